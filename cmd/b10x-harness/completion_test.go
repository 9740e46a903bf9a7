package main

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/alecthomas/kong"

	"github.com/b10x/harness/internal/cliref/clireftest"
)

// fullTestModel is the model completion and man write from.
func fullTestModel(t *testing.T) *kong.Application {
	t.Helper()
	app, err := fullModel("b10x-harness", "A description.")
	if err != nil {
		t.Fatal(err)
	}
	return app
}

// visit calls fn for n and every visible command below it, parents first:
// the commands kong's model has, read without cliref.
func visit(n *kong.Node, fn func(*kong.Node)) {
	fn(n)
	for _, c := range n.Children {
		if !c.Hidden && c.Type == kong.CommandNode {
			visit(c, fn)
		}
	}
}

// completionScript is `b10x-harness completion SHELL` through the binary,
// written to a file.
func completionScript(t *testing.T, shell string) string {
	t.Helper()
	r := harness(t, "", "completion", shell)
	if r.code != 0 || r.stderr != "" || r.stdout == "" {
		t.Fatalf("completion %s: exit %d, %d bytes, stderr %q", shell, r.code, len(r.stdout), r.stderr)
	}
	return clireftest.WriteTemp(t, "completion."+shell, r.stdout)
}

// TestCompletionBash completes command lines with the script the binary
// prints, in a real bash: commands, flags, a flag's words in each of the
// forms bash splits them into, and nothing of the harness's after -- or
// in exec's command. Candidates are compared exactly.
func TestCompletionBash(t *testing.T) {
	script := completionScript(t, "bash")
	cases := []struct {
		line []string
		want []string
	}{
		{[]string{"b10x-harness", "ex"}, []string{"exec"}},
		{[]string{"b10x-harness", "m"}, []string{"mcp"}}, // man is hidden
		{[]string{"b10x-harness", "exec", "--con"}, []string{"--confine"}},
		{[]string{"b10x-harness", "exec", "--confine", ""}, []string{"strict", "auto"}},
		{[]string{"b10x-harness", "exec", "--confine", "s"}, []string{"strict"}},
		{[]string{"b10x-harness", "exec", "--confine", "="}, []string{"strict", "auto"}},
		{[]string{"b10x-harness", "exec", "--confine", "=", "a"}, []string{"auto"}},
		{[]string{"b10x-harness", "exec", "--confine=s"}, []string{"--confine=strict"}},
		{[]string{"b10x-harness", "exec", "--timeout", "1s", "--conf"}, []string{"--confine"}},
		{[]string{"b10x-harness", "exec", "--timeout", "=", "1s", "--conf"}, []string{"--confine"}},
		{[]string{"b10x-harness", "exec", "--", ""}, nil},
		{[]string{"b10x-harness", "exec", "--", "--"}, nil},
		{[]string{"b10x-harness", "exec", "--", "make", "--con"}, nil},
		{[]string{"b10x-harness", "exec", "make", "--con"}, nil},
		{[]string{"b10x-harness", "exec", "--net", "none", "make", "-"}, nil},
		{[]string{"b10x-harness", "policy", ""}, []string{"check", "show", "schema"}},
		{[]string{"b10x-harness", "policy", "show", "--js"}, []string{"--json"}},
		{[]string{"b10x-harness", "help", "po"}, []string{"policy"}},
		{[]string{"b10x-harness", "help", "policy", "s"}, []string{"show", "schema"}},
		{[]string{"b10x-harness", "completion", ""}, []string{"bash", "zsh", "fish"}},
		{[]string{"b10x-harness", "completion", "bash", ""}, nil},
		{[]string{"b10x-harness", "call", "--surface", ""}, []string{"flat", "verbs"}},
		{[]string{"b10x-harness", "--version", "ex"}, []string{"exec"}},
		{[]string{"b10x-harness", "-"}, []string{"--help", "-h", "--version"}},
	}
	var lines [][]string
	for _, c := range cases {
		lines = append(lines, c.line)
	}
	got := clireftest.BashComplete(t, script, "_b10x_harness", lines)
	for i, c := range cases {
		if !slices.Equal(got[i], c.want) {
			t.Errorf("%q: %q, want %q", strings.Join(c.line, " "), got[i], c.want)
		}
	}
}

