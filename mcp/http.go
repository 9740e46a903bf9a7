package mcp

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/b10x/harness/internal/proc"
)

// The second transport: MCP streamable HTTP on a Unix socket or a loopback
// address, every request authenticated by a bearer token read from a file,
// for evaluation harnesses that reach a sandbox VM through a forwarded
// socket or port.

// MinTokenLen is the shortest bearer token ReadToken accepts, in bytes.
const MinTokenLen = 32

// ReadToken reads the bearer token from the file at path: its content with
// surrounding white space (a trailing newline) removed. It refuses a file
// that is missing, not a regular file, accessible to group or others (any
// of the mode bits 0077), empty, shorter than MinTokenLen bytes, or holding
// anything but visible ASCII (a header value cannot carry the rest). The
// errors name the file and never quote its content.
func ReadToken(path string) ([]byte, error) {
	// O_NONBLOCK: a FIFO in the token's place must be refused, not wait
	// for a writer.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("token file: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("token file: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("token file %s is not a regular file", path)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("token file %s is accessible to group or others (mode %04o); make it private: chmod 600 %s", path, perm, path)
	}
	b, err := io.ReadAll(io.LimitReader(f, 64<<10))
	if err != nil {
		return nil, fmt.Errorf("token file %s: %w", path, err)
	}
	tok := bytes.TrimSpace(b)
	switch {
	case len(tok) == 0:
		return nil, fmt.Errorf("token file %s is empty", path)
	case len(tok) < MinTokenLen:
		return nil, fmt.Errorf("token file %s holds a token of %d bytes; at least %d are needed (e.g. head -c 32 /dev/urandom | base64 > FILE)", path, len(tok), MinTokenLen)
	}
	for _, c := range tok {
		if c < 0x21 || c > 0x7e {
			return nil, fmt.Errorf("token file %s holds a character that is not visible ASCII; a bearer token is one word of printable characters", path)
		}
	}
	return tok, nil
}

// Listener is what Listen opened: a Unix socket or a TCP listener, plain
// or TLS. Close it once; the socket file it created is removed then.
type Listener struct {
	net.Listener
	name string // what String shows: unix:PATH or HOST:PORT
	path string // the socket file, "" for TCP
	id   fileID // the socket file's identity, to remove only our own
	// reaper removes the socket file when reaperEnd is closed (by Close,
	// or by the kernel when the harness dies, SIGKILL included).
	reaper *proc.Remover

	closeOnce sync.Once
	closeErr  error
}

// String is the address as a client names it: unix:/PATH or HOST:PORT
// (with the port bound, when ADDR asked for port 0).
func (l *Listener) String() string { return l.name }

// Close closes the listener and removes the socket file it created, if it
// is still the same file. The harness cannot remove it itself once it has
// confined its own writes (Landlock: removing a file needs the remove_file
// right on its directory, which would let it remove any file there), so
// the socket's reaper, started by Listen before that and never confined,
// removes it; Close waits for it. If the reaper could not be started, or
// fails, the error says so and the file stays, for the next Listen to
// replace. Close may be called more than once (ServeStreamable closes it,
// and so does its caller): the calls after the first return the first
// one's result.
func (l *Listener) Close() error {
	l.closeOnce.Do(func() { l.closeErr = l.close() })
	return l.closeErr
}

func (l *Listener) close() error {
	err := l.Listener.Close()
	if l.path == "" {
		return err
	}
	if l.reaper != nil {
		_ = l.reaper.Done()
		if id, ok := statID(l.path); !ok || id != l.id {
			return err // removed (or no longer ours)
		}
	}
	if id, ok := statID(l.path); ok && id == l.id {
		if rerr := os.Remove(l.path); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
			return fmt.Errorf("removing the socket %s: %w", l.path, rerr)
		}
	}
	return err
}

type fileID struct{ dev, ino uint64 }

