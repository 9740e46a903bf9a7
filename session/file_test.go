package session

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/b10x/harness/cgroup"
	"github.com/b10x/harness/confine"
	"github.com/b10x/harness/confine/spawn"
	"github.com/b10x/harness/gate"
	"github.com/b10x/harness/policy"
	"github.com/b10x/harness/surface"
)

// TestParseFileRefuses: the values whose syntax the gate and the proxy
// own are checked by their parsers (Checks), at the file's position.
func TestParseFileRefuses(t *testing.T) {
	for _, c := range []struct {
		name, content, want string
	}{
		{"bad rule", "write_scope = [\"a=b\"]\n", `p.toml:1:1: write_scope: write-scope rule "a=b": value "b" is not allowed, partial-only or denied`},
		{"bad hook", "\nhook = [\"\"]\n", `p.toml:2:1: hook: hook "": empty command`},
		{"bad domain", "allow_domain = [\"a b\"]\n", `p.toml:1:1: allow_domain: domain pattern "a b": not a valid host name`},
		{"bad deny", "deny_domain = [\"*x.com\"]\n", `p.toml:1:1: deny_domain: domain pattern "*x.com"`},
	} {
		_, err := ParseFile("p.toml", []byte(c.content))
		var e *Error
		if !errors.As(err, &e) || !e.Usage {
			t.Errorf("%s: got %v, want a usage *Error", c.name, err)
			continue
		}
		if !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%s:\n got %s\nwant %s...", c.name, err, c.want)
		}
	}
}

func TestParseFileApplies(t *testing.T) {
	content := "confine = \"strict\"\napprove_up_to = \"medium\"\nmemory_max = \"1GiB\"\nallow_program = [\"sh\", \"go\"]\ncpu_max = 1.5\nmax_turns = 3\n"
	lf, err := ParseFile("p.toml", []byte(content))
	if err != nil {
		t.Fatal(err)
	}
	p := Defaults()
	if err := lf.Apply(&p); err != nil {
		t.Fatal(err)
	}
	if p.mode() != confine.Strict || p.risk() != gate.Medium || p.Run.MemoryMax != 1<<30 || p.Run.CPUMax != 1.5 || p.Agent.MaxTurns != 3 ||
		strings.Join(p.Programs, ",") != "sh,go" || !p.Required("memory_max") || !p.Required("cpu_max") || p.Required("pids_max") {
		t.Errorf("applied: %+v", p)
	}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
}

// TestPolicyWords: every word of the policy's enums is the word of the
// package that enforces it, so that a valid policy converts whole (mode,
// risk, kind).
func TestPolicyWords(t *testing.T) {
	for _, w := range policy.Settings() {
		for _, word := range w.Words() {
			var err error
			switch w.Key {
			case "confine":
				var m confine.Mode
				if m, err = confine.ParseMode(word); err == nil && m.String() != word {
					t.Errorf("confine %s is %s", word, m)
				}
			case "approve_up_to":
				var r gate.Risk
				if r, err = gate.ParseRisk(word); err == nil && r.String() != word {
					t.Errorf("approve_up_to %s is %s", word, r)
				}
			case "surface":
				_, err = surface.ParseKind(word)
			}
			if err != nil {
				t.Errorf("%s %s: %v", w.Key, word, err)
			}
		}
	}
	// The other way: each package's words are the policy's.
	for _, m := range []confine.Mode{confine.Strict, confine.Auto, confine.Off} {
		p := Defaults()
		p.Confine = policy.Confine(m.String())
		if err := p.Validate(); err != nil || p.mode() != m {
			t.Errorf("confine %s: %v, mode %s", m, err, p.mode())
		}
	}
	for _, r := range []gate.Risk{gate.Low, gate.Medium, gate.High} {
		p := Defaults()
		p.ApproveUpTo = policy.Risk(r.String())
		if err := p.Validate(); err != nil || p.risk() != r {
			t.Errorf("approve_up_to %s: %v, risk %s", r, err, p.risk())
		}
	}
	for _, k := range []surface.Kind{surface.Flat, surface.Verbs} {
		p := Defaults()
		p.Surface = policy.Surface(k)
		if err := p.Validate(); err != nil || p.kind() != k {
			t.Errorf("surface %s: %v", k, err)
		}
	}
}

