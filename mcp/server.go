// Package mcp serves the gate's published tools over the Model Context
// Protocol, with the official Go SDK (github.com/modelcontextprotocol/go-sdk).
//
// The server is one more surface over the gate: tools/list is exactly what
// the configured surface.Surface presents (flat: one tool per published
// entry; verbs: tool_search, tool_describe, tool_invoke), with the
// descriptions and input schemas as the surface gives them, and every
// tools/call goes through surface.Surface.Dispatch and so through the gate,
// which records it. A call to a name that was never listed reaches the gate
// too and is refused there (reason unpublished), so the refusal is recorded
// like any other.
//
// # Approvals
//
// Calls above the risk ceiling are decided by the gate's approver. An MCP
// server's gate is built with an *Approver (NewApprover), which asks the
// client's user by elicitation on the session the call came by. A client
// without the elicitation capability gets every such call denied (mode
// auto, stated in the server's instructions) or is refused at initialize
// (mode prompt). The server never opens /dev/tty.
//
// # Transports
//
// ServeStdio serves one session on newline-delimited JSON-RPC. Handler and
// ServeStreamable serve MCP streamable HTTP behind a bearer token: every
// client that initializes gets an MCP session of its own, and all of them
// share the one gate (budget, standing approvals, record). Listen opens the
// listener they take (a Unix socket or a loopback address; TLS for any
// other) and ReadToken the token; both must run before the harness
// confines itself.
//
// # What it does not do
//
// Client roots are ignored: the workspace is the policy's. The server
// serves tools only (no resources, prompts or sampling). It speaks the
// protocol versions up to 2025-11-25, those with an initialize handshake
// (see lastHandshakeVersion): 2026-07-28 forbids the elicitation/create
// request its approvals send while a call is served. Every tools/call is
// answered after the gate's decision; a panic in a handler becomes an
// internal JSON-RPC error, not a crash.
package mcp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/b10x/harness/gate"
	"github.com/b10x/harness/surface"
)

// DefaultMaxMessage is the cap on one incoming JSON-RPC message when
// Config.MaxMessage is zero: the gate's argument cap (gate.DefaultMaxArgs)
// plus room for the envelope and JSON escaping.
const DefaultMaxMessage = gate.DefaultMaxArgs + 1<<20

// progressEvery is how often a call that asked for progress hears of it.
var progressEvery = time.Second

// Config configures a Server. Surface and Gate are required, and Surface
// must be a surface over Gate.
type Config struct {
	// Surface is the shape the client sees (flat or verbs).
	Surface *surface.Surface
	// Gate is the gate Surface dispatches to. Its approver decides calls
	// above the ceiling: an *Approver (NewApprover) asks the client by
	// elicitation; gate.DenyAll and gate.ApproveAll work as they do
	// anywhere; an approver that asks on a terminal is refused by
	// NewServer (the server's stdio is the protocol).
	Gate *gate.Gate
	// Name and Version identify the server at initialize; "": the
	// module's name ("b10x-harness") and "devel".
	Name, Version string
	// Network says that run calls have network access: run is annotated
	// openWorldHint. false: no tool is open-world.
	Network bool
	// MaxMessage caps one incoming JSON-RPC message on ServeStdio, in
	// bytes; 0: DefaultMaxMessage. A larger message is skipped (it is
	// never read whole) and answered with an error, and the session goes
	// on. Run uses the transport's own cap.
	MaxMessage int64
	// StopWait bounds how long ServeStdio and ServeStreamable wait, once
	// they stop, for the calls they cancelled to end, be recorded and be
	// answered; 0: DefaultStopWait. A cancelled run call has its policy's
	// grace after SIGTERM before its tree is killed: give it the grace
	// and a few seconds (the harness passes grace + 5 s).
	StopWait time.Duration
	// SessionIdle closes an HTTP session that has had no request for this
	// long (a request being served, a run call among them, holds it open;
	// a standalone SSE stream does not); its client gets 404 and must
	// initialize again. 0: DefaultSessionIdle; negative: never.
	SessionIdle time.Duration
	// MaxSessions caps the live HTTP sessions: an initialize past it is
	// answered HTTP 503 with a JSON-RPC error. 0: DefaultMaxSessions;
	// negative: no cap.
	MaxSessions int
	// Logf receives what the server says for people, once each: the run
	// record failing. Nil: discarded. The text may quote a model's words:
	// render it safely.
	Logf func(format string, args ...any)
}

