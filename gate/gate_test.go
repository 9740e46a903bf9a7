package gate

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/b10x/harness/tools"
	"github.com/b10x/harness/workspace"
)

// newTestGate builds a gate over a fresh workspace with all six file tools
// published (the host is declared confined: these tests check policy, not
// the kernel) and a record in memory.
func newTestGate(t *testing.T, cfg Config) (*Gate, string, *bytes.Buffer) {
	t.Helper()
	dir := t.TempDir()
	ws, err := workspace.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	var rec bytes.Buffer
	cfg.Workspace = ws
	if cfg.Tools == nil {
		cfg.Tools = append(tools.ReadTools(), tools.WriteTools()...)
	}
	cfg.Host.ConfinedWorkspace = true
	if cfg.Recorder == nil {
		cfg.Recorder = NewRecorder(&rec)
	}
	g, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return g, ws.Dir(), &rec
}

func call(g *Gate, name, args string) Outcome {
	return g.Call(context.Background(), Call{Surface: "test", Name: name, Args: json.RawMessage(args)})
}

// records returns the call lines of a record (the outcomes), skipping the
// intent lines written before each execution.
func records(t *testing.T, b *bytes.Buffer) []CallRecord {
	t.Helper()
	var out []CallRecord
	for _, l := range bytes.Split(bytes.TrimSpace(b.Bytes()), []byte("\n")) {
		var r CallRecord
		if err := json.Unmarshal(l, &r); err != nil {
			t.Fatalf("record line %q: %v", l, err)
		}
		if r.Event == "intent" {
			continue
		}
		out = append(out, r)
	}
	return out
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestCatalogueIsTheSpecs(t *testing.T) {
	want := "file_read file.read low always|dir_list dir.list low always|search search low always|find find low always|" +
		"file_write file.write medium confined workspace|file_edit file.edit medium confined workspace|" +
		"run shell high confined execution and an allowed program"
	var got []string
	for _, e := range Catalogue {
		got = append(got, fmt.Sprintf("%s %s %s %s", e.Name, e.Operation, e.Risk, e.Needs))
	}
	if strings.Join(got, "|") != want {
		t.Fatalf("catalogue:\n%s\nwant\n%s", strings.Join(got, "|"), want)
	}
}

func TestZeroConfigDeniesAboveLow(t *testing.T) {
	// The Go API's default approver is deny-all: with no Approver and no
	// ceiling, a medium-risk write is refused and nothing is written.
	g, dir, rec := newTestGate(t, Config{})
	o := call(g, "file_write", `{"path":"a.txt","content":"x"}`)
	if o.Status != Refused || o.Reason != tools.ReasonApprovalRejected {
		t.Fatalf("outcome %+v", o)
	}
	if _, err := os.Stat(filepath.Join(dir, "a.txt")); !os.IsNotExist(err) {
		t.Fatalf("file written despite refusal: %v", err)
	}
	if o := call(g, "file_read", `{"path":"."}`); o.Reason == tools.ReasonApprovalRejected {
		t.Fatalf("a low-risk read asked for approval: %+v", o)
	}
	r := records(t, rec)
	if r[0].Approver != "deny" || r[0].Approval != "rejected" {
		t.Fatalf("record %+v", r[0])
	}
}

// countingApprover approves or rejects and counts its calls.
type countingApprover struct {
	approve bool
	n       int
	seen    []Request
}

func (a *countingApprover) Name() string { return "counting" }
func (a *countingApprover) Approve(_ context.Context, r Request) (Decision, error) {
	a.n++
	a.seen = append(a.seen, r)
	return Decision{Approved: a.approve, Reason: "test"}, nil
}

func TestCeilingTimesRiskTimesApprover(t *testing.T) {
	calls := map[Risk][2]string{
		Low:    {"file_read", `{"path":"f.txt"}`},
		Medium: {"file_edit", `{"path":"f.txt","old_string":"a","new_string":"b"}`},
	}
	for _, ceiling := range []Risk{Low, Medium, High} {
		for risk, c := range calls {
			for _, approve := range []bool{true, false} {
				name := fmt.Sprintf("ceiling=%s/risk=%s/approve=%v", ceiling, risk, approve)
				t.Run(name, func(t *testing.T) {
					a := &countingApprover{approve: approve}
					g, dir, _ := newTestGate(t, Config{ApproveUpTo: ceiling, Approver: a})
					write(t, filepath.Join(dir, "f.txt"), "a\n")
					o := call(g, c[0], c[1])
					asks := risk > ceiling
					if asks != (a.n == 1) {
						t.Fatalf("approver asked %d times, want asked=%v", a.n, asks)
					}
					if asks && !approve {
						if o.Status != Refused || o.Reason != tools.ReasonApprovalRejected {
							t.Fatalf("outcome %+v", o)
						}
						if b, _ := os.ReadFile(filepath.Join(dir, "f.txt")); string(b) != "a\n" {
							t.Fatalf("refused edit changed the file: %q", b)
						}
						return
					}
					if o.Status != Executed {
						t.Fatalf("outcome %+v", o)
					}
				})
			}
		}
	}
}

func TestStandingApproval(t *testing.T) {
	a := &standingOnce{}
	g, _, rec := newTestGate(t, Config{Approver: a})
	for i := range 3 {
		if o := call(g, "file_write", fmt.Sprintf(`{"path":"f%d.txt","content":"x"}`, i)); o.Status != Executed {
			t.Fatalf("call %d: %+v", i, o)
		}
	}
	if a.n != 1 {
		t.Fatalf("approver asked %d times, want 1 (standing yes)", a.n)
	}
	r := records(t, rec)
	if r[0].Approval != "approved-standing" || r[2].Approval != "approved-standing" {
		t.Fatalf("records %+v / %+v", r[0], r[2])
	}
	// A standing yes is per entry: file_edit still asks.
	write(t, filepath.Join(g.cfg.Workspace.Dir(), "e.txt"), "a")
	call(g, "file_edit", `{"path":"e.txt","old_string":"a","new_string":"b"}`)
	if a.n != 2 {
		t.Fatalf("standing approval leaked to another entry")
	}
}

type standingOnce struct{ n int }

func (a *standingOnce) Name() string { return "standing" }
func (a *standingOnce) Approve(context.Context, Request) (Decision, error) {
	a.n++
	return Decision{Approved: true, Standing: true}, nil
}

type failingApprover struct{}

func (failingApprover) Name() string { return "failing" }
func (failingApprover) Approve(context.Context, Request) (Decision, error) {
	return Decision{Approved: true}, fmt.Errorf("terminal went away")
}

func TestApproverErrorRejects(t *testing.T) {
	g, _, rec := newTestGate(t, Config{Approver: failingApprover{}})
	o := call(g, "file_write", `{"path":"a","content":"x"}`)
	if o.Status != Refused || o.Reason != tools.ReasonApprovalRejected {
		t.Fatalf("an approver error must reject, got %+v", o)
	}
	if r := records(t, rec); !strings.Contains(r[0].Cause, "terminal went away") {
		t.Fatalf("record cause %q", r[0].Cause)
	}
}

func TestSpecWriteScopeExample(t *testing.T) {
	var rules []ScopeRule
	for _, s := range []string{"src/**=allowed", "config/*.yaml=partial-only", "**/*.pem=denied"} {
		r, err := ParseScopeRule(s)
		if err != nil {
			t.Fatal(err)
		}
		rules = append(rules, r)
	}
	g, dir, rec := newTestGate(t, Config{ApproveUpTo: High, WriteScope: rules})
	write(t, filepath.Join(dir, "config/app.yaml"), "a: 1\n")
	write(t, filepath.Join(dir, "secret.pem"), "KEY\n")
	write(t, filepath.Join(dir, "src/key.pem"), "SRCKEY\n")
	must(t, os.MkdirAll(filepath.Join(dir, "ok"), 0o755))
	must(t, os.Symlink("../secret.pem", filepath.Join(dir, "ok/x")))
	must(t, os.Symlink("../config/app.yaml", filepath.Join(dir, "src/cfg")))

	cases := []struct {
		name, tool, args string
		status           Status
		rule             int // matched rule index, -1 none
	}{
		{"allowed write", "file_write", `{"path":"src/main.go","content":"package main\n"}`, Executed, 0},
		{"partial-only edit", "file_edit", `{"path":"config/app.yaml","old_string":"1","new_string":"2"}`, Executed, 1},
		{"partial-only write", "file_write", `{"path":"config/app.yaml","content":"x"}`, Refused, 1},
		{"pem denied", "file_write", `{"path":"secret.pem","content":"x"}`, Refused, 2},
		{"pem edit denied", "file_edit", `{"path":"secret.pem","old_string":"KEY","new_string":"K"}`, Refused, 2},
		// First match wins: src/** comes before **/*.pem.
		{"first match wins", "file_write", `{"path":"src/key.pem","content":"x"}`, Executed, 0},
		// A link cannot dodge the rules: ok/x resolves to secret.pem.
		{"link to pem", "file_write", `{"path":"ok/x","content":"x"}`, Refused, 2},
		{"link into partial-only", "file_write", `{"path":"src/cfg","content":"x"}`, Refused, 1},
		{"unmentioned", "file_write", `{"path":"notes.txt","content":"x"}`, Executed, -1},
	}
	for _, c := range cases {
		o := call(g, c.tool, c.args)
		if o.Status != c.status {
			t.Errorf("%s: %+v", c.name, o)
		}
		if c.status == Refused && o.Reason != tools.ReasonDeniedPath {
			t.Errorf("%s: reason %s", c.name, o.Reason)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "secret.pem")); string(b) != "KEY\n" {
		t.Fatalf("secret.pem changed: %q", b)
	}
	if fi, _ := os.Lstat(filepath.Join(dir, "ok/x")); fi.Mode()&os.ModeSymlink == 0 {
		t.Fatal("the link was replaced")
	}
	for i, r := range records(t, rec) {
		var got *int
		for _, s := range r.Steps {
			if s.Step == "scope" {
				got = s.Rule
			}
		}
		want := cases[i].rule
		if want < 0 && got != nil || want >= 0 && (got == nil || *got != want) {
			t.Errorf("%s: recorded rule %v, want %d", cases[i].name, got, want)
		}
	}
}

func TestProtectedPaths(t *testing.T) {
	g, dir, _ := newTestGate(t, Config{ApproveUpTo: High, Protected: []string{"run.jsonl"}})
	must(t, os.MkdirAll(filepath.Join(dir, ".git/hooks"), 0o755))
	for _, p := range []string{".git/hooks/pre-commit", ".git/config", "run.jsonl", ".b10x/agents/x.md"} {
		o := call(g, "file_write", fmt.Sprintf(`{"path":%q,"content":"#!/bin/sh\nrm -rf /\n"}`, p))
		if o.Status != Refused || o.Reason != tools.ReasonDeniedPath {
			t.Errorf("%s: %+v", p, o)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, ".git/hooks/pre-commit")); err == nil {
		t.Fatal("hook created")
	}
	// A wildcard rule does not name .git explicitly; a rule that does admits it.
	all, _ := ParseScopeRule("**=allowed")
	g2, _, _ := newTestGate(t, Config{ApproveUpTo: High, WriteScope: []ScopeRule{all}})
	if o := call(g2, "file_write", `{"path":".git/hooks/post-merge","content":"x"}`); o.Status != Refused {
		t.Fatalf("** admitted a protected path: %+v", o)
	}
	explicit, _ := ParseScopeRule(".git/hooks/**=allowed")
	g3, dir3, _ := newTestGate(t, Config{ApproveUpTo: High, WriteScope: []ScopeRule{explicit}})
	must(t, os.MkdirAll(filepath.Join(dir3, ".git/hooks"), 0o755))
	if o := call(g3, "file_write", `{"path":".git/hooks/post-merge","content":"x"}`); o.Status != Executed {
		t.Fatalf("an explicit rule did not admit: %+v", o)
	}
}

func TestNarrowingIsPublication(t *testing.T) {
	g, _, _ := newTestGate(t, Config{ApproveUpTo: High, Allow: []string{"file_read", "run"}})
	if got := fmt.Sprint(g.PublishedNames()); got != "[file_read]" {
		t.Fatalf("published %s: narrowing may only remove (run was never admitted)", got)
	}
	o := call(g, "file_write", `{"path":"a","content":"x"}`)
	if o.Status != Refused || o.Reason != tools.ReasonUnpublished {
		t.Fatalf("%+v", o)
	}
	if _, err := New(Config{Workspace: g.cfg.Workspace, Allow: []string{"rm"}}); err == nil {
		t.Fatal("narrowing to an unknown entry was accepted")
	}
}

func TestUnpresentedIsUnpublished(t *testing.T) {
	g, _, _ := newTestGate(t, Config{})
	o := g.Call(context.Background(), Call{Surface: "verbs", Name: "file_read", Args: json.RawMessage(`{"path":"."}`), Unpresented: true})
	if o.Status != Refused || o.Reason != tools.ReasonUnpublished {
		t.Fatalf("%+v", o)
	}
}

func TestBudget(t *testing.T) {
	g, dir, rec := newTestGate(t, Config{MaxCalls: 2})
	write(t, filepath.Join(dir, "f"), "x")
	for i := range 4 {
		o := call(g, "file_read", `{"path":"f"}`)
		if (i < 2) != (o.Status == Executed) || i >= 2 && o.Reason != tools.ReasonBudgetExhausted {
			t.Fatalf("call %d: %+v", i, o)
		}
	}
	if r := records(t, rec); r[3].Reason != "budget_exhausted" {
		t.Fatalf("record %+v", r[3])
	}
}

func TestResultCapAndArgsCap(t *testing.T) {
	g, dir, rec := newTestGate(t, Config{MaxResult: 10, MaxArgs: 100})
	write(t, filepath.Join(dir, "big"), strings.Repeat("line\n", 10))
	o := call(g, "file_read", `{"path":"big"}`)
	if o.Status != Failed || o.Reason != tools.ReasonOversizedResult || o.Result != "" || !strings.Contains(o.Message, "offset and limit") {
		t.Fatalf("%+v", o)
	}
	if o := call(g, "file_read", `{"path":"big","limit":2}`); o.Status != Executed {
		t.Fatalf("narrowed call: %+v", o)
	}
	o = call(g, "file_read", fmt.Sprintf(`{"path":%q}`, strings.Repeat("a", 200)))
	if o.Status != Refused || o.Reason != tools.ReasonInvalidArgument {
		t.Fatalf("args cap: %+v", o)
	}
	if r := records(t, rec); r[0].ResultSize != 0 || r[0].Status != Failed {
		t.Fatalf("record %+v", r[0])
	}
}

func TestRecordRedactsLargeBodies(t *testing.T) {
	g, _, rec := newTestGate(t, Config{ApproveUpTo: High})
	body := strings.Repeat("s", 5000)
	call(g, "file_write", fmt.Sprintf(`{"path":"a","content":%q}`, body))
	r := records(t, rec)
	args := r[0].Args.(map[string]any)
	c, ok := args["content"].(map[string]any)
	if !ok || c["bytes"] != float64(5000) || len(c["sha256"].(string)) != 64 {
		t.Fatalf("content recorded as %v", args["content"])
	}
	if strings.Contains(rec.String(), body[:2000]) {
		t.Fatal("large body written to the record")
	}
}

func TestEveryReasonCodeIsReachable(t *testing.T) {
	// The reasons the gate itself produces; program_not_allowed and timeout
	// come from tools and are covered with them, as tool_error is for a
	// tool's own failures. The gate's own tool_error is the record that
	// cannot be written (see the end).
	g, dir, _ := newTestGate(t, Config{MaxResult: 4, MaxCalls: 6, Hooks: []Hook{{Argv: []string{"/bin/sh", "-c", `grep -q blockme && { echo no >&2; exit 2; }; exit 0`}}}})
	write(t, filepath.Join(dir, "f"), "hello\n")
	write(t, filepath.Join(dir, "blockme"), "x")
	got := map[tools.Reason]bool{}
	for _, c := range [][2]string{
		{"run", `{}`},
		{"file_read", `{"path":7}`},
		{"file_read", `{"path":"../x"}`},
		{"file_read", `{"path":"blockme"}`},
		{"file_write", `{"path":"a","content":"x"}`},
		{"file_read", `{"path":"f"}`},
		{"file_read", `{"path":"f"}`},
	} {
		got[call(g, c[0], c[1]).Reason] = true
	}
	// A deadline that passes and a caller's cancel: timeout and cancelled.
	slow, dir3, _ := newTestGate(t, Config{CallTimeout: time.Nanosecond})
	write(t, filepath.Join(dir3, "f"), "hello\n")
	got[call(slow, "file_read", `{"path":"f"}`).Reason] = true
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	fresh, _, _ := newTestGate(t, Config{})
	got[fresh.Call(ctx, Call{Surface: "test", Name: "search", Args: json.RawMessage(`{"pattern":"hello"}`)}).Reason] = true
	// A record write that fails: that call does not run, and every later
	// one is refused, with record_failed.
	bad, dir2, _ := newTestGate(t, Config{Recorder: NewRecorder(&flakyWriter{failAt: 1})})
	write(t, filepath.Join(dir2, "f"), "hello\n")
	for i := 0; i < 2; i++ {
		o := call(bad, "file_read", `{"path":"f"}`)
		if o.Status != Refused || !strings.Contains(o.Message, "run record could not be written (no space left on device)") {
			t.Errorf("with a failed record: %+v, want refused and the record named", o)
			continue
		}
		got[o.Reason] = true
	}
	for _, r := range []tools.Reason{tools.ReasonUnpublished, tools.ReasonInvalidArgument, tools.ReasonDeniedPath, tools.ReasonHookBlocked,
		tools.ReasonApprovalRejected, tools.ReasonOversizedResult, tools.ReasonBudgetExhausted, tools.ReasonTimeout,
		tools.ReasonCancelled, tools.ReasonRecordFailed} {
		if !got[r] {
			t.Errorf("reason %s did not occur", r)
		}
	}
}

// flakyWriter fails its write number failAt (counting from 1) and accepts
// every other, keeping what it accepted: a disk that fills up, then frees.
type flakyWriter struct {
	n, failAt int
	buf       bytes.Buffer
}

func (w *flakyWriter) Write(p []byte) (int, error) {
	w.n++
	if w.n == w.failAt {
		return 0, syscall.ENOSPC
	}
	return w.buf.Write(p)
}

// TestRecorderErrorIsSticky: after a failed write the recorder writes
// nothing more, even when its writer would accept it again (a record with a
// hole proves nothing), and every later Write returns the first error.
func TestRecorderErrorIsSticky(t *testing.T) {
	w := &flakyWriter{failAt: 2}
	r := NewRecorder(w)
	if err := r.Write(map[string]int{"line": 1}); err != nil {
		t.Fatal(err)
	}
	first := r.Write(map[string]int{"line": 2})
	if first == nil || !strings.Contains(first.Error(), "no space left") {
		t.Fatalf("second write: %v, want the writer's error", first)
	}
	for i := 3; i <= 4; i++ {
		if err := r.Write(map[string]int{"line": i}); err == nil || err.Error() != first.Error() {
			t.Fatalf("write %d after the failure: %v, want %v", i, err, first)
		}
	}
	if got := w.buf.String(); got != `{"line":1}`+"\n" {
		t.Fatalf("the writer got %q after the failure, want only the first line", got)
	}
	if w.n != 2 {
		t.Fatalf("the writer was called %d times, want 2: nothing after the failure", w.n)
	}
}

// TestBrokenRecordStopsLaterCalls: once a record line could not be
// written, no later call acts on the workspace, through Call or Record, and
// none is recorded, even when the writer would accept the line again. The
// call whose intent line failed did not run.
func TestBrokenRecordStopsLaterCalls(t *testing.T) {
	w := &flakyWriter{failAt: 1}
	g, dir, _ := newTestGate(t, Config{ApproveUpTo: High, Recorder: NewRecorder(w)})
	write(t, filepath.Join(dir, "f"), "hello\n")
	o := call(g, "file_write", `{"path":"first.txt","content":"x"}`)
	if o.Status != Refused || o.Reason != tools.ReasonRecordFailed || o.Result != "" || !strings.Contains(o.Message, "did not run") {
		t.Fatalf("the call whose intent line failed: %+v, want refused with record_failed, saying it did not run", o)
	}
	if _, err := os.Stat(filepath.Join(dir, "first.txt")); err == nil {
		t.Error("the call whose intent line could not be written ran")
	}
	for _, c := range [][2]string{
		{"file_write", `{"path":"a.txt","content":"x"}`},
		{"file_edit", `{"path":"f","old_string":"hello","new_string":"bye"}`},
		{"file_read", `{"path":"f"}`},
	} {
		o := call(g, c[0], c[1])
		if o.Status != Refused || o.Reason != tools.ReasonRecordFailed || o.Result != "" {
			t.Errorf("%s after the record failed: %+v, want refused with record_failed", c[0], o)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "a.txt")); err == nil {
		t.Error("file_write ran after the record failed")
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "f")); string(b) != "hello\n" {
		t.Errorf("file_edit ran after the record failed: f holds %q", b)
	}
	if o := g.Record(Call{Surface: "test", Name: "tool_search"}, Outcome{Status: Executed, Result: "x"}); o.Status != Refused || o.Reason != tools.ReasonRecordFailed {
		t.Errorf("Record after the record failed: %+v, want refused with record_failed", o)
	}
	if w.buf.Len() != 0 {
		t.Errorf("lines were recorded after a failed one: %q", w.buf.String())
	}
}

