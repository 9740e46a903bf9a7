package mcp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/b10x/harness/gate"
	"github.com/b10x/harness/surface"
	"github.com/b10x/harness/tools"
)

const (
	initLine  = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	initdLine = `{"jsonrpc":"2.0","method":"notifications/initialized"}`
	listLine  = `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`
	callLine  = `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"file_read","arguments":{"path":"f.txt"}}}`
)

// stdio is one ServeStdio session driven line by line.
type stdio struct {
	t    *testing.T
	in   *io.PipeWriter
	out  *bufio.Reader
	done chan error
}

func serveStdio(t *testing.T, srv *Server) *stdio {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	s := &stdio{t: t, in: inW, out: bufio.NewReader(outR), done: make(chan error, 1)}
	go func() {
		err := srv.ServeStdio(context.Background(), inR, outW)
		outW.Close()
		s.done <- err
	}()
	t.Cleanup(func() { inW.Close(); io.Copy(io.Discard, outR) })
	return s
}

func (s *stdio) send(line string) {
	s.t.Helper()
	if _, err := io.WriteString(s.in, line+"\n"); err != nil {
		s.t.Fatal(err)
	}
}

// recv reads one response (skipping notifications).
func (s *stdio) recv() map[string]any {
	s.t.Helper()
	for {
		l, err := s.out.ReadBytes('\n')
		if err != nil {
			s.t.Fatalf("reading a response: %v", err)
		}
		var m map[string]any
		if err := json.Unmarshal(l, &m); err != nil {
			s.t.Fatalf("response %q: %v", l, err)
		}
		if _, ok := m["id"]; ok {
			return m
		}
	}
}

// end returns ServeStdio's error, failing when it does not return.
func (s *stdio) end() error {
	s.t.Helper()
	go io.Copy(io.Discard, s.out)
	select {
	case err := <-s.done:
		return err
	case <-time.After(10 * time.Second):
		s.t.Fatal("ServeStdio did not return")
		return nil
	}
}

func TestStdioSession(t *testing.T) {
	f := newFixture(t, surface.Flat, ApproveDeny, gate.Config{}, Config{})
	s := serveStdio(t, f.srv)
	// A call before initialize is a protocol error.
	s.send(listLine)
	if r := s.recv(); r["error"] == nil {
		t.Fatalf("tools/list before initialize: %v", r)
	}
	s.send(initLine)
	if r := s.recv(); r["result"] == nil {
		t.Fatal(r)
	}
	s.send(initdLine)
	s.send(callLine)
	r := s.recv()
	res, _ := r["result"].(map[string]any)
	if sc := wireOutcome(res); sc["status"] != "executed" || !strings.Contains(wireText(res), "hello") {
		t.Fatal(r)
	}
	for _, bad := range []string{
		`{"jsonrpc":"2.0","id":4,"method":"no/such/method"}`,
		`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":7}}`,
		`{"jsonrpc":"2.0","id":6,"method":"tools/call","params":"x"}`,
		`{"jsonrpc":"2.0","id":7,"method":"tools/call"}`,
		`{"jsonrpc":"2.0","id":8,"method":"initialize","params":{}}`,
	} {
		s.send(bad)
		if r := s.recv(); r["error"] == nil {
			t.Errorf("%s: %v", bad, r)
		}
	}
	// The session survived all of it.
	s.send(strings.Replace(callLine, `"id":3`, `"id":9`, 1))
	if r := s.recv(); r["result"] == nil {
		t.Fatal(r)
	}
	s.in.Close()
	if err := s.end(); err != nil {
		t.Fatalf("clean end of input: %v", err)
	}
	if n := len(f.rec.calls(t)); n != 2 {
		t.Fatalf("%d calls recorded", n)
	}
}

func TestStdioMalformedEnds(t *testing.T) {
	for _, bad := range []string{"not json", `{"jsonrpc":"2.0","id":1,"method":`, `[]`, `{"id":1}x`} {
		f := newFixture(t, surface.Flat, ApproveDeny, gate.Config{}, Config{})
		s := serveStdio(t, f.srv)
		s.send(initLine)
		s.recv()
		s.send(bad)
		s.in.Close()
		if err := s.end(); err == nil {
			t.Errorf("%q: the session ended without an error", bad)
		}
	}
}

func TestStdioMessageOverCap(t *testing.T) {
	const max = 64 << 10
	f := newFixture(t, surface.Flat, ApproveDeny, gate.Config{}, Config{MaxMessage: max})
	s := serveStdio(t, f.srv)
	s.send(initLine)
	s.recv()
	s.send(initdLine)
	// A message under the cap is served.
	s.send(strings.Replace(callLine, `"f.txt"`, `"`+strings.Repeat("a", max/2)+`"`, 1))
	if r := s.recv(); r["result"] == nil {
		t.Fatal(r)
	}
	// One over it ends the session with an error before it is read whole:
	// the writer of an endless line is cut off.
	go func() {
		io.WriteString(s.in, `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"file_read","arguments":{"path":"`)
		chunk := bytes.Repeat([]byte("a"), 32<<10)
		for {
			if _, err := s.in.Write(chunk); err != nil {
				return
			}
		}
	}()
	err := s.end()
	if err == nil || !strings.Contains(err.Error(), "maximum") {
		t.Fatalf("ServeStdio: %v", err)
	}
	s.in.CloseWithError(io.ErrClosedPipe)
}

