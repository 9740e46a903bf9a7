package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/b10x/harness/agent/replay"
	"github.com/b10x/harness/internal/testenv"
)

// mcpServer is `b10x-harness mcp` started as a subprocess by the go-sdk
// client, over its stdin and stdout.
type mcpServer struct {
	cs     *sdk.ClientSession
	stderr *syncBuf
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// mcpConnect starts `b10x-harness mcp args...` and connects to it with the
// go-sdk client (opts may be nil). The session is closed (stdin closed, the
// process waited for) at the end of the test.
func mcpConnect(t *testing.T, opts *sdk.ClientOptions, args ...string) (*mcpServer, error) {
	t.Helper()
	cmd := harnessCommand(append([]string{"mcp"}, args...)...)
	cmd.Env = append(os.Environ(), "B10X_TEST_MAIN=1")
	s := &mcpServer{stderr: &syncBuf{}}
	cmd.Stderr = s.stderr
	c := sdk.NewClient(&sdk.Implementation{Name: "b10x-test", Version: "1"}, opts)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, &sdk.CommandTransport{Command: cmd}, nil)
	if err != nil {
		return s, err
	}
	s.cs = cs
	t.Cleanup(func() { s.close(t) })
	return s, nil
}

func mcpMustConnect(t *testing.T, opts *sdk.ClientOptions, args ...string) *mcpServer {
	t.Helper()
	s, err := mcpConnect(t, opts, args...)
	if err != nil {
		t.Fatalf("connect: %v\nstderr:\n%s", err, s.stderr)
	}
	return s
}

// close ends the session as a client does (closes the server's stdin) and
// fails the test on a stack trace.
func (s *mcpServer) close(t *testing.T) {
	t.Helper()
	if s.cs != nil {
		s.cs.Close()
		s.cs = nil
	}
	if e := s.stderr.String(); strings.Contains(e, "goroutine ") || strings.Contains(e, "panic:") {
		t.Fatalf("a stack trace reached stderr:\n%s", e)
	}
}

func (s *mcpServer) names(t *testing.T) []string {
	t.Helper()
	res, err := s.cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	return names
}

func (s *mcpServer) call(t *testing.T, name string, args json.RawMessage) (*sdk.CallToolResult, map[string]any) {
	t.Helper()
	r, err := s.cs.CallTool(context.Background(), &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s %s: %v\nstderr:\n%s", name, args, err, s.stderr)
	}
	o, err := mcpOutcome(r)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return r, o
}

// mcpReason is "executed" or the reason code of an outcome.
func mcpReason(o map[string]any) string {
	if o["status"] == "executed" {
		return "executed"
	}
	r, _ := o["reason"].(string)
	return r
}

// TestMCPListMatchesTools: tools/list from the binary serves the same
// names, in the same order, as `b10x-harness tools --json` for the same
// policy, with the same descriptions.
func TestMCPListMatchesTools(t *testing.T) {
	ws, _ := sampleWorkspace(t)
	for _, pol := range [][]string{
		{"--workspace", ws},
		{"--workspace", ws, "--allow-program", "sh", "--surface", "verbs"},
		{"--workspace", ws, "--confine", "off"},
	} {
		r := harness(t, "", append([]string{"tools", "--json"}, pol...)...)
		if r.code != 0 {
			t.Fatalf("tools: exit %d: %s", r.code, r.stderr)
		}
		var defs []struct{ Name, Description string }
		if err := json.Unmarshal([]byte(r.stdout), &defs); err != nil {
			t.Fatalf("tools --json: %v\n%s", err, r.stdout)
		}
		s := mcpMustConnect(t, nil, pol...)
		res, err := s.cs.ListTools(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Tools) != len(defs) {
			t.Fatalf("%v: %d tools listed, `tools` shows %d", pol, len(res.Tools), len(defs))
		}
		for i, tl := range res.Tools {
			if tl.Name != defs[i].Name || tl.Description != defs[i].Description {
				t.Errorf("%v: tool %d is %q, `tools` shows %q (or the descriptions differ)", pol, i, tl.Name, defs[i].Name)
			}
		}
		s.close(t)
	}
}