// TestRecordFailsAfterTheEffect: when the intent line is written and the
// call line is not (the disk filled during the call), the call's effect
// stands and its outcome says so: executed, with a note that the record
// could not be written; later calls are refused.
func TestRecordFailsAfterTheEffect(t *testing.T) {
	w := &flakyWriter{failAt: 2}
	g, dir, _ := newTestGate(t, Config{ApproveUpTo: High, Recorder: NewRecorder(w)})
	o := call(g, "file_write", `{"path":"a.txt","content":"x"}`)
	if o.Status != Executed || o.Meta["record_error"] != "no space left on device" ||
		!strings.Contains(o.Message, "the call ran") || !strings.Contains(o.Result, "run record could not be written") {
		t.Fatalf("outcome %+v, want executed with a note on the record", o)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "a.txt")); err != nil || string(b) != "x" {
		t.Fatalf("a.txt: %q %v", b, err)
	}
	if !strings.Contains(w.buf.String(), `"event":"intent"`) || !strings.Contains(w.buf.String(), `"a.txt"`) {
		t.Fatalf("the intent line is missing: %q", w.buf.String())
	}
	if o := call(g, "file_write", `{"path":"b.txt","content":"x"}`); o.Status != Refused || o.Reason != tools.ReasonRecordFailed {
		t.Fatalf("later call: %+v", o)
	}
}

