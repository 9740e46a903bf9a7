package surface

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/b10x/harness/gate"
	"github.com/b10x/harness/tools"
	"github.com/b10x/harness/workspace"
)

func newGate(t *testing.T, cfg gate.Config) (*gate.Gate, *bytes.Buffer) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "f.txt"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ws, err := workspace.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	var rec bytes.Buffer
	cfg.Workspace = ws
	cfg.Tools = append(tools.ReadTools(), tools.WriteTools()...)
	cfg.Host.ConfinedWorkspace = true
	cfg.Recorder = gate.NewRecorder(&rec)
	g, err := gate.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return g, &rec
}

func names(defs []Def) string {
	var n []string
	for _, d := range defs {
		n = append(n, d.Name)
	}
	return strings.Join(n, ",")
}

func TestFlatIsThePublishedCatalogue(t *testing.T) {
	g, _ := newGate(t, gate.Config{})
	s, _ := New(Flat, g, Options{})
	if got := names(s.Definitions()); got != "file_read,dir_list,search,find,file_write,file_edit" {
		t.Fatal(got)
	}
	for _, d := range s.Definitions() {
		var schema map[string]any
		if err := json.Unmarshal(d.InputSchema, &schema); err != nil || schema["type"] != "object" || schema["additionalProperties"] != false {
			t.Errorf("%s: schema %s", d.Name, d.InputSchema)
		}
	}
}

func TestScopeAnnouncement(t *testing.T) {
	rule, _ := gate.ParseScopeRule("**/*.pem=denied")
	g, _ := newGate(t, gate.Config{WriteScope: []gate.ScopeRule{rule}})
	stated, _ := New(Flat, g, Options{})
	silent, _ := New(Flat, g, Options{SilentScope: true})
	for _, d := range stated.Definitions() {
		has := strings.Contains(d.Description, "**/*.pem: no write tool may change these paths")
		if (d.Name == "file_write" || d.Name == "file_edit") != has {
			t.Errorf("stated: %s mentions the rule: %v", d.Name, has)
		}
	}
	for _, d := range silent.Definitions() {
		if strings.Contains(d.Description, "*.pem") {
			t.Errorf("silent: %s states the rule", d.Name)
		}
	}
	// Silent keeps the gate.
	o := silent.Dispatch(context.Background(), "file_write", json.RawMessage(`{"path":"k.pem","content":"x"}`))
	if o.Reason != tools.ReasonDeniedPath {
		t.Fatalf("%+v", o)
	}
}

