package mcp

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/b10x/harness/gate"
	"github.com/b10x/harness/tools"
)

// How a served session ends (decision 0076). The server stops once: on
// ServeStdio's context ending (the harness's SIGINT or SIGTERM), at the
// end of stdin, when the client's end of stdout closes, or on
// ServeStreamable's context ending. Stopping cancels every call in flight
// and every later one (a run call's tree gets its grace, then the kill),
// waits at most Config.StopWait for them to end and be recorded, and writes
// every answer it has to the client before the transport closes.
// CancelledAtStop then says how many calls the stop cut short: none means
// the session ended normally.

// DefaultStopWait is Config.StopWait's default: the policy's default grace
// (10 s) and 5 s for the kill, the broker and the record.
const DefaultStopWait = 15 * time.Second

// DefaultSessionIdle is Config.SessionIdle's default.
const DefaultSessionIdle = 10 * time.Minute

// DefaultMaxSessions is Config.MaxSessions's default.
const DefaultMaxSessions = 100

// ErrStopped is the cause of the context of a call cancelled because the
// server stopped (context.Cause matches it with errors.Is).
var ErrStopped = errors.New("the MCP server stopped")

// ErrRequestGone is the cause of the context of a call cancelled because
// the HTTP request that carried it ended before its answer (the client's
// connection went away): no one can receive the answer any more.
var ErrRequestGone = errors.New("the HTTP request that carried the call ended before its answer (the client's connection went away)")

// calls tracks the tools/call requests being served: how many, and how to
// cancel each. Its zero value is ready.
type calls struct {
	mu      sync.Mutex
	next    uint64
	cancel  map[uint64]context.CancelCauseFunc
	idle    chan struct{} // closed and set to nil when the last call ends
	stopped error         // set by stop: the cause every call gets
}

// begin registers one call whose context is ctx; end must be called when
// the call is decided (recorded). A call that begins after the stop is
// cancelled at once.
func (c *calls) begin(ctx context.Context) (_ context.Context, end func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped != nil {
		cancel(c.stopped)
	}
	if c.cancel == nil {
		c.cancel = map[uint64]context.CancelCauseFunc{}
	}
	c.next++
	id := c.next
	c.cancel[id] = cancel
	return ctx, func() {
		cancel(nil)
		c.mu.Lock()
		defer c.mu.Unlock()
		delete(c.cancel, id)
		if len(c.cancel) == 0 && c.idle != nil {
			close(c.idle)
			c.idle = nil
		}
	}
}

// stop cancels every call in flight and every later one with cause; it
// reports whether this was the first stop.
func (c *calls) stop(cause error) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped != nil {
		return false
	}
	c.stopped = cause
	for _, cancel := range c.cancel {
		cancel(cause)
	}
	return true
}

// wait waits until no call is in flight, at most d; it reports whether
// none is.
func (c *calls) wait(d time.Duration) bool {
	c.mu.Lock()
	if len(c.cancel) == 0 {
		c.mu.Unlock()
		return true
	}
	if c.idle == nil {
		c.idle = make(chan struct{})
	}
	idle := c.idle
	c.mu.Unlock()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-idle:
		return true
	case <-t.C:
		return false
	}
}

// stop stops the server (once): every call in flight and every later one
// is cancelled with ErrStopped and why. It reports whether this was the
// first stop.
func (s *Server) stop(why string) bool {
	return s.calls.stop(fmt.Errorf("%w: %s", ErrStopped, why))
}

// CancelledAtStop is the number of calls the server's stop cut short
// (recorded with reason cancelled because the server stopped): 0 when the
// session ended with no call in flight, or none ended by the stop. It is
// final once ServeStdio or ServeStreamable has returned.
func (s *Server) CancelledAtStop() int { return int(s.cancelledAtStop.Load()) }

// RecordFailed reports whether a call was refused or noted because the
// run record could not be written (reason record_failed): the record of
// this session is incomplete.
func (s *Server) RecordFailed() bool { return s.recordFailed.Load() }

