package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/b10x/harness/confine/spawn"
	"github.com/b10x/harness/gate"
	"github.com/b10x/harness/surface"
	"github.com/b10x/harness/tools"
	"github.com/b10x/harness/workspace"
)

// syncBuffer is a record that handler goroutines write while a test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// calls returns the record's call lines (not the intent lines).
func (s *syncBuffer) calls(t *testing.T) []gate.CallRecord {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []gate.CallRecord
	for _, l := range bytes.Split(bytes.TrimSpace(s.b.Bytes()), []byte("\n")) {
		if len(l) == 0 {
			continue
		}
		var r gate.CallRecord
		if err := json.Unmarshal(l, &r); err != nil {
			t.Fatalf("record line %q: %v", l, err)
		}
		if r.Event == "call" {
			out = append(out, r)
		}
	}
	return out
}

type fixture struct {
	srv *Server
	rec *syncBuffer
	dir string
}

// newFixture builds a real gate over a temp workspace holding f.txt, with
// the six file tools published (the host is declared confined: these tests
// check the protocol and policy, not the kernel), and a server over it.
func newFixture(t testing.TB, kind surface.Kind, mode string, gcfg gate.Config, cfg Config) *fixture {
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
	rec := &syncBuffer{}
	gcfg.Workspace = ws
	if gcfg.Tools == nil {
		gcfg.Tools = append(tools.ReadTools(), tools.WriteTools()...)
	}
	gcfg.Host.ConfinedWorkspace = true
	if gcfg.Recorder == nil {
		gcfg.Recorder = gate.NewRecorder(rec)
	}
	if mode != "" {
		a, err := NewApprover(mode, 0)
		if err != nil {
			t.Fatal(err)
		}
		gcfg.Approver = a
	}
	g, err := gate.New(gcfg)
	if err != nil {
		t.Fatal(err)
	}
	s, err := surface.New(kind, g, surface.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Surface, cfg.Gate = s, g
	srv, err := NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{srv: srv, rec: rec, dir: ws.Dir()}
}

// connect runs a session of f's server over in-memory transports and
// returns a client connected to it.
func (f *fixture) connect(t *testing.T, opts *sdk.ClientOptions) (*sdk.ClientSession, error) {
	t.Helper()
	st, ct := sdk.NewInMemoryTransports()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.srv.Run(ctx, st) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("the server did not end")
		}
	})
	c := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, opts)
	cs, err := c.Connect(context.Background(), ct, nil)
	if err == nil {
		t.Cleanup(func() { cs.Close() })
	}
	return cs, err
}

func (f *fixture) mustConnect(t *testing.T, opts *sdk.ClientOptions) *sdk.ClientSession {
	t.Helper()
	cs, err := f.connect(t, opts)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// outcome reads the gate's outcome back from a result (Result): _meta's
// data, with the content's text as the result when executed, or as the
// message after "STATUS (REASON): " otherwise. A result of another shape
// fails the test.
func outcome(t *testing.T, r *sdk.CallToolResult) gate.Outcome {
	t.Helper()
	if r.StructuredContent != nil || len(r.Content) != 1 {
		t.Fatalf("a result with structuredContent %v and %d content blocks", r.StructuredContent, len(r.Content))
	}
	b, err := json.Marshal(r.Meta[OutcomeMeta])
	if err != nil {
		t.Fatal(err)
	}
	var m Outcome
	if err := json.Unmarshal(b, &m); err != nil || m.Status == "" {
		t.Fatalf("_meta %s: %v", b, err)
	}
	o := gate.Outcome{Status: m.Status, Entry: m.Entry, Reason: m.Reason, Meta: m.Meta, Seq: m.Seq}
	txt := text(r)
	if !o.IsError() {
		o.Result = txt
		return o
	}
	prefix := fmt.Sprintf("%s (%s): ", o.Status, o.Reason)
	if !strings.HasPrefix(txt, prefix) {
		t.Fatalf("an error's text %q does not begin %q", txt, prefix)
	}
	o.Message = strings.TrimPrefix(txt, prefix)
	return o
}

func text(r *sdk.CallToolResult) string {
	var s []string
	for _, c := range r.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			s = append(s, tc.Text)
		}
	}
	return strings.Join(s, "\n")
}

func callTool(t *testing.T, cs *sdk.ClientSession, name, args string) *sdk.CallToolResult {
	t.Helper()
	r, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: name, Arguments: json.RawMessage(args)})
	if err != nil {
		t.Fatalf("%s %s: %v", name, args, err)
	}
	return r
}

