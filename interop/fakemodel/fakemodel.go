// Package fakemodel is a model API that plays a script, for driving real
// agent clients (Claude Code, Codex CLI, Gemini CLI) offline against
// `b10x-harness mcp` in tests.
//
// A Server speaks one wire format, just enough of it for a client's agent
// loop, written from each provider's public API reference:
//
//   - Anthropic: the Messages API (POST /v1/messages, streamed as
//     server-sent events: message_start, content_block_start/delta/stop,
//     message_delta, message_stop) and /v1/messages/count_tokens.
//   - OpenAI: the Responses API (POST /v1/responses, streamed:
//     response.created, response.output_item.added/done,
//     response.completed).
//   - Gemini: generateContent and streamGenerateContent (?alt=sse) under
//     /v1beta/models/MODEL.
//
// Each request that offers the MCP server's tools is a turn of the
// scripted conversation. The server answers it with the next Turn of the
// script (its tool calls, named as the client named the MCP tools, or its
// final text) and keeps, for the test, what the request carried: the tool
// results of the previous turn exactly as the client put them before the
// model (Result), and the tools it declared. Requests that do not offer the
// MCP tools (a client's own side requests) get a short text answer and are
// kept too.
//
// Which turn a request answers is read from the conversation it carries:
// the tool calls already made (their ids encode turn and place), so the
// server holds no conversation state and a client that retries a request
// gets the same answer.
//
// A Server listens on 127.0.0.1 only. It is safe for concurrent use.
package fakemodel

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
)

// Format is a model API's wire format.
type Format string

// The wire formats a Server speaks.
const (
	Anthropic Format = "anthropic" // Messages API with SSE
	OpenAI    Format = "openai"    // Responses API with SSE
	Gemini    Format = "gemini"    // generateContent / streamGenerateContent
)

// Call is one tool call the scripted model makes.
type Call struct {
	// Tool is the tool's name as the MCP server lists it (file_read); the
	// server calls it by the name the client gave it (mcp__b10x__file_read,
	// mcp_b10x_file_read, or file_read in the namespace mcp__b10x).
	Tool string
	// Args are the call's arguments.
	Args map[string]any
}

// Turn is one reply of the scripted model: tool calls (several in one
// turn are parallel calls), or, with none, the final text.
type Turn struct {
	Calls []Call
	Text  string
}

// Result is one tool result as a request carried it to the model.
type Result struct {
	// Turn and Index place the call it answers in the script.
	Turn, Index int
	// Tool is the call's Tool.
	Tool string
	// Text is what the model reads: the result's text parts as the client
	// wrote them, joined by newlines (for Gemini, the functionResponse's
	// response rendered as the client sent it, see Gemini's notes).
	Text string
	// IsError is the wire's own error mark: Anthropic's is_error, Gemini's
	// response.error; the Responses API has none (always false).
	IsError bool
	// Raw is the result's block, item or part as sent.
	Raw json.RawMessage
}

// Request is one request a client sent.
type Request struct {
	Path string
	Body json.RawMessage
	// Main is true for a turn of the scripted conversation (the request
	// offered the MCP tools).
	Main bool
	// Turn is the script turn the request was answered with (Main only).
	Turn int
	// Results are the tool results it carried for calls of earlier turns,
	// in the order the request has them.
	Results []Result
	// Tools maps each MCP tool the request declared (by its MCP name) to
	// its declaration as sent.
	Tools map[string]json.RawMessage
}

// Options configure a Server.
type Options struct {
	// Format is the wire format; required.
	Format Format
	// Server is the MCP server's name in the client's configuration
	// (b10x): the prefix of the names the client gives its tools.
	Server string
	// Script is the conversation; its last turn should have no calls.
	Script []Turn
}

// Server is a fake model API on a loopback port.
type Server struct {
	opt  Options
	ln   net.Listener
	srv  *http.Server
	done chan struct{}

	mu   sync.Mutex
	reqs []Request
	errs []error
}