// callContext is the context one tools/call runs in: cancelled when the
// server stops, and, over HTTP, when the request that carried it ends
// before its answer. end is called once the call is decided, with its
// outcome.
func (s *Server) callContext(ctx context.Context, extra *sdk.RequestExtra) (context.Context, func(gate.Outcome)) {
	ctx, done := s.calls.begin(ctx)
	cctx, cancel := context.WithCancelCause(ctx)
	unwatch := s.watchRequest(extra, func() { cancel(ErrRequestGone) })
	return cctx, func(o gate.Outcome) {
		unwatch()
		if o.Reason == tools.ReasonCancelled && errors.Is(context.Cause(cctx), ErrStopped) {
			s.cancelledAtStop.Add(1)
		}
		if why, failed := recordFailure(o); failed && !s.recordFailed.Swap(true) && s.cfg.Logf != nil {
			s.cfg.Logf("the run record could not be written (%s): the record of this session is incomplete, and every later call is refused", why)
		}
		cancel(nil)
		done()
	}
}

// recordFailure reports whether o says the run record could not be
// written, and why (the errno's text): a call refused with reason
// record_failed, or one that acted and whose call line was lost (its
// outcome stands, with meta record_error).
func recordFailure(o gate.Outcome) (string, bool) {
	if why, ok := o.Meta["record_error"].(string); ok {
		return why, true
	}
	if o.Reason != tools.ReasonRecordFailed {
		return "", false
	}
	why := o.Message
	if i, j := strings.Index(why, "("), strings.Index(why, ")"); i >= 0 && j > i {
		why = why[i+1 : j]
	}
	return why, true
}

// requestHeader names the header Handler sets on every HTTP request it
// passes to the SDK, replacing any the client sent: the key under which
// the request's context is found while it is served. The SDK gives a
// tools/call handler the headers of the request that carried it
// (RequestExtra.Header), not its context.
const requestHeader = "B10x-Harness-Request"

// serveRequest registers r's context for the calls it carries, and
// returns r with the key header set, and the function that forgets it.
func (s *Server) serveRequest(r *http.Request) (*http.Request, func()) {
	key := strconv.FormatUint(s.httpSeq.Add(1), 36)
	r.Header.Del(requestHeader)
	r.Header.Set(requestHeader, key)
	s.requests.Store(key, r.Context())
	return r, func() { s.requests.Delete(key) }
}

// watchRequest calls gone when the HTTP request extra came by ends (at
// once when it already has); it returns the function that stops watching.
// A call that came by stdio is not watched.
func (s *Server) watchRequest(extra *sdk.RequestExtra, gone func()) (unwatch func()) {
	if extra == nil || extra.Header == nil {
		return func() {}
	}
	key := extra.Header.Get(requestHeader)
	if key == "" {
		return func() {}
	}
	v, ok := s.requests.Load(key)
	if !ok {
		gone()
		return func() {}
	}
	stop := context.AfterFunc(v.(context.Context), gone)
	return func() { stop() }
}

// counter is an atomic count with a wait for zero.
type counter struct {
	n atomic.Int64
}

func (c *counter) add(d int64) { c.n.Add(d) }

// waitZero polls until the count is zero, at most d; it reports whether
// it is.
func (c *counter) waitZero(d time.Duration) bool {
	end := time.Now().Add(d)
	for c.n.Load() > 0 {
		if time.Now().After(end) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

// StopReason says why the server stopped ("the client closed its input",
// the cause of ServeStdio's or ServeStreamable's context, such as
// "SIGTERM"); "" while it has not.
func (s *Server) StopReason() string {
	s.calls.mu.Lock()
	defer s.calls.mu.Unlock()
	if s.calls.stopped == nil {
		return ""
	}
	msg := s.calls.stopped.Error()
	if r, ok := strings.CutPrefix(msg, ErrStopped.Error()+": "); ok {
		return r
	}
	return msg
}