// serveLines writes lines to a real pipe, closes its write end at once
// and returns what ServeStdio answered, by id, and its error.
func serveLines(t *testing.T, srv *Server, lines ...string) (map[string]map[string]any, error) {
	t.Helper()
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer inR.Close()
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer outR.Close()
	done := make(chan error, 1)
	go func() {
		err := srv.ServeStdio(context.Background(), inR, outW)
		outW.Close()
		done <- err
	}()
	if _, err := io.WriteString(inW, strings.Join(lines, "\n")+"\n"); err != nil {
		t.Fatal(err)
	}
	inW.Close()
	got := map[string]map[string]any{}
	sc := bufio.NewScanner(outR)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("output line %q: %v", sc.Bytes(), err)
		}
		if id, ok := m["id"]; ok && m["method"] == nil {
			got[fmt.Sprint(id)] = m
		}
	}
	select {
	case err := <-done:
		return got, err
	case <-time.After(20 * time.Second):
		t.Fatal("ServeStdio did not return after the end of its input")
		return nil, nil
	}
}

// TestStdioAnswersEveryRequestBeforeEOF: a client that writes its requests
// and closes its end at once gets an answer to each of them, and the calls
// are recorded, before ServeStdio returns. The end of input stops the
// server: a call still running then is cancelled (and answered so), and
// CancelledAtStop counts it.
func TestStdioAnswersEveryRequestBeforeEOF(t *testing.T) {
	f := newFixture(t, surface.Flat, ApproveDeny, gate.Config{}, Config{})
	got, err := serveLines(t, f.srv, initLine, initdLine, listLine, callLine,
		strings.Replace(callLine, `"id":3`, `"id":"four"`, 1),
		`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"file_write","arguments":{"path":"n.txt","content":"x"}}}`,
		`{"jsonrpc":"2.0","id":6,"method":"no/such/method"}`)
	if err != nil {
		t.Fatalf("ServeStdio: %v", err)
	}
	for _, id := range []string{"1", "2", "3", "four", "5", "6"} {
		if got[id] == nil {
			t.Errorf("request %s went unanswered; answers: %v", id, got)
		}
	}
	cancelled := 0
	for _, id := range []string{"3", "four"} {
		switch sc := structured(t, got[id]); {
		case sc["status"] == "executed":
		case sc["reason"] == "cancelled":
			cancelled++
		default:
			t.Errorf("call %s: %v", id, got[id])
		}
	}
	if sc := structured(t, got["5"]); sc["reason"] != "approval_rejected" {
		t.Errorf("call 5: %v", got["5"])
	}
	if got["6"]["error"] == nil {
		t.Errorf("unknown method: %v", got["6"])
	}
	if n := len(f.rec.calls(t)); n != 3 {
		t.Errorf("%d calls recorded, want 3", n)
	}
	if n := f.srv.CancelledAtStop(); n != cancelled {
		t.Errorf("CancelledAtStop %d, %d answered cancelled", n, cancelled)
	}
}

// TestStdioEOFRefusesPendingApproval: at the end of input, an approval the
// server is still waiting for can never be answered; the call is refused
// at once (not after the approval timeout) and the refusal is answered.
func TestStdioEOFRefusesPendingApproval(t *testing.T) {
	a, _ := NewApprover(ApproveAuto, time.Hour)
	f := newFixtureWith(t, a)
	start := time.Now()
	got, err := serveLines(t, f.srv,
		strings.Replace(initLine, `"capabilities":{}`, `"capabilities":{"elicitation":{}}`, 1), initdLine,
		`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"file_write","arguments":{"path":"n.txt","content":"x"}}}`)
	if err != nil {
		t.Fatalf("ServeStdio: %v", err)
	}
	if el := time.Since(start); el > 10*time.Second {
		t.Errorf("took %s", el)
	}
	res, _ := got["5"]["result"].(map[string]any)
	if sc := wireOutcome(res); sc["reason"] != "approval_rejected" {
		t.Fatalf("call 5: %v", got)
	}
	if _, err := os.Stat(filepath.Join(f.dir, "n.txt")); !os.IsNotExist(err) {
		t.Error("the unapproved write wrote")
	}
	if recs := f.rec.calls(t); len(recs) != 1 || recs[0].Reason != string(tools.ReasonApprovalRejected) {
		t.Errorf("recorded %+v", recs)
	}
}

// TestStdioEOFWaitEndsWithContext: a request still unanswered at the end of input
// does not hold ServeStdio past its context.
func TestStdioEOFWaitEndsWithContext(t *testing.T) {
	p := newPending()
	p.incoming["n1"] = true
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	d := &drainReader{ctx: ctx, r: strings.NewReader(""), p: p, max: 1 << 20}
	if n, err := d.Read(make([]byte, 10)); n != 0 || err != io.EOF {
		t.Fatalf("%d %v", n, err)
	}
	if ctx.Err() == nil {
		t.Fatal("EOF before the context ended, with a request unanswered")
	}
}

// wireOutcome is a tools/call result's outcome as decoded JSON: its
// _meta[OutcomeMeta] (nil when absent).
func wireOutcome(res map[string]any) map[string]any {
	meta, _ := res["_meta"].(map[string]any)
	o, _ := meta[OutcomeMeta].(map[string]any)
	return o
}

// wireText is the text of a tools/call result's first content block.
func wireText(res map[string]any) string {
	content, _ := res["content"].([]any)
	if len(content) == 0 {
		return ""
	}
	c, _ := content[0].(map[string]any)
	s, _ := c["text"].(string)
	return s
}
