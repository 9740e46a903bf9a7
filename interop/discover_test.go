package interop

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

// claudeDiscover is the server/discover request Claude Code 2.1.332 sends
// before initialize (SEP-2575, protocol 2026-07-28), as TestClaudeCode's
// tee logged it.
const claudeDiscover = `{"jsonrpc":"2.0","id":"server-discover-probe-1","method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"claude-code","title":"Claude Code","version":"2.1.332","description":"Anthropic's agentic coding tool","websiteUrl":"https://claude.com/claude-code"},"io.modelcontextprotocol/clientCapabilities":{"roots":{"listChanged":true},"elicitation":{"form":{},"url":{}}}}}}`

func initializeAt(version string) string {
	return `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"` + version + `","capabilities":{},"clientInfo":{"name":"b10x-interop-raw","version":"1"}}}`
}

// TestServerDiscoverStdio plays Claude Code's opening to the real binary
// over stdio, message by message: server/discover at 2026-07-28 is
// answered -32022 (unsupported protocol version, the versions the harness
// speaks in its data), a server/discover without the new protocol's _meta
// -32601 (no such method in the versions it speaks); the session carries
// on: initialize at 2025-11-25 settles on 2025-11-25, a call runs, the
// record holds the call and nothing of the discovery, and the end is a
// normal one. initialize at 2026-07-28 itself settles on 2025-11-25.
func TestServerDiscoverStdio(t *testing.T) {
	clientPath(t, "claude") // the request is Claude Code's own
	f := newFixture(t)
	s := startRaw(t, f)
	h := handshake{discover: true, discoverVersion: "2026-07-28", version: "2025-11-25"}
	h.discoverError = s.ask(t, claudeDiscover).Error
	checkDiscover(t, h)
	if e := s.ask(t, `{"jsonrpc":"2.0","id":2,"method":"server/discover"}`).Error; e == nil || e.Code != -32601 {
		t.Errorf("server/discover without _meta was answered %+v; want -32601", e)
	}
	if v := s.initialize(t, "2025-11-25"); v != "2025-11-25" {
		t.Errorf("initialize at 2025-11-25 after server/discover settled on %q", v)
	}
	s.send(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	r := s.ask(t, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"file_read","arguments":{"path":"hello.txt"}}}`)
	var res struct {
		Content []struct{ Text string } `json:"content"`
	}
	if r.Error != nil || json.Unmarshal(r.Result, &res) != nil || len(res.Content) != 1 || res.Content[0].Text != helloText {
		t.Errorf("file_read after the discovery: %+v %s", r.Error, r.Result)
	}
	s.end(t)
	checkEnd(t, f, "client_closed")
	var events []string
	for _, l := range f.recordLines(t) {
		events = append(events, str(l["event"]))
	}
	if !slices.Equal(events, []string{"run_start", "intent", "call", "run_end"}) {
		t.Errorf("the record's lines: %v; want the one call's only", events)
	}

	// A client that asks initialize at 2026-07-28 gets the newest version
	// the harness speaks, as initialize negotiates.
	f2 := newFixture(t)
	s2 := startRaw(t, f2)
	if v := s2.initialize(t, "2026-07-28"); v != "2025-11-25" {
		t.Errorf("initialize at 2026-07-28 settled on %q; want 2025-11-25", v)
	}
	s2.end(t)
}

// TestServerDiscoverHTTP: over streamable HTTP, server/discover at
// 2026-07-28 (with the headers SEP-2575 asks for) is answered HTTP 400
// with the same JSON-RPC error and opens no session: under --max-sessions
// 1, three of them, then initialize gets the one session.
func TestServerDiscoverHTTP(t *testing.T) {
	clientPath(t, "claude")
	f := newFixture(t)
	h := startHTTP(t, f, "--max-sessions", "1")
	post := func(body string, header map[string]string) (*http.Response, []byte) {
		t.Helper()
		req, _ := http.NewRequest("POST", h.url, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+h.token)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, b
	}
	for range 3 {
		resp, b := post(claudeDiscover, map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "server/discover"})
		var m message
		if resp.StatusCode != http.StatusBadRequest || resp.Header.Get("Mcp-Session-Id") != "" || json.Unmarshal(b, &m) != nil {
			t.Fatalf("server/discover over HTTP: %s, session %q: %s", resp.Status, resp.Header.Get("Mcp-Session-Id"), b)
		}
		checkDiscover(t, handshake{discover: true, discoverVersion: "2026-07-28", discoverError: m.Error, version: "2025-11-25"})
	}
	resp, b := post(initializeAt("2025-11-25"), nil)
	var m message
	for _, l := range strings.Split(string(b), "\n") {
		if d, ok := strings.CutPrefix(l, "data: "); ok {
			_ = json.Unmarshal([]byte(d), &m)
		}
	}
	var r struct{ ProtocolVersion string }
	_ = json.Unmarshal(m.Result, &r)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Mcp-Session-Id") == "" || r.ProtocolVersion != "2025-11-25" {
		t.Errorf("initialize after three server/discover, under --max-sessions 1: %s, session %q: %s", resp.Status, resp.Header.Get("Mcp-Session-Id"), b)
	}
	h.stop(t)
	checkEnd(t, f, "stopped")
}

// rawSession is the harness over stdio, spoken to line by line.
type rawSession struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Reader
	stderr *syncBuf
}

func startRaw(t *testing.T, f *fixture) *rawSession {
	t.Helper()
	s := &rawSession{cmd: exec.Command(f.harness, f.mcpArgs()...), stderr: &syncBuf{}}
	s.cmd.Stderr = s.stderr
	var err error
	if s.in, err = s.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	out, err := s.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	s.out = bufio.NewReaderSize(out, 1<<20)
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if s.cmd.ProcessState == nil {
			_ = s.cmd.Process.Kill()
			_ = s.cmd.Wait()
		}
	})
	return s
}

func (s *rawSession) send(t *testing.T, line string) {
	t.Helper()
	if _, err := io.WriteString(s.in, line+"\n"); err != nil {
		t.Fatalf("writing %s: %v", line, err)
	}
}

// ask sends a request and returns the answer carrying its id (within 10 s).
func (s *rawSession) ask(t *testing.T, req string) message {
	t.Helper()
	var r message
	if err := json.Unmarshal([]byte(req), &r); err != nil {
		t.Fatal(err)
	}
	s.send(t, req)
	got := make(chan message, 1)
	go func() {
		for {
			b, err := s.out.ReadBytes('\n')
			if err != nil {
				close(got)
				return
			}
			var m message
			if json.Unmarshal(b, &m) == nil && m.Method == "" && bytes.Equal(m.ID, r.ID) {
				got <- m
				return
			}
		}
	}()
	select {
	case m, ok := <-got:
		if !ok {
			t.Fatalf("the harness ended before answering %s; stderr:\n%s", req, s.stderr)
		}
		return m
	case <-time.After(10 * time.Second):
		t.Fatalf("no answer to %s; stderr:\n%s", req, s.stderr)
	}
	panic("unreachable")
}

// initialize asks initialize at version and returns the version the
// harness settled on.
func (s *rawSession) initialize(t *testing.T, version string) string {
	t.Helper()
	m := s.ask(t, initializeAt(version))
	var r struct{ ProtocolVersion string }
	if m.Error != nil || json.Unmarshal(m.Result, &r) != nil {
		t.Fatalf("initialize at %s: %+v %s", version, m.Error, m.Result)
	}
	return r.ProtocolVersion
}

// end closes stdin, the stdio transport's shutdown, and asserts exit 0.
func (s *rawSession) end(t *testing.T) {
	t.Helper()
	_ = s.in.Close()
	done := make(chan error, 1)
	go func() { done <- s.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("the harness: %v; stderr:\n%s", err, s.stderr)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the harness did not exit; stderr:\n%s", s.stderr)
	}
}