// TestIntentPrecedesExecution: the intent line of a call that executes is
// written before the tool acts (the hook sees it in the record) and the
// call line after; refusals have only a call line.
func TestIntentPrecedesExecution(t *testing.T) {
	w := &watchWriter{}
	g, dir, _ := newTestGate(t, Config{ApproveUpTo: High, Recorder: NewRecorder(w)})
	w.path = filepath.Join(dir, "a.txt")
	o := call(g, "file_write", `{"path":"a.txt","content":"x"}`)
	if o.Status != Executed {
		t.Fatal(o)
	}
	call(g, "file_read", `{"path":"../x"}`)
	lines := strings.Split(strings.TrimSpace(w.buf.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines, want intent, call, call:\n%s", len(lines), w.buf.String())
	}
	var in IntentRecord
	must(t, json.Unmarshal([]byte(lines[0]), &in))
	if in.Event != "intent" || in.Seq != 1 || in.Entry != "file_write" || in.Approval != "not-needed" || len(in.Steps) == 0 {
		t.Fatalf("intent line %s", lines[0])
	}
	if w.existed[0] || !w.existed[1] {
		t.Fatalf("a.txt existed when the lines were written: %v, want [false true ...]: the intent line comes before the effect", w.existed)
	}
	for i, want := range []string{`"event":"call","seq":1`, `"event":"call","seq":2`} {
		if !strings.Contains(lines[i+1], want) {
			t.Errorf("line %d: %s, want %s", i+2, lines[i+1], want)
		}
	}
}

// watchWriter keeps what it is given and, at each write, whether path
// existed.
type watchWriter struct {
	path    string
	buf     bytes.Buffer
	existed []bool
}

func (w *watchWriter) Write(p []byte) (int, error) {
	_, err := os.Stat(w.path)
	w.existed = append(w.existed, err == nil)
	return w.buf.Write(p)
}

// TestWriteResultOverCapIsShortened: a write whose result is above the cap
// happened; its outcome is executed with the result shortened and a note,
// never failed (a retry would do it twice). A read above the cap still
// fails, as nothing happened.
func TestWriteResultOverCapIsShortened(t *testing.T) {
	g, dir, rec := newTestGate(t, Config{ApproveUpTo: High, MaxResult: 1024})
	big := strings.Repeat("x\n", 5000)
	write(t, filepath.Join(dir, "dbl"), big)
	o := call(g, "file_edit", `{"path":"dbl","old_string":"x\n","new_string":"x\ny\n","replace_all":true}`)
	if o.Status != Executed {
		t.Fatalf("edit over the cap: %+v", o)
	}
	if len(o.Result) > 1024 || !strings.Contains(o.Result, "result shortened") || !strings.Contains(o.Result, "its effect happened in full") {
		t.Fatalf("result (%d bytes) %q", len(o.Result), o.Result)
	}
	if full, _ := o.Meta["result_full_bytes"].(int); full <= 1024 {
		t.Fatalf("meta %v", o.Meta)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "dbl")); strings.Count(string(b), "y\n") != 5000 {
		t.Fatalf("the edit did not happen once: %d y lines", strings.Count(string(b), "y\n"))
	}
	r := records(t, rec)
	if r[0].Status != Executed || !strings.Contains(r[0].Steps[len(r[0].Steps)-1].Detail, "shortened") {
		t.Fatalf("record %+v", r[0])
	}
	if o := call(g, "file_read", `{"path":"dbl"}`); o.Status != Failed || o.Reason != tools.ReasonOversizedResult {
		t.Fatalf("read over the cap: %+v", o)
	}
}

