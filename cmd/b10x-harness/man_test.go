package main

import (
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/alecthomas/kong"

	"github.com/b10x/harness/internal/testenv"
)

// manSections is page cut at its .SH and .SS lines, by their title.
func manSections(page string) map[string]string {
	out := map[string]string{}
	title := ""
	for _, l := range strings.Split(page, "\n") {
		if t, ok := strings.CutPrefix(l, ".SH "); ok {
			title = strings.Trim(t, `"`)
		} else if t, ok := strings.CutPrefix(l, ".SS "); ok {
			title = "SS " + strings.Trim(t, `"`)
		}
		out[title] += l + "\n"
	}
	return out
}

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
	sec := manSections(page)
	for _, s := range []string{"NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS", "COMMANDS", "EXIT STATUS"} {
		if sec[s] == "" {
			t.Errorf("no %s section", s)
		}
	}
	app := fullTestModel(t)
	if userDefaultsFlag(app) != nil && !strings.Contains(sec["FILES"], `.I "~/.config/b10x\-harness/policy.toml"`) {
		t.Errorf("FILES does not name the user defaults file:\n%s", sec["FILES"])
	}
	n := 0
	visit(app.Node, func(c *kong.Node) {
		body := sec["OPTIONS"]
		if c != app.Node {
			body = sec["SS "+roff(c.Path())]
			n++
		}
		if body == "" {
			t.Errorf("no section for %q", c.Path())
			return
		}
		if c != app.Node && !strings.Contains(body, roff(firstSentence(c.Help))) {
			t.Errorf("%s: its help is not in its section", c.Path())
		}
		for _, f := range c.Flags {
			if !regexp.MustCompile(`\\fB` + regexp.QuoteMeta(roff("--"+f.Name)) + `\\fR(=|,|\n)`).MatchString(body) {
				t.Errorf("%s: flag --%s is not in its section", c.Path(), f.Name)
			}
		}
		for _, p := range c.Positional {
			if !strings.Contains(body, roff(p.Summary())) {
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
	renderMan(t, page)
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

// renderMan renders page with groff (-ww: every warning), or man -l where
// groff is missing, and fails on any warning; it returns the text.
func renderMan(t *testing.T, page string) string {
	t.Helper()
	var cmd *exec.Cmd
	if groff, err := exec.LookPath("groff"); err == nil {
		cmd = exec.Command(groff, "-man", "-Tutf8", "-ww", "-P-cbou")
	} else {
		man, err := exec.LookPath("man")
		testenv.Require(t, err == nil, "groff or man on PATH (to render the page)", append(testenv.InGuest(), testenv.HostLacks(err != nil)...)...)
		cmd = exec.Command(man, "--warnings=w", "-l", "-")
		cmd.Env = append(cmd.Environ(), "MANWIDTH=80", "MAN_KEEP_FORMATTING=0", "MANPAGER=cat", "PAGER=cat")
	}
	cmd.Stdin = strings.NewReader(page)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil || stderr.Len() > 0 {
		t.Fatalf("%s: %v\n%s", cmd.Args, err, stderr.String())
	}
	return string(out)
}

// manGrammar's help and flags hold what roff would take for requests and
// escapes.
type manGrammar struct {
	Dots struct {
		DryRun bool   `name:"dry-run" help:".TH looks like a request\n\n'so does this, and a back\\slash \\fB is not bold"`
		Level  string `enum:"low,high" default:"low" help:"One of two. Exits 7 never."`
	} `cmd:"" help:".Starts with a dot. Exit status: 4 when a dot is seen; café."`
}

// TestManEscapes: writeMan on a small model whose help starts lines with
// . and ', and holds backslashes and a character beyond ASCII: no line of
// the page is a request it did not mean, and the rendered page reads as
// the help was written.
func TestManEscapes(t *testing.T) {
	p, err := kong.New(&manGrammar{}, kong.Name("demo-tool"), kong.Description("A tool to test the page."))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := writeMan(&b, p.Model, "v1.2.3"); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	requests := regexp.MustCompile(`^(\.\\"|\.(TH|SH|SS|TP|PP|br|B|nh|ad)( |$))`)
	for _, l := range strings.Split(page, "\n") {
		if (strings.HasPrefix(l, ".") || strings.HasPrefix(l, "'")) && !requests.MatchString(l) {
			t.Errorf("unescaped request: %q", l)
		}
	}
	for _, want := range []string{`\&.TH looks`, `\&'so does`, `back\eslash \efB is`, `\fB\-\-dry\-run\fR`, `caf\[u00E9]`, `.TH "DEMO\-TOOL" 1 "" "demo\-tool v1.2.3"`} {
		if !strings.Contains(page, want) {
			t.Errorf("the page does not hold %q:\n%s", want, page)
		}
	}
	sec := manSections(page)
	if exit := sec["EXIT STATUS"]; !strings.Contains(exit, "Exit status: 4 when a dot is seen") || strings.Contains(exit, "7 never") {
		t.Errorf("EXIT STATUS takes a command's sentences, not a flag's:\n%s", exit)
	}
	if !strings.Contains(sec["NAME"], `demo\-tool \- a tool to test the page`) {
		t.Errorf("NAME: %q", sec["NAME"])
	}
	text := strings.Join(strings.Fields(renderMan(t, page)), " ")
	for _, want := range []string{".TH looks like a request", "'so does this, and a back\\slash \\fB is not bold", "--dry-run", "--level=low|high", "Values: low, high; default: low", ".Starts with a dot.", "café"} {
		if !strings.Contains(text, want) {
			t.Errorf("the rendered page does not read %q:\n%s", want, text)
		}
	}
}

// TestManRoff: roff escapes what roff would read as its own.
func TestManRoff(t *testing.T) {
	for in, want := range map[string]string{
		"plain":             "plain",
		".dot":              `\&.dot`,
		"'quote":            `\&'quote`,
		"a.b 'c'":           `a.b 'c'`,
		"one\n.two\n'three": "one\n\\&.two\n\\&'three",
		`back\slash`:        `back\eslash`,
		"--flag-name":       `\-\-flag\-name`,
		"tab\there":         "tab here",
		"bell\a":            "bell",
		"→ ü":               `\[u2192] \[u00FC]`,
		" lead":             `\& lead`,
	} {
		if got := roff(in); got != want {
			t.Errorf("roff(%q) = %q, want %q", in, got, want)
		}
	}
	if got := roffArg(`say "hi" - now`); got != `"say \(dqhi\(dq \- now"` {
		t.Errorf("roffArg: %s", got)
	}
}