func statID(path string) (fileID, bool) {
	var st syscall.Stat_t
	if syscall.Lstat(path, &st) != nil || st.Mode&syscall.S_IFMT != syscall.S_IFSOCK {
		return fileID{}, false
	}
	return fileID{uint64(st.Dev), st.Ino}, true
}

// Listen opens the listener addr names:
//
//   - "unix:PATH": a Unix socket at PATH, created with mode 0600. A PATH
//     that exists and is not a socket is refused; a socket there that no
//     one listens on (a harness's leftover) is replaced; one that answers
//     is refused.
//   - "HOST:PORT": TCP. Without tlsConf HOST must be a loopback address
//     (in 127.0.0.0/8, or ::1) or "localhost" resolving to loopback
//     addresses only (the first is bound); anything else, the empty HOST
//     (every interface) included, is refused with an error naming addr.
//     With tlsConf, any address is served with TLS.
//
// Call it before the harness confines itself (session.Open): creating a
// socket file outside the workspace is one of the writes the harness's
// own Landlock domain denies. Errors are the caller's configuration
// errors or the system's (address in use, permission).
func Listen(addr string, tlsConf *tls.Config) (*Listener, error) {
	if path, ok := strings.CutPrefix(addr, "unix:"); ok {
		l, err := listenUnix(path)
		if err != nil {
			return nil, err
		}
		if tlsConf != nil {
			l.Listener = tls.NewListener(l.Listener, tlsConf)
		}
		return l, nil
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("%q: want unix:PATH or HOST:PORT (%v)", addr, err)
	}
	bind := addr
	if tlsConf == nil {
		ip, err := loopback(host)
		if err != nil {
			return nil, fmt.Errorf("%s: %w; serving beyond this machine needs TLS: %w", addr, err, ErrNeedsTLS)
		}
		bind = net.JoinHostPort(ip.String(), port)
	}
	ln, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", addr, err)
	}
	l := &Listener{Listener: ln, name: ln.Addr().String()}
	if tlsConf != nil {
		l.Listener = tls.NewListener(ln, tlsConf)
	}
	return l, nil
}

// loopback returns the loopback address host names, or why it is not one.
func loopback(host string) (net.IP, error) {
	if host == "" {
		return nil, errors.New("an empty host means every interface, not a loopback address")
	}
	if host == "localhost" {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		addrs, err := net.DefaultResolver.LookupIPAddr(ctx, host)
		if err != nil || len(addrs) == 0 {
			return nil, fmt.Errorf("localhost does not resolve (%v)", err)
		}
		for _, a := range addrs {
			if !a.IP.IsLoopback() {
				return nil, fmt.Errorf("localhost resolves to %s, which is not a loopback address", a.IP)
			}
		}
		return addrs[0].IP, nil
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return nil, fmt.Errorf("%q is not an IP address or localhost, so not a known loopback address", host)
	}
	if !ip.IsLoopback() {
		return nil, fmt.Errorf("%s is not a loopback address", ip)
	}
	return ip, nil
}

// ErrNeedsTLS is matched by Listen's error for an address beyond this
// machine given without a TLS configuration.
var ErrNeedsTLS = errors.New("give a certificate and its key")

// umaskMu serializes the umask change of listenUnix.
var umaskMu sync.Mutex

