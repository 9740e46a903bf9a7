package mcp

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/b10x/harness/gate"
	"github.com/b10x/harness/surface"
	"github.com/b10x/harness/tools"
	"github.com/b10x/harness/workspace"
)

// stubbornSearch is a search tool that, once its context ends, still
// takes linger to finish, and then succeeds: a call whose answer is
// computed after the stop began.
type stubbornSearch struct {
	tools.Search
	started chan struct{}
	linger  time.Duration
}

type stubbornCall struct{ s stubbornSearch }

func (s stubbornSearch) Prepare(*workspace.Workspace, json.RawMessage) (tools.Prepared, error) {
	return stubbornCall{s}, nil
}
func (c stubbornCall) Args() any             { return map[string]any{} }
func (c stubbornCall) Writes() []tools.Write { return nil }
func (c stubbornCall) Execute(ctx context.Context, _ tools.Report) (tools.Result, error) {
	close(c.s.started)
	<-ctx.Done()
	time.Sleep(c.s.linger)
	return tools.Result{Text: "finished anyway"}, nil
}

// lineSession is ServeStdio on real pipes, driven line by line; stdin
// stays open until the test closes it.
type lineSession struct {
	t    *testing.T
	in   *os.File
	out  *bufio.Reader
	done chan error
}

func serveOnPipes(t *testing.T, ctx context.Context, srv *Server) *lineSession {
	t.Helper()
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	s := &lineSession{t: t, in: inW, out: bufio.NewReader(outR), done: make(chan error, 1)}
	go func() {
		err := srv.ServeStdio(ctx, inR, outW)
		outW.Close()
		s.done <- err
	}()
	t.Cleanup(func() { inW.Close(); inR.Close(); outR.Close() })
	return s
}

func (s *lineSession) send(lines ...string) {
	s.t.Helper()
	for _, l := range lines {
		if _, err := io.WriteString(s.in, l+"\n"); err != nil {
			s.t.Fatal(err)
		}
	}
}

// answer reads up to the answer to id (notifications and other answers
// are skipped).
func (s *lineSession) answer(id string) map[string]any {
	s.t.Helper()
	for {
		l, err := s.out.ReadBytes('\n')
		if err != nil {
			s.t.Fatalf("reading the answer to %s: %v", id, err)
		}
		var m map[string]any
		if err := json.Unmarshal(l, &m); err != nil {
			s.t.Fatalf("output line %q: %v", l, err)
		}
		if b, _ := json.Marshal(m["id"]); string(b) == id && m["method"] == nil {
			return m
		}
	}
}

// returned is ServeStdio's error, within d.
func (s *lineSession) returned(d time.Duration) error {
	s.t.Helper()
	go io.Copy(io.Discard, s.out)
	select {
	case err := <-s.done:
		return err
	case <-time.After(d):
		s.t.Fatalf("ServeStdio did not return within %s", d)
		return nil
	}
}

func structured(t *testing.T, m map[string]any) map[string]any {
	t.Helper()
	res, _ := m["result"].(map[string]any)
	sc, _ := res["structuredContent"].(map[string]any)
	if meta, _ := res["_meta"].(map[string]any); sc == nil && meta != nil {
		sc, _ = meta["b10x-harness/outcome"].(map[string]any)
	}
	if sc == nil {
		t.Fatalf("no outcome in %v", m)
	}
	return sc
}