func TestVerbs(t *testing.T) {
	g, rec := newGate(t, gate.Config{ApproveUpTo: gate.High, Allow: []string{"file_read", "search", "file_write"}})
	s, _ := New(Verbs, g, Options{})
	ctx := context.Background()
	if got := names(s.Definitions()); got != "tool_search,tool_describe,tool_invoke" {
		t.Fatal(got)
	}
	o := s.Dispatch(ctx, "tool_search", json.RawMessage(`{}`))
	if o.Status != gate.Executed || !strings.Contains(o.Result, "file_read") || strings.Contains(o.Result, "dir_list") {
		t.Fatalf("search lists a narrowed-away tool or misses one: %+v", o)
	}
	o = s.Dispatch(ctx, "tool_search", json.RawMessage(`{"query":"regular expression"}`))
	if !strings.HasPrefix(o.Result, "search (") || strings.Contains(o.Result, "file_read") {
		t.Fatalf("query: %q", o.Result)
	}
	o = s.Dispatch(ctx, "tool_describe", json.RawMessage(`{"name":"file_read"}`))
	if o.Status != gate.Executed || !strings.Contains(o.Result, `"input_schema"`) {
		t.Fatalf("%+v", o)
	}
	for _, n := range []string{"dir_list", "run", "nope"} {
		if o := s.Dispatch(ctx, "tool_describe", json.RawMessage(`{"name":"`+n+`"}`)); o.Reason != tools.ReasonUnpublished {
			t.Errorf("describe %s: %+v", n, o)
		}
		if o := s.Dispatch(ctx, "tool_invoke", json.RawMessage(`{"name":"`+n+`","arguments":{"path":"."}}`)); o.Reason != tools.ReasonUnpublished || o.Entry != n {
			t.Errorf("invoke %s: %+v", n, o)
		}
	}
	o = s.Dispatch(ctx, "tool_invoke", json.RawMessage(`{"name":"file_read","arguments":{"path":"f.txt"}}`))
	if o.Status != gate.Executed || o.Result != "hello\n" || o.Entry != "file_read" {
		t.Fatalf("%+v", o)
	}
	// An entry called directly was never presented by this surface.
	if o := s.Dispatch(ctx, "file_read", json.RawMessage(`{"path":"f.txt"}`)); o.Reason != tools.ReasonUnpublished {
		t.Fatalf("direct call under verbs: %+v", o)
	}
	// Malformed envelopes are invalid_argument.
	for _, bad := range []string{`{"name":5}`, `{"name":"file_read","arguments":{},"extra":1}`, `[]`} {
		if o := s.Dispatch(ctx, "tool_invoke", json.RawMessage(bad)); o.Reason != tools.ReasonInvalidArgument {
			t.Errorf("%s: %+v", bad, o)
		}
	}
	// The record shows invokes as their entry, with the verb as via.
	var seen bool
	for _, l := range bytes.Split(bytes.TrimSpace(rec.Bytes()), []byte("\n")) {
		var r gate.CallRecord
		json.Unmarshal(l, &r)
		if r.Entry == "file_read" && r.Via == "tool_invoke" && r.Status == gate.Executed {
			seen = true
		}
		if r.Entry == "tool_invoke" && r.Status == gate.Executed {
			t.Errorf("an invoke was recorded as the generic verb: %s", l)
		}
	}
	if !seen {
		t.Fatal("no record of the resolved invoke")
	}
}

// TestVerbsApprovalSeesEntry: denying run (or any entry) denies it through
// tool_invoke too, and the approver is asked about the entry, not the verb.
func TestVerbsApprovalSeesEntry(t *testing.T) {
	a := &recordingApprover{}
	g, _ := newGate(t, gate.Config{Approver: a})
	s, _ := New(Verbs, g, Options{})
	o := s.Dispatch(context.Background(), "tool_invoke", json.RawMessage(`{"name":"file_write","arguments":{"path":"x","content":"y"}}`))
	if o.Reason != tools.ReasonApprovalRejected || len(a.seen) != 1 || a.seen[0].Entry.Name != "file_write" || a.seen[0].Via != "tool_invoke" {
		t.Fatalf("%+v %+v", o, a.seen)
	}
}

type recordingApprover struct{ seen []gate.Request }

func (a *recordingApprover) Name() string { return "rec" }
func (a *recordingApprover) Approve(_ context.Context, r gate.Request) (gate.Decision, error) {
	a.seen = append(a.seen, r)
	return gate.Decision{}, nil
}

// TestEntryOf: under verbs a tool_invoke names its entry, read leniently;
// any other call, and every call under flat, is the entry it names.
func TestEntryOf(t *testing.T) {
	for _, c := range []struct {
		kind       Kind
		name, args string
		want       string
	}{
		{Verbs, "tool_invoke", `{"name":"file_read","arguments":{}}`, "file_read"},
		{Verbs, "tool_invoke", `{"name":"run","extra":1}`, "run"},
		{Verbs, "tool_invoke", `{"arguments":{}}`, "tool_invoke"},
		{Verbs, "tool_invoke", `not json`, "tool_invoke"},
		{Verbs, "tool_search", `{"name":"run"}`, "tool_search"},
		{Flat, "tool_invoke", `{"name":"run"}`, "tool_invoke"},
		{Flat, "file_read", `{}`, "file_read"},
	} {
		if got := c.kind.EntryOf(c.name, json.RawMessage(c.args)); got != c.want {
			t.Errorf("%s %s %s: %q, want %q", c.kind, c.name, c.args, got, c.want)
		}
	}
}
