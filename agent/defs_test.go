package agent_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/b10x/harness/agent"
	"github.com/b10x/harness/gate"
	"github.com/b10x/harness/internal/testenv"
)

func TestParseDef(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		want      agent.Def
	}{
		{
			name: "inline list",
			src:  "---\nname: reviewer\ndescription: Reads code.\ntools: [file_read, search , \"find\"]\napprove-up-to: low\n---\nYou review.\n\nCarefully.\n",
			want: agent.Def{Name: "reviewer", Description: "Reads code.", Tools: []string{"file_read", "search", "find"}, HasTools: true,
				ApproveUpTo: gate.Low, HasCeiling: true, Instructions: "You review.\n\nCarefully.", Line: 2},
		},
		{
			name: "block list, comments, CRLF, quoted description",
			src:  "---\r\n# an agent\r\nname: fixer\r\ndescription: 'It''s a fixer: it edits.'\r\ntools:\r\n  - file_read\r\n  - file_edit # exact edits only\r\n\r\n---\r\nFix things.\r\n",
			want: agent.Def{Name: "fixer", Description: "It's a fixer: it edits.", Tools: []string{"file_read", "file_edit"}, HasTools: true,
				Instructions: "Fix things.", Line: 3},
		},
		{
			name: "no tools declared",
			src:  "---\nname: all\ndescription: d\n---\nbody",
			want: agent.Def{Name: "all", Description: "d", Instructions: "body", Line: 2},
		},
		{
			name: "empty tool list",
			src:  "---\nname: none\ndescription: d\ntools: []\napprove-up-to: medium\n---\nbody",
			want: agent.Def{Name: "none", Description: "d", Tools: []string{}, HasTools: true, ApproveUpTo: gate.Medium, HasCeiling: true, Instructions: "body", Line: 2},
		},
		{
			name: "the policy file's spelling",
			src:  "---\nname: p\ndescription: d\napprove_up_to: medium\n---\nbody",
			want: agent.Def{Name: "p", Description: "d", ApproveUpTo: gate.Medium, HasCeiling: true, Instructions: "body", Line: 2},
		},
		{
			name: "BOM and dashes in the body",
			src:  "\xef\xbb\xbf---\nname: a.b_c-1\ndescription: \"x \\\"y\\\"\"\n---\nline\n---\nmore",
			want: agent.Def{Name: "a.b_c-1", Description: `x "y"`, Instructions: "line\n---\nmore", Line: 2},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := agent.ParseDef("f.md", []byte(tc.src))
			if err != nil {
				t.Fatal(err)
			}
			tc.want.File = "f.md"
			if got.Name != tc.want.Name || got.Description != tc.want.Description || !slices.Equal(got.Tools, tc.want.Tools) ||
				got.HasTools != tc.want.HasTools || got.ApproveUpTo != tc.want.ApproveUpTo || got.HasCeiling != tc.want.HasCeiling ||
				got.Instructions != tc.want.Instructions || got.File != tc.want.File || got.Line != tc.want.Line {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
			if (got.Tools == nil) != (tc.want.Tools == nil) {
				t.Errorf("tools nil-ness: got %#v want %#v", got.Tools, tc.want.Tools)
			}
		})
	}
}

