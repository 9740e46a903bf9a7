package agent_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/b10x/harness/agent"
	"github.com/b10x/harness/gate"
	"github.com/b10x/harness/surface"
	"github.com/b10x/harness/tools"
	"github.com/b10x/harness/workspace"
)

// scripted is a provider whose conversation plays fixed turns and keeps
// what it was sent.
type scripted struct {
	turns []agent.Turn
	// block makes Next wait for the context's end from this turn index on.
	block int
	err   error // returned instead of the turn at index errAt
	errAt int

	mu      sync.Mutex
	req     agent.Request
	results [][]agent.ToolResult
	nexts   int
}

func (s *scripted) Name() string { return "scripted" }

func (s *scripted) Begin(req agent.Request) (agent.Conversation, error) {
	s.req = req
	return s, nil
}

func (s *scripted) Next(ctx context.Context, results []agent.ToolResult) (agent.Turn, error) {
	s.mu.Lock()
	i := s.nexts
	s.nexts++
	s.results = append(s.results, results)
	s.mu.Unlock()
	if s.err != nil && i == s.errAt {
		return agent.Turn{}, s.err
	}
	if s.block > 0 && i >= s.block {
		<-ctx.Done()
		return agent.Turn{}, ctx.Err()
	}
	if i >= len(s.turns) {
		return agent.Turn{Text: "done", Stop: "end_turn"}, nil
	}
	return s.turns[i], nil
}

func call(id, name, args string) agent.ToolCall {
	return agent.ToolCall{ID: id, Name: name, Args: json.RawMessage(args)}
}

type env struct {
	ws  string
	rec *bytes.Buffer
	g   *gate.Gate
}

