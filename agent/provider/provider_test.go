package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/b10x/harness/agent"
	"github.com/b10x/harness/agent/providertest"
	"github.com/b10x/harness/gate"
	"github.com/b10x/harness/internal/setting"
	"github.com/b10x/harness/surface"
	"github.com/b10x/harness/tools"
	"github.com/b10x/harness/workspace"
)

const testKey = "sk-test-KEY-must-not-leak-0123456789"

// fixture is a workspace with one file inside and a secret outside, a gate
// over the read tools recording into rec, and a surface of the given kind.
type fixture struct {
	ws  string
	rec *bytes.Buffer
	g   *gate.Gate
	sf  *surface.Surface
}

func newFixture(t *testing.T, kind surface.Kind) *fixture {
	t.Helper()
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "hello.txt"), []byte("hello from inside\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "secret.txt"), []byte("OUTSIDE-SECRET\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	w, err := workspace.Open(ws)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	rec := &bytes.Buffer{}
	g, err := gate.New(gate.Config{Workspace: w, Tools: tools.ReadTools(), Recorder: gate.NewRecorder(rec)})
	if err != nil {
		t.Fatal(err)
	}
	sf, err := surface.New(kind, g, surface.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{ws: ws, rec: rec, g: g, sf: sf}
}

// callLines returns the record's call lines (not the intent lines written
// before each execution).
func (f *fixture) callLines(t *testing.T) []gate.CallRecord {
	t.Helper()
	var out []gate.CallRecord
	for _, l := range bytes.Split(bytes.TrimSpace(f.rec.Bytes()), []byte("\n")) {
		if len(l) == 0 {
			continue
		}
		var c gate.CallRecord
		if err := json.Unmarshal(l, &c); err != nil {
			t.Fatalf("record line %s: %v", l, err)
		}
		if c.Event == "call" {
			out = append(out, c)
		}
	}
	return out
}

func (f *fixture) run(t *testing.T, p agent.Provider, task string) agent.Summary {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return agent.Run(ctx, agent.Config{Provider: p, Surface: f.sf, System: "SYSTEM PROMPT", Task: task, MaxTurns: 10})
}

func anthropicFor(t *testing.T, fake *providertest.Fake, opt Options) *Anthropic {
	t.Helper()
	opt.BaseURL, opt.APIKey, opt.Model = fake.URL(), testKey, "claude-test"
	p, err := NewAnthropic(opt)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func openaiFor(t *testing.T, fake *providertest.Fake, opt Options) *OpenAI {
	t.Helper()
	opt.BaseURL, opt.APIKey, opt.Model = fake.URL()+"/v1", testKey, "gpt-test"
	p, err := NewOpenAI(opt)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// jsonEqual compares two JSON values semantically.
func jsonEqual(t *testing.T, a, b any) bool {
	t.Helper()
	norm := func(v any) any {
		raw, ok := v.(json.RawMessage)
		if !ok {
			var err error
			raw, err = json.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
		}
		var out any
		if err := json.Unmarshal(raw, &out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	return reflect.DeepEqual(norm(a), norm(b))
}

func TestAnthropicParallelCallsAndErrorFlags(t *testing.T) {
	f := newFixture(t, surface.Flat)
	fake := providertest.NewAnthropic(t,
		providertest.AnthropicMessage("Reading two files.", "tool_use",
			providertest.Call{ID: "toolu_1", Name: "file_read", Input: map[string]any{"path": "hello.txt"}},
			providertest.Call{ID: "toolu_2", Name: "file_read", Input: map[string]any{"path": "../secret.txt"}},
			providertest.Call{ID: "toolu_3", Name: "run", Input: map[string]any{"argv": []string{"sh"}}},
		),
		providertest.AnthropicMessage("Done.", "end_turn"),
	)
	sum := f.run(t, anthropicFor(t, fake, Options{}), "read the files")
	if sum.EndedBy != agent.EndModelStopped || sum.Err != nil {
		t.Fatalf("ended by %s (%v), want model_stopped", sum.EndedBy, sum.Err)
	}
	reqs := fake.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}

	// The first request: headers, model, system, task, and exactly the
	// surface's definitions.
	r0 := reqs[0]
	// The key goes in x-api-key, the header the Messages API documents.
	if got := r0.Header.Get("x-api-key"); got != testKey {
		t.Errorf("x-api-key %q, want the key", got)
	}
	if r0.Header.Get("anthropic-version") == "" {
		t.Error("no anthropic-version header")
	}
	if r0.JSON["model"] != "claude-test" || r0.JSON["max_tokens"] != float64(DefaultAnthropicMaxTokens) {
		t.Errorf("model %v max_tokens %v", r0.JSON["model"], r0.JSON["max_tokens"])
	}
	if !jsonEqual(t, r0.JSON["system"], []any{map[string]any{"type": "text", "text": "SYSTEM PROMPT"}}) {
		t.Errorf("system = %v", r0.JSON["system"])
	}
	var want []any
	for _, d := range f.sf.Definitions() {
		want = append(want, map[string]any{"name": d.Name, "description": d.Description, "input_schema": d.InputSchema})
	}
	if !jsonEqual(t, r0.JSON["tools"], want) {
		got, _ := json.MarshalIndent(r0.JSON["tools"], "", " ")
		t.Errorf("tools sent differ from the surface's definitions:\n%s", got)
	}
	msgs := r0.JSON["messages"].([]any)
	if len(msgs) != 1 || !strings.Contains(string(mustJSON(t, msgs[0])), "read the files") {
		t.Errorf("first messages = %s", mustJSON(t, msgs))
	}

	// The second request carries the model's turn back and one
	// tool_result per call, in order, with is_error on the refusals.
	msgs = reqs[1].JSON["messages"].([]any)
	if len(msgs) != 3 {
		t.Fatalf("second request has %d messages, want 3: %s", len(msgs), mustJSON(t, msgs))
	}
	asst := msgs[1].(map[string]any)
	if asst["role"] != "assistant" || !strings.Contains(string(mustJSON(t, asst)), `"toolu_3"`) {
		t.Errorf("the model's turn was not sent back: %s", mustJSON(t, asst))
	}
	user := msgs[2].(map[string]any)
	blocks := user["content"].([]any)
	if user["role"] != "user" || len(blocks) != 3 {
		t.Fatalf("tool results message: %s", mustJSON(t, user))
	}
	type exp struct {
		id      string
		isError bool
		text    string
	}
	for i, e := range []exp{
		{"toolu_1", false, "hello from inside"},
		{"toolu_2", true, "ERROR (refused, denied_path)"},
		{"toolu_3", true, "ERROR (refused, unpublished)"},
	} {
		b := blocks[i].(map[string]any)
		content := string(mustJSON(t, b["content"]))
		if b["type"] != "tool_result" || b["tool_use_id"] != e.id || b["is_error"] != e.isError || !strings.Contains(content, e.text) {
			t.Errorf("result %d = %s, want id %s is_error %v containing %q", i, mustJSON(t, b), e.id, e.isError, e.text)
		}
		if strings.Contains(content, "OUTSIDE-SECRET") {
			t.Errorf("result %d leaks the outside file", i)
		}
	}

	// Each call was recorded, in order, with its outcome.
	calls := f.callLines(t)
	if len(calls) != 3 {
		t.Fatalf("%d call lines, want 3", len(calls))
	}
	for i, w := range []struct {
		entry  string
		status gate.Status
		reason string
	}{{"file_read", gate.Executed, ""}, {"file_read", gate.Refused, "denied_path"}, {"run", gate.Refused, "unpublished"}} {
		c := calls[i]
		if c.Entry != w.entry || c.Status != w.status || c.Reason != w.reason || c.Seq != int64(i+1) {
			t.Errorf("call line %d: %s %s %s seq %d, want %s %s %s", i, c.Entry, c.Status, c.Reason, c.Seq, w.entry, w.status, w.reason)
		}
	}
	if strings.Contains(f.rec.String(), testKey) {
		t.Error("the API key reached the record")
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestAnthropicStopReasons(t *testing.T) {
	for _, tc := range []struct {
		stop string
		want agent.EndReason
	}{
		{"end_turn", agent.EndModelStopped},
		{"max_tokens", agent.EndModelStopped},
		{"refusal", agent.EndModelStopped},
	} {
		t.Run(tc.stop, func(t *testing.T) {
			f := newFixture(t, surface.Flat)
			fake := providertest.NewAnthropic(t, providertest.AnthropicMessage("partial answ", tc.stop))
			sum := f.run(t, anthropicFor(t, fake, Options{}), "task")
			if sum.EndedBy != tc.want || sum.LastStop != tc.stop || sum.Turns != 1 {
				t.Errorf("ended by %s, last stop %q, %d turns; want %s, %q, 1", sum.EndedBy, sum.LastStop, sum.Turns, tc.want, tc.stop)
			}
		})
	}
}

// A tool_use cut by max_tokens still gets its result: the gate refuses the
// incomplete arguments, and the model hears it.
func TestAnthropicMaxTokensWithToolUse(t *testing.T) {
	f := newFixture(t, surface.Flat)
	fake := providertest.NewAnthropic(t,
		providertest.AnthropicMessage("", "max_tokens", providertest.Call{ID: "toolu_cut", Name: "file_read", Input: map[string]any{}}),
		providertest.AnthropicMessage("ok", "end_turn"),
	)
	sum := f.run(t, anthropicFor(t, fake, Options{}), "task")
	if sum.EndedBy != agent.EndModelStopped || len(sum.Calls) != 1 || sum.Calls[0].Reason != tools.ReasonInvalidArgument {
		t.Fatalf("summary %+v", sum)
	}
	res := fake.Requests()[1].JSON["messages"].([]any)[2]
	if !strings.Contains(string(mustJSON(t, res)), `"is_error":true`) {
		t.Errorf("result of the cut call: %s", mustJSON(t, res))
	}
}

// Arguments that are not an object are refused by the gate as
// invalid_argument and returned to the model, not a crash.
func TestAnthropicNonObjectInput(t *testing.T) {
	f := newFixture(t, surface.Flat)
	fake := providertest.NewAnthropic(t,
		providertest.AnthropicMessage("", "tool_use",
			providertest.Call{ID: "a", Name: "file_read", Input: "hello.txt"},
			providertest.Call{ID: "b", Name: "file_read", Input: []any{1, 2}}),
		providertest.AnthropicMessage("", "end_turn"),
	)
	sum := f.run(t, anthropicFor(t, fake, Options{}), "task")
	if sum.EndedBy != agent.EndModelStopped || len(sum.Calls) != 2 {
		t.Fatalf("summary %+v", sum)
	}
	for _, c := range sum.Calls {
		if c.Reason != tools.ReasonInvalidArgument {
			t.Errorf("call %s: %s %s, want invalid_argument", c.Name, c.Status, c.Reason)
		}
	}
}

func TestAnthropicErrors(t *testing.T) {
	ok := providertest.AnthropicMessage("fine", "end_turn")
	for _, tc := range []struct {
		name     string
		replies  []providertest.Reply
		opt      Options
		wantEnd  agent.EndReason
		wantMsg  []string
		requests int
	}{
		{
			name:    "401",
			replies: []providertest.Reply{providertest.AnthropicError(401, "authentication_error", "invalid x-api-key", nil)},
			wantEnd: agent.EndError, wantMsg: []string{"anthropic: authentication failed (401)", "ANTHROPIC_API_KEY", "invalid x-api-key"}, requests: 1,
		},
		{
			name: "429 then success",
			replies: []providertest.Reply{
				providertest.AnthropicError(429, "rate_limit_error", "slow down", map[string]string{"retry-after": "0"}),
				ok,
			},
			wantEnd: agent.EndModelStopped, requests: 2,
		},
		{
			name: "429 retry-after honoured",
			replies: []providertest.Reply{
				providertest.AnthropicError(429, "rate_limit_error", "slow down", map[string]string{"retry-after-ms": "300"}),
				ok,
			},
			wantEnd: agent.EndModelStopped, requests: 2,
		},
		{
			name: "429 for good",
			replies: []providertest.Reply{
				providertest.AnthropicError(429, "rate_limit_error", "slow down", map[string]string{"retry-after": "0"}),
				providertest.AnthropicError(429, "rate_limit_error", "slow down", map[string]string{"retry-after": "0"}),
			},
			opt:     Options{MaxRetries: 1},
			wantEnd: agent.EndError, wantMsg: []string{"rate limited (429) (after 1 retries)", "slow down"}, requests: 2,
		},
		{
			name: "500 after retries",
			replies: []providertest.Reply{
				providertest.AnthropicError(500, "api_error", "boom", map[string]string{"retry-after": "0"}),
				providertest.AnthropicError(500, "api_error", "boom", map[string]string{"retry-after": "0"}),
				providertest.AnthropicError(500, "api_error", "boom", map[string]string{"retry-after": "0"}),
			},
			wantEnd: agent.EndError, wantMsg: []string{"server error (500) (after 2 retries)", "boom"}, requests: 3,
		},
		{
			name: "529 overloaded then success",
			replies: []providertest.Reply{
				providertest.AnthropicError(529, "overloaded_error", "overloaded", map[string]string{"retry-after": "0"}),
				ok,
			},
			wantEnd: agent.EndModelStopped, requests: 2,
		},
		{
			name:    "timeout",
			replies: []providertest.Reply{{Delay: 5 * time.Second, Body: ok.Body}},
			opt:     Options{RequestTimeout: 200 * time.Millisecond, MaxRetries: -1},
			wantEnd: agent.EndError, wantMsg: []string{"anthropic: no response within 200ms"}, requests: 1,
		},
		{
			name:    "400",
			replies: []providertest.Reply{providertest.AnthropicError(400, "invalid_request_error", "tools.0: bad schema", nil)},
			wantEnd: agent.EndError, wantMsg: []string{"request rejected (400): tools.0: bad schema"}, requests: 1,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, surface.Flat)
			fake := providertest.NewAnthropic(t, tc.replies...)
			start := time.Now()
			sum := f.run(t, anthropicFor(t, fake, tc.opt), "task")
			if sum.EndedBy != tc.wantEnd {
				t.Fatalf("ended by %s (%v), want %s", sum.EndedBy, sum.Err, tc.wantEnd)
			}
			if n := len(fake.Requests()); n != tc.requests {
				t.Errorf("%d requests, want %d", n, tc.requests)
			}
			if tc.name == "429 retry-after honoured" && time.Since(start) < 300*time.Millisecond {
				t.Errorf("retried after %s, before the 300ms retry-after-ms", time.Since(start))
			}
			if tc.wantEnd != agent.EndError {
				return
			}
			msg := sum.Err.Error()
			for _, w := range tc.wantMsg {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not contain %q", msg, w)
				}
			}
			if strings.Contains(msg, "\n") || strings.Contains(msg, testKey) {
				t.Errorf("error is not one line without the key: %q", msg)
			}
			// Nothing reachable from the error (no request, whose
			// headers hold the key) mentions the key.
			for e := sum.Err; e != nil; e = errors.Unwrap(e) {
				if s := fmt.Sprintf("%v %+v %#v", e, e, e); strings.Contains(s, testKey) {
					t.Errorf("the key is reachable from %v: %s", sum.Err, s)
				}
			}
		})
	}
}

func TestAnthropicConfigErrors(t *testing.T) {
	if _, err := NewAnthropic(Options{APIKey: "k"}); !namesSetting(err, setting.Model) {
		t.Errorf("no model: %v", err)
	}
	if _, err := NewAnthropic(Options{Model: "m", APIKey: "k", BaseURL: "http://example.com"}); err == nil || !strings.Contains(err.Error(), "in clear") {
		t.Errorf("http to a remote host with a key: %v", err)
	}
	if _, err := NewAnthropic(Options{Model: "m", APIKey: "k", BaseURL: "https://user:pw@example.com"}); err == nil || strings.Contains(err.Error(), "pw") {
		t.Errorf("credentials in the URL: %v", err)
	}
	if _, err := NewAnthropic(Options{Model: "m", APIKey: "k", BaseURL: "ftp://x"}); err == nil {
		t.Error("ftp base URL accepted")
	}
	p, err := NewAnthropic(Options{Model: "m", APIKey: "k", BaseURL: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Begin(agent.Request{Task: "  "}); err == nil {
		t.Error("an empty task was accepted")
	}
}

// The environment cannot redirect requests or swap the key.
func TestAnthropicIgnoresEnvironment(t *testing.T) {
	t.Setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:1")
	t.Setenv("ANTHROPIC_AUTH_TOKEN", "env-token")
	f := newFixture(t, surface.Flat)
	fake := providertest.NewAnthropic(t, providertest.AnthropicMessage("hi", "end_turn"))
	sum := f.run(t, anthropicFor(t, fake, Options{}), "task")
	if sum.EndedBy != agent.EndModelStopped {
		t.Fatalf("ended by %s: %v", sum.EndedBy, sum.Err)
	}
	h := fake.Requests()[0].Header
	if h.Get("x-api-key") != testKey || h.Get("authorization") != "" {
		t.Errorf("auth headers: x-api-key %q, authorization %q", h.Get("x-api-key"), h.Get("authorization"))
	}
}

func TestOpenAIParallelCallsMalformedArgumentsAndErrorText(t *testing.T) {
	t.Setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/v1")
	f := newFixture(t, surface.Flat)
	fake := providertest.NewOpenAI(t,
		providertest.OpenAIMessage("", "tool_calls",
			providertest.Call{ID: "call_1", Name: "file_read", Input: map[string]any{"path": "hello.txt"}},
			providertest.Call{ID: "call_2", Name: "file_read", Raw: `{"path": "hello.txt"`},
			providertest.Call{ID: "call_3", Name: "dir_list", Input: map[string]any{"path": "/proc/self/root"}},
		),
		providertest.OpenAIMessage("All done.", "stop"),
	)
	sum := f.run(t, openaiFor(t, fake, Options{}), "list and read")
	if sum.EndedBy != agent.EndModelStopped || sum.Err != nil {
		t.Fatalf("ended by %s (%v)", sum.EndedBy, sum.Err)
	}
	reqs := fake.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2 (OPENAI_BASE_URL must not redirect)", len(reqs))
	}
	if got := reqs[0].Header.Get("authorization"); got != "Bearer "+testKey {
		t.Errorf("authorization %q", got)
	}
	var want []any
	for _, d := range f.sf.Definitions() {
		want = append(want, map[string]any{"type": "function", "function": map[string]any{"name": d.Name, "description": d.Description, "parameters": d.InputSchema}})
	}
	if !jsonEqual(t, reqs[0].JSON["tools"], want) {
		t.Errorf("tools sent differ from the definitions: %s", mustJSON(t, reqs[0].JSON["tools"]))
	}
	msgs := reqs[0].JSON["messages"].([]any)
	if len(msgs) != 2 || msgs[0].(map[string]any)["role"] != "system" || msgs[1].(map[string]any)["content"] != "list and read" {
		t.Errorf("first messages: %s", mustJSON(t, msgs))
	}

	msgs = reqs[1].JSON["messages"].([]any)
	if len(msgs) != 6 {
		t.Fatalf("second request: %d messages, want 6: %s", len(msgs), mustJSON(t, msgs))
	}
	if msgs[2].(map[string]any)["role"] != "assistant" || !strings.Contains(string(mustJSON(t, msgs[2])), `{\"path\": \"hello.txt\"`) {
		t.Errorf("the model's turn was not sent back with its raw arguments: %s", mustJSON(t, msgs[2]))
	}
	for i, w := range []struct{ id, prefix string }{
		{"call_1", "hello from inside"},
		{"call_2", "ERROR (refused, invalid_argument): "},
		{"call_3", "ERROR (refused, denied_path): "},
	} {
		m := msgs[3+i].(map[string]any)
		content, _ := m["content"].(string)
		if m["role"] != "tool" || m["tool_call_id"] != w.id || !strings.HasPrefix(content, w.prefix) {
			t.Errorf("tool message %d = %s, want id %s beginning %q", i, mustJSON(t, m), w.id, w.prefix)
		}
	}
	calls := f.callLines(t)
	if len(calls) != 3 || calls[1].Reason != "invalid_argument" || calls[2].Reason != "denied_path" {
		t.Errorf("record: %+v", calls)
	}
}

func TestOpenAIErrors(t *testing.T) {
	ok := providertest.OpenAIMessage("fine", "stop")
	for _, tc := range []struct {
		name     string
		replies  []providertest.Reply
		opt      Options
		wantEnd  agent.EndReason
		wantMsg  []string
		requests int
	}{
		{
			name:    "401",
			replies: []providertest.Reply{providertest.OpenAIError(401, "invalid_request_error", "invalid_api_key", "Incorrect API key provided", nil)},
			wantEnd: agent.EndError, wantMsg: []string{"openai: authentication failed (401)", "OPENAI_API_KEY", "Incorrect API key provided"}, requests: 1,
		},
		{
			name: "429 then success",
			replies: []providertest.Reply{
				providertest.OpenAIError(429, "requests", "rate_limit_exceeded", "Rate limit reached", map[string]string{"retry-after": "0"}),
				ok,
			},
			wantEnd: agent.EndModelStopped, requests: 2,
		},
		{
			name: "503 after retries",
			replies: []providertest.Reply{
				providertest.OpenAIError(503, "server_error", "", "The engine is overloaded", map[string]string{"retry-after": "0"}),
				providertest.OpenAIError(503, "server_error", "", "The engine is overloaded", map[string]string{"retry-after": "0"}),
			},
			opt:     Options{MaxRetries: 1},
			wantEnd: agent.EndError, wantMsg: []string{"openai: server error (503) (after 1 retries)", "overloaded"}, requests: 2,
		},
		{
			name:    "timeout",
			replies: []providertest.Reply{{Delay: 5 * time.Second, Body: ok.Body}},
			opt:     Options{RequestTimeout: 200 * time.Millisecond, MaxRetries: -1},
			wantEnd: agent.EndError, wantMsg: []string{"openai: no response within 200ms"}, requests: 1,
		},
		{
			name:    "no choices",
			replies: []providertest.Reply{{Body: map[string]any{"id": "x", "object": "chat.completion", "created": 1, "model": "m", "choices": []any{}}}},
			wantEnd: agent.EndError, wantMsg: []string{"openai: the response has no choices"}, requests: 1,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, surface.Flat)
			fake := providertest.NewOpenAI(t, tc.replies...)
			sum := f.run(t, openaiFor(t, fake, tc.opt), "task")
			if sum.EndedBy != tc.wantEnd {
				t.Fatalf("ended by %s (%v), want %s", sum.EndedBy, sum.Err, tc.wantEnd)
			}
			if n := len(fake.Requests()); n != tc.requests {
				t.Errorf("%d requests, want %d", n, tc.requests)
			}
			if tc.wantEnd != agent.EndError {
				return
			}
			msg := sum.Err.Error()
			for _, w := range tc.wantMsg {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not contain %q", msg, w)
				}
			}
			if strings.Contains(msg, "\n") || strings.Contains(msg, testKey) {
				t.Errorf("error is not one line without the key: %q", msg)
			}
		})
	}
}

// A local OpenAI-compatible server without a key: no Authorization header.
func TestOpenAIWithoutKey(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "")
	f := newFixture(t, surface.Flat)
	fake := providertest.NewOpenAI(t, providertest.OpenAIMessage("hi", "stop"))
	p, err := NewOpenAI(Options{Model: "local", BaseURL: fake.URL() + "/v1"})
	if err != nil {
		t.Fatal(err)
	}
	sum := f.run(t, p, "task")
	if sum.EndedBy != agent.EndModelStopped {
		t.Fatalf("ended by %s: %v", sum.EndedBy, sum.Err)
	}
	if h := fake.Requests()[0].Header.Get("authorization"); h != "" {
		t.Errorf("authorization %q sent without a key", h)
	}
	if _, ok := fake.Requests()[0].JSON["max_completion_tokens"]; ok {
		t.Error("max_completion_tokens sent although no cap was given")
	}
}

