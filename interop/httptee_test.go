package interop

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// httpTee is the tee of an HTTP client: a reverse proxy on a loopback
// port in front of `mcp --listen`, which logs every JSON-RPC message each
// way as the stdio tee does ("in": a request body, "out": a JSON answer or
// each event of an SSE stream; "http": each request's method and status
// once it is answered, as "DELETE 204"), so that readHandshake and checkWireResults
// read an HTTP session as they read a stdio one. Headers pass unchanged,
// the bearer token among them: the harness still decides who may in.
type httpTee struct {
	url   string
	start time.Time
	mu    sync.Mutex
	evs   []wireEvent
}

// startHTTPTee proxies to the harness at target (h.url), until the end of
// the test.
func startHTTPTee(t *testing.T, target string) *httpTee {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	tee := &httpTee{start: time.Now()}
	proxy := &httputil.ReverseProxy{
		Rewrite:       func(r *httputil.ProxyRequest) { r.SetURL(u) },
		FlushInterval: -1, // SSE events pass as they come
		ModifyResponse: func(resp *http.Response) error {
			switch ct := resp.Header.Get("Content-Type"); {
			case strings.HasPrefix(ct, "text/event-stream"):
				resp.Body = &sseTee{ReadCloser: resp.Body, tee: tee}
			case strings.HasPrefix(ct, "application/json"):
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				tee.note("out", b)
				resp.Body = io.NopCloser(bytes.NewReader(b))
				if err != nil {
					return err
				}
			}
			return nil
		},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil {
			b, err := io.ReadAll(r.Body)
			r.Body.Close()
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			if len(bytes.TrimSpace(b)) > 0 {
				tee.note("in", b)
			}
			r.Body = io.NopCloser(bytes.NewReader(b))
		}
		sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
		proxy.ServeHTTP(sw, r)
		tee.note("http", []byte(r.Method+" "+strconv.Itoa(sw.code)))
	}))
	t.Cleanup(srv.Close)
	tee.url = srv.URL + u.Path
	return tee
}

// note logs one message (Line when it is JSON, Text otherwise).
func (tee *httpTee) note(dir string, b []byte) {
	b = bytes.TrimSpace(b)
	ev := wireEvent{Dir: dir}
	if json.Valid(b) {
		ev.Line = append(json.RawMessage(nil), b...)
	} else {
		ev.Text = string(b)
	}
	tee.mu.Lock()
	defer tee.mu.Unlock()
	ev.MS = time.Since(tee.start).Milliseconds()
	tee.evs = append(tee.evs, ev)
}

// events is what the tee has logged so far.
func (tee *httpTee) events() []wireEvent {
	tee.mu.Lock()
	defer tee.mu.Unlock()
	return append([]wireEvent(nil), tee.evs...)
}

// sseTee logs the data of each event of an SSE stream as it is read.
type sseTee struct {
	io.ReadCloser
	tee        *httpTee
	line, data []byte
}

func (s *sseTee) Read(p []byte) (int, error) {
	n, err := s.ReadCloser.Read(p)
	for _, c := range p[:n] {
		if c != '\n' {
			s.line = append(s.line, c)
			continue
		}
		l := bytes.TrimSuffix(s.line, []byte("\r"))
		s.line = s.line[:0]
		switch {
		case len(l) == 0: // the end of an event
			if len(s.data) > 0 {
				s.tee.note("out", s.data)
			}
			s.data = nil
		case bytes.HasPrefix(l, []byte("data:")):
			d := bytes.TrimPrefix(bytes.TrimPrefix(l, []byte("data:")), []byte(" "))
			if len(s.data) > 0 {
				s.data = append(s.data, '\n')
			}
			s.data = append(s.data, d...)
		}
	}
	return n, err
}

// statusWriter keeps the status a handler wrote.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (s *statusWriter) WriteHeader(code int) {
	s.code = code
	s.ResponseWriter.WriteHeader(code)
}

// Flush passes SSE events on as the proxy flushes them.
func (s *statusWriter) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// requests is the method and status of each request, in the order they
// were answered.
func (tee *httpTee) requests() []string {
	var out []string
	for _, ev := range tee.events() {
		if ev.Dir == "http" {
			out = append(out, ev.Text)
		}
	}
	return out
}