// TestMCPCallFileRead: a file_read through the binary is executed and
// returns the file's text as its one content block, the outcome in _meta,
// no structuredContent (mcpOutcome checks).
func TestMCPCallFileRead(t *testing.T) {
	ws, _ := sampleWorkspace(t)
	s := mcpMustConnect(t, nil, "--workspace", ws)
	r, o := s.call(t, "file_read", json.RawMessage(`{"path":"hello.txt"}`))
	if r.IsError || o["status"] != "executed" || o["result"] != "hello\nworld\n" {
		t.Fatalf("%+v %v", r, o)
	}
	if tc, ok := r.Content[0].(*sdk.TextContent); !ok || tc.Text != "hello\nworld\n" {
		t.Fatalf("content %+v", r.Content)
	}
}

// TestMCPReasons: every refusal through the binary is an error result
// carrying its reason code, and no outside byte reaches the client.
func TestMCPReasons(t *testing.T) {
	ws, _ := sampleWorkspace(t)
	s := mcpMustConnect(t, nil, "--workspace", ws, "--approve", "deny", "--max-calls", "6")
	cases := []struct{ name, args, reason string }{
		{"file_read", `{"path":"../data-archived/x"}`, "denied_path"},
		{"file_read", `{"path":"link-out"}`, "denied_path"},
		{"shell", `{"cmd":"id"}`, "unpublished"},
		{"file_read", `{"path":7}`, "invalid_argument"},
		{"file_write", `{"path":"new.txt","content":"x"}`, "approval_rejected"},
		{"file_read", `{"path":"hello.txt"}`, "executed"},
		{"file_read", `{"path":"hello.txt"}`, "budget_exhausted"},
	}
	if !atkWrites() {
		cases[4].reason = "unpublished"
	}
	for _, c := range cases {
		r, o := s.call(t, c.name, json.RawMessage(c.args))
		if got := mcpReason(o); got != c.reason || r.IsError != (c.reason != "executed") {
			t.Errorf("%s %s: %s (isError %v), want %s: %v", c.name, c.args, got, r.IsError, c.reason, o)
		}
		if b, _ := json.Marshal(r); bytes.Contains(b, []byte("OUTSIDE-SECRET")) {
			t.Errorf("%s %s: an outside byte reached the client", c.name, c.args)
		}
	}
	if _, err := os.Stat(filepath.Join(ws, "new.txt")); !os.IsNotExist(err) {
		t.Error("a refused write wrote")
	}
}

