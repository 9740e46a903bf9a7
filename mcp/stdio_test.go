package mcp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/b10x/harness/gate"
	"github.com/b10x/harness/surface"
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
	if sc, _ := res["structuredContent"].(map[string]any); sc["status"] != "executed" || !strings.Contains(sc["result"].(string), "hello") {
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