// Server is an MCP server over one gate. It is safe for concurrent use:
// Run and ServeStdio may serve several sessions at once, all sharing the
// gate (its call budget, standing approvals and record).
type Server struct {
	cfg    Config
	mode   string         // approval mode: auto, prompt, deny, all, or another approver's name
	listed map[string]int // tool name → its place in the surface's list
	sdk    *sdk.Server
	maxMsg int64

	calls           calls        // the tools/call requests in flight (lifecycle.go)
	cancelledAtStop atomic.Int64 // calls the stop cut short
	recordFailed    atomic.Bool  // a call was refused or noted record_failed
	httpSeq         atomic.Uint64
	requests        sync.Map // Handler's requests in flight: requestHeader's key → context
	posts           counter  // HTTP POST requests being served
	handling        counter  // HTTP requests being served
	initializing    atomic.Int64
	stopping        atomic.Bool // ServeStreamable is stopping: new HTTP requests get 503
}

// NewServer returns a server presenting cfg.Surface. It fails when Surface
// or Gate is missing, or when the gate's approver would ask on a terminal.
func NewServer(cfg Config) (*Server, error) {
	if cfg.Surface == nil || cfg.Gate == nil {
		return nil, errors.New("mcp: Config.Surface and Config.Gate are required")
	}
	if cfg.Name == "" {
		cfg.Name = "b10x-harness"
	}
	if cfg.Version == "" {
		cfg.Version = "devel"
	}
	s := &Server{cfg: cfg, listed: map[string]int{}, maxMsg: cfg.MaxMessage}
	if s.maxMsg <= 0 {
		s.maxMsg = DefaultMaxMessage
	}
	if s.cfg.StopWait <= 0 {
		s.cfg.StopWait = DefaultStopWait
	}
	if s.cfg.SessionIdle == 0 {
		s.cfg.SessionIdle = DefaultSessionIdle
	}
	if s.cfg.MaxSessions == 0 {
		s.cfg.MaxSessions = DefaultMaxSessions
	}
	approver := cfg.Gate.Config().Approver
	switch a := approver.(type) {
	case *Approver:
		s.mode = a.Mode()
	case *gate.TTYApprover:
		return nil, errors.New("mcp: the gate's approver asks on a terminal; an MCP server decides approvals by elicitation (use mcp.NewApprover)")
	case gate.DenyAll:
		s.mode = ApproveDeny
	case gate.ApproveAll:
		s.mode = ApproveAll
	default:
		s.mode = approver.Name()
	}

	s.sdk = sdk.NewServer(&sdk.Implementation{Name: cfg.Name, Version: cfg.Version}, &sdk.ServerOptions{Instructions: s.instructions(), SupportedProtocolVersions: protocolVersions()})
	for i, d := range cfg.Surface.Definitions() {
		s.listed[d.Name] = i + 1
		s.sdk.AddTool(&sdk.Tool{Name: d.Name, Description: d.Description, InputSchema: d.InputSchema, Annotations: s.annotations(d.Name)}, s.call)
	}
	s.sdk.AddReceivingMiddleware(s.middleware)
	return s, nil
}

// lastHandshakeVersion is the newest protocol version with an initialize
// handshake and server-initiated requests. From 2026-07-28 on, a server may
// not send elicitation/create while serving a call (it must answer with
// input requests and signed request state, SEP-2322), and sessions need
// not begin with initialize; this server's approvals need both, so it
// speaks the versions up to this one.
const lastHandshakeVersion = "2025-11-25"

// protocolVersions lists the SDK's versions up to lastHandshakeVersion.
func protocolVersions() []string {
	var vs []string
	for _, v := range sdk.SupportedProtocolVersions() {
		if v <= lastHandshakeVersion {
			vs = append(vs, v)
		}
	}
	return vs
}

