// Package providertest holds in-process fakes of the model providers' HTTP
// APIs, for tests: an Anthropic Messages endpoint and an OpenAI Chat
// Completions endpoint that answer from a queue of scripted replies and keep
// every request they received, so a test can assert what the harness sent
// (tool definitions, tool results and their error flags, headers).
//
// The replies use the real wire formats (tool_use blocks and stop_reason;
// tool_calls and finish_reason; the providers' error bodies), so a client
// parses them as it would the real services' answers.
package providertest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// Reply is one scripted HTTP answer.
type Reply struct {
	Status int               // 0: 200
	Header map[string]string // extra response headers (e.g. retry-after)
	Body   any               // marshalled as JSON
	Delay  time.Duration     // wait before answering (the request's context may end first)
}

// Request is one request a fake received.
type Request struct {
	Method string
	Path   string
	Header http.Header
	Body   []byte
	JSON   map[string]any // Body decoded; nil when it is not a JSON object
}

// Fake is a fake provider endpoint. It is safe for concurrent use.
type Fake struct {
	Server *httptest.Server
	path   string

	mu       sync.Mutex
	replies  []Reply
	requests []Request
}

func newFake(t testing.TB, path string, replies []Reply) *Fake {
	f := &Fake{path: path, replies: replies}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Server.Close)
	return f
}

// NewAnthropic starts a fake Messages API (POST /v1/messages). Point the
// provider's base URL at URL().
func NewAnthropic(t testing.TB, replies ...Reply) *Fake { return newFake(t, "/v1/messages", replies) }

// NewOpenAI starts a fake Chat Completions API (POST /v1/chat/completions).
// Point the provider's base URL at URL()+"/v1".
func NewOpenAI(t testing.TB, replies ...Reply) *Fake {
	return newFake(t, "/v1/chat/completions", replies)
}

// URL is the server's base URL.
func (f *Fake) URL() string { return f.Server.URL }

// Requests returns a copy of the requests received so far.
func (f *Fake) Requests() []Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Request(nil), f.requests...)
}

// Remaining is how many scripted replies were not used.
func (f *Fake) Remaining() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.replies)
}

func (f *Fake) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	req := Request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body}
	var m map[string]any
	if json.Unmarshal(body, &m) == nil {
		req.JSON = m
	}
	f.mu.Lock()
	f.requests = append(f.requests, req)
	var rep Reply
	ok := len(f.replies) > 0
	if ok {
		rep, f.replies = f.replies[0], f.replies[1:]
	}
	f.mu.Unlock()

	w.Header().Set("content-type", "application/json")
	if r.Method != http.MethodPost || r.URL.Path != f.path {
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprintf(w, `{"error":{"type":"not_found_error","message":"fake: no route %s %s"}}`, r.Method, r.URL.Path)
		return
	}
	if !ok {
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, `{"type":"error","error":{"type":"invalid_request_error","message":"fake: no scripted reply left"}}`)
		return
	}
	if rep.Delay > 0 {
		select {
		case <-time.After(rep.Delay):
		case <-r.Context().Done():
			return
		}
	}
	for k, v := range rep.Header {
		w.Header().Set(k, v)
	}
	st := rep.Status
	if st == 0 {
		st = http.StatusOK
	}
	w.WriteHeader(st)
	b, err := json.Marshal(rep.Body)
	if err != nil {
		panic("providertest: reply body: " + err.Error())
	}
	_, _ = w.Write(b)
}

// Call is a tool call in a scripted reply.
type Call struct {
	ID    string
	Name  string
	Input any    // Anthropic: the input value (any JSON); OpenAI: marshalled into arguments
	Raw   string // OpenAI only: arguments exactly as given (malformed JSON allowed); wins over Input
}

// AnthropicMessage is a Messages API answer with optional text and tool_use
// blocks. stop is the stop_reason ("end_turn", "tool_use", "max_tokens").
func AnthropicMessage(text, stop string, calls ...Call) Reply {
	var content []any
	if text != "" {
		content = append(content, map[string]any{"type": "text", "text": text})
	}
	for _, c := range calls {
		in := c.Input
		if in == nil {
			in = map[string]any{}
		}
		content = append(content, map[string]any{"type": "tool_use", "id": c.ID, "name": c.Name, "input": in})
	}
	if content == nil {
		content = []any{}
	}
	return Reply{Body: map[string]any{
		"id": "msg_fake", "type": "message", "role": "assistant", "model": "fake-model",
		"content": content, "stop_reason": stop, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": 10, "output_tokens": 10},
	}}
}

// AnthropicError is a Messages API error answer.
func AnthropicError(status int, typ, msg string, header map[string]string) Reply {
	return Reply{Status: status, Header: header, Body: map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": msg}}}
}

// OpenAIMessage is a Chat Completions answer whose first choice has optional
// content and tool calls. finish is the finish_reason ("stop",
// "tool_calls", "length").
func OpenAIMessage(content, finish string, calls ...Call) Reply {
	msg := map[string]any{"role": "assistant", "content": nil, "refusal": nil}
	if content != "" {
		msg["content"] = content
	}
	if len(calls) > 0 {
		var tcs []any
		for _, c := range calls {
			args := c.Raw
			if args == "" {
				b, _ := json.Marshal(c.Input)
				if c.Input == nil {
					b = []byte("{}")
				}
				args = string(b)
			}
			tcs = append(tcs, map[string]any{"id": c.ID, "type": "function", "function": map[string]any{"name": c.Name, "arguments": args}})
		}
		msg["tool_calls"] = tcs
	}
	return Reply{Body: map[string]any{
		"id": "chatcmpl-fake", "object": "chat.completion", "created": 1, "model": "fake-model",
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish, "logprobs": nil}},
		"usage":   map[string]any{"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20},
	}}
}

// OpenAIError is a Chat Completions error answer.
func OpenAIError(status int, typ, code, msg string, header map[string]string) Reply {
	return Reply{Status: status, Header: header, Body: map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": code}}}
}