// Start listens on 127.0.0.1 (a free port) and serves opt's script until
// Close.
func Start(opt Options) (*Server, error) {
	switch opt.Format {
	case Anthropic, OpenAI, Gemini:
	default:
		return nil, fmt.Errorf("fakemodel: unknown format %q", opt.Format)
	}
	if opt.Server == "" || len(opt.Script) == 0 {
		return nil, errors.New("fakemodel: Options.Server and Options.Script are required")
	}
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("fakemodel: %w", err)
	}
	s := &Server{opt: opt, ln: ln, done: make(chan struct{})}
	s.srv = &http.Server{Handler: s}
	go func() {
		defer close(s.done)
		_ = s.srv.Serve(ln)
	}()
	return s, nil
}

// URL is the server's base URL, http://127.0.0.1:PORT (no path).
func (s *Server) URL() string { return "http://" + s.ln.Addr().String() }

// Close stops the server and waits for it.
func (s *Server) Close() error {
	err := s.srv.Close()
	<-s.done
	return err
}

// Requests returns the requests received so far, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

// Main returns the requests of the scripted conversation, in order.
func (s *Server) Main() []Request {
	var m []Request
	for _, r := range s.Requests() {
		if r.Main {
			m = append(m, r)
		}
	}
	return m
}

// Err reports what the server could not understand or answer (nil: all
// was well): a request it could not parse, a tool the script calls that
// the client did not offer.
func (s *Server) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return errors.Join(s.errs...)
}

// Seen returns the tool results of turn t's calls as the model saw them,
// from the first main request that carried any of them (nil: none did).
func (s *Server) Seen(t int) []Result {
	for _, r := range s.Main() {
		var out []Result
		for _, res := range r.Results {
			if res.Turn == t {
				out = append(out, res)
			}
		}
		if len(out) > 0 {
			return out
		}
	}
	return nil
}

func (s *Server) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.errs = append(s.errs, err)
}

// wire is one format's parsing of a request and writing of a reply.
type wire interface {
	// parse reads the request: its MCP tools, its tool calls already
	// made, and the results of those calls.
	parse(body []byte) (parsed, error)
	// reply writes turn (or, for a side request, text) as the answer.
	reply(w http.ResponseWriter, r *http.Request, p parsed, calls []wireCall, text string) error
}

// parsed is what a format read from a request.
type parsed struct {
	tools   map[string]toolDecl // by MCP name
	made    []callRef           // tool calls in the history, by id
	results []Result            // Turn, Index from the id; Tool filled later
	stream  bool
}

// toolDecl is a tool as the client declared it.
type toolDecl struct {
	name      string // the name the model calls it by
	namespace string // OpenAI: the namespace holding it
	raw       json.RawMessage
}

type callRef struct{ turn, index int }

