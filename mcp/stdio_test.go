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

// rawAnswer reads up to the next line that answers a request (skipping
// notifications) and returns it as written.
func (s *stdio) rawAnswer() []byte {
	s.t.Helper()
	for {
		l, err := s.out.ReadBytes('\n')
		if err != nil {
			s.t.Fatalf("reading an answer: %v", err)
		}
		var m map[string]any
		if err := json.Unmarshal(l, &m); err != nil {
			s.t.Fatalf("answer %q: %v", l, err)
		}
		if _, ok := m["method"]; !ok {
			return l
		}
	}
}

// TestStdioBadInputAnswered: every line that is not a usable JSON-RPC
// message is answered with the error the specification gives it, with id
// null unless the line has a valid one, and the session carries on: the
// request after each is answered.
func TestStdioBadInputAnswered(t *testing.T) {
	deep := `{"jsonrpc":"2.0","id":10,"method":"ping","params":{"a":` + strings.Repeat("[", 999) + strings.Repeat("]", 999) + `}}`
	cases := []struct {
		line string
		code float64
		id   string // the answer's id, as written
	}{
		{"not json", codeParseError, "null"},
		{`{"jsonrpc":"2.0","id":1,"method":`, codeParseError, "null"},
		{`{"id":1}x`, codeParseError, "null"},
		{"\x00\x01\xfe binary", codeParseError, "null"},
		{`{"jsonrpc":"2.0","id":2,"method":"ping"}` + "\x00", codeParseError, "null"},
		{`{"jsonrpc":"2.0","id":11,"method":"ping","params":{"x":"` + "\xff" + `"}}`, codeParseError, "null"},
		{deep, codeParseError, "null"},
		{`[]`, codeInvalidRequest, "null"},
		{`[{"jsonrpc":"2.0","id":5,"method":"ping"}]`, codeInvalidRequest, "null"},
		{`"a string"`, codeInvalidRequest, "null"},
		{`{"jsonrpc":"1.0","id":7,"method":"ping"}`, codeInvalidRequest, "7"},
		{`{"id":7,"method":"ping"}`, codeInvalidRequest, "7"},
		{`{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}`, codeInvalidRequest, "null"},
		{`{"jsonrpc":"2.0","id":[1],"method":"ping"}`, codeInvalidRequest, "null"},
		{`{"jsonrpc":"2.0","id":true,"method":"ping"}`, codeInvalidRequest, "null"},
		{`{"jsonrpc":"2.0","id":null,"method":"ping"}`, codeInvalidRequest, "null"},
		{`{"jsonrpc":"2.0","id":8,"method":5}`, codeInvalidRequest, "8"},
		{`{"jsonrpc":"2.0","id":"nine"}`, codeInvalidRequest, `"nine"`},
	}
	f := newFixture(t, surface.Flat, ApproveDeny, gate.Config{}, Config{})
	s := serveStdio(t, f.srv)
	s.send(initLine)
	s.recv()
	s.send(initdLine)
	for i, c := range cases {
		s.send(c.line)
		var m struct {
			ID    json.RawMessage
			Error struct{ Code float64 }
		}
		l := s.rawAnswer()
		if err := json.Unmarshal(l, &m); err != nil || m.Error.Code != c.code || string(m.ID) != c.id {
			t.Errorf("%.60q: answered %s, want code %v and id %s", c.line, l, c.code, c.id)
		}
		s.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":"after-%d","method":"ping"}`, i))
		if l := s.rawAnswer(); !bytes.Contains(l, []byte(fmt.Sprintf(`"id":"after-%d","result":{}`, i))) {
			t.Fatalf("after %.60q: %s", c.line, l)
		}
	}
	s.in.Close()
	if err := s.end(); err != nil {
		t.Fatalf("ServeStdio: %v", err)
	}
}

// TestStdioBeforeInitialize: a request before initialize and a second
// initialize are invalid requests (-32600), not the SDK's code 0.
func TestStdioBeforeInitialize(t *testing.T) {
	f := newFixture(t, surface.Flat, ApproveDeny, gate.Config{}, Config{})
	s := serveStdio(t, f.srv)
	s.send(listLine)
	if l := s.rawAnswer(); !bytes.HasPrefix(l, []byte(`{"jsonrpc":"2.0","id":2,"error":{"code":-32600,`)) {
		t.Errorf("tools/list before initialize: %s", l)
	}
	s.send(initLine)
	s.recv()
	s.send(strings.Replace(initLine, `"id":1`, `"id":9`, 1))
	if l := s.rawAnswer(); !bytes.HasPrefix(l, []byte(`{"jsonrpc":"2.0","id":9,"error":{"code":-32600,`)) {
		t.Errorf("a second initialize: %s", l)
	}
}

