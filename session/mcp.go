package session

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/b10x/harness/mcp"
	"github.com/b10x/harness/record"
)

// MCPOptions are how ServeMCP serves the session's published tools: over
// Stdin and Stdout, or on Listener, every HTTP request carrying Token.
type MCPOptions struct {
	Name, Version string
	Stdin         io.Reader
	Stdout        io.Writer
	// Listener, when not nil, serves MCP streamable HTTP instead of stdio.
	Listener *mcp.Listener
	Token    []byte
	// SessionIdle closes an HTTP session after that long without a
	// request (0: never); MaxSessions bounds how many are open at once.
	SessionIdle time.Duration
	MaxSessions int
	// Say is given each line the server says beside the protocol (what
	// broke it, the HTTP transport's notes). Nil says nothing.
	Say func(line string)
}

// MCPEnd says how ServeMCP ended.
type MCPEnd struct {
	// EndedBy is the record's run_end ended_by: client_closed (stdio),
	// stopped (HTTP), cancelled (calls in flight were cut short by the
	// end) or error (the session broke: Err says how).
	EndedBy string
	Err     error
	// RecordErr is non-nil when the run record is incomplete: a call's
	// line or run_end could not be written (a full disk).
	RecordErr error
}

// ServeMCP serves the session over MCP until ctx ends (the harness's
// SIGINT or SIGTERM; its cause names the signal) or, over stdio, the
// client ends the session; then the calls in flight are cancelled, every
// answer computed is written, and the session is ended with a run_end
// that says how (End is not called again).
func (s *Session) ServeMCP(ctx context.Context, o MCPOptions) MCPEnd {
	say := o.Say
	if say == nil {
		say = func(string) {}
	}
	idle := o.SessionIdle
	if idle == 0 {
		idle = -1 // never
	}
	srv, err := mcp.NewServer(mcp.Config{Surface: s.surface, Gate: s.gate, Name: o.Name, Version: o.Version, Network: s.Network(),
		StopWait: s.policy.Run.Grace + 5*time.Second, SessionIdle: idle, MaxSessions: o.MaxSessions,
		Logf: func(format string, args ...any) { say(fmt.Sprintf(format, args...) + "; mcp will exit 1") }})
	if err != nil {
		s.End("error")
		return MCPEnd{EndedBy: "error", Err: err}
	}
	if o.Listener != nil {
		say("listening on " + o.Listener.String())
		err = srv.ServeStreamable(ctx, o.Listener, o.Token, func(format string, args ...any) { say("http: " + fmt.Sprintf(format, args...)) })
	} else {
		err = srv.ServeStdio(ctx, o.Stdin, o.Stdout)
	}
	end := record.RunEnd{How: srv.StopReason(), CancelledCalls: srv.CancelledAtStop()}
	out := MCPEnd{}
	switch {
	case err != nil && ctx.Err() == nil:
		end.EndedBy, out.Err = "error", err
	case end.CancelledCalls > 0:
		end.EndedBy = "cancelled"
	case o.Listener != nil:
		end.EndedBy = "stopped"
	default:
		end.EndedBy = "client_closed"
	}
	out.EndedBy = end.EndedBy
	out.RecordErr = s.EndWith(end)
	if out.RecordErr == nil && srv.RecordFailed() {
		out.RecordErr = errors.New("a call's line could not be written")
	}
	return out
}