func TestParseDefErrors(t *testing.T) {
	for _, tc := range []struct {
		src  string
		line int
		msg  string
	}{
		{"name: x\n", 1, `must start with a "---" line`},
		{"", 1, `must start with a "---" line`},
		{"---\nname: x\ndescription: d\n", 1, "not closed"},
		{"---\ndescription: d\n---\nbody", 3, "no name:"},
		{"---\nname: x\n---\nbody", 3, "no description:"},
		{"---\nname: x\ndescription: d\n---\n\n  \n", 4, "no instructions"},
		{"---\nname: x\nname: y\ndescription: d\n---\nb", 3, "name: repeated (first on line 2)"},
		{"---\nname: x\ndescription: d\nmodel: opus\n---\nb", 4, `unknown key "model"`},
		{"---\nname: X\ndescription: d\n---\nb", 2, `name "X"`},
		{"---\nname: a b\ndescription: d\n---\nb", 2, "name"},
		{"---\nname: x\ndescription: d\ntools: [file_read, shell]\n---\nb", 4, `unknown tool "shell"`},
		{"---\nname: x\ndescription: d\ntools:\n  - file_read\n  - tool_invoke\n---\nb", 6, `unknown tool "tool_invoke"`},
		{"---\nname: x\ndescription: d\ntools: [file_read, file_read]\n---\nb", 4, "listed twice"},
		{"---\nname: x\ndescription: d\ntools: [file_read\n---\nb", 4, `must close with "]"`},
		{"---\nname: x\ndescription: d\ntools: file_read\n---\nb", 4, "want a list"},
		{"---\nname: x\ndescription: d\ntools: [file_read,,find]\n---\nb", 4, "empty tool name"},
		{"---\nname: x\ndescription: d\n- file_read\n---\nb", 4, "list item outside a list"},
		{"---\nname: x\ndescription: d\napprove-up-to: extreme\n---\nb", 4, "want low, medium or high"},
		{"---\nname: x\ndescription: d\napprove-up-to: HIGH\n---\nb", 4, "want low, medium or high"},
		{"---\nname: x\ndescription: d\napprove-up-to: low\napprove_up_to: medium\n---\nb", 5, "approve_up_to: repeated (first on line 4)"},
		{"---\nname: x\ndescription: d\napprove_up_to: extreme\n---\nb", 4, `approve_up_to "extreme": want low, medium or high`},
		{"---\nname: x\ndescription: |\n  multi\n---\nb", 3, "unsupported value"},
		{"---\nname: x\ndescription: d\n  nested: 1\n---\nb", 4, "unexpected indentation"},
		{"---\nname: x\ndescription: \"open\n---\nb", 3, "bad double-quoted value"},
		{"---\nname: x\ndescription: 'a'b'\n---\nb", 3, "bad single-quoted value"},
		{"---\nname: x\ndescription:\n---\nb", 3, "description: empty"},
		{"---\nname: x\njust words\n---\nb", 3, `expected "key: value"`},
		{"---\nname: x\ndescription: d\x00\n---\nb", 0, "NUL"},
		{"---\nname: x\ndescription: \xff\n---\nb", 0, "UTF-8"},
	} {
		_, err := agent.ParseDef("a.md", []byte(tc.src))
		var de *agent.DefError
		if !errors.As(err, &de) {
			t.Errorf("%q: error %v, want a *DefError", tc.src, err)
			continue
		}
		if de.Line != tc.line || !strings.Contains(de.Msg, tc.msg) || de.File != "a.md" {
			t.Errorf("%q: %v (line %d), want line %d with %q", tc.src, err, de.Line, tc.line, tc.msg)
		}
		if strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: multi-line error %q", tc.src, err)
		}
	}
}

func TestDefCeilingAndAllow(t *testing.T) {
	d := agent.Def{Name: "x", File: "x.md", Line: 2}
	if r, err := d.Ceiling(gate.Medium); err != nil || r != gate.Medium {
		t.Errorf("undeclared ceiling: %v %v", r, err)
	}
	if d.Allow() != nil {
		t.Error("undeclared tools must not narrow (nil)")
	}
	d.HasCeiling, d.ApproveUpTo = true, gate.Low
	if r, err := d.Ceiling(gate.High); err != nil || r != gate.Low {
		t.Errorf("lower ceiling: %v %v", r, err)
	}
	if r, err := d.Ceiling(gate.Low); err != nil || r != gate.Low {
		t.Errorf("equal ceiling: %v %v", r, err)
	}
	d.ApproveUpTo = gate.High
	if _, err := d.Ceiling(gate.Medium); err == nil || !strings.Contains(err.Error(), "x.md:2") || !strings.Contains(err.Error(), "only lower") {
		t.Errorf("higher ceiling: %v", err)
	}
	d.HasTools, d.Tools = true, []string{}
	if a := d.Allow(); a == nil || len(a) != 0 {
		t.Errorf("empty declaration must narrow to nothing, got %#v", a)
	}
	d.Tools = []string{"file_read"}
	a := d.Allow()
	a[0] = "run"
	if d.Tools[0] != "file_read" {
		t.Error("Allow returned the definition's own slice")
	}
}

