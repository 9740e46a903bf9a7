package cliref

import (
	"slices"
	"strings"
	"testing"

	"github.com/alecthomas/kong"

	"github.com/b10x/harness/internal/cliref/clireftest"
)

// hiddenGrammar has a hidden flag and a hidden command beside visible ones.
type hiddenGrammar struct {
	Visible struct {
		Mode   string `enum:"fast,slow" default:"fast" help:"How."`
		Secret bool   `hidden:"" help:"Not to be shown."`
	} `cmd:"" help:"Shown."`
	Ghost struct{} `cmd:"" hidden:"" help:"Not to be shown."`
}

// model is grammar's model as FromKong makes it, the program named name.
func model(t *testing.T, grammar any, name string) *Command {
	t.Helper()
	p, err := kong.New(grammar, kong.Name(name), kong.Description("A tool to test the reference."))
	if err != nil {
		t.Fatal(err)
	}
	return FromKong(p.Model)
}

// TestCompletionHidden: a hidden command or flag is in none of the three
// scripts, nor offered by bash; the scripts' functions are named after
// the program (demo-tool's bash function is _demo_tool).
func TestCompletionHidden(t *testing.T) {
	root := model(t, &hiddenGrammar{}, "demo-tool")
	for _, shell := range Shells {
		var b strings.Builder
		if err := WriteCompletion(&b, root, shell, Completion{}); err != nil {
			t.Fatal(err)
		}
		s := b.String()
		if strings.Contains(s, "secret") || strings.Contains(s, "ghost") || !strings.Contains(s, "visible") || !strings.Contains(s, "slow") {
			t.Errorf("%s script: hidden names in it, or visible ones missing:\n%s", shell, s)
		}
		if strings.Contains(s, "b10x") || strings.Contains(s, "{{") || !strings.Contains(s, "demo-tool completion "+shell) {
			t.Errorf("%s script: not written for demo-tool alone:\n%s", shell, s)
		}
		if shell != "bash" {
			continue
		}
		got := clireftest.BashComplete(t, clireftest.WriteTemp(t, "c.bash", s), "_demo_tool", [][]string{
			{"demo-tool", ""}, {"demo-tool", "visible", "--"}, {"demo-tool", "visible", "--mode", ""},
		})
		for i, want := range [][]string{{"visible"}, {"--mode", "--help"}, {"fast", "slow"}} {
			if !slices.Equal(got[i], want) {
				t.Errorf("bash, case %d: %q, want %q", i, got[i], want)
			}
		}
	}
	var b strings.Builder
	if err := WriteCompletion(&b, root, "tcsh", Completion{}); err == nil || !strings.Contains(err.Error(), `"tcsh"`) || b.Len() > 0 {
		t.Errorf("WriteCompletion tcsh: %v, %d bytes written", err, b.Len())
	}
}

// kindGrammar has a flag or an argument of every Kind, and a negatable
// flag with a short form and an alias.
type kindGrammar struct {
	Go struct {
		Color   bool     `negatable:"" short:"c" aliases:"colour" help:"Colour."`
		Verbose int      `type:"counter" help:"More."`
		Out     string   `type:"path" help:"Where."`
		Level   string   `enum:"low,high" default:"low" help:"How much."`
		Name    string   `help:"Called."`
		Tags    []string `help:"Tagged."`
		Command []string `arg:"" passthrough:"" help:"The program."`
	} `cmd:"" help:"Go."`
}

// TestFromKong: what each of kong's flags and arguments takes, its forms,
// and the usage line.
func TestFromKong(t *testing.T) {
	root := model(t, &kindGrammar{}, "demo-tool")
	if len(root.Children) != 1 || root.Usage != "<command> [flags]" {
		t.Fatalf("root: %d commands, usage %q", len(root.Children), root.Usage)
	}
	g := root.Children[0]
	if g.Path != "go" || g.Usage != "<command> ... [flags]" {
		t.Errorf("go: path %q, usage %q", g.Path, g.Usage)
	}
	want := map[string]Kind{"color": None, "verbose": None, "out": File, "level": Enum, "name": Any, "tags": Any}
	for _, f := range g.Flags {
		if k, ok := want[f.Name]; !ok || f.Value.Kind != k {
			t.Errorf("--%s takes %d, want %d", f.Name, f.Value.Kind, k)
		}
		delete(want, f.Name)
		switch f.Name {
		case "color":
			if got := strings.Join(f.names(), " "); got != "--color --colour --no-color -c" {
				t.Errorf("--color's forms: %s", got)
			}
		case "level":
			if f.Default != "low" || !slices.Equal(f.Value.Words, []string{"low", "high"}) {
				t.Errorf("--level: default %q, words %q", f.Default, f.Value.Words)
			}
		case "verbose", "tags":
			if !f.Repeat {
				t.Errorf("--%s is not repeatable", f.Name)
			}
		}
	}
	if len(want) > 0 {
		t.Errorf("flags missing: %v", want)
	}
	if len(g.Args) != 1 || g.Args[0].Value.Kind != Rest || g.Args[0].Summary != "<command> ..." {
		t.Errorf("go's arguments: %+v", g.Args)
	}
}
