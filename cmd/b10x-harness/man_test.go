package main

import (
	"regexp"
	"strings"
	"testing"

	"github.com/alecthomas/kong"

	"github.com/b10x/harness/internal/cliref"
	"github.com/b10x/harness/internal/cliref/clireftest"
)

// TestManPage: the page the binary prints has every visible command, each
// with every visible flag of its own (hyphens escaped), its help and its
// arguments; the hidden man command is not on it; its exit statuses are
// the commands' own (exec's 124 to 127, call's 0 to 3); and groff (or
// man) renders it without a warning.
func TestManPage(t *testing.T) {
	r := harness(t, "", "man")
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("man: exit %d, stderr %q", r.code, r.stderr)
	}
	page := r.stdout
	sec := clireftest.ManSections(page)
	for _, s := range []string{"NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS", "COMMANDS", "EXIT STATUS"} {
		if sec[s] == "" {
			t.Errorf("no %s section", s)
		}
	}
	app := fullTestModel(t)
	if userDefaultsFlag(app) && !strings.Contains(sec["FILES"], `.I "~/.config/b10x\-harness/policy.toml"`) {
		t.Errorf("FILES does not name the user defaults file:\n%s", sec["FILES"])
	}
	n := 0
	visit(app.Node, func(c *kong.Node) {
		body := sec["OPTIONS"]
		if c != app.Node {
			body = sec["SS "+cliref.Roff(c.Path())]
			n++
		}
		if body == "" {
			t.Errorf("no section for %q", c.Path())
			return
		}
		if first, _, _ := strings.Cut(strings.Join(strings.Fields(c.Help), " "), ". "); c != app.Node && !strings.Contains(body, cliref.Roff(first)) {
			t.Errorf("%s: its help is not in its section", c.Path())
		}
		for _, f := range c.Flags {
			if !regexp.MustCompile(`\\fB` + regexp.QuoteMeta(cliref.Roff("--"+f.Name)) + `\\fR(=|,|\n)`).MatchString(body) {
				t.Errorf("%s: flag --%s is not in its section", c.Path(), f.Name)
			}
		}
		for _, p := range c.Positional {
			if !strings.Contains(body, cliref.Roff(p.Summary())) {
				t.Errorf("%s: argument %s is not in its section", c.Path(), p.Name)
			}
		}
	})
	if n < 10 {
		t.Errorf("%d commands on the page", n)
	}
	if _, ok := sec[`SS man`]; ok || strings.Contains(sec["SYNOPSIS"], "harness man") {
		t.Error("the hidden man command is on the page")
	}
	if strings.Contains(page, "--") {
		t.Error("a hyphen is not escaped")
	}
	exit := exitEntries(sec["EXIT STATUS"])
	for cmd, says := range map[string][]string{
		"0": {"success"}, "1": {"failed"}, "2": {"usage"},
		"exec":         {"124 when", "125 when", "126 when", "127 when", "128 + a signal"},
		"call":         {"0 when", "1 when", "3 when", "2 on"},
		"doctor":       {"0 when", "1 when"},
		"mcp":          {"0 when", "130 when", "1 when", "2 for"},
		"policy check": {"(exit 2)"},
	} {
		for _, w := range says {
			if !strings.Contains(exit[cmd], w) {
				t.Errorf("EXIT STATUS, %s: %q does not say %q", cmd, exit[cmd], w)
			}
		}
	}
	for _, cmd := range []string{"run", "tools", "policy show", "completion"} {
		if e, ok := exit[cmd]; ok {
			t.Errorf("EXIT STATUS has an entry for %s, whose help gives no status: %q", cmd, e)
		}
	}
	clireftest.RenderMan(t, page)
}

// exitEntries is the EXIT STATUS section's tagged paragraphs (.TP, .B TAG,
// text), by tag.
func exitEntries(section string) map[string]string {
	out := map[string]string{}
	for _, e := range strings.Split(section, ".TP\n")[1:] {
		tag, text, _ := strings.Cut(e, "\n")
		tag = strings.Trim(strings.TrimPrefix(tag, ".B "), `"`)
		out[tag] = strings.Join(strings.Fields(strings.ReplaceAll(text, `\-`, "-")), " ")
	}
	return out
}

// userDefaultsFlag reports whether a visible command of app has
// --no-user-defaults (reads the user defaults file).
func userDefaultsFlag(app *kong.Application) bool {
	has := false
	visit(app.Node, func(n *kong.Node) {
		for _, f := range n.Flags {
			has = has || (!f.Hidden && f.Name == "no-user-defaults")
		}
	})
	return has
}
