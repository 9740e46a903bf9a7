package session

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/b10x/harness/policy"
)

// TestLoadAgents: the definitions of agents_dir and of each plugin's
// agents/ are read and their directories protected; a named agent narrows
// the policy to its tools and lowers its ceiling; what cannot be loaded
// is a usage *Error naming its key.
func TestLoadAgents(t *testing.T) {
	examples, err := filepath.Abs("../examples/agents")
	if err != nil {
		t.Fatal(err)
	}
	plugin := t.TempDir()
	if err := os.Mkdir(filepath.Join(plugin, "agents"), 0o755); err != nil {
		t.Fatal(err)
	}
	p := Defaults()
	p.Agent.Dirs, p.Agent.Plugins, p.Agent.Name, p.ApproveUpTo = []string{examples}, []string{plugin}, "reader", "high"
	d, err := LoadAgents(&p)
	if err != nil {
		t.Fatal(err)
	}
	if d == nil || d.Name != "reader" || !slices.Equal(p.Narrow, []string{"file_read", "dir_list"}) || p.ApproveUpTo != "low" {
		t.Errorf("reader: def %v, narrow %q, ceiling %s", d, p.Narrow, p.ApproveUpTo)
	}
	if want := []string{examples, filepath.Join(plugin, "agents")}; !slices.Equal(p.Protect, want) {
		t.Errorf("protected %q, want %q", p.Protect, want)
	}

	p = Defaults()
	p.Agent.Dirs = []string{examples}
	if d, err := LoadAgents(&p); d != nil || err != nil || p.Narrow != nil {
		t.Errorf("no agent named: %v, %v, narrow %q", d, err, p.Narrow)
	}

	for _, c := range []struct {
		name    string
		set     func(p *Policy)
		key     string
		message string
	}{
		{"plugin without agents/", func(p *Policy) { p.Agent.Plugins = []string{t.TempDir()} }, "plugin", "no agents/ directory in it"},
		{"no definitions", func(p *Policy) { p.Agent.Name = "reader" }, "agent", "no agent definitions were given (agents_dir or plugin)"},
		{"no such agent", func(p *Policy) { p.Agent.Dirs, p.Agent.Name = []string{examples}, "nobody" }, "agent",
			"no such agent in " + examples + " (defined: fixer, reader)"},
	} {
		p := Defaults()
		c.set(&p)
		_, err := LoadAgents(&p)
		var e *Error
		if !errors.As(err, &e) || e.Key != c.key || !policy.IsUsage(err) || e.Err.Error() != c.message {
			t.Errorf("%s: %v; want a usage error of %s: %s", c.name, err, c.key, c.message)
		}
	}
}