// TestMCPElicitation: with --approve-up-to low, a file_write asks the
// client by elicitation; accept writes, decline refuses with
// approval_rejected and writes nothing.
func TestMCPElicitation(t *testing.T) {
	testenv.Require(t, atkWrites(), "file_write (a confined workspace)", testenv.ShapeNoLandlock)
	for _, action := range []string{"accept", "decline"} {
		t.Run(action, func(t *testing.T) {
			ws, _ := sampleWorkspace(t)
			var mu sync.Mutex
			var asked []string
			opts := &sdk.ClientOptions{ElicitationHandler: func(_ context.Context, req *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
				mu.Lock()
				asked = append(asked, req.Params.Message)
				mu.Unlock()
				return &sdk.ElicitResult{Action: action}, nil
			}}
			s := mcpMustConnect(t, opts, "--workspace", ws, "--approve-up-to", "low")
			r, o := s.call(t, "file_write", json.RawMessage(`{"path":"new.txt","content":"approved?\n"}`))
			b, err := os.ReadFile(filepath.Join(ws, "new.txt"))
			switch action {
			case "accept":
				if r.IsError || o["status"] != "executed" || string(b) != "approved?\n" {
					t.Fatalf("%v; file %q %v", o, b, err)
				}
			default:
				if !r.IsError || o["reason"] != "approval_rejected" || !os.IsNotExist(err) {
					t.Fatalf("%v; file %q %v", o, b, err)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if len(asked) != 1 || !strings.Contains(asked[0], "file_write (file.write, risk medium)") || !strings.Contains(asked[0], "new.txt") {
				t.Fatalf("asked %q", asked)
			}
		})
	}
}

// TestMCPPromptWithoutElicitation: --approve prompt refuses a client
// without the elicitation capability at initialize, with a clear error.
func TestMCPPromptWithoutElicitation(t *testing.T) {
	ws, _ := sampleWorkspace(t)
	s, err := mcpConnect(t, nil, "--workspace", ws, "--approve", "prompt")
	if err == nil {
		s.close(t)
		t.Fatal("a client without elicitation was served under --approve prompt")
	}
	if !strings.Contains(err.Error(), "did not declare the elicitation capability") {
		t.Fatalf("connect: %v", err)
	}
}

// TestMCPRunCancelled: a run call cancelled by the client (its context
// ended: notifications/cancelled) kills the call's whole tree, checked by
// a scan of the host's processes, and is recorded as cancelled.
func TestMCPRunCancelled(t *testing.T) {
	testenv.Require(t, atkExecution(), "confined execution", testenv.ShapeNoLandlock, testenv.ShapeNoUserns)
	ws, _ := sampleWorkspace(t)
	rec := filepath.Join(t.TempDir(), "rec.jsonl")
	s := mcpMustConnect(t, nil, "--workspace", ws, "--allow-program", "sh", "--approve", "all", "--record", rec)
	marker := fmt.Sprintf("%d.%d", 1000+os.Getpid()%1000, time.Now().UnixNano()%100000)
	args, _ := json.Marshal(map[string]any{"argv": []string{"sh", "-c", fmt.Sprintf("sleep %s & sleep %s & wait", marker, marker)}})
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := s.cs.CallTool(ctx, &sdk.CallToolParams{Name: "run", Arguments: json.RawMessage(args)})
		errc <- err
	}()
	deadline := time.Now().Add(30 * time.Second)
	for len(mcpMarked(marker)) < 2 {
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("the program's tree did not start; stderr:\n%s", s.stderr)
		}
		time.Sleep(20 * time.Millisecond)
	}
	mcpCancelLeavesNothing(t, cancel, errc, marker)
	s.close(t)
	var calls []map[string]any
	for _, l := range readRecord(t, rec) {
		if l["event"] == "call" {
			calls = append(calls, l)
		}
	}
	if len(calls) != 1 || calls[0]["entry"] != "run" || calls[0]["reason"] != "cancelled" {
		t.Fatalf("recorded %v", calls)
	}
}

// mcpMarked lists the host's processes whose command line holds marker.
func mcpMarked(marker string) []string {
	var found []string
	dirs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, d := range dirs {
		b, err := os.ReadFile(d)
		if err == nil && bytes.Contains(b, []byte(marker)) {
			found = append(found, d+": "+strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	return found
}

// TestMCPRecord: one MCP session is one run record: a run_start whose
// command is "mcp", one call line per call, and a run_end, client_closed
// when the client closed stdin with no call in flight.
func TestMCPRecord(t *testing.T) {
	ws, _ := sampleWorkspace(t)
	rec := filepath.Join(t.TempDir(), "rec.jsonl")
	s := mcpMustConnect(t, nil, "--workspace", ws, "--record", rec)
	s.call(t, "file_read", json.RawMessage(`{"path":"hello.txt"}`))
	s.call(t, "file_read", json.RawMessage(`{"path":"link-out"}`))
	s.call(t, "nope", json.RawMessage(`{}`))
	s.close(t)
	var events, calls []string
	for _, l := range readRecord(t, rec) {
		ev, _ := l["event"].(string)
		if ev == "intent" {
			continue
		}
		events = append(events, ev)
		switch ev {
		case "run_start":
			if l["command"] != "mcp" {
				t.Errorf("run_start command %v", l["command"])
			}
		case "call":
			calls = append(calls, fmt.Sprint(l["entry"], " ", mcpReason(l)))
		case "run_end":
			if l["ended_by"] != "client_closed" {
				t.Errorf("run_end %v", l)
			}
		}
	}
	if want := []string{"run_start", "call", "call", "call", "run_end"}; !slices.Equal(events, want) {
		t.Fatalf("record events %v, want %v", events, want)
	}
	if want := []string{"file_read executed", "file_read denied_path", "nope unpublished"}; !slices.Equal(calls, want) {
		t.Fatalf("calls %v, want %v", calls, want)
	}
}

// TestMCPAnswersEveryRequestAtEOF: requests written all at once and
// followed by the end of stdin (printf '...' | b10x-harness mcp) are all
// answered, and the calls recorded, before the binary exits. The end of
// stdin is the client's shutdown: a call still running then is cancelled
// (answered and recorded so, and the exit is 130); one that finished
// first stands.
func TestMCPAnswersEveryRequestAtEOF(t *testing.T) {
	ws, _ := sampleWorkspace(t)
	rec := filepath.Join(t.TempDir(), "rec.jsonl")
	in := strings.Join([]string{
		initLine,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"file_read","arguments":{"path":"hello.txt"}}}`,
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"file_read","arguments":{"path":"link-out"}}}`,
	}, "\n") + "\n"
	r := harness(t, in, "mcp", "--workspace", ws, "--record", rec)
	if r.code != 0 && r.code != exitInterrupted {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	got := map[string]map[string]any{}
	sc := bufio.NewScanner(strings.NewReader(r.stdout))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("stdout line %q: %v", sc.Bytes(), err)
		}
		got[fmt.Sprint(m["id"])] = m
	}
	for _, id := range []string{"1", "2", "3", "4"} {
		if got[id]["result"] == nil {
			t.Errorf("request %s: %v", id, got[id])
		}
	}
	cancelled := 0
	for _, id := range []string{"3", "4"} {
		switch o := callOutcome(t, got[id]); {
		case o["reason"] == "cancelled":
			cancelled++
		case id == "3" && o["status"] == "executed", id == "4" && o["reason"] == "denied_path":
		default:
			t.Errorf("call %s: %v", id, o)
		}
	}
	n := 0
	for _, l := range readRecord(t, rec) {
		if l["event"] == "call" {
			n++
		}
	}
	if n != 2 {
		t.Errorf("%d calls recorded, want 2", n)
	}
	end := runEnd(t, rec)
	if want := map[bool]int{true: exitInterrupted, false: 0}[cancelled > 0]; r.code != want || (cancelled > 0) != (end["ended_by"] == "cancelled") {
		t.Errorf("%d calls answered cancelled; exit %d, run_end %v", cancelled, r.code, end)
	}
}

