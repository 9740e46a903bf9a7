package mcp

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/b10x/harness/gate"
	"github.com/b10x/harness/surface"
)

// FuzzServer drives ServeStdio with arbitrary input: it must neither panic
// nor hang, whatever the bytes (an approval waiting for an answer that
// never comes included: the end of input ends it).
func FuzzServer(f *testing.F) {
	elicitInit := strings.Replace(initLine, `"capabilities":{}`, `"capabilities":{"elicitation":{}}`, 1)
	write := `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"file_write","arguments":{"path":"n.txt","content":"x"},"_meta":{"progressToken":1}}}`
	for _, seed := range []string{
		initLine + "\n" + initdLine + "\n" + listLine + "\n" + callLine + "\n",
		elicitInit + "\n" + initdLine + "\n" + write + "\n",
		elicitInit + "\n" + initdLine + "\n" + write + "\n" + `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":5}}` + "\n",
		initLine + "\n" + `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"nope","arguments":null}}` + "\n",
		initLine + "\n" + `[` + listLine + `,` + callLine + `]` + "\n",
		callLine + "\n",
		"\n\n{}\n",
	} {
		f.Add([]byte(seed))
	}
	fx := newFixture(f, surface.Flat, ApproveAuto, gate.Config{Recorder: gate.NewRecorder(io.Discard)}, Config{MaxMessage: 1 << 20})
	f.Fuzz(func(t *testing.T, data []byte) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		done := make(chan struct{})
		go func() {
			defer close(done)
			fx.srv.ServeStdio(ctx, bytes.NewReader(data), io.Discard)
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("ServeStdio did not end on %q", data)
		}
	})
}

// FuzzStdioFraming: whatever lines come first, a well-formed request after
// them is answered (JSON-RPC by the book, frame.go): no input ends the
// session or makes it drop what follows.
func FuzzStdioFraming(f *testing.F) {
	for _, seed := range []string{
		"not json", `[]`, `[` + listLine + `]`, `{"jsonrpc":"1.0","id":1,"method":"ping"}`, `{"jsonrpc":"2.0","id":{},"method":"ping"}`,
		`{"jsonrpc":"2.0","id":1.5,"method":"ping"}`, `{"jsonrpc":"2.0","id":1e400,"method":"ping"}`, "\x00\xff", `{"jsonrpc":"2.0","id":1,"method":"ping"}` + "\x00",
		`{"jsonrpc":"2.0","id":"a","result":{}}`, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"zz"}}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"file_read","arguments":{"path":"f.txt"}}}`,
		`{"jsonrpc":"2.0","id":3,"method":"initialize","params":{}}`, `{"jsonrpc":"2.0","id":4,"method":"tools/list","params":[]}`,
		`{"jsonrpc":"2.0","id":5,"method":"ping","params":"\ud800"}`, `{"jsonrpc":"2.0","id":"\u0000","method":"ping"}`,
		`{"jsonrpc":"2.0","id":6,"method":"ping","jsonrpc":"1.0"}`, `{"jsonrpc":"2.0","ID":7,"Method":"ping"}`,
	} {
		f.Add([]byte(seed))
	}
	const probe = `{"jsonrpc":"2.0","id":"probe-7f3a","method":"ping"}`
	f.Fuzz(func(t *testing.T, data []byte) {
		fx := newFixture(t, surface.Flat, ApproveDeny, gate.Config{Recorder: gate.NewRecorder(io.Discard)}, Config{MaxMessage: 1 << 16})
		in := initLine + "\n" + initdLine + "\n" + string(data) + "\n" + probe + "\n"
		inR, inW := io.Pipe()
		outR, outW := io.Pipe()
		done := make(chan struct{})
		go func() {
			defer close(done)
			fx.srv.ServeStdio(context.Background(), inR, outW)
			outW.Close()
		}()
		go io.WriteString(inW, in) // stdin stays open until the probe is answered
		answered := make(chan bool, 1)
		go func() {
			sc := bufio.NewScanner(outR)
			sc.Buffer(nil, 4<<20)
			for sc.Scan() {
				if bytes.HasPrefix(sc.Bytes(), []byte(`{"jsonrpc":"2.0","id":"probe-7f3a",`)) {
					answered <- true
					io.Copy(io.Discard, outR)
					return
				}
			}
			answered <- false
		}()
		select {
		case ok := <-answered:
			if !ok {
				t.Fatalf("the session ended before answering the request after %q", data)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("the request after %q was not answered", data)
		}
		inW.Close()
		<-done
	})
}

// FuzzHTTPFraming: whatever body a client POSTs within its session (not
// JSON, a batch, a response, a request of another version, bytes past the
// size cap), a well-formed request posted after it is answered, and the
// session carries on. The handler is driven in process (no socket).
func FuzzHTTPFraming(f *testing.F) {
	for _, seed := range []string{
		"not json", `[]`, `[` + listLine + `]`, `{"jsonrpc":"1.0","id":1,"method":"ping"}`, `{"jsonrpc":"2.0","id":{},"method":"ping"}`,
		`{"jsonrpc":"2.0","id":null,"method":"ping"}`, `{"jsonrpc":"2.0","id":1e400,"method":"ping"}`, "\x00\xff", "",
		`{"jsonrpc":"2.0","id":"a","result":{}}`, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"zz"}}`,
		`{"jsonrpc":"2.0","id":3,"method":"initialize","params":{}}`, `{"jsonrpc":"2.0","id":4,"method":"tools/list","params":[]}`,
		callLine, `{"jsonrpc":"2.0","id":5,"method":"ping"}{"jsonrpc":"2.0","id":6,"method":"ping"}`,
		strings.Repeat("x", 70000),
	} {
		f.Add([]byte(seed))
	}
	const probe = `{"jsonrpc":"2.0","id":"probe-7f3a","method":"ping"}`
	fx := newFixture(f, surface.Flat, ApproveDeny, gate.Config{Recorder: gate.NewRecorder(io.Discard)}, Config{MaxMessage: 1 << 16})
	token := []byte("fuzz-token")
	h, err := fx.srv.Handler(token)
	if err != nil {
		f.Fatal(err)
	}
	// serve answers one request, or fails the input that made the server
	// hang instead of answering.
	var data []byte
	serve := func(req *http.Request) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		done := make(chan struct{})
		go func() {
			defer close(done)
			h.ServeHTTP(w, req)
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			panic(fmt.Sprintf("%s %s after a body of %q: no answer in 10 s", req.Method, req.Header.Get("Mcp-Session-Id"), data))
		}
		return w
	}
	post := func(sid, body string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+string(token))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
			req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
		}
		return serve(req)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		data = in
		init := post("", initLine)
		sid := init.Header().Get("Mcp-Session-Id")
		if init.Code != http.StatusOK || sid == "" {
			t.Fatalf("initialize: %d %q", init.Code, init.Body)
		}
		defer func() {
			req := httptest.NewRequest(http.MethodDelete, "/", nil)
			req.Header.Set("Authorization", "Bearer "+string(token))
			req.Header.Set("Mcp-Session-Id", sid)
			serve(req)
		}()
		post(sid, initdLine)
		if w := post(sid, string(data)); w.Code >= 500 {
			t.Fatalf("a body of %q got %d %q, want an answer or a 4xx", data, w.Code, w.Body)
		}
		w := post(sid, probe)
		if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"id":"probe-7f3a"`) || !strings.Contains(w.Body.String(), `"result"`) {
			t.Fatalf("the request after %q: %d %q, want its answer", data, w.Code, w.Body)
		}
	})
}