// instructions tells the client how this server decides.
func (s *Server) instructions() string {
	var b strings.Builder
	b.WriteString("These tools act on one workspace, fixed by the harness's policy: paths are relative to its root, and client roots are ignored for every access decision. ")
	b.WriteString("Every call passes the harness's gate (publication, arguments, paths and write scope, hooks, approval) and is recorded; a refused or failed call is an error result whose text begins with its status and reason code, e.g. \"refused (denied_path): ...\". ")
	ceiling := s.cfg.Gate.Config().ApproveUpTo
	fmt.Fprintf(&b, "Calls whose risk is above %s need approval: ", ceiling)
	switch s.mode {
	case ApproveAuto:
		b.WriteString("when the client supports elicitation, its user is asked for each such call; a client without elicitation gets each such call denied.")
	case ApprovePrompt:
		b.WriteString("the client's user is asked for each such call by elicitation; a client without elicitation is refused at initialize.")
	case ApproveDeny:
		b.WriteString("they are denied.")
	case ApproveAll:
		b.WriteString("they are all approved without asking anyone (the policy's approve is all).")
	default:
		fmt.Fprintf(&b, "they are decided by the %s approver.", s.mode)
	}
	return b.String()
}

// annotations derives a tool's hints from the catalogue.
func (s *Server) annotations(name string) *sdk.ToolAnnotations {
	f, t := false, true
	switch name {
	case "tool_search", "tool_describe":
		return &sdk.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, DestructiveHint: &f, OpenWorldHint: &f}
	case "tool_invoke":
		destructive, open := false, false
		for _, e := range s.cfg.Gate.Published() {
			destructive = destructive || e.Risk > gate.Low
			open = open || (e.Needs == gate.ConfinedExecution && s.cfg.Network)
		}
		return &sdk.ToolAnnotations{ReadOnlyHint: !destructive, DestructiveHint: &destructive, OpenWorldHint: &open}
	}
	e, ok := gate.Lookup(name)
	if !ok {
		return nil
	}
	if e.Risk == gate.Low && e.Needs == gate.Always {
		return &sdk.ToolAnnotations{Title: e.Operation, ReadOnlyHint: true, IdempotentHint: true, DestructiveHint: &f, OpenWorldHint: &f}
	}
	open := e.Needs == gate.ConfinedExecution && s.cfg.Network
	return &sdk.ToolAnnotations{Title: e.Operation, DestructiveHint: &t, OpenWorldHint: &open}
}

// middleware refuses a session in prompt mode whose client cannot be
// asked, and sends calls to names never listed to the gate (the SDK
// would answer them with a protocol error the record never sees).
func (s *Server) middleware(next sdk.MethodHandler) sdk.MethodHandler {
	return func(ctx context.Context, method string, req sdk.Request) (res sdk.Result, err error) {
		defer func() {
			if p := recover(); p != nil {
				res, err = nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "internal error"}
			}
		}()
		switch r := req.(type) {
		case *sdk.ServerRequest[*sdk.InitializeParams]:
			if s.mode == ApprovePrompt && r.Params != nil && !canElicit(r.Params) {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest,
					Message: "this server asks its client's user to approve calls above the risk ceiling (approve: prompt), and the client did not declare the elicitation capability"}
			}
		case *sdk.CallToolRequest:
			if r.Params != nil && s.listed[r.Params.Name] == 0 {
				return s.call(ctx, r)
			}
		case *sdk.ListToolsRequest:
			// The SDK lists by name; the surface's order is the
			// catalogue's (reads first), as every other surface shows it.
			res, err := next(ctx, method, req)
			if lr, ok := res.(*sdk.ListToolsResult); ok && err == nil {
				sort.SliceStable(lr.Tools, func(i, j int) bool { return s.listed[lr.Tools[i].Name] < s.listed[lr.Tools[j].Name] })
			}
			return res, err
		}
		return next(ctx, method, req)
	}
}

// call handles one tools/call: the gate decides, the outcome is the result.
func (s *Server) call(ctx context.Context, req *sdk.CallToolRequest) (_ *sdk.CallToolResult, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "internal error"}
		}
	}()
	if req == nil || req.Params == nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "missing params"}
	}
	ctx, end := s.callContext(withSession(ctx, req.Session), req.Extra)
	var o gate.Outcome
	defer func() { end(o) }()
	var w surface.With
	if tok := req.Params.GetProgressToken(); tok != nil && req.Session != nil {
		var out atomic.Int64
		w.Progress = func(n int64) {
			for old := out.Load(); n > old && !out.CompareAndSwap(old, n); old = out.Load() {
			}
		}
		stop := s.progress(ctx, req.Session, tok, &out)
		defer stop()
	}
	args, ignored := clientArgs(req.Params.Arguments, func() bool { return s.declares(req.Params.Name, WaitForPrevious) })
	w.Ignored = ignored
	o = s.cfg.Surface.DispatchWith(ctx, req.Params.Name, args, w)
	return Result(o), nil
}