func newEnv(t *testing.T, cfg gate.Config) *env {
	t.Helper()
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	must(t, os.MkdirAll(ws, 0o755))
	must(t, os.WriteFile(filepath.Join(ws, "a.txt"), []byte("inside\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "secret"), []byte("OUTSIDE\n"), 0o644))
	w, err := workspace.Open(ws)
	must(t, err)
	t.Cleanup(func() { w.Close() })
	rec := &bytes.Buffer{}
	cfg.Workspace, cfg.Recorder = w, gate.NewRecorder(rec)
	if cfg.Tools == nil {
		cfg.Tools = tools.ReadTools()
	}
	g, err := gate.New(cfg)
	must(t, err)
	return &env{ws: ws, rec: rec, g: g}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func (e *env) surface(t *testing.T, k surface.Kind) *surface.Surface {
	sf, err := surface.New(k, e.g, surface.Options{})
	must(t, err)
	return sf
}

func (e *env) records(t *testing.T) []gate.CallRecord {
	var out []gate.CallRecord
	for _, l := range bytes.Split(bytes.TrimSpace(e.rec.Bytes()), []byte("\n")) {
		if len(l) == 0 {
			continue
		}
		var c gate.CallRecord
		must(t, json.Unmarshal(l, &c))
		if c.Event == "call" { // not the intent lines written before each execution
			out = append(out, c)
		}
	}
	return out
}

func TestRunResultsInOrderWithErrorFlags(t *testing.T) {
	e := newEnv(t, gate.Config{})
	p := &scripted{turns: []agent.Turn{
		{Text: "three at once", Stop: "tool_use", Calls: []agent.ToolCall{
			call("1", "file_read", `{"path":"a.txt"}`),
			call("2", "file_read", `{"path":"../secret"}`),
			call("3", "nosuchtool", `{}`),
			call("4", "file_read", `{"path":`),
		}},
		{Text: "fin", Stop: "end_turn"},
	}}
	sum := agent.Run(context.Background(), agent.Config{Provider: p, Surface: e.surface(t, surface.Flat), System: "sys", Task: "task"})
	if sum.EndedBy != agent.EndModelStopped || sum.Turns != 2 || len(sum.Calls) != 4 {
		t.Fatalf("summary %+v", sum)
	}
	if p.req.System != "sys" || p.req.Task != "task" || len(p.req.Tools) != 4 {
		t.Errorf("request %+v", p.req)
	}
	res := p.results[1]
	want := []struct {
		id      string
		isError bool
		prefix  string
	}{
		{"1", false, "inside"},
		{"2", true, "ERROR (refused, denied_path): "},
		{"3", true, "ERROR (refused, unpublished): "},
		{"4", true, "ERROR (refused, invalid_argument): "},
	}
	if len(res) != len(want) {
		t.Fatalf("%d results, want %d", len(res), len(want))
	}
	for i, w := range want {
		if res[i].CallID != w.id || res[i].IsError != w.isError || !strings.HasPrefix(res[i].Content, w.prefix) {
			t.Errorf("result %d = %+v, want id %s error %v prefix %q", i, res[i], w.id, w.isError, w.prefix)
		}
		if strings.Contains(res[i].Content, "OUTSIDE") {
			t.Errorf("result %d leaks the outside file", i)
		}
	}
	recs := e.records(t)
	if len(recs) != 4 {
		t.Fatalf("%d record lines, want 4", len(recs))
	}
	for i, r := range recs {
		if r.Seq != int64(i+1) || r.Seq != sum.Calls[i].Seq {
			t.Errorf("record %d seq %d, summary seq %d", i, r.Seq, sum.Calls[i].Seq)
		}
	}
	if sum.Count(gate.Executed) != 1 || sum.Count(gate.Refused) != 3 {
		t.Errorf("counts: %d executed, %d refused", sum.Count(gate.Executed), sum.Count(gate.Refused))
	}
}

func TestRunMaxTurns(t *testing.T) {
	e := newEnv(t, gate.Config{})
	loop := agent.Turn{Calls: []agent.ToolCall{call("x", "dir_list", `{}`)}, Stop: "tool_use"}
	p := &scripted{turns: []agent.Turn{loop, loop, loop, loop, loop}}
	sum := agent.Run(context.Background(), agent.Config{Provider: p, Surface: e.surface(t, surface.Flat), Task: "t", MaxTurns: 3})
	if sum.EndedBy != agent.EndMaxTurns || sum.Turns != 3 || len(sum.Calls) != 3 || p.nexts != 3 {
		t.Errorf("ended by %s after %d turns, %d calls, %d requests; want max_turns after 3", sum.EndedBy, sum.Turns, len(sum.Calls), p.nexts)
	}
}

// The gate's call budget ends the run: the calls past it are refused by the
// gate and recorded, and the model is not asked again.
func TestRunMaxCalls(t *testing.T) {
	e := newEnv(t, gate.Config{MaxCalls: 2})
	p := &scripted{turns: []agent.Turn{
		{Calls: []agent.ToolCall{call("1", "dir_list", `{}`)}, Stop: "tool_use"},
		{Calls: []agent.ToolCall{call("2", "dir_list", `{}`), call("3", "file_read", `{"path":"a.txt"}`), call("4", "find", `{"pattern":"*"}`)}, Stop: "tool_use"},
		{Calls: []agent.ToolCall{call("5", "dir_list", `{}`)}, Stop: "tool_use"},
	}}
	sum := agent.Run(context.Background(), agent.Config{Provider: p, Surface: e.surface(t, surface.Flat), Task: "t"})
	if sum.EndedBy != agent.EndMaxCalls || p.nexts != 2 {
		t.Fatalf("ended by %s after %d requests, want max_calls after 2", sum.EndedBy, p.nexts)
	}
	recs := e.records(t)
	if len(recs) != 4 {
		t.Fatalf("%d record lines, want 4", len(recs))
	}
	for i, r := range recs {
		wantBudget := i >= 2
		if (r.Reason == string(tools.ReasonBudgetExhausted)) != wantBudget {
			t.Errorf("record %d: %s %s", i, r.Status, r.Reason)
		}
	}
}

func TestRunTimeout(t *testing.T) {
	e := newEnv(t, gate.Config{})
	p := &scripted{turns: []agent.Turn{{Calls: []agent.ToolCall{call("1", "dir_list", `{}`)}, Stop: "tool_use"}}, block: 1}
	start := time.Now()
	sum := agent.Run(context.Background(), agent.Config{Provider: p, Surface: e.surface(t, surface.Flat), Task: "t", Timeout: 200 * time.Millisecond})
	if sum.EndedBy != agent.EndTimeout || sum.Err != nil {
		t.Fatalf("ended by %s (%v), want timeout", sum.EndedBy, sum.Err)
	}
	if d := time.Since(start); d < 200*time.Millisecond || d > 10*time.Second {
		t.Errorf("ended after %s", d)
	}
}

func TestRunInterrupted(t *testing.T) {
	e := newEnv(t, gate.Config{})
	p := &scripted{block: 1, turns: []agent.Turn{{Calls: []agent.ToolCall{call("1", "dir_list", `{}`)}, Stop: "tool_use"}}}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	sum := agent.Run(ctx, agent.Config{Provider: p, Surface: e.surface(t, surface.Flat), Task: "t", Timeout: time.Hour})
	if sum.EndedBy != agent.EndCancelled {
		t.Fatalf("ended by %s, want cancelled", sum.EndedBy)
	}
}

func TestRunProviderError(t *testing.T) {
	e := newEnv(t, gate.Config{})
	boom := errors.New("fake: authentication failed (401)")
	p := &scripted{err: boom, errAt: 0}
	sum := agent.Run(context.Background(), agent.Config{Provider: p, Surface: e.surface(t, surface.Flat), Task: "t"})
	if sum.EndedBy != agent.EndError || !errors.Is(sum.Err, boom) {
		t.Fatalf("ended by %s (%v), want error", sum.EndedBy, sum.Err)
	}
}

// cancelAfterFirst cancels the run's context when the first call is done.
type cancelAfterFirst struct {
	cancel  context.CancelFunc
	skipped []string
	done    int
}

func (o *cancelAfterFirst) Turn(int, agent.Turn)          {}
func (o *cancelAfterFirst) CallStart(int, agent.ToolCall) {}
func (o *cancelAfterFirst) CallDone(int, agent.ToolCall, gate.Outcome, time.Duration) {
	o.done++
	o.cancel()
}
func (o *cancelAfterFirst) Skipped(_ int, c agent.ToolCall, why agent.EndReason) {
	o.skipped = append(o.skipped, c.ID+":"+string(why))
}

// Calls of a turn that the run's end overtakes never reach the gate.
func TestRunSkipsCallsAfterTheEnd(t *testing.T) {
	e := newEnv(t, gate.Config{})
	p := &scripted{turns: []agent.Turn{{Calls: []agent.ToolCall{
		call("1", "dir_list", `{}`), call("2", "file_read", `{"path":"a.txt"}`), call("3", "find", `{"pattern":"*"}`),
	}, Stop: "tool_use"}}}
	ctx, cancel := context.WithCancel(context.Background())
	obs := &cancelAfterFirst{cancel: cancel}
	sum := agent.Run(ctx, agent.Config{Provider: p, Surface: e.surface(t, surface.Flat), Task: "t", Observer: obs})
	if sum.EndedBy != agent.EndCancelled || sum.Skipped != 2 || len(sum.Calls) != 1 {
		t.Fatalf("summary %+v", sum)
	}
	if strings.Join(obs.skipped, ",") != "2:cancelled,3:cancelled" {
		t.Errorf("skipped %v", obs.skipped)
	}
	if n := len(e.records(t)); n != 1 {
		t.Errorf("%d record lines, want 1", n)
	}
}

func TestRunRefusesBadConfig(t *testing.T) {
	if s := agent.Run(context.Background(), agent.Config{}); s.EndedBy != agent.EndError || s.Err == nil {
		t.Errorf("empty config: %+v", s)
	}
	e := newEnv(t, gate.Config{})
	if s := agent.Run(context.Background(), agent.Config{Provider: &scripted{}, Surface: e.surface(t, surface.Flat), MaxTurns: -1}); s.EndedBy != agent.EndError {
		t.Errorf("negative max turns: %+v", s)
	}
}

func TestResultText(t *testing.T) {
	for _, tc := range []struct {
		out  gate.Outcome
		want string
	}{
		{gate.Outcome{Status: gate.Executed, Result: "text"}, "text"},
		{gate.Outcome{Status: gate.Executed}, "(empty result)"},
		{gate.Outcome{Status: gate.Refused, Reason: tools.ReasonDeniedPath, Message: "no"}, "ERROR (refused, denied_path): no"},
		{gate.Outcome{Status: gate.Failed, Reason: tools.ReasonTimeout, Message: "slow"}, "ERROR (failed, timeout): slow"},
		{gate.Outcome{Status: gate.Failed}, "ERROR (failed, tool_error): the call did not succeed"},
		{gate.Outcome{}, "ERROR (failed, tool_error): the call did not succeed"},
		// A refusal's text never reads as success, even with a result.
		{gate.Outcome{Status: gate.Refused, Reason: tools.ReasonUnpublished, Message: "m", Result: "looks fine"}, "ERROR (refused, unpublished): m"},
	} {
		if got := agent.ResultText(tc.out); got != tc.want {
			t.Errorf("ResultText(%+v) = %q, want %q", tc.out, got, tc.want)
		}
	}
}

// TestRunDuplicateCallIDs: a turn whose calls share an id runs only the
// first; the later one is refused (invalid_argument), recorded, and its
// result is an error under that id.
func TestRunDuplicateCallIDs(t *testing.T) {
	e := newEnv(t, gate.Config{ApproveUpTo: gate.High, Tools: append(tools.ReadTools(), tools.WriteTools()...), Host: gate.Host{ConfinedWorkspace: true}})
	edit := `{"path":"a.txt","old_string":"inside","new_string":"inside!"}`
	p := &scripted{turns: []agent.Turn{
		{Stop: "tool_calls", Calls: []agent.ToolCall{call("dup", "file_edit", edit), call("dup", "file_edit", `{"path":"a.txt","old_string":"inside!","new_string":"inside!!"}`), call("other", "file_read", `{"path":"a.txt"}`)}},
		{Text: "done", Stop: "stop"},
	}}
	sum := agent.Run(context.Background(), agent.Config{Provider: p, Surface: e.surface(t, surface.Flat), Task: "t"})
	if sum.EndedBy != agent.EndModelStopped {
		t.Fatalf("ended by %s: %v", sum.EndedBy, sum.Err)
	}
	if b, _ := os.ReadFile(filepath.Join(e.ws, "a.txt")); string(b) != "inside!\n" {
		t.Fatalf("a.txt holds %q: the duplicate ran", b)
	}
	res := p.results[1] // the first Next has no results
	if len(res) != 3 || res[0].CallID != "dup" || res[0].IsError || res[1].CallID != "dup" || !res[1].IsError ||
		!strings.Contains(res[1].Content, "already used by an earlier call") || res[2].CallID != "other" || res[2].IsError {
		t.Fatalf("results %+v", res)
	}
	recs := e.records(t)
	if len(recs) != 3 || recs[1].Status != gate.Refused || recs[1].Reason != string(tools.ReasonInvalidArgument) || recs[1].Entry != "file_edit" {
		t.Fatalf("record %+v", recs)
	}
}