// Under the verbs surface the provider sends the three verbs, and a
// tool_invoke reaches the gate as its entry.
func TestOpenAIVerbs(t *testing.T) {
	f := newFixture(t, surface.Verbs)
	fake := providertest.NewOpenAI(t,
		providertest.OpenAIMessage("", "tool_calls",
			providertest.Call{ID: "c1", Name: "tool_invoke", Input: map[string]any{"name": "file_read", "arguments": map[string]any{"path": "hello.txt"}}},
			providertest.Call{ID: "c2", Name: "tool_invoke", Input: map[string]any{"name": "run", "arguments": map[string]any{"argv": []string{"sh"}}}},
		),
		providertest.OpenAIMessage("", "stop"),
	)
	sum := f.run(t, openaiFor(t, fake, Options{}), "task")
	if sum.EndedBy != agent.EndModelStopped {
		t.Fatalf("ended by %s: %v", sum.EndedBy, sum.Err)
	}
	var names []string
	for _, tl := range fake.Requests()[0].JSON["tools"].([]any) {
		names = append(names, tl.(map[string]any)["function"].(map[string]any)["name"].(string))
	}
	if strings.Join(names, ",") != "tool_search,tool_describe,tool_invoke" {
		t.Errorf("verbs sent: %v", names)
	}
	if sum.Calls[0].Entry != "file_read" || sum.Calls[0].Status != gate.Executed || sum.Calls[1].Entry != "run" || sum.Calls[1].Reason != tools.ReasonUnpublished {
		t.Errorf("calls: %+v", sum.Calls)
	}
}

