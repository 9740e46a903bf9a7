package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCallExitStatusesAndRecord(t *testing.T) {
	ws, _ := sampleWorkspace(t)
	rec := filepath.Join(t.TempDir(), "run.jsonl")
	cases := []struct {
		name   string
		args   []string
		code   int
		status string
		reason string
	}{
		{"read", []string{"file_read", `{"path":"hello.txt"}`}, 0, "executed", ""},
		{"prefix sibling", []string{"file_read", `{"path":"../data-archived/x"}`}, 3, "refused", "denied_path"},
		{"link out", []string{"file_read", `{"path":"link-out"}`}, 3, "refused", "denied_path"},
		{"proc root", []string{"file_read", `{"path":"/proc/self/root/etc/passwd"}`}, 3, "refused", "denied_path"},
		{"nul", []string{"file_read", `{"path":"a\u0000b"}`}, 3, "refused", "invalid_argument"},
		{"not a string", []string{"file_read", `{"path":7}`}, 3, "refused", "invalid_argument"},
		{"unknown tool", []string{"rm_rf", `{}`}, 3, "refused", "unpublished"},
		{"run unpublished", []string{"run", `{"argv":["true"]}`}, 3, "refused", "unpublished"},
		{"oversized", []string{"--max-result", "3", "file_read", `{"path":"hello.txt"}`}, 1, "failed", "oversized_result"},
		{"verbs invoke resolves", []string{"--surface", "verbs", "tool_invoke", `{"name":"file_read","arguments":{"path":"hello.txt"}}`}, 0, "executed", ""},
		{"verbs invoke unpublished", []string{"--surface", "verbs", "tool_invoke", `{"name":"run","arguments":{"argv":["sh"]}}`}, 3, "refused", "unpublished"},
		{"verbs direct entry", []string{"--surface", "verbs", "file_read", `{"path":"hello.txt"}`}, 3, "refused", "unpublished"},
		{"flat verb", []string{"tool_invoke", `{"name":"file_read","arguments":{"path":"hello.txt"}}`}, 3, "refused", "unpublished"},
		{"budget", []string{"--max-calls", "0", "file_read", `{"path":"hello.txt"}`}, 0, "executed", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string{"call", "--workspace", ws, "--record", rec, "--confine", "off"}, c.args...)
			r := harness(t, "", args...)
			if r.code != c.code {
				t.Fatalf("exit %d, want %d\nstdout %s\nstderr %s", r.code, c.code, r.stdout, r.stderr)
			}
			o := outcome(t, r)
			if o["status"] != c.status || c.reason != "" && o["reason"] != c.reason {
				t.Fatalf("outcome %v, want %s/%s", o, c.status, c.reason)
			}
			if strings.Contains(r.stdout, "OUTSIDE-SECRET") {
				t.Fatal("outside content leaked")
			}
		})
	}
	lines := readRecord(t, rec)
	var calls []map[string]any
	for _, l := range lines {
		if l["event"] == "call" {
			calls = append(calls, l)
		}
	}
	if len(calls) != len(cases) {
		t.Fatalf("record holds %d call lines, want %d", len(calls), len(cases))
	}
	for i, c := range cases {
		if calls[i]["status"] != c.status {
			t.Errorf("record call %d (%s): status %v, want %s", i, c.name, calls[i]["status"], c.status)
		}
		if c.reason != "" && calls[i]["reason"] != c.reason {
			t.Errorf("record call %d (%s): reason %v, want %s", i, c.name, calls[i]["reason"], c.reason)
		}
	}
	// The verbs invoke was recorded as its entry.
	if calls[9]["entry"] != "file_read" || calls[9]["via"] != "tool_invoke" {
		t.Errorf("verbs invoke recorded as %v via %v", calls[9]["entry"], calls[9]["via"])
	}
	if calls[10]["entry"] != "run" {
		t.Errorf("verbs invoke of run recorded as %v", calls[10]["entry"])
	}
}