// TestCompletionBashFlags: every command's flags, as the model has them
// (its own and its parents', hidden ones left out), are what bash offers
// for --, no more, no less.
func TestCompletionBashFlags(t *testing.T) {
	script := completionScript(t, "bash")
	app := fullTestModel(t)
	var lines [][]string
	var want [][]string
	visit(app.Node, func(n *kong.Node) {
		lines = append(lines, append(append([]string{"b10x-harness"}, strings.Fields(n.Path())...), "--"))
		var flags []string
		for p := n; p != nil; p = p.Parent {
			for _, f := range p.Flags {
				if f.Hidden {
					continue
				}
				flags = append(flags, "--"+f.Name)
				for _, a := range f.Aliases {
					flags = append(flags, "--"+a)
				}
				switch neg := f.Tag.Negatable; neg {
				case "":
				case "_": // kong's mark for the default negation
					flags = append(flags, "--no-"+f.Name)
				default:
					flags = append(flags, "--"+neg)
				}
			}
		}
		want = append(want, flags)
	})
	if len(lines) < 10 {
		t.Fatalf("only %d commands in the model", len(lines))
	}
	got := clireftest.BashComplete(t, script, "_b10x_harness", lines)
	for i := range lines {
		g, w := slices.Sorted(slices.Values(got[i])), slices.Sorted(slices.Values(want[i]))
		if !slices.Equal(g, w) {
			t.Errorf("%q: %q, want %q", strings.Join(lines[i], " "), g, w)
		}
	}
}

// TestCompletionWrongShell: a shell it does not know is one line on stderr
// naming it and the three it knows, exit 2, nothing on stdout.
func TestCompletionWrongShell(t *testing.T) {
	for _, args := range [][]string{{"completion", "tcsh"}, {"completion", "Bash"}} {
		r := harness(t, "", args...)
		lines := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n")
		if r.code != exitUsage || r.stdout != "" || len(lines) != 1 {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit %d and one line", args, r.code, r.stdout, r.stderr, exitUsage)
			continue
		}
		for _, w := range []string{args[1], "bash", "zsh", "fish"} {
			if !strings.Contains(r.stderr, `"`+w+`"`) {
				t.Errorf("%q: %q does not name %q", args, r.stderr, w)
			}
		}
	}
}

// isolatedEnv is the environment with HOME and the XDG directories in a
// temporary directory, for a shell that writes its state there.
func isolatedEnv(t *testing.T) []string {
	dir := t.TempDir()
	return append(os.Environ(), "HOME="+dir, "XDG_CONFIG_HOME="+dir, "XDG_DATA_HOME="+dir, "XDG_CACHE_HOME="+dir, "ZDOTDIR="+dir)
}

// TestCompletionZsh parses the zsh script and, through compinit, checks
// that sourcing it registers its function for b10x-harness.
func TestCompletionZsh(t *testing.T) {
	zsh := clireftest.RequireProgram(t, "zsh", "to check the zsh completion", true)
	script := completionScript(t, "zsh")
	if out, err := exec.Command(zsh, "-n", script).CombinedOutput(); err != nil || len(out) > 0 {
		t.Fatalf("zsh -n: %v\n%s", err, out)
	}
	cmd := exec.Command(zsh, "-f", "-c", `autoload -U compinit && compinit -u -D && source "$1" && print -r -- $_comps[b10x-harness]`, "zsh", script)
	cmd.Env = isolatedEnv(t)
	out, err := cmd.CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "_b10x-harness" {
		t.Fatalf("zsh: sourcing the script after compinit: %v\n%s", err, out)
	}
}

// TestCompletionFish parses the fish script and completes command lines
// with it (complete -C); candidates are compared exactly.
func TestCompletionFish(t *testing.T) {
	fish := clireftest.RequireProgram(t, "fish", "to check the fish completion", true)
	script := completionScript(t, "fish")
	if out, err := exec.Command(fish, "--no-execute", script).CombinedOutput(); err != nil || len(out) > 0 {
		t.Fatalf("fish --no-execute: %v\n%s", err, out)
	}
	cases := []struct {
		line string
		want []string
	}{
		{"b10x-harness ex", []string{"exec"}},
		{"b10x-harness exec --con", []string{"--confine"}},
		{"b10x-harness exec --confine ", []string{"auto", "strict"}},
		{"b10x-harness exec --confine=s", []string{"--confine=strict"}},
		{"b10x-harness exec --timeout 1s --conf", []string{"--confine"}},
		{"b10x-harness exec -- --", nil},
		{"b10x-harness exec make --con", nil},
		{"b10x-harness help policy s", []string{"schema", "show"}},
		{"b10x-harness completion ", []string{"bash", "fish", "zsh"}},
	}
	env := isolatedEnv(t)
	for _, c := range cases {
		cmd := exec.Command(fish, "--no-config", "-c", `source $argv[1]; and complete -C $argv[2]`, script, c.line)
		cmd.Env = env
		cmd.Dir = t.TempDir() // no file names to offer
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil || stderr.Len() > 0 {
			t.Fatalf("fish, %q: %v\n%s", c.line, err, stderr.String())
		}
		var got []string
		for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if w, _, _ := strings.Cut(l, "\t"); w != "" {
				got = append(got, w)
			}
		}
		slices.Sort(got)
		if !slices.Equal(got, c.want) {
			t.Errorf("fish, %q: %q, want %q", c.line, got, c.want)
		}
	}
}