func TestParseSpec(t *testing.T) {
	for in, want := range map[string]Spec{
		"anthropic":     {Kind: "anthropic"},
		"openai":        {Kind: "openai"},
		"replay:a.json": {Kind: "replay", File: "a.json"},
		"replay:x:y":    {Kind: "replay", File: "x:y"},
	} {
		got, err := ParseSpec(in)
		if err != nil || got != want {
			t.Errorf("ParseSpec(%q) = %+v, %v", in, got, err)
		}
	}
	for _, bad := range []string{"", "replay:", "Anthropic", "gemini", "replay"} {
		if _, err := ParseSpec(bad); err == nil {
			t.Errorf("ParseSpec(%q) accepted", bad)
		}
	}
}

// TestOpenAIDuplicateCallIDs: a response whose two tool calls share an id
// runs the first only, and the next request answers that id once, with
// both results in order (the second the refusal of the duplicate).
func TestOpenAIDuplicateCallIDs(t *testing.T) {
	f := newFixture(t, surface.Flat)
	fake := providertest.NewOpenAI(t,
		providertest.OpenAIMessage("", "tool_calls",
			providertest.Call{ID: "call_1", Name: "file_read", Input: map[string]any{"path": "hello.txt"}},
			providertest.Call{ID: "call_1", Name: "dir_list", Input: map[string]any{"path": "."}},
		),
		providertest.OpenAIMessage("All done.", "stop"),
	)
	sum := f.run(t, openaiFor(t, fake, Options{}), "read")
	if sum.EndedBy != agent.EndModelStopped || sum.Err != nil {
		t.Fatalf("ended by %s (%v)", sum.EndedBy, sum.Err)
	}
	msgs := fake.Requests()[1].JSON["messages"].([]any)
	var tool []map[string]any
	for _, m := range msgs {
		if mm := m.(map[string]any); mm["role"] == "tool" {
			tool = append(tool, mm)
		}
	}
	if len(tool) != 1 || tool[0]["tool_call_id"] != "call_1" {
		t.Fatalf("tool messages %s, want one for call_1", mustJSON(t, tool))
	}
	content, _ := tool[0]["content"].(string)
	if !strings.HasPrefix(content, "hello from inside") || !strings.Contains(content, "ERROR (refused, invalid_argument): tool call id \"call_1\" was already used") {
		t.Fatalf("content %q", content)
	}
	calls := f.callLines(t)
	if len(calls) != 2 || calls[0].Status != gate.Executed || calls[1].Status != gate.Refused || calls[1].Entry != "dir_list" {
		t.Fatalf("record %+v", calls)
	}
}