func TestListFlat(t *testing.T) {
	f := newFixture(t, surface.Flat, ApproveDeny, gate.Config{}, Config{})
	cs := f.mustConnect(t, nil)
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defs := f.srv.cfg.Surface.Definitions()
	if len(res.Tools) != len(defs) {
		t.Fatalf("%d tools listed, the surface has %d", len(res.Tools), len(defs))
	}
	for i, tl := range res.Tools {
		d := defs[i]
		if tl.Name != d.Name || tl.Description != d.Description {
			t.Errorf("tool %d: %q %q, want %q %q", i, tl.Name, tl.Description, d.Name, d.Description)
		}
		got, _ := json.Marshal(tl.InputSchema)
		var a, b any
		json.Unmarshal(got, &a)
		json.Unmarshal(d.InputSchema, &b)
		ja, _ := json.Marshal(a)
		jb, _ := json.Marshal(b)
		if !bytes.Equal(ja, jb) {
			t.Errorf("%s: schema %s, want %s", d.Name, ja, jb)
		}
		an := tl.Annotations
		if an == nil || an.DestructiveHint == nil || an.OpenWorldHint == nil {
			t.Fatalf("%s: annotations %+v", d.Name, an)
		}
		e, _ := gate.Lookup(d.Name)
		read := e.Risk == gate.Low
		if an.ReadOnlyHint != read || *an.DestructiveHint == read || *an.OpenWorldHint {
			t.Errorf("%s: readOnly %v destructive %v openWorld %v", d.Name, an.ReadOnlyHint, *an.DestructiveHint, *an.OpenWorldHint)
		}
	}
	if !strings.Contains(cs.InitializeResult().Instructions, "client roots are ignored") {
		t.Errorf("instructions: %q", cs.InitializeResult().Instructions)
	}
}

func TestListScopeAnnouncement(t *testing.T) {
	rule, _ := gate.ParseScopeRule("**/*.pem=denied")
	f := newFixture(t, surface.Flat, ApproveDeny, gate.Config{WriteScope: []gate.ScopeRule{rule}}, Config{})
	cs := f.mustConnect(t, nil)
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range res.Tools {
		if has := strings.Contains(tl.Description, "**/*.pem: no write tool may change these paths"); has != (tl.Name == "file_write" || tl.Name == "file_edit") {
			t.Errorf("%s announces the rule: %v", tl.Name, has)
		}
	}
}

