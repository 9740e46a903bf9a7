package replay

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/b10x/harness/agent"
	"github.com/b10x/harness/gate"
	"github.com/b10x/harness/internal/testenv"
	"github.com/b10x/harness/surface"
	"github.com/b10x/harness/tools"
	"github.com/b10x/harness/workspace"
)

func TestParse(t *testing.T) {
	script := strings.Join([]string{
		`# a comment`,
		``,
		`{"text": "look", "tool_calls": [{"name": "dir_list"}, {"name": "file_read", "arguments": {"path": "hello.txt"}}]}`,
		`{"tool_calls": [{"name": "file_read", "arguments_raw": "{\"path\": "}, {"name": "file_read", "arguments": "just a string"}]}`,
		`   {"text": "bye"}   `,
		``,
	}, "\n")
	turns, err := Parse("s.jsonl", strings.NewReader(script))
	if err != nil {
		t.Fatal(err)
	}
	if len(turns) != 3 {
		t.Fatalf("%d turns, want 3", len(turns))
	}
	t0 := turns[0]
	if t0.Text != "look" || len(t0.Calls) != 2 || string(t0.Calls[0].Args) != "{}" || t0.Calls[1].ID != "L3.2" ||
		string(t0.Calls[1].Args) != `{"path": "hello.txt"}` || t0.Stop != "tool_calls" {
		t.Errorf("turn 1 = %+v", t0)
	}
	if string(turns[1].Calls[0].Args) != `{"path": ` || string(turns[1].Calls[1].Args) != `"just a string"` {
		t.Errorf("turn 2 args: %q %q", turns[1].Calls[0].Args, turns[1].Calls[1].Args)
	}
	if turns[2].Text != "bye" || len(turns[2].Calls) != 0 || turns[2].Stop != agent.StopScriptEnded {
		t.Errorf("turn 3 = %+v", turns[2])
	}
}

func TestParseReplayErrors(t *testing.T) {
	for _, tc := range []struct {
		script string
		line   int
		msg    string
	}{
		{"", 0, "no turns"},
		{"# only a comment\n\n", 0, "no turns"},
		{`{"text": "a"` + "\n", 1, "ends inside the JSON value"},
		{"\n\n{nope}\n", 3, "invalid JSON"},
		{`{"text": "a", "calls": []}`, 1, `unknown field "calls"`},
		{`{"text": 3}`, 1, "text must be a string, not number"},
		{`{"tool_calls": {"name": "x"}}`, 1, "tool_calls must be an array, not object"},
		{`{"tool_calls": ["x"]}`, 1, "must be an object, not string"},
		{`[1, 2]`, 1, "the line must be a JSON object, not array"},
		{`null`, 1, "not a turn object"},
		{`"x"`, 1, "the line must be a JSON object, not string"},
		{`{}`, 1, "an empty turn"},
		{`{"tool_calls": []}`, 1, "an empty turn"},
		{`{"tool_calls": [{"arguments": {}}]}`, 1, "tool_calls[0]: no name"},
		{`{"tool_calls": [{"name": ""}]}`, 1, "no name"},
		{`{"tool_calls": [{"name": "x", "args": {}}]}`, 1, `unknown field "args"`},
		{`{"tool_calls": [{"name": "x", "arguments": {}, "arguments_raw": "{}"}]}`, 1, "both arguments and arguments_raw"},
		{`{"text": "a"} {"text": "b"}`, 1, "trailing data"},
		{"{\"text\": \"end\"}\n{\"text\": \"more\"}\n", 2, "never played: line 1 has no tool calls"},
		{"{\"text\": \"\xff\"}", 1, "not valid UTF-8"},
	} {
		_, err := Parse("bad.jsonl", strings.NewReader(tc.script))
		var se *ScriptError
		if !errors.As(err, &se) {
			t.Errorf("%q: error %v, want a *ScriptError", tc.script, err)
			continue
		}
		if se.Line != tc.line || !strings.Contains(se.Msg, tc.msg) || !strings.HasPrefix(err.Error(), "replay script bad.jsonl") {
			t.Errorf("%q: %v (line %d), want line %d containing %q", tc.script, err, se.Line, tc.line, tc.msg)
		}
		if strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: error spans lines: %q", tc.script, err)
		}
	}
}

func TestLoadReplayErrorNamesFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "x.jsonl")
	if err := os.WriteFile(p, []byte("{\"text\": \"ok\", \"tool_calls\": [{\"name\": \"find\"}]}\n{broken\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Load(p)
	if err == nil || !strings.Contains(err.Error(), p+":2:") {
		t.Errorf("error %v, want one naming %s:2", err, p)
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing.jsonl")); err == nil || !strings.Contains(err.Error(), "missing.jsonl") {
		t.Errorf("missing file: %v", err)
	}
}

// runScript plays turns against a gate over the read tools on a workspace
// with a secret beside it, and returns the summary and the record.
func runScript(t *testing.T, turns []agent.Turn) (agent.Summary, string) {
	t.Helper()
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "secret.txt"), []byte("OUTSIDE-SECRET\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	w, err := workspace.Open(ws)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var rec bytes.Buffer
	g, err := gate.New(gate.Config{Workspace: w, Tools: tools.ReadTools(), Recorder: gate.NewRecorder(&rec)})
	if err != nil {
		t.Fatal(err)
	}
	sf, err := surface.New(surface.Flat, g, surface.Options{})
	if err != nil {
		t.Fatal(err)
	}
	sum := agent.Run(context.Background(), agent.Config{Provider: New("s", turns), Surface: sf})
	return sum, rec.String()
}

// The replay provider's calls go through the gate like a model's, and the
// run ends with script_ended both on a text-only last turn and at the end
// of the lines.
func TestReplayRun(t *testing.T) {
	for _, tc := range []struct {
		name, script string
		turns        int
	}{
		{"final text turn", "{\"tool_calls\": [{\"name\": \"file_read\", \"arguments\": {\"path\": \"../secret.txt\"}}]}\n{\"text\": \"done\"}\n", 2},
		{"end of lines", "{\"tool_calls\": [{\"name\": \"file_read\", \"arguments\": {\"path\": \"../secret.txt\"}}]}\n", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			turns, err := Parse("s", strings.NewReader(tc.script))
			if err != nil {
				t.Fatal(err)
			}
			sum, rec := runScript(t, turns)
			if sum.EndedBy != agent.EndScriptEnded || sum.Turns != tc.turns || len(sum.Calls) != 1 || sum.Calls[0].Status != gate.Refused || sum.Calls[0].Reason != "denied_path" {
				t.Errorf("summary %+v", sum)
			}
			if strings.Count(rec, `"event":"call"`) != 1 || !strings.Contains(rec, `"reason":"denied_path"`) || strings.Contains(rec, "OUTSIDE-SECRET") {
				t.Errorf("record: %s", rec)
			}
		})
	}
}

func TestReplayHonoursContext(t *testing.T) {
	turns, _ := Parse("s", strings.NewReader(`{"text": "x"}`))
	conv, _ := New("s", turns).Begin(agent.Request{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := conv.Next(ctx, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("Next on a cancelled context: %v", err)
	}
}

// The shipped example scripts parse.
func TestExampleScriptsParse(t *testing.T) {
	_, err := os.Stat("../../examples")
	testenv.Require(t, err == nil, "the repository's examples/ (vmtest copies only package directories)",
		testenv.InGuest()...)
	files, err := filepath.Glob("../../examples/*.jsonl")
	if err != nil || len(files) < 3 {
		t.Fatalf("example scripts: %v %v", files, err)
	}
	for _, f := range files {
		r, err := Load(f)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if r.Turns() < 2 {
			t.Errorf("%s: %d turns", f, r.Turns())
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"text": "a", "tool_calls": [{"name": "file_read", "arguments": {"path": "x"}}]}`))
	f.Add([]byte("# c\n{\"text\": \"end\"}\n"))
	f.Add([]byte(`{"tool_calls": [{"name": "run", "arguments_raw": "{"}]}`))
	f.Add([]byte("{\"text\": \"a\"}\n{\"text\": \"b\"}"))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, data []byte) {
		turns, err := Parse("fuzz", strings.NewReader(string(data)))
		if err != nil {
			var se *ScriptError
			if !errors.As(err, &se) {
				t.Fatalf("error of type %T: %v", err, err)
			}
			return
		}
		if len(turns) == 0 {
			t.Fatal("no error and no turns")
		}
		for i, tr := range turns {
			last := i == len(turns)-1
			if len(tr.Calls) == 0 && !last {
				t.Fatalf("turn %d without calls is not the last", i)
			}
			if tr.Text == "" && len(tr.Calls) == 0 {
				t.Fatalf("turn %d is empty", i)
			}
			for _, c := range tr.Calls {
				if c.Name == "" || c.ID == "" || c.Args == nil {
					t.Fatalf("turn %d: incomplete call %+v", i, c)
				}
			}
		}
	})
}