// TestMCPAttackReplayMatchesCall plays every tool call of
// examples/attacks.jsonl through MCP and through `b10x-harness call`, each
// on its own fresh copy of the prepared examples/workspace with the same
// policy, and requires the same outcome (executed or reason code) for
// each call.
func TestMCPAttackReplayMatchesCall(t *testing.T) {
	rnRepo(t)
	f, err := os.Open("../../examples/attacks.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	turns, err := replay.Parse(f.Name(), f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	_, wsCall := rnPrepare(t)
	_, wsMCP := rnPrepare(t)
	policy := []string{"--approve-up-to", "high", "--allow-program", "make", "--allow-program", "echo", "--write-scope", "**/*.pem=denied"}
	s := mcpMustConnect(t, nil, append([]string{"--workspace", wsMCP}, policy...)...)
	n := 0
	for _, turn := range turns {
		for _, c := range turn.Calls {
			n++
			r := harness(t, "", append([]string{"call", c.Name, string(c.Args), "--workspace", wsCall}, policy...)...)
			viaCall := mcpReason(outcome(t, r))
			// An MCP client can send only JSON: arguments that are not
			// (the model wrote malformed JSON) go as the string it wrote.
			args := c.Args
			if !json.Valid(args) {
				args, _ = json.Marshal(string(c.Args))
			}
			_, o := s.call(t, c.Name, args)
			if viaMCP := mcpReason(o); viaMCP != viaCall {
				t.Errorf("call %d, %s %s: %s through MCP, %s through call (%v)", n, c.Name, c.Args, viaMCP, viaCall, o["message"])
			}
		}
	}
	if n < 30 {
		t.Fatalf("only %d calls played", n)
	}
}

// TestMCPPolicyFile: `mcp --policy FILE` serves the policy the file states
// (workspace, ceiling, write scope, approval, call budget), a flag given
// beside it overrides its key, and a bad file refuses to start with its
// FILE:LINE:COL before any message is read.
func TestMCPPolicyFile(t *testing.T) {
	testenv.Require(t, atkWrites(), "file_write (a confined workspace)", testenv.ShapeNoLandlock)
	ws, _ := sampleWorkspace(t)
	pol := filepath.Join(t.TempDir(), "mcp.toml")
	must(t, os.WriteFile(pol, []byte(fmt.Sprintf(`workspace = %q
approve_up_to = "medium"
approve = "deny"
write_scope = ["**/*.pem=denied"]
max_calls = 4
`, ws)), 0o644))

	r := harness(t, "", "tools", "--json", "--policy", pol)
	var defs []struct{ Name string }
	if err := json.Unmarshal([]byte(r.stdout), &defs); err != nil || r.code != 0 {
		t.Fatalf("tools --policy: exit %d %v: %s", r.code, err, r.stderr)
	}
	var want []string
	for _, d := range defs {
		want = append(want, d.Name)
	}
	s := mcpMustConnect(t, nil, "--policy", pol)
	if got := s.names(t); !slices.Equal(got, want) {
		t.Errorf("tools/list %v, tools --policy %v", got, want)
	}
	for _, c := range []struct{ name, args, reason string }{
		{"file_write", `{"path":"k.pem","content":"x"}`, "denied_path"}, // write_scope
		{"file_write", `{"path":"ok.txt","content":"x"}`, "executed"},   // approve_up_to medium
		{"file_read", `{"path":"hello.txt"}`, "executed"},               // workspace
		{"file_read", `{"path":"../data-archived/x"}`, "denied_path"},   // call 4 of 4
		{"file_read", `{"path":"hello.txt"}`, "budget_exhausted"},       // max_calls
	} {
		if _, o := s.call(t, c.name, json.RawMessage(c.args)); mcpReason(o) != c.reason {
			t.Errorf("%s %s: %v, want %s", c.name, c.args, o, c.reason)
		}
	}
	s.close(t)

	// A flag overrides the file's key: the ceiling back to low, so the
	// write asks, and approve = "deny" from the file refuses it.
	s = mcpMustConnect(t, nil, "--policy", pol, "--approve-up-to", "low")
	if _, o := s.call(t, "file_write", json.RawMessage(`{"path":"ok2.txt","content":"x"}`)); mcpReason(o) != "approval_rejected" {
		t.Errorf("file_write under --approve-up-to low: %v", o)
	}
	s.close(t)

	// A bad file: the error names the place, and nothing is served.
	bad := filepath.Join(t.TempDir(), "bad.toml")
	must(t, os.WriteFile(bad, []byte("workspace = \".\"\nmax_cals = 3\n"), 0o644))
	r = harness(t, initLine+"\n", "mcp", "--policy", bad)
	if r.code == 0 || r.stdout != "" || !strings.Contains(r.stderr, bad+":2:") {
		t.Fatalf("bad policy: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
}

const initLine = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`

// mcpCancelLeavesNothing cancels a call in flight, checks that it returned
// an error, and waits (10 s at most) until no process carrying marker is
// left: the call's whole tree was killed.
func mcpCancelLeavesNothing(t *testing.T, cancel func(), errc <-chan error, marker string) {
	t.Helper()
	cancel()
	if err := <-errc; err == nil {
		t.Fatal("a cancelled call returned no error")
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(mcpMarked(marker)) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("processes left after the cancelled call: %v", mcpMarked(marker))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestMCPRunPrestarted: an MCP session's run calls run in sandboxes
// started before them (the outcome's meta says so), each with a /tmp of
// its own.
func TestMCPRunPrestarted(t *testing.T) {
	testenv.Require(t, atkExecution(), "confined execution", testenv.ShapeNoLandlock, testenv.ShapeNoUserns)
	ws, _ := sampleWorkspace(t)
	s := mcpMustConnect(t, nil, "--workspace", ws, "--allow-program", "sh", "--approve", "all")
	args := json.RawMessage(`{"argv":["sh","-c","ls /tmp | sed s/^/tmp:/; touch /tmp/$(echo m)ark; echo ran"]}`)
	for i := 1; i <= 2; i++ {
		time.Sleep(200 * time.Millisecond) // the client's turn
		r, o := s.call(t, "run", args)
		meta, _ := o["meta"].(map[string]any)
		if r.IsError || mcpReason(o) != "executed" || meta["prestarted"] != true {
			t.Fatalf("call %d: %v", i, o)
		}
		if res, _ := o["result"].(string); !strings.Contains(res, "ran") || strings.Contains(res, "tmp:mark") {
			t.Fatalf("call %d's output (a sandbox served twice if it shows tmp:mark): %q", i, res)
		}
	}
}