// namesSetting reports whether err is a *setting.Error for key.
func namesSetting(err error, key string) bool {
	var se *setting.Error
	return errors.As(err, &se) && se.Key == key
}

// TestSpecCheck: what a run cannot use is refused, keyed, before anything
// is opened; what it can is not.
func TestSpecCheck(t *testing.T) {
	anthropic, openai, replay := Spec{Kind: "anthropic"}, Spec{Kind: "openai"}, Spec{Kind: "replay", File: "s.jsonl"}
	for _, c := range []struct {
		spec Spec
		opt  Options
		want string // "" for no error
	}{
		{anthropic, Options{Model: "m", APIKey: "k"}, ""},
		{openai, Options{Model: "m", BaseURL: "http://127.0.0.1:8000/v1"}, ""}, // a server of one's own may take no key
		{replay, Options{}, ""},
		{anthropic, Options{Model: "m"}, "provider anthropic: needs an API key in ANTHROPIC_API_KEY"},
		{anthropic, Options{Model: "m", BaseURL: "http://127.0.0.1:8000"}, "provider anthropic: needs an API key in ANTHROPIC_API_KEY"},
		{openai, Options{Model: "m"}, "provider openai: needs an API key in OPENAI_API_KEY"},
		{openai, Options{Model: " ", APIKey: "k"}, "model: none given; openai needs one"},
		{anthropic, Options{Model: "m", APIKey: "k", MaxTokens: -1}, "max_tokens -1: must not be negative"},
		{replay, Options{RequestTimeout: -time.Second}, "request_timeout -1s: must not be negative"},
		{replay, Options{Model: "x"}, `model "x": a replay script has no model`},
		{replay, Options{BaseURL: "https://user:secret@example.com/"}, "base_url"},
	} {
		err := c.spec.Check(c.opt)
		if c.want == "" {
			if err != nil {
				t.Errorf("%v %+v: %v, want no error", c.spec, c.opt, err)
			}
			continue
		}
		var se *setting.Error
		if !errors.As(err, &se) || !se.Usage || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%v %+v: %v, want a usage *setting.Error starting %q", c.spec, c.opt, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("%v: the URL's credentials reached the error: %v", c.spec, err)
		}
	}
}