// hugeErrorTool is a read tool whose every call fails with a message of
// size bytes: what a tool that quoted a huge input back would give. The
// tools themselves cap what they quote (256 bytes); the gate's cap is
// the second line.
type hugeErrorTool struct{ size int }

func (h hugeErrorTool) Name() string            { return "search" }
func (h hugeErrorTool) Description() string     { return "fails loudly" }
func (h hugeErrorTool) Schema() json.RawMessage { return json.RawMessage(`{"type":"object"}`) }
func (h hugeErrorTool) Prepare(*workspace.Workspace, json.RawMessage) (tools.Prepared, error) {
	return hugeErrorCall(h), nil
}

type hugeErrorCall hugeErrorTool

func (h hugeErrorCall) Args() any             { return struct{}{} }
func (h hugeErrorCall) Writes() []tools.Write { return nil }
func (h hugeErrorCall) Execute(context.Context, tools.Report) (tools.Result, error) {
	return tools.Result{}, &tools.Error{Reason: tools.ReasonToolError, Public: "bad: " + strings.Repeat("(", h.size)}
}

// TestMessagesAreCapped: a tool error of 7 MB gives a bounded message that
// says what was cut, and a bounded record line.
func TestMessagesAreCapped(t *testing.T) {
	g, _, rec := newTestGate(t, Config{MaxResult: 8 << 10, Tools: []tools.Tool{hugeErrorTool{7 << 20}}})
	o := call(g, "search", `{}`)
	if o.Status == Executed {
		t.Fatalf("the failing tool executed: %v", o.Status)
	}
	if len(o.Message) > 8<<10+100 || !strings.Contains(o.Message, "[cut: the first") {
		t.Fatalf("message of %d bytes: %.200q", len(o.Message), o.Message)
	}
	if rec.Len() > 64<<10 {
		t.Fatalf("record line of %d bytes", rec.Len())
	}
	// The tools refuse a 7 MB pattern before they look at it, in a line.
	g2, _, _ := newTestGate(t, Config{MaxResult: 8 << 10})
	pat := "(" + strings.Repeat("a", 7<<20)
	if o := call(g2, "search", fmt.Sprintf(`{"pattern":%q}`, pat)); o.Status == Executed || len(o.Message) > 256 || o.Reason != tools.ReasonInvalidArgument {
		t.Fatalf("a 7 MB pattern: %v %s, message of %d bytes", o.Status, o.Reason, len(o.Message))
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestUnpublishedSaysTheHostsReason: an entry the host cannot confine says
// so, not that no program or no implementation was given (issue 18).
func TestUnpublishedSaysTheHostsReason(t *testing.T) {
	for _, c := range []struct {
		host Host
		name string
		want string
	}{
		{Host{WorkspaceWhy: "--confine off", ExecutionWhy: "--confine off"}, "file_write", "needs a confined workspace: --confine off"},
		{Host{WorkspaceWhy: "--confine off", ExecutionWhy: "--confine off"}, "run", "needs confined execution: --confine off"},
		{Host{ConfinedWorkspace: true, ConfinedExecution: true}, "run", "no program is allowed (the allow_program setting is empty)"},
		{Host{ConfinedWorkspace: true}, "run", "no program is allowed (the allow_program setting is empty)"},
	} {
		ws, err := workspace.Open(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		defer ws.Close()
		g, err := New(Config{Host: c.host, Workspace: ws, Tools: tools.ReadTools()})
		if err != nil {
			t.Fatal(err)
		}
		if got := g.Unpublished()[c.name]; got != c.want {
			t.Errorf("host %+v: %s unpublished because %q, want %q", c.host, c.name, got, c.want)
		}
	}
}