// TestPolicyLimits: the table's limits name the controllers cgroup
// manages and the layers confine reports for them, and its tmp_size
// default is the run child's own cap.
func TestPolicyLimits(t *testing.T) {
	ctls := map[cgroup.Controller]bool{}
	for _, s := range policy.Settings() {
		if s.Controller == "" {
			if s.Layer != "" {
				t.Errorf("%s has a layer and no controller", s.Key)
			}
			continue
		}
		ctls[s.Controller] = true
		if got := string(confine.LimitLayer(s.Controller)); got != s.Layer {
			t.Errorf("%s: layer %q, confine says %q", s.Key, s.Layer, got)
		}
	}
	for _, c := range []cgroup.Controller{cgroup.ControllerPids, cgroup.ControllerMemory, cgroup.ControllerCPU} {
		if !ctls[c] {
			t.Errorf("no setting limits %s", c)
		}
	}
	all := cgroup.Limits{PidsMax: 1, MemoryMax: 1, CPUQuota: 1, CPUPeriod: 1}
	if len(all.Needs()) != len(ctls) {
		t.Errorf("cgroup has %d limits, the table %d", len(all.Needs()), len(ctls))
	}
	if d := Defaults().Run.TmpSize; d != spawn.DefaultTmpSize {
		t.Errorf("tmp_size's default is %d, spawn's %d", d, spawn.DefaultTmpSize)
	}
}

// TestExamplePolicies: the shipped examples parse, with every check.
func TestExamplePolicies(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("..", "examples", "policies", "*.toml"))
	if len(files) < 2 {
		t.Fatalf("examples/policies holds %d files, want a CI step and an evaluation", len(files))
	}
	for _, f := range files {
		if _, err := LoadFile(f); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

func FuzzParseFile(f *testing.F) {
	f.Add([]byte("confine = \"auto\"\nallow_program = [\"sh\"]\n"))
	f.Add([]byte("[x]\ny=1"))
	f.Add([]byte("memory_max = \"2GiB\"\ncpu_max = 1.5\n"))
	f.Add([]byte("write_scope = [\"a/**=denied\"]\nallow_domain = [\"*.example.com\"]\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		lf, err := ParseFile("f.toml", b)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("not an *Error: %v", err)
			}
			return
		}
		p := Defaults()
		if err := lf.Apply(&p); err != nil {
			t.Fatalf("parsed, then Apply failed: %v", err)
		}
	})
}

// TestUserDefaultsFor: the file is read for a command that takes settings,
// with the keys it does not take refused; never for exec or a command
// without settings; the environment's word skips it, and a word that is
// not a boolean is a usage error.
func TestUserDefaultsFor(t *testing.T) {
	xdg := t.TempDir()
	dir := filepath.Join(xdg, "b10x-harness")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "policy.toml"), []byte("max_calls = 7\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"XDG_CONFIG_HOME": xdg}
	getenv := func(k string) string { return env[k] }
	lf, err := UserDefaultsFor(policy.Run, getenv)
	if err != nil || lf == nil {
		t.Fatalf("run: %v, %v; want the file", lf, err)
	}
	if v, ok := lf.Value("max_calls"); !ok || fmt.Sprint(v) != "7" {
		t.Errorf("run: max_calls %v %v, want 7", v, ok)
	}
	for _, c := range []policy.Command{0, policy.Exec} {
		if lf, err := UserDefaultsFor(c, getenv); lf != nil || err != nil {
			t.Errorf("command %v: %v, %v; want no file read", c, lf, err)
		}
	}
	for word, skip := range map[string]bool{"1": true, "TRUE": true, "yes": true, "0": false, "no": false} {
		env[NoUserDefaultsEnv] = word
		lf, err := UserDefaultsFor(policy.Run, getenv)
		if err != nil || (lf == nil) != skip {
			t.Errorf("%s=%s: %v, %v; want skipped %v", NoUserDefaultsEnv, word, lf, err, skip)
		}
	}
	env[NoUserDefaultsEnv] = "maybe"
	if _, err := UserDefaultsFor(policy.Run, getenv); !IsUsage(err) || !strings.Contains(err.Error(), `B10X_HARNESS_NO_USER_DEFAULTS="maybe": want 1`) {
		t.Errorf("a word that is not a boolean: %v, want a usage error naming it", err)
	}
}