// wireCall is a scripted call with the client's name for its tool.
type wireCall struct {
	id   string
	decl toolDecl
	args map[string]any
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	if err != nil {
		s.fail(fmt.Errorf("%s: reading the body: %w", r.URL.Path, err))
		http.Error(w, "bad body", http.StatusBadRequest)
		return
	}
	var wf wire
	switch {
	case s.opt.Format == Anthropic && strings.HasSuffix(r.URL.Path, "/count_tokens"):
		// Claude Code counts the tokens of large results before sending.
		s.keep(Request{Path: r.URL.Path, Body: body})
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"input_tokens":%d}`, len(body)/4)
		return
	case s.opt.Format == Anthropic && strings.HasSuffix(r.URL.Path, "/v1/messages"):
		wf = anthropicWire{server: s.opt.Server}
	case s.opt.Format == OpenAI && strings.HasSuffix(r.URL.Path, "/responses"):
		wf = openaiWire{server: s.opt.Server}
	case s.opt.Format == Gemini && strings.Contains(r.URL.Path, "/models/") &&
		(strings.HasSuffix(r.URL.Path, ":generateContent") || strings.HasSuffix(r.URL.Path, ":streamGenerateContent")):
		wf = geminiWire{server: s.opt.Server, stream: strings.HasSuffix(r.URL.Path, ":streamGenerateContent")}
	case s.opt.Format == Gemini && strings.HasSuffix(r.URL.Path, ":countTokens"):
		s.keep(Request{Path: r.URL.Path, Body: body})
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"totalTokens":%d}`, len(body)/4)
		return
	default:
		s.fail(fmt.Errorf("unexpected request %s %s", r.Method, r.URL))
		http.NotFound(w, r)
		return
	}
	p, err := wf.parse(body)
	if err != nil {
		s.fail(fmt.Errorf("%s: %w", r.URL.Path, err))
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	req := Request{Path: r.URL.Path, Body: body, Tools: map[string]json.RawMessage{}}
	for name, d := range p.tools {
		req.Tools[name] = d.raw
	}
	if len(p.tools) == 0 {
		// A side request (a title, a summary): not part of the script.
		s.keep(req)
		if err := wf.reply(w, r, p, nil, "ok"); err != nil {
			s.fail(err)
		}
		return
	}
	req.Main = true
	turn := 0
	for _, c := range p.made {
		turn = max(turn, c.turn+1)
	}
	for _, res := range p.results {
		if res.Turn < len(s.opt.Script) && res.Index < len(s.opt.Script[res.Turn].Calls) {
			res.Tool = s.opt.Script[res.Turn].Calls[res.Index].Tool
		}
		req.Results = append(req.Results, res)
	}
	req.Turn = turn
	s.keep(req)
	if turn >= len(s.opt.Script) {
		s.fail(fmt.Errorf("request for turn %d, past the script's %d turns", turn, len(s.opt.Script)))
		_ = wf.reply(w, r, p, nil, "the script has ended")
		return
	}
	t := s.opt.Script[turn]
	var calls []wireCall
	for i, c := range t.Calls {
		d, ok := p.tools[c.Tool]
		if !ok {
			s.fail(fmt.Errorf("turn %d calls %s, which the client did not offer (it offered %v)", turn, c.Tool, names(p.tools)))
			continue
		}
		calls = append(calls, wireCall{id: callID(turn, i), decl: d, args: c.Args})
	}
	if err := wf.reply(w, r, p, calls, t.Text); err != nil {
		s.fail(err)
	}
}

func (s *Server) keep(r Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reqs = append(s.reqs, r)
}

func names(m map[string]toolDecl) []string {
	var n []string
	for k := range m {
		n = append(n, k)
	}
	return n
}

// callID encodes a call's place in the script in its id.
func callID(turn, index int) string { return fmt.Sprintf("b10x_%d_%d", turn, index) }

var callIDPattern = regexp.MustCompile(`b10x_(\d+)_(\d+)`)

// parseCallID reads a place from an id callID made (possibly with a
// client's prefix, as in toolu_b10x_0_1 or fc_b10x_0_1).
func parseCallID(id string) (callRef, bool) {
	m := callIDPattern.FindStringSubmatch(id)
	if m == nil {
		return callRef{}, false
	}
	t, err1 := strconv.Atoi(m[1])
	i, err2 := strconv.Atoi(m[2])
	if err1 != nil || err2 != nil {
		return callRef{}, false
	}
	return callRef{t, i}, true
}

// sse is one server-sent event: name "" sends data only.
type sse struct {
	name string
	data any
}

// writeEvents answers with a stream of server-sent events.
func writeEvents(w http.ResponseWriter, events []sse) error {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	for _, e := range events {
		if err := writeSSE(w, e.name, e.data); err != nil {
			return err
		}
	}
	return nil
}

// writeSSE writes one server-sent event and flushes it.
func writeSSE(w http.ResponseWriter, event string, data any) error {
	b, err := json.Marshal(data)
	if err != nil {
		return err
	}
	if event != "" {
		if _, err := fmt.Fprintf(w, "event: %s\n", event); err != nil {
			return err
		}
	}
	if _, err := fmt.Fprintf(w, "data: %s\n\n", b); err != nil {
		return err
	}
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
	return nil
}

// textOf joins the text parts of an MCP-like content value: a string, or
// an array of {"type": "...text", "text": ...} blocks.
func textOf(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var blocks []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &blocks) != nil {
		return string(raw)
	}
	var parts []string
	for _, b := range blocks {
		if strings.HasSuffix(b.Type, "text") {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}