func TestCallBudget(t *testing.T) {
	ws, _ := sampleWorkspace(t)
	// One process is one run: --max-calls bounds the calls of a run; a
	// single call with budget 1 passes, the CLI's call cannot make two, so
	// the gate's own tests cover exhaustion. Here: a bad budget is a usage error.
	r := harness(t, "", "call", "--workspace", ws, "--max-calls", "-1", "file_read", `{"path":"hello.txt"}`)
	if r.code != 2 || !strings.Contains(r.stderr, "--max-calls") {
		t.Fatalf("exit %d stderr %q", r.code, r.stderr)
	}
}

func TestToolsJSONIsFourValidDefinitionsWhenOff(t *testing.T) {
	ws, _ := sampleWorkspace(t)
	r := harness(t, "", "tools", "--surface", "flat", "--workspace", ws, "--confine", "off", "--json")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	var defs []struct {
		Name        string         `json:"name"`
		Description string         `json:"description"`
		InputSchema map[string]any `json:"input_schema"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &defs); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range defs {
		names = append(names, d.Name)
		if d.Description == "" || d.InputSchema["type"] != "object" {
			t.Errorf("%s: bad definition %+v", d.Name, d)
		}
		if _, ok := d.InputSchema["properties"].(map[string]any); !ok {
			t.Errorf("%s: schema has no properties", d.Name)
		}
	}
	if strings.Join(names, ",") != "file_read,dir_list,search,find" {
		t.Fatalf("published %v", names)
	}
	v := harness(t, "", "tools", "--surface", "verbs", "--workspace", ws, "--confine", "off", "--json")
	if !strings.Contains(v.stdout, `"tool_invoke"`) || strings.Contains(v.stdout, `"file_read"`) {
		t.Fatalf("verbs surface shows %s", v.stdout)
	}
}

func TestUsageErrorsAreOneLine(t *testing.T) {
	ws, _ := sampleWorkspace(t)
	for _, args := range [][]string{
		{"call", "--workspace", ws, "--confine", "bogus", "file_read", "{}"},
		{"call", "--workspace", ws, "--write-scope", "src/**=maybe", "file_read", "{}"},
		{"call", "--workspace", ws, "--approve-up-to", "extreme", "file_read", "{}"},
		{"call", "--workspace", filepath.Join(ws, "nope"), "file_read", "{}"},
		{"call", "--workspace", ws, "--max-result", "12 parsecs", "file_read", "{}"},
		{"call", "--workspace", ws, "--hook", "'unterminated", "file_read", "{}"},
		{"frobnicate"},
	} {
		r := harness(t, "", args...)
		if r.code != 2 {
			t.Errorf("%v: exit %d, want 2 (stderr %q)", args, r.code, r.stderr)
		}
		if !strings.HasPrefix(r.stderr, "b10x-harness: ") {
			t.Errorf("%v: stderr does not start with a one-line error: %q", args, r.stderr)
		}
	}
}

func TestRecordSummary(t *testing.T) {
	ws, _ := sampleWorkspace(t)
	rec := filepath.Join(t.TempDir(), "run.jsonl")
	harness(t, "", "call", "--workspace", ws, "--record", rec, "--confine", "off", "file_read", `{"path":"hello.txt"}`)
	harness(t, "", "call", "--workspace", ws, "--record", rec, "--confine", "off", "file_read", `{"path":"link-out"}`)
	r := harness(t, "", "record", "summary", rec)
	if r.code != 0 || !strings.Contains(r.stdout, "2 run(s), 2 call(s)") || !strings.Contains(r.stdout, "denied_path") {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// A truncated record is read; the torn line is named.
	b, _ := os.ReadFile(rec)
	must(t, os.WriteFile(rec, b[:len(b)-20], 0o644))
	n := bytes.Count(b, []byte("\n"))
	r = harness(t, "", "record", "summary", rec)
	if r.code != 0 || !strings.Contains(r.stdout, fmt.Sprintf("torn: line %d ", n)) || !strings.Contains(r.stdout, "a run has no run_end") {
		t.Fatalf("truncated record: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// A file with no record line at all is not a record.
	must(t, os.WriteFile(rec, []byte("hello\nworld\n"), 0o644))
	if r = harness(t, "", "record", "summary", rec); r.code != 2 || !strings.Contains(r.stderr, "no record line") {
		t.Fatalf("not a record: exit %d stderr %q", r.code, r.stderr)
	}
}