func writeDef(t *testing.T, dir, file, name string) {
	t.Helper()
	must(t, os.MkdirAll(dir, 0o755))
	must(t, os.WriteFile(filepath.Join(dir, file), []byte("---\nname: "+name+"\ndescription: d\n---\nbody\n"), 0o644))
}

func TestLoadDefs(t *testing.T) {
	a, b := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	writeDef(t, a, "one.md", "one")
	writeDef(t, a, "two.md", "two")
	must(t, os.WriteFile(filepath.Join(a, "notes.txt"), []byte("not an agent"), 0o644))
	writeDef(t, b, "three.md", "three")
	defs, err := agent.LoadDefs(a, b)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range defs {
		names = append(names, d.Name)
	}
	if strings.Join(names, ",") != "one,three,two" {
		t.Errorf("names %v", names)
	}
	if d, ok := agent.FindDef(defs, "three"); !ok || d.File != filepath.Join(b, "three.md") {
		t.Errorf("FindDef: %+v %v", d, ok)
	}
	if _, ok := agent.FindDef(defs, "four"); ok {
		t.Error("FindDef found a missing agent")
	}

	// A duplicate name across directories names both places.
	writeDef(t, b, "dup.md", "one")
	_, err = agent.LoadDefs(a, b)
	if err == nil || !strings.Contains(err.Error(), filepath.Join(b, "dup.md")+":2") || !strings.Contains(err.Error(), filepath.Join(a, "one.md")+":2") {
		t.Errorf("duplicate: %v", err)
	}
	// A broken file fails the whole load, naming it.
	must(t, os.WriteFile(filepath.Join(b, "dup.md"), []byte("oops"), 0o644))
	if _, err := agent.LoadDefs(b); err == nil || !strings.Contains(err.Error(), "dup.md:1") {
		t.Errorf("broken file: %v", err)
	}
	if _, err := agent.LoadDefs(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("a missing directory was accepted")
	}
	// A directory named like a definition is skipped.
	must(t, os.Mkdir(filepath.Join(a, "dir.md"), 0o755))
	if _, err := agent.LoadDefs(a); err != nil {
		t.Errorf("a directory named *.md: %v", err)
	}
}

func TestExampleAgentsLoad(t *testing.T) {
	_, err := os.Stat("../examples/agents")
	testenv.Require(t, err == nil, "the repository's examples/ (vmtest copies only package directories)",
		testenv.InGuest()...)
	defs, err := agent.LoadDefs("../examples/agents")
	if err != nil {
		t.Fatal(err)
	}
	r, ok := agent.FindDef(defs, "reader")
	if !ok || !slices.Equal(r.Tools, []string{"file_read", "dir_list"}) {
		t.Errorf("reader: %+v", r)
	}
}

func FuzzParseDef(f *testing.F) {
	f.Add([]byte("---\nname: a\ndescription: d\ntools: [file_read, run]\napprove-up-to: low\n---\nbody\n"))
	f.Add([]byte("---\nname: a\ndescription: 'x'\ntools:\n  - find\n---\nb"))
	f.Add([]byte("---\r\nname: a\r\n---\r\n"))
	f.Add([]byte("---\nname: \"\\u0000\"\ndescription: d\n---\nb"))
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := agent.ParseDef("fuzz.md", data)
		if err != nil {
			var de *agent.DefError
			if !errors.As(err, &de) {
				t.Fatalf("error of type %T: %v", err, err)
			}
			return
		}
		if d.Name == "" || d.Description == "" || d.Instructions == "" || d.Line < 2 {
			t.Fatalf("accepted an incomplete definition: %+v", d)
		}
		seen := map[string]bool{}
		for _, n := range d.Tools {
			if _, ok := gate.Lookup(n); !ok || seen[n] {
				t.Fatalf("accepted tool %q", n)
			}
			seen[n] = true
		}
		if d.HasTools != (d.Tools != nil) {
			t.Fatalf("HasTools %v with tools %#v", d.HasTools, d.Tools)
		}
		if d.ApproveUpTo < gate.Low || d.ApproveUpTo > gate.High {
			t.Fatalf("ceiling %v", d.ApproveUpTo)
		}
	})
}