func TestListVerbs(t *testing.T) {
	for _, c := range []struct {
		tools       []tools.Tool
		destructive bool
	}{{nil, true}, {tools.ReadTools(), false}} {
		f := newFixture(t, surface.Verbs, ApproveDeny, gate.Config{Tools: c.tools}, Config{Network: true})
		cs := f.mustConnect(t, nil)
		res, err := cs.ListTools(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, tl := range res.Tools {
			names = append(names, tl.Name)
			if tl.Name == "tool_invoke" {
				if *tl.Annotations.DestructiveHint != c.destructive || tl.Annotations.ReadOnlyHint == c.destructive {
					t.Errorf("tool_invoke over %d tools: %+v", len(c.tools), tl.Annotations)
				}
				if *tl.Annotations.OpenWorldHint {
					t.Error("tool_invoke is open-world without run")
				}
			} else if !tl.Annotations.ReadOnlyHint {
				t.Errorf("%s is not read-only", tl.Name)
			}
		}
		if strings.Join(names, ",") != "tool_search,tool_describe,tool_invoke" {
			t.Fatal(names)
		}
		// tool_invoke of file_read through the verbs surface.
		r := callTool(t, cs, "tool_invoke", `{"name":"file_read","arguments":{"path":"f.txt"}}`)
		if r.IsError || !strings.Contains(text(r), "hello") {
			t.Fatalf("%+v %s", r, text(r))
		}
		// A catalogue entry called directly is refused and recorded.
		r = callTool(t, cs, "file_read", `{"path":"f.txt"}`)
		if o := outcome(t, r); !r.IsError || o.Reason != tools.ReasonUnpublished {
			t.Fatalf("%+v", o)
		}
		recs := f.rec.calls(t)
		if last := recs[len(recs)-1]; last.Entry != "file_read" || last.Reason != string(tools.ReasonUnpublished) {
			t.Fatalf("%+v", last)
		}
	}
}

func TestAnnotationsRun(t *testing.T) {
	truePath, err := spawn.PinProgram("/bin/true")
	if err != nil {
		t.Fatal(err)
	}
	run := tools.RunTool(tools.RunConfig{Programs: tools.Programs{"true": truePath}})
	for _, network := range []bool{false, true} {
		f := newFixture(t, surface.Flat, ApproveDeny, gate.Config{Tools: []tools.Tool{run}, Host: gate.Host{ConfinedExecution: true, Programs: 1}}, Config{Network: network})
		an := f.srv.annotations("run")
		if an.ReadOnlyHint || !*an.DestructiveHint || *an.OpenWorldHint != network {
			t.Errorf("network %v: %+v", network, an)
		}
	}
}

func TestCallFileRead(t *testing.T) {
	f := newFixture(t, surface.Flat, ApproveDeny, gate.Config{}, Config{})
	cs := f.mustConnect(t, nil)
	r := callTool(t, cs, "file_read", `{"path":"f.txt"}`)
	if r.IsError || !strings.Contains(text(r), "hello") {
		t.Fatalf("%+v %q", r, text(r))
	}
	o := outcome(t, r)
	if o.Status != gate.Executed || o.Entry != "file_read" || o.Result != text(r) || o.Seq != 1 {
		t.Fatalf("%+v", o)
	}
	recs := f.rec.calls(t)
	if len(recs) != 1 || recs[0].Status != gate.Executed || recs[0].Surface != "flat" || recs[0].Entry != "file_read" {
		t.Fatalf("%+v", recs)
	}
}

// failWriter fails every write: a record that cannot be written.
type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestReasons(t *testing.T) {
	rule, _ := gate.ParseScopeRule("**/*.pem=denied")
	f := newFixture(t, surface.Flat, ApproveDeny, gate.Config{WriteScope: []gate.ScopeRule{rule}, MaxResult: 64 << 10, MaxCalls: 12}, Config{})
	if err := os.WriteFile(filepath.Join(f.dir, "big.txt"), bytes.Repeat([]byte("x\n"), 64<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	cs := f.mustConnect(t, nil)
	for _, c := range []struct {
		name, args string
		status     gate.Status
		reason     tools.Reason
	}{
		{"nope", `{}`, gate.Refused, tools.ReasonUnpublished},
		{"run", `{"argv":["true"]}`, gate.Refused, tools.ReasonUnpublished},
		{"file_read", `{"path":"f.txt","bogus":1}`, gate.Refused, tools.ReasonInvalidArgument},
		{"file_read", `{"path":7}`, gate.Refused, tools.ReasonInvalidArgument},
		{"file_read", `{"path":"../etc/passwd"}`, gate.Refused, tools.ReasonDeniedPath},
		{"file_read", `{"path":"/etc/passwd"}`, gate.Refused, tools.ReasonDeniedPath},
		{"file_write", `{"path":"k.pem","content":"x"}`, gate.Refused, tools.ReasonDeniedPath},
		{"file_write", `{"path":".git/config","content":"x"}`, gate.Refused, tools.ReasonDeniedPath},
		{"file_write", `{"path":"new.txt","content":"x"}`, gate.Refused, tools.ReasonApprovalRejected},
		{"file_read", `{"path":"missing.txt"}`, gate.Failed, tools.ReasonToolError},
		{"file_read", `{"path":"big.txt"}`, gate.Failed, tools.ReasonOversizedResult},
		{"file_read", `{"path":"f.txt"}`, gate.Executed, ""},
		{"file_read", `{"path":"f.txt"}`, gate.Refused, tools.ReasonBudgetExhausted},
	} {
		r := callTool(t, cs, c.name, c.args)
		o := outcome(t, r)
		if o.Status != c.status || o.Reason != c.reason || r.IsError != (c.status != gate.Executed) {
			t.Errorf("%s %s: %+v (isError %v)", c.name, c.args, o, r.IsError)
			continue
		}
		if r.IsError && !strings.Contains(text(r), string(c.reason)) {
			t.Errorf("%s %s: text %q lacks the reason", c.name, c.args, text(r))
		}
		recs := f.rec.calls(t)
		last := recs[len(recs)-1]
		if last.Seq != o.Seq || last.Entry != c.name || last.Status != c.status || last.Reason != string(c.reason) {
			t.Errorf("%s %s: recorded %+v", c.name, c.args, last)
		}
	}
	if _, err := os.Stat(filepath.Join(f.dir, "new.txt")); !os.IsNotExist(err) {
		t.Error("a refused write wrote")
	}

	// A record that cannot be written refuses every call.
	f = newFixture(t, surface.Flat, ApproveDeny, gate.Config{Recorder: gate.NewRecorder(failWriter{})}, Config{})
	cs = f.mustConnect(t, nil)
	callTool(t, cs, "file_read", `{"path":"f.txt"}`)
	if o := outcome(t, callTool(t, cs, "file_read", `{"path":"f.txt"}`)); o.Reason != tools.ReasonRecordFailed {
		t.Fatalf("%+v", o)
	}
}

// elicitClient answers every elicitation with action after wait, and
// keeps the messages it was shown.
type elicitClient struct {
	mu       sync.Mutex
	action   string
	wait     time.Duration
	messages []string
}

func (e *elicitClient) handle(ctx context.Context, req *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
	e.mu.Lock()
	e.messages = append(e.messages, req.Params.Message)
	e.mu.Unlock()
	select {
	case <-time.After(e.wait):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return &sdk.ElicitResult{Action: e.action}, nil
}

func TestElicitation(t *testing.T) {
	for _, c := range []struct {
		action string
		wait   time.Duration
		status gate.Status
		msg    string
	}{
		{"accept", 0, gate.Executed, ""},
		{"decline", 0, gate.Refused, "declined by the MCP client's user"},
		{"cancel", 0, gate.Refused, "dismissed"},
		{"accept", time.Hour, gate.Refused, "no answer within 300ms"},
	} {
		t.Run(c.action+c.wait.String(), func(t *testing.T) {
			a, _ := NewApprover(ApproveAuto, 300*time.Millisecond)
			f := newFixtureWith(t, a)
			e := &elicitClient{action: c.action, wait: c.wait}
			cs := f.mustConnect(t, &sdk.ClientOptions{ElicitationHandler: e.handle})
			content := "line one\n\x1b[31mred\u202e\n"
			args, _ := json.Marshal(map[string]string{"path": "new.txt", "content": content})
			r := callTool(t, cs, "file_write", string(args))
			o := outcome(t, r)
			if o.Status != c.status {
				t.Fatalf("%+v", o)
			}
			_, err := os.Stat(filepath.Join(f.dir, "new.txt"))
			if (err == nil) != (c.status == gate.Executed) {
				t.Fatalf("file exists: %v, outcome %+v", err == nil, o)
			}
			if c.status != gate.Executed && (o.Reason != tools.ReasonApprovalRejected || !strings.Contains(o.Message, c.msg)) {
				t.Fatalf("%+v", o)
			}
			e.mu.Lock()
			defer e.mu.Unlock()
			if len(e.messages) != 1 {
				t.Fatalf("%d elicitations", len(e.messages))
			}
			m := e.messages[0]
			for _, want := range []string{"file_write (file.write, risk medium)", "sha256 ", "new.txt", `\x1b[31mred\u202e`} {
				if !strings.Contains(m, want) {
					t.Errorf("message lacks %q:\n%s", want, m)
				}
			}
			if strings.ContainsAny(m, "\x1b\u202e") {
				t.Errorf("message carries raw control characters: %q", m)
			}
			recs := f.rec.calls(t)
			if last := recs[len(recs)-1]; last.Approver != "elicit" {
				t.Errorf("approver %q", last.Approver)
			}
		})
	}
}

// newFixtureWith builds a flat fixture whose gate has approver a.
func newFixtureWith(t *testing.T, a gate.Approver) *fixture {
	t.Helper()
	return newFixture(t, surface.Flat, "", gate.Config{Approver: a}, Config{})
}

func TestPromptWithoutElicitationRefusedAtInitialize(t *testing.T) {
	f := newFixture(t, surface.Flat, ApprovePrompt, gate.Config{}, Config{})
	if _, err := f.connect(t, nil); err == nil || !strings.Contains(err.Error(), "elicitation") {
		t.Fatalf("connect: %v", err)
	}
	// With elicitation, prompt works.
	e := &elicitClient{action: "accept"}
	cs := f.mustConnect(t, &sdk.ClientOptions{ElicitationHandler: e.handle})
	if r := callTool(t, cs, "file_write", `{"path":"a.txt","content":"x"}`); r.IsError {
		t.Fatal(text(r))
	}
}

func TestAutoWithoutElicitationDenies(t *testing.T) {
	f := newFixture(t, surface.Flat, ApproveAuto, gate.Config{}, Config{})
	cs := f.mustConnect(t, nil)
	if in := cs.InitializeResult().Instructions; !strings.Contains(in, "without elicitation gets each such call denied") {
		t.Errorf("instructions: %q", in)
	}
	r := callTool(t, cs, "file_write", `{"path":"a.txt","content":"x"}`)
	o := outcome(t, r)
	if o.Reason != tools.ReasonApprovalRejected || !strings.Contains(o.Message, "no elicitation capability") {
		t.Fatalf("%+v", o)
	}
	// Reads need no approval.
	if r := callTool(t, cs, "file_read", `{"path":"f.txt"}`); r.IsError {
		t.Fatal(text(r))
	}
}

func TestApproveAll(t *testing.T) {
	f := newFixture(t, surface.Flat, ApproveAll, gate.Config{}, Config{})
	cs := f.mustConnect(t, nil)
	if r := callTool(t, cs, "file_write", `{"path":"a.txt","content":"x"}`); r.IsError {
		t.Fatal(text(r))
	}
	if recs := f.rec.calls(t); recs[0].Approver != "all" || recs[0].Approval != "approved" {
		t.Fatalf("%+v", recs[0])
	}
}

func TestNewServerRefusesTTYApprover(t *testing.T) {
	dir := t.TempDir()
	ws, _ := workspace.Open(dir)
	defer ws.Close()
	g, err := gate.New(gate.Config{Workspace: ws, Tools: tools.ReadTools(), Approver: gate.NewTTYApprover(strings.NewReader(""), io.Discard)})
	if err != nil {
		t.Fatal(err)
	}
	s, _ := surface.New(surface.Flat, g, surface.Options{})
	if _, err := NewServer(Config{Surface: s, Gate: g}); err == nil {
		t.Fatal("a terminal approver was accepted")
	}
	if _, err := NewServer(Config{}); err == nil {
		t.Fatal("an empty config was accepted")
	}
	if _, err := NewApprover("maybe", 0); err == nil {
		t.Fatal("an unknown mode was accepted")
	}
}

// slowSearch is a search tool that takes until its context ends or
// release is closed: a slow call that needs no run.
type slowSearch struct {
	tools.Search
	started chan struct{}
	release chan struct{}
}

type slowCall struct{ s slowSearch }

func (s slowSearch) Prepare(*workspace.Workspace, json.RawMessage) (tools.Prepared, error) {
	return slowCall{s}, nil
}
func (c slowCall) Args() any             { return map[string]any{} }
func (c slowCall) Writes() []tools.Write { return nil }
func (c slowCall) Execute(ctx context.Context, _ tools.Report) (tools.Result, error) {
	close(c.s.started)
	select {
	case <-ctx.Done():
		return tools.Result{}, tools.Errorf(tools.ReasonToolError, ctx.Err(), "the search was stopped")
	case <-c.s.release:
		return tools.Result{Text: "done"}, nil
	}
}

func TestCancelledCallIsRecorded(t *testing.T) {
	slow := slowSearch{started: make(chan struct{}), release: make(chan struct{})}
	f := newFixture(t, surface.Flat, ApproveDeny, gate.Config{Tools: []tools.Tool{slow}}, Config{})
	cs := f.mustConnect(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "search", Arguments: json.RawMessage(`{"pattern":"x"}`)})
		errc <- err
	}()
	<-slow.started
	cancel()
	if err := <-errc; err == nil {
		t.Fatal("a cancelled call returned no error")
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		recs := f.rec.calls(t)
		if len(recs) == 1 {
			if recs[0].Status != gate.Failed || recs[0].Reason != string(tools.ReasonCancelled) {
				t.Fatalf("%+v", recs[0])
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the cancelled call was not recorded")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The session goes on.
	if _, err := cs.ListTools(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
}

func TestProgress(t *testing.T) {
	old := progressEvery
	progressEvery = 20 * time.Millisecond
	t.Cleanup(func() { progressEvery = old })
	slow := slowSearch{started: make(chan struct{}), release: make(chan struct{})}
	f := newFixture(t, surface.Flat, ApproveDeny, gate.Config{Tools: []tools.Tool{slow}}, Config{})
	var mu sync.Mutex
	var got []*sdk.ProgressNotificationParams
	cs := f.mustConnect(t, &sdk.ClientOptions{ProgressNotificationHandler: func(_ context.Context, r *sdk.ProgressNotificationClientRequest) {
		mu.Lock()
		got = append(got, r.Params)
		mu.Unlock()
	}})
	go func() {
		<-slow.started
		time.Sleep(200 * time.Millisecond)
		close(slow.release)
	}()
	p := &sdk.CallToolParams{Name: "search", Arguments: json.RawMessage(`{}`)}
	p.SetProgressToken("tok")
	r, err := cs.CallTool(context.Background(), p)
	if err != nil || r.IsError {
		t.Fatal(err, r)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) < 2 {
		t.Fatalf("%d progress notifications", len(got))
	}
	for i, n := range got {
		if n.ProgressToken != "tok" || !strings.HasPrefix(n.Message, "running for") || (i > 0 && n.Progress <= got[i-1].Progress) {
			t.Fatalf("notification %d: %+v", i, n)
		}
	}
}