func listenUnix(path string) (*Listener, error) {
	if path == "" {
		return nil, errors.New("unix: needs a socket path (unix:/PATH)")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("unix:%s: %w", path, err)
	}
	if fi, err := os.Lstat(abs); err == nil {
		if fi.Mode().Type() != os.ModeSocket {
			return nil, fmt.Errorf("unix:%s: the path exists and is not a socket; refusing to replace it", abs)
		}
		c, err := net.DialTimeout("unix", abs, time.Second)
		if err == nil {
			c.Close()
			return nil, fmt.Errorf("unix:%s: a server already listens on this socket", abs)
		}
		if !errors.Is(err, syscall.ECONNREFUSED) {
			return nil, fmt.Errorf("unix:%s: the socket exists and cannot be checked: %w", abs, err)
		}
		if err := os.Remove(abs); err != nil {
			return nil, fmt.Errorf("unix:%s: removing the leftover socket: %w", abs, err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("unix:%s: %w", abs, err)
	}
	umaskMu.Lock()
	old := syscall.Umask(0o177)
	ul, err := net.ListenUnix("unix", &net.UnixAddr{Name: abs, Net: "unix"})
	syscall.Umask(old)
	umaskMu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("unix:%s: %w", abs, err)
	}
	ul.SetUnlinkOnClose(false) // Close removes it, after checking it is ours
	if err := os.Chmod(abs, 0o600); err != nil {
		ul.Close()
		os.Remove(abs)
		return nil, fmt.Errorf("unix:%s: %w", abs, err)
	}
	id, _ := statID(abs)
	l := &Listener{Listener: ul, name: "unix:" + abs, path: abs, id: id}
	// Without a remover Close tries itself, and says why it could not.
	l.reaper, _ = proc.StartRemover(abs, false)
	return l, nil
}

// Handler returns the streamable HTTP handler of the server: the SDK's
// StreamableHTTPHandler (stateful sessions, so that approvals can be asked
// by elicitation, progress and cancellation delivered, on the session the
// call came by) behind a bearer-token check. Every request must carry
// "Authorization: Bearer TOKEN" with exactly token; any other gets 401 and
// never reaches the MCP server. The comparison is constant-time (of the
// tokens' SHA-256). A request body over Config.MaxMessage gets 413. All
// HTTP clients share this server's gate, call budget and record; each
// initialize is one MCP session. token must not be empty.
//
// Sessions are bounded: one with no request for Config.SessionIdle is
// closed (the SDK's SessionTimeout), and a request that would open one
// more than Config.MaxSessions is answered 503 with a JSON-RPC error. A
// tools/call whose HTTP request ends before its answer (the client's
// connection went away: a reset, a client killed) is cancelled, since its
// answer can reach no one (there is no event store to resume the stream
// from); the gate records it cancelled. Once the server stops, every new
// request is answered 503.
func (s *Server) Handler(token []byte) (http.Handler, error) {
	if len(token) == 0 {
		return nil, errors.New("mcp: Handler needs a bearer token")
	}
	idle := s.cfg.SessionIdle
	if idle < 0 {
		idle = 0 // the SDK's never
	}
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s.sdk },
		&sdk.StreamableHTTPOptions{MaxRequestBodyBytes: s.maxMsg, SessionTimeout: idle})
	want := sha256.Sum256(token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		vals := r.Header.Values("Authorization")
		ok := false
		if len(vals) == 1 {
			if scheme, got, found := strings.Cut(vals[0], " "); found && strings.EqualFold(scheme, "Bearer") {
				g := sha256.Sum256([]byte(strings.TrimSpace(got)))
				ok = subtle.ConstantTimeCompare(g[:], want[:]) == 1
			}
		}
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="b10x-harness"`)
			http.Error(w, "unauthorized: this server needs Authorization: Bearer TOKEN (the token in the server's token file)", http.StatusUnauthorized)
			return
		}
		s.handling.add(1)
		defer s.handling.add(-1)
		if s.stopping.Load() {
			s.refuse(w, r, "the server is stopping")
			return
		}
		if r.Method == http.MethodPost {
			if !s.checkBody(w, r) {
				return
			}
			s.posts.add(1)
			defer s.posts.add(-1)
			if r.Header.Get("Mcp-Session-Id") == "" {
				// A POST without a session opens one. It counts as
				// opening until its answer starts, by when the SDK has
				// bound the session (it is then live).
				n := s.initializing.Add(1)
				opened := &firstWrite{ResponseWriter: w, first: func() { s.initializing.Add(-1) }}
				defer opened.fire()
				w = opened
				if s.cfg.MaxSessions > 0 && s.liveSessions()+int(n) > s.cfg.MaxSessions {
					s.refuse(w, r, s.fullMessage())
					return
				}
			}
		}
		r, forget := s.serveRequest(r)
		defer forget()
		h.ServeHTTP(w, r)
	}), nil
}

// firstWrite calls first once, when the response starts (or at fire).
type firstWrite struct {
	http.ResponseWriter
	first func()
	once  sync.Once
}

func (f *firstWrite) fire() { f.once.Do(f.first) }

func (f *firstWrite) WriteHeader(code int) {
	f.fire()
	f.ResponseWriter.WriteHeader(code)
}

func (f *firstWrite) Write(b []byte) (int, error) {
	f.fire()
	return f.ResponseWriter.Write(b)
}

func (f *firstWrite) Flush() {
	f.fire()
	if fl, ok := f.ResponseWriter.(http.Flusher); ok {
		fl.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (f *firstWrite) Unwrap() http.ResponseWriter { return f.ResponseWriter }

// fullMessage is what a client is told past the session cap.
func (s *Server) fullMessage() string {
	msg := fmt.Sprintf("the server holds its limit of %d sessions; end one (DELETE)", s.cfg.MaxSessions)
	if s.cfg.SessionIdle > 0 {
		msg += fmt.Sprintf(" or wait: a session idle for %s is closed", s.cfg.SessionIdle)
	}
	return msg
}

// liveSessions counts the server's sessions.
func (s *Server) liveSessions() int {
	n := 0
	for range s.sdk.Sessions() {
		n++
	}
	return n
}

// refuse answers r 503 with a JSON-RPC error carrying the request's id
// (null when the body holds none: a notification, a batch, garbage).
func (s *Server) refuse(w http.ResponseWriter, r *http.Request, msg string) {
	id := json.RawMessage("null")
	if r.Body != nil {
		var m struct {
			ID json.RawMessage `json:"id"`
		}
		b, _ := io.ReadAll(io.LimitReader(r.Body, s.maxMsg))
		if json.Unmarshal(b, &m) == nil && idKey(m.ID) != "" {
			id = m.ID
		}
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": CodeUnavailable, "message": msg}})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Retry-After", "1")
	w.WriteHeader(http.StatusServiceUnavailable)
	w.Write(append(body, '\n'))
}

// checkBody answers, as JSON-RPC says and the stdio transport does, a
// POST whose body is not one JSON-RPC message: a batch (MCP 2025-06-18
// removed them) gets -32600, a body that is not JSON -32700, both with id
// null and HTTP 400, in JSON. It reports whether r may go on; r's body is
// then the same bytes. A body past the size limit goes on, to be refused
// 413.
func (s *Server) checkBody(w http.ResponseWriter, r *http.Request) bool {
	if r.Body == nil {
		return true
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, s.maxMsg+1))
	if err != nil {
		http.Error(w, "reading the request body: "+err.Error(), http.StatusBadRequest)
		return false
	}
	if int64(len(b)) > s.maxMsg {
		r.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(b), r.Body), r.Body}
		return true
	}
	r.Body = io.NopCloser(bytes.NewReader(b))
	code, msg := 0, ""
	switch t := bytes.TrimLeft(b, " \t\r\n"); {
	case len(t) > 0 && t[0] == '[':
		code, msg = jsonrpc.CodeInvalidRequest, "batches are not supported (MCP 2025-06-18 removed them): send one message per request"
	case !json.Valid(b):
		code, msg = jsonrpc.CodeParseError, "parse error: the body is not JSON"
	default:
		return true
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": nil, "error": map[string]any{"code": code, "message": msg}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	w.Write(append(body, '\n'))
	return false
}

// CodeUnavailable is the JSON-RPC error code of a request the server
// cannot take now (past the session cap, or while it stops), in the range
// the JSON-RPC specification leaves to servers.
const CodeUnavailable = -32001

// ServeStreamable serves MCP streamable HTTP on ln (see Handler) until ctx
// is done or ln fails, and returns ctx.Err() or the failure. When ctx ends
// it stops: it stops accepting and answers every new request 503, cancels
// the calls in flight (their trees get their grace, then the kill; the
// gate records them cancelled), waits up to Config.StopWait for them to
// end and for their answers to be written to their clients, then closes
// every session and connection, so that the session's record is complete
// when it returns. CancelledAtStop then says how many calls the stop cut
// short. ln is closed; removing a socket file is the caller's
// (Listener.Close). logf receives the HTTP server's own errors (TLS
// handshakes, bad requests); nil discards them. Neither carries the token.
func (s *Server) ServeStreamable(ctx context.Context, ln net.Listener, token []byte, logf func(format string, args ...any)) error {
	h, err := s.Handler(token)
	if err != nil {
		return err
	}
	errLog := log.New(io.Discard, "", 0)
	if logf != nil {
		errLog = log.New(logWriter(logf), "", 0)
	}
	hs := &http.Server{Handler: h, ErrorLog: errLog, ReadHeaderTimeout: 30 * time.Second, MaxHeaderBytes: 64 << 10}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	rctx, stopReclaim := context.WithCancel(context.Background())
	defer stopReclaim()
	go s.reclaim(rctx, reclaimEvery)
	var serveErr error
	select {
	case serveErr = <-errc:
	case <-ctx.Done():
	}
	s.stopping.Store(true)
	why := "the harness was told to stop"
	if serveErr != nil {
		why = "the listener failed"
	} else if c := context.Cause(ctx); c != nil && c != ctx.Err() {
		why = c.Error()
	}
	// Shutdown closes the listener and the idle connections at once, and
	// the others as their requests end.
	shut := make(chan struct{})
	go func() {
		defer close(shut)
		sctx, cancel := context.WithTimeout(context.Background(), s.cfg.StopWait+2*time.Second)
		defer cancel()
		hs.Shutdown(sctx)
	}()
	s.stop(why)
	// The calls end, are recorded, and their POSTs deliver the answers.
	s.calls.wait(s.cfg.StopWait)
	s.posts.waitZero(2 * time.Second)
	// The standalone SSE streams (GET) end with their sessions; once no
	// request is being served, what is left is connections without one.
	s.closeSessions()
	s.handling.waitZero(2 * time.Second)
	hs.Close()
	<-shut
	if serveErr == nil {
		<-errc
		return ctx.Err()
	}
	return serveErr
}

// reclaimEvery is how often ServeStreamable looks for sessions that ended.
var reclaimEvery = 5 * time.Second

// reclaim gives the memory of ended sessions back to the system: every
// period, when at least 64 sessions and half of those there were have
// ended since it last did, it runs the collector and returns the freed
// pages (debug.FreeOSMemory). An idle server allocates nothing, so the
// runtime alone would collect only at its two-minute forced cycle and
// return the pages later still: 10,000 abandoned sessions would hold
// some 55 MB for minutes after they expired.
func (s *Server) reclaim(ctx context.Context, period time.Duration) {
	t := time.NewTicker(period)
	defer t.Stop()
	peak := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		n := s.liveSessions()
		peak = max(peak, n)
		if peak-n >= 64 && n <= peak/2 {
			debug.FreeOSMemory()
			peak = n
		}
	}
}

// closeSessions closes every session and waits, at most 2 seconds, for
// them to end.
func (s *Server) closeSessions() {
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ss := range s.sdk.Sessions() {
			ss.Close()
		}
	}()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
	}
}

// logWriter turns the lines of a log.Logger into logf calls.
type logWriter func(format string, args ...any)

func (f logWriter) Write(p []byte) (int, error) {
	f("%s", strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