// TestStdioIDsAsWritten: an answer carries its request's id exactly as the
// client wrote it, whatever the number, and a string id with escapes.
func TestStdioIDsAsWritten(t *testing.T) {
	f := newFixture(t, surface.Flat, ApproveDeny, gate.Config{}, Config{})
	s := serveStdio(t, f.srv)
	s.send(initLine)
	s.recv()
	s.send(initdLine)
	for _, id := range []string{`1.5`, `1e30`, `-0`, `12345678901234567890`, `-7`, `0.1e-3`, `"x"`, `"b10x-1"`, `"a\u0062"`, `""`} {
		s.send(`{"jsonrpc":"2.0","id":` + id + `,"method":"ping"}`)
		if l := s.rawAnswer(); !bytes.HasPrefix(l, []byte(`{"jsonrpc":"2.0","id":`+id+`,"result":{}}`)) {
			t.Errorf("id %s answered %s", id, l)
		}
	}
	// A call's answer too.
	s.send(strings.Replace(callLine, `"id":3`, `"id":3.25`, 1))
	if l := s.rawAnswer(); !bytes.HasPrefix(l, []byte(`{"jsonrpc":"2.0","id":3.25,"result":{`)) {
		t.Errorf("tools/call id 3.25 answered %s", l)
	}
}

// TestStdioDuplicateIDInFlight: a request whose id is in flight is refused
// with that id, and the request in flight goes on; once answered, its id
// may be used again. A notifications/cancelled names a request by the
// client's id and cancels it.
func TestStdioDuplicateIDInFlight(t *testing.T) {
	slow := slowSearch{started: make(chan struct{}), release: make(chan struct{})}
	f := newFixture(t, surface.Flat, ApproveDeny, gate.Config{Tools: append(tools.ReadTools(), slow)}, Config{})
	s := serveStdio(t, f.srv)
	s.send(initLine)
	s.recv()
	s.send(initdLine)
	search := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"search","arguments":{"pattern":"x"}}}`
	s.send(search)
	<-slow.started
	s.send(strings.Replace(callLine, `"id":3`, `"id":7`, 1))
	if l := s.rawAnswer(); !bytes.HasPrefix(l, []byte(`{"jsonrpc":"2.0","id":7,"error":{"code":-32600,`)) {
		t.Fatalf("a second request with id 7 in flight: %s", l)
	}
	close(slow.release)
	if l := s.rawAnswer(); !bytes.HasPrefix(l, []byte(`{"jsonrpc":"2.0","id":7,"result":{`)) || !bytes.Contains(l, []byte(`"done"`)) {
		t.Fatalf("the search's answer: %s", l)
	}
	s.send(strings.Replace(callLine, `"id":3`, `"id":7`, 1))
	if l := s.rawAnswer(); !bytes.HasPrefix(l, []byte(`{"jsonrpc":"2.0","id":7,"result":{`)) {
		t.Fatalf("id 7 once free again: %s", l)
	}

	slow2 := slowSearch{started: make(chan struct{}), release: make(chan struct{})}
	f = newFixture(t, surface.Flat, ApproveDeny, gate.Config{Tools: []tools.Tool{slow2}}, Config{})
	s = serveStdio(t, f.srv)
	s.send(initLine)
	s.recv()
	s.send(initdLine)
	s.send(strings.Replace(search, `"id":7`, `"id":"c-1"`, 1))
	<-slow2.started
	s.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"c-1","reason":"the user pressed Esc"}}`)
	deadline := time.Now().Add(5 * time.Second)
	for len(f.rec.calls(t)) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the cancelled call was not recorded")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if recs := f.rec.calls(t); recs[0].Reason != string(tools.ReasonCancelled) {
		t.Fatalf("recorded %+v", recs[0])
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
	// One over it is skipped, never held whole, and answered; the session
	// goes on.
	go func() {
		io.WriteString(s.in, `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"file_read","arguments":{"path":"`)
		chunk := bytes.Repeat([]byte("a"), 32<<10)
		for range 8 {
			s.in.Write(chunk)
		}
		io.WriteString(s.in, `"}}}`+"\n")
		s.send(listLine)
	}()
	if l := s.rawAnswer(); !bytes.HasPrefix(l, []byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,`)) || !bytes.Contains(l, []byte("more than 65536 bytes")) {
		t.Fatalf("the message over the cap: %s", l)
	}
	if r := s.recv(); r["id"] != float64(2) || r["result"] == nil {
		t.Fatalf("after the message over the cap: %v", r)
	}
	if n := len(f.rec.calls(t)); n != 1 {
		t.Fatalf("%d calls recorded, want 1", n)
	}
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