const slowCallLine = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"search","arguments":{"pattern":"x"}}}`

// TestStdioEOFCancelsCallInFlight: a call answered before the end of
// input stays executed; the one still running at the end of input is
// cancelled, answered so and recorded so, and ServeStdio returns nil.
func TestStdioEOFCancelsCallInFlight(t *testing.T) {
	slow := slowSearch{started: make(chan struct{}), release: make(chan struct{})}
	f := newFixture(t, surface.Flat, ApproveDeny, gate.Config{Tools: append(tools.ReadTools(), slow)}, Config{})
	s := serveOnPipes(t, context.Background(), f.srv)
	s.send(initLine, initdLine, callLine)
	if sc := structured(t, s.answer("3")); sc["status"] != "executed" {
		t.Fatalf("call 3: %v", sc)
	}
	s.send(slowCallLine)
	<-slow.started
	s.in.Close()
	if sc := structured(t, s.answer("7")); sc["reason"] != "cancelled" {
		t.Fatalf("call 7 at the end of input: %v", sc)
	}
	if err := s.returned(10 * time.Second); err != nil {
		t.Fatalf("ServeStdio: %v", err)
	}
	recs := f.rec.calls(t)
	if len(recs) != 2 || recs[0].Status != gate.Executed || recs[1].Reason != string(tools.ReasonCancelled) {
		t.Fatalf("recorded %+v", recs)
	}
	if n := f.srv.CancelledAtStop(); n != 1 {
		t.Fatalf("CancelledAtStop %d, want 1", n)
	}
}

// TestStdioStopOnContext: ctx ending stops a session whose stdin stays
// open: the call in flight is cancelled and its answer written, and
// ServeStdio returns ctx.Err() at once, not when the call would have
// ended.
func TestStdioStopOnContext(t *testing.T) {
	slow := slowSearch{started: make(chan struct{}), release: make(chan struct{})}
	f := newFixture(t, surface.Flat, ApproveDeny, gate.Config{Tools: []tools.Tool{slow}}, Config{})
	ctx, cancel := context.WithCancelCause(context.Background())
	s := serveOnPipes(t, ctx, f.srv)
	s.send(initLine, initdLine, slowCallLine)
	<-slow.started
	start := time.Now()
	cancel(errors.New("SIGTERM"))
	if sc := structured(t, s.answer("7")); sc["reason"] != "cancelled" {
		t.Fatalf("call 7 after the stop: %v", sc)
	}
	if err := s.returned(5 * time.Second); !errors.Is(err, context.Canceled) {
		t.Fatalf("ServeStdio: %v, want context.Canceled", err)
	}
	if el := time.Since(start); el > 3*time.Second {
		t.Errorf("the stop took %s", el)
	}
	if n := f.srv.CancelledAtStop(); n != 1 {
		t.Fatalf("CancelledAtStop %d, want 1", n)
	}
	if recs := f.rec.calls(t); len(recs) != 1 || recs[0].Reason != string(tools.ReasonCancelled) {
		t.Fatalf("recorded %+v", recs)
	}
}

// TestStdioStopWritesComputedAnswers: a call that finishes after the stop
// began (its tool ends in its own time) has its answer written, and is
// not counted as cancelled; a session stopped with nothing in flight
// counts none.
func TestStdioStopWritesComputedAnswers(t *testing.T) {
	st := stubbornSearch{started: make(chan struct{}), linger: 300 * time.Millisecond}
	f := newFixture(t, surface.Flat, ApproveDeny, gate.Config{Tools: []tools.Tool{st}}, Config{})
	ctx, cancel := context.WithCancel(context.Background())
	s := serveOnPipes(t, ctx, f.srv)
	s.send(initLine, initdLine, slowCallLine)
	<-st.started
	cancel()
	sc := structured(t, s.answer("7"))
	if err := s.returned(5 * time.Second); !errors.Is(err, context.Canceled) {
		t.Fatalf("ServeStdio: %v", err)
	}
	// The gate names a call whose context ended as cancelled even when
	// its tool returned; what matters here is that the answer came.
	if sc["entry"] != "search" {
		t.Fatalf("answer %v", sc)
	}

	idle := newFixture(t, surface.Flat, ApproveDeny, gate.Config{}, Config{})
	ctx, cancel = context.WithCancel(context.Background())
	s = serveOnPipes(t, ctx, idle.srv)
	s.send(initLine, initdLine, callLine)
	s.answer("3")
	cancel()
	if err := s.returned(5 * time.Second); !errors.Is(err, context.Canceled) {
		t.Fatalf("ServeStdio: %v", err)
	}
	if n := idle.srv.CancelledAtStop(); n != 0 {
		t.Fatalf("CancelledAtStop %d with nothing in flight", n)
	}
}

// TestStdioStopWaitBounds: a call that does not end when cancelled does
// not hold ServeStdio past Config.StopWait.
func TestStdioStopWaitBounds(t *testing.T) {
	st := stubbornSearch{started: make(chan struct{}), linger: time.Hour}
	f := newFixture(t, surface.Flat, ApproveDeny, gate.Config{Tools: []tools.Tool{st}}, Config{StopWait: 300 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	s := serveOnPipes(t, ctx, f.srv)
	s.send(initLine, initdLine, slowCallLine)
	<-st.started
	start := time.Now()
	cancel()
	s.returned(5 * time.Second)
	if el := time.Since(start); el > 3*time.Second {
		t.Errorf("ServeStdio returned %s after the stop, StopWait 300ms", el)
	}
}

// httpFixture serves f's server over streamable HTTP on a loopback port.
func httpFixture(t *testing.T, f *fixture) (url string, stop func() error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.srv.ServeStreamable(ctx, ln, []byte(testToken), nil) }()
	stopped := false
	stop = func() error {
		if stopped {
			return nil
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(20 * time.Second):
			t.Fatal("ServeStreamable did not return")
			return nil
		}
	}
	t.Cleanup(func() { stop() })
	return "http://" + ln.Addr().String() + "/mcp", stop
}

const testToken = "b10x-test-token-0123456789abcdefghijklmn"

type bearerRT struct{ next http.RoundTripper }

func (b bearerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+testToken)
	return b.next.RoundTrip(r)
}

func httpClient() *http.Client {
	return &http.Client{Transport: bearerRT{http.DefaultTransport.(*http.Transport).Clone()}}
}

func httpConnect(t *testing.T, url string) (*sdk.ClientSession, error) {
	t.Helper()
	c := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: url, HTTPClient: httpClient(), DisableStandaloneSSE: true, MaxRetries: -1}, nil)
}

// postInit sends one initialize as a raw POST and returns the response.
func postInit(t *testing.T, url string, id string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(strings.Replace(initLine, `"id":1`, `"id":`+id, 1)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := httpClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

// TestHTTPSessionCap: past MaxSessions an initialize is answered 503 with
// a JSON-RPC error carrying its id; a session that ends frees its place.
func TestHTTPSessionCap(t *testing.T) {
	f := newFixture(t, surface.Flat, ApproveDeny, gate.Config{}, Config{MaxSessions: 2})
	url, _ := httpFixture(t, f)
	a, err := httpConnect(t, url)
	if err != nil {
		t.Fatal(err)
	}
	b, err := httpConnect(t, url)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	resp, body := postInit(t, url, `"third"`)
	var m struct {
		ID    any `json:"id"`
		Error struct {
			Code    int
			Message string
		}
	}
	if err := json.Unmarshal(body, &m); err != nil || resp.StatusCode != http.StatusServiceUnavailable || m.ID != "third" ||
		m.Error.Code != CodeUnavailable || !strings.Contains(m.Error.Message, "limit of 2 sessions") {
		t.Fatalf("the third session: %s %s (%v)", resp.Status, body, err)
	}
	if _, err := httpConnect(t, url); err == nil {
		t.Fatal("the SDK's client got a third session")
	}
	a.Close() // DELETE: the session ends
	deadline := time.Now().Add(5 * time.Second)
	for f.srv.liveSessions() > 1 {
		if time.Now().After(deadline) {
			t.Fatalf("%d sessions live after one of two ended", f.srv.liveSessions())
		}
		time.Sleep(20 * time.Millisecond)
	}
	c, err := httpConnect(t, url)
	if err != nil {
		t.Fatalf("after a session ended: %v", err)
	}
	c.Close()
}

// TestHTTPSessionIdle: a session with no request for SessionIdle is
// closed; its client's next request gets 404.
func TestHTTPSessionIdle(t *testing.T) {
	f := newFixture(t, surface.Flat, ApproveDeny, gate.Config{}, Config{SessionIdle: 200 * time.Millisecond})
	url, _ := httpFixture(t, f)
	cs, err := httpConnect(t, url)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if _, err := cs.ListTools(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for f.srv.liveSessions() > 0 {
		if time.Now().After(deadline) {
			t.Fatal("the idle session was not closed")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := cs.ListTools(context.Background(), nil); err == nil {
		t.Fatal("an expired session was served")
	}
}

// TestHTTPRequestGoneCancelsCall: a call whose HTTP request ends before
// its answer is cancelled and recorded so; the server goes on.
func TestHTTPRequestGoneCancelsCall(t *testing.T) {
	slow := slowSearch{started: make(chan struct{}), release: make(chan struct{})}
	f := newFixture(t, surface.Flat, ApproveDeny, gate.Config{Tools: append(tools.ReadTools(), slow)}, Config{})
	url, stop := httpFixture(t, f)
	cs, err := httpConnect(t, url)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	rctx, rcancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		// The raw POST, so that ending it sends no notifications/cancelled.
		req, _ := http.NewRequestWithContext(rctx, "POST", url, strings.NewReader(slowCallLine))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", cs.ID())
		req.Header.Set("Mcp-Protocol-Version", cs.InitializeResult().ProtocolVersion)
		resp, err := httpClient().Do(req)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		errc <- err
	}()
	<-slow.started
	rcancel()
	<-errc
	deadline := time.Now().Add(5 * time.Second)
	for len(f.rec.calls(t)) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the abandoned call was not cancelled")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if recs := f.rec.calls(t); recs[0].Reason != string(tools.ReasonCancelled) {
		t.Fatalf("recorded %+v", recs[0])
	}
	if r := callTool(t, cs, "file_read", `{"path":"f.txt"}`); r.IsError {
		t.Fatalf("after the abandoned call: %v", text(r))
	}
	if err := stop(); !errors.Is(err, context.Canceled) {
		t.Fatalf("ServeStreamable: %v", err)
	}
	if n := f.srv.CancelledAtStop(); n != 0 {
		t.Fatalf("CancelledAtStop %d: the abandoned call was not the stop's", n)
	}
}

// TestHTTPStopAnswersCallInFlight: stopping the HTTP server cancels the
// call in flight and its client still gets the cancelled answer.
func TestHTTPStopAnswersCallInFlight(t *testing.T) {
	slow := slowSearch{started: make(chan struct{}), release: make(chan struct{})}
	f := newFixture(t, surface.Flat, ApproveDeny, gate.Config{Tools: []tools.Tool{slow}}, Config{})
	url, stop := httpFixture(t, f)
	cs, err := httpConnect(t, url)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	type answer struct {
		r   *sdk.CallToolResult
		err error
	}
	ac := make(chan answer, 1)
	go func() {
		r, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "search", Arguments: json.RawMessage(`{"pattern":"x"}`)})
		ac <- answer{r, err}
	}()
	<-slow.started
	if err := stop(); !errors.Is(err, context.Canceled) {
		t.Fatalf("ServeStreamable: %v", err)
	}
	a := <-ac
	if a.err != nil {
		t.Fatalf("the call in flight got no answer: %v", a.err)
	}
	b, _ := json.Marshal(a.r)
	var m map[string]any
	json.Unmarshal(b, &m)
	if o := structured(t, map[string]any{"result": m}); o["reason"] != "cancelled" {
		t.Fatalf("answer %v", o)
	}
	if n := f.srv.CancelledAtStop(); n != 1 {
		t.Fatalf("CancelledAtStop %d, want 1", n)
	}
}