// progress sends notifications/progress every progressEvery until stop is
// called: the seconds elapsed, and the output a run call has produced.
func (s *Server) progress(ctx context.Context, ss *sdk.ServerSession, tok any, out *atomic.Int64) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	start := time.Now()
	go func() {
		defer close(finished)
		t := time.NewTicker(progressEvery)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case now := <-t.C:
				el := now.Sub(start)
				msg := "running for " + el.Round(time.Second).String()
				if n := out.Load(); n > 0 {
					msg += fmt.Sprintf(", %d bytes of output so far", n)
				}
				_ = ss.NotifyProgress(ctx, &sdk.ProgressNotificationParams{ProgressToken: tok, Progress: el.Seconds(), Message: msg})
			}
		}
	}()
	return func() { close(done); <-finished }
}

// Run serves one session on t until the client disconnects or ctx is
// done, and returns why it ended (nil for a clean end of input, ctx.Err()
// when ctx ended it). The transport's own message cap applies (the SDK's
// IOTransport and StdioTransport take one: MaxLineLength).
func (s *Server) Run(ctx context.Context, t sdk.Transport) error {
	return s.sdk.Run(ctx, t)
}

// ServeStdio serves one session on newline-delimited JSON-RPC read from in
// and written to out, until in ends, out fails or ctx is done. in and out
// are not closed.
//
// Every line is checked before the SDK reads it (frame.go): one that is
// not JSON is answered -32700, one that is not a valid request,
// notification or response (a batch among them), or a request whose id is
// already in flight, -32600, and a message longer than Config.MaxMessage
// is skipped without being read whole and answered -32600; the session
// goes on after each. Every answer carries the request's id exactly as the
// client wrote it.
//
// The session ends by stopping the server (see CancelledAtStop): at the
// end of in (a client closes stdin to shut its server down), when out
// fails (the client's end is gone), or when ctx is done (the harness's
// SIGINT or SIGTERM, which is how clients end a stdio server). Every call
// in flight is then cancelled, every request read is answered (a
// cancelled call with its cancelled outcome) and every answer already
// computed is written before ServeStdio returns, within Config.StopWait;
// input that arrives after ctx is done is not read. A request the server
// sent the client and that is still unanswered (an approval asked by
// elicitation) fails, and the call it was asked for is refused.
// ServeStdio returns nil at the end of in or of out (the client is gone),
// ctx.Err() when ctx ended it.
func (s *Server) ServeStdio(ctx context.Context, in io.Reader, out io.Writer) error {
	p := newPending()
	// The reader's wait for answers ends StopWait after the stop at most.
	drainCtx, giveUp := context.WithCancel(context.Background())
	defer giveUp()
	halt := func(why string) {
		if s.stop(why) {
			time.AfterFunc(s.cfg.StopWait, giveUp)
		}
	}
	stopReading := make(chan struct{})
	w := &drainWriter{w: out, p: p, onFail: func() { halt("the client's end of the output closed") }}
	w.frame = newFramer(w.answer)
	r := &drainReader{ctx: drainCtx, r: in, p: p, max: int(s.maxMsg), stop: stopReading, frame: w.frame,
		onEnd: func() { halt("the client closed its input") }}
	done := make(chan error, 1)
	go func() {
		// The reader holds a line to Config.MaxMessage; the line the SDK
		// gets may be a little longer (the id is ours).
		done <- s.Run(context.Background(), &sdk.IOTransport{Reader: r, Writer: w, MaxLineLength: -1})
	}()
	var err error
	select {
	case err = <-done:
		halt("the session ended")
		if w.failed.Load() {
			// The client is gone; the SDK's error is the write that
			// found it so. That is how the session ended, not a fault.
			err = nil
		}
	case <-ctx.Done():
		why := "the harness was told to stop"
		if c := context.Cause(ctx); c != nil && c != ctx.Err() {
			why = c.Error()
		}
		halt(why)
		close(stopReading)
		select {
		case <-done:
		case <-time.After(s.cfg.StopWait + time.Second):
		}
		err = ctx.Err()
	}
	// Every call is decided, and so recorded, before the session is
	// said to have ended.
	s.calls.wait(s.cfg.StopWait)
	return err
}
