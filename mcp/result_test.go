package mcp

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/b10x/harness/gate"
	"github.com/b10x/harness/policy"
	"github.com/b10x/harness/surface"
	"github.com/b10x/harness/tools"
)

// TestResultShape: the tool's text is the one content block and appears
// nowhere else; an error's text says status and reason, and its message
// is not repeated in _meta (Gemini CLI shows an error's whole result).
func TestResultShape(t *testing.T) {
	for _, c := range []struct {
		o    gate.Outcome
		text string
	}{
		{gate.Outcome{Status: gate.Executed, Entry: "file_read", Result: "a \"quoted\" line\n", Meta: map[string]any{"lines": 1}, Seq: 3}, "a \"quoted\" line\n"},
		{gate.Outcome{Status: gate.Refused, Entry: "file_read", Reason: tools.ReasonDeniedPath, Message: "path \"../x\" leaves the workspace", Seq: 4},
			"refused (denied_path): path \"../x\" leaves the workspace"},
		{gate.Outcome{Status: gate.Failed, Entry: "file_read", Reason: tools.ReasonOversizedResult, Message: "too big. Read a part.", Seq: 5},
			"failed (oversized_result): too big. Read a part."},
	} {
		r := Result(c.o)
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		var wire struct {
			Content []struct {
				Type, Text string
			} `json:"content"`
			StructuredContent json.RawMessage           `json:"structuredContent"`
			Meta              map[string]map[string]any `json:"_meta"`
			IsError           bool                      `json:"isError"`
		}
		if err := json.Unmarshal(b, &wire); err != nil {
			t.Fatal(err)
		}
		if len(wire.Content) != 1 || wire.Content[0].Type != "text" || wire.Content[0].Text != c.text || wire.StructuredContent != nil || wire.IsError != c.o.IsError() {
			t.Errorf("%s", b)
		}
		o := wire.Meta[OutcomeMeta]
		if o["status"] != string(c.o.Status) || o["entry"] != "file_read" || o["seq"] != float64(c.o.Seq) || str(o["reason"]) != string(c.o.Reason) {
			t.Errorf("_meta: %s", b)
		}
		if n := strings.Count(string(b), "quoted") + strings.Count(string(b), "leaves the workspace") + strings.Count(string(b), "too big"); n != 1 {
			t.Errorf("the text appears %d times in %s", n, b)
		}
	}
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

func TestClientArgs(t *testing.T) {
	never := func() bool { return false }
	for _, c := range []struct {
		in, out string
		ignored string
		takes   bool
	}{
		{`{"path":"a.txt"}`, `{"path":"a.txt"}`, "", false},
		{`{"path":"a.txt","wait_for_previous":true}`, `{"path":"a.txt"}`, "wait_for_previous=true", false},
		{`{"wait_for_previous":false,"path":"a.txt","limit":3}`, `{"path":"a.txt","limit":3}`, "wait_for_previous=false", false},
		{` { "wait_for_previous" : true } `, `{}`, "wait_for_previous=true", false},
		// Only the client's boolean, only at the top, only once, only
		// from a tool that does not take it: anything else is the gate's
		// to refuse.
		{`{"path":"a.txt","wait_for_previous":"yes"}`, `{"path":"a.txt","wait_for_previous":"yes"}`, "", false},
		{`{"path":"a.txt","wait_for_previous":true,"wait_for_previous":true}`, `{"path":"a.txt","wait_for_previous":true,"wait_for_previous":true}`, "", false},
		{`{"path":"a.txt","path":"b.txt","wait_for_previous":true}`, `{"path":"a.txt","path":"b.txt","wait_for_previous":true}`, "", false},
		{`{"name":"file_read","arguments":{"wait_for_previous":true}}`, `{"name":"file_read","arguments":{"wait_for_previous":true}}`, "", false},
		{`{"path":"a.txt","wait_for_previous":true}`, `{"path":"a.txt","wait_for_previous":true}`, "", true},
		{`{"path":"a.txt","wait_for_previous":true} {}`, `{"path":"a.txt","wait_for_previous":true} {}`, "", false},
		{`["wait_for_previous"]`, `["wait_for_previous"]`, "", false},
		{`{"wait_for_previous":true`, `{"wait_for_previous":true`, "", false},
	} {
		takes := never
		if c.takes {
			takes = func() bool { return true }
		}
		out, ignored := clientArgs(json.RawMessage(c.in), takes)
		if string(out) != c.out || strings.Join(ignored, ",") != c.ignored {
			t.Errorf("%s: %s %v, want %s %q", c.in, out, ignored, c.out, c.ignored)
		}
	}
}

// TestWaitForPreviousIgnored: a call with Gemini CLI's wait_for_previous
// runs, and its record line says the argument was ignored, on both
// surfaces; no published tool's schema declares the property, so it never
// takes an argument a tool would have read.
func TestWaitForPreviousIgnored(t *testing.T) {
	for _, kind := range []surface.Kind{surface.Flat, surface.Verbs} {
		f := newFixture(t, kind, ApproveDeny, gate.Config{}, Config{})
		for _, d := range f.srv.cfg.Surface.Definitions() {
			if f.srv.declares(d.Name, WaitForPrevious) {
				t.Errorf("%s declares %s", d.Name, WaitForPrevious)
			}
		}
		cs := f.mustConnect(t, nil)
		name, args := "file_read", `{"path":"f.txt","wait_for_previous":true}`
		if kind == surface.Verbs {
			name, args = "tool_invoke", `{"name":"file_read","arguments":{"path":"f.txt"},"wait_for_previous":true}`
		}
		r := callTool(t, cs, name, args)
		if o := outcome(t, r); o.Status != gate.Executed || o.Result != "hello\n" {
			t.Fatalf("%s: %+v", kind, o)
		}
		if r := callTool(t, cs, name, strings.Replace(args, "true", `"yes"`, 1)); !r.IsError || !strings.Contains(text(r), "wait_for_previous") {
			t.Errorf("%s: a non-boolean wait_for_previous: %q", kind, text(r))
		}
		recs := f.rec.calls(t)
		if len(recs) != 2 || len(recs[0].Steps) == 0 || recs[0].Steps[0].Step != "client" || !strings.Contains(recs[0].Steps[0].Detail, "ignored wait_for_previous=true") {
			t.Fatalf("%s: %+v", kind, recs)
		}
		if b, _ := json.Marshal(recs[0].Args); strings.Contains(string(b), WaitForPrevious) {
			t.Errorf("%s: the recorded arguments %s keep it", kind, b)
		}
		if recs[1].Steps[0].Step == "client" {
			t.Errorf("%s: a refused non-boolean is recorded as ignored: %+v", kind, recs[1])
		}
	}
}

// TestDefaultMaxResultIsTheTables: the policy table's default of
// max_result under mcp, which the command applies, is DefaultMaxResult.
func TestDefaultMaxResultIsTheTables(t *testing.T) {
	s, ok := policy.Lookup("max_result")
	if !ok {
		t.Fatal("no max_result in the policy table")
	}
	n, err := policy.ParseSize(s.DefaultFor(policy.MCP))
	if err != nil || n != DefaultMaxResult {
		t.Errorf("the table's max_result under mcp is %q (%d, %v), DefaultMaxResult %d", s.DefaultFor(policy.MCP), n, err, DefaultMaxResult)
	}
}
