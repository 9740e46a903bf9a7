package mcp

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
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
// or TLS. Close it once; it removes the socket file it created, when the
// process may still remove it.
type Listener struct {
	net.Listener
	name string // what String shows: unix:PATH or HOST:PORT
	path string // the socket file, "" for TCP
	id   fileID // the socket file's identity, to remove only our own
}

// String is the address as a client names it: unix:/PATH or HOST:PORT
// (with the port bound, when ADDR asked for port 0).
func (l *Listener) String() string { return l.name }

// Close closes the listener and removes the socket file it created, if it
// is still the same file. Removing it fails where the harness has confined
// its own writes (Landlock) and the socket is outside the workspace: the
// error says so and the file stays, for the next Listen to replace.
func (l *Listener) Close() error {
	err := l.Listener.Close()
	if l.path == "" {
		return err
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
		return nil, fmt.Errorf("--listen %q: want unix:PATH or HOST:PORT (%v)", addr, err)
	}
	bind := addr
	if tlsConf == nil {
		ip, err := loopback(host)
		if err != nil {
			return nil, fmt.Errorf("--listen %s: %w; serving beyond this machine needs TLS (--tls-cert FILE --tls-key FILE)", addr, err)
		}
		bind = net.JoinHostPort(ip.String(), port)
	}
	ln, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, fmt.Errorf("--listen %s: %w", addr, err)
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

// umaskMu serializes the umask change of listenUnix.
var umaskMu sync.Mutex

func listenUnix(path string) (*Listener, error) {
	if path == "" {
		return nil, errors.New("--listen unix: needs a socket path (unix:/PATH)")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("--listen unix:%s: %w", path, err)
	}
	if fi, err := os.Lstat(abs); err == nil {
		if fi.Mode().Type() != os.ModeSocket {
			return nil, fmt.Errorf("--listen unix:%s: the path exists and is not a socket; refusing to replace it", abs)
		}
		c, err := net.DialTimeout("unix", abs, time.Second)
		if err == nil {
			c.Close()
			return nil, fmt.Errorf("--listen unix:%s: a server already listens on this socket", abs)
		}
		if !errors.Is(err, syscall.ECONNREFUSED) {
			return nil, fmt.Errorf("--listen unix:%s: the socket exists and cannot be checked: %w", abs, err)
		}
		if err := os.Remove(abs); err != nil {
			return nil, fmt.Errorf("--listen unix:%s: removing the leftover socket: %w", abs, err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("--listen unix:%s: %w", abs, err)
	}
	umaskMu.Lock()
	old := syscall.Umask(0o177)
	ul, err := net.ListenUnix("unix", &net.UnixAddr{Name: abs, Net: "unix"})
	syscall.Umask(old)
	umaskMu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("--listen unix:%s: %w", abs, err)
	}
	ul.SetUnlinkOnClose(false) // Close removes it, after checking it is ours
	if err := os.Chmod(abs, 0o600); err != nil {
		ul.Close()
		os.Remove(abs)
		return nil, fmt.Errorf("--listen unix:%s: %w", abs, err)
	}
	id, _ := statID(abs)
	return &Listener{Listener: ul, name: "unix:" + abs, path: abs, id: id}, nil
}

// shutdownGrace bounds how long ServeStreamable waits, once ctx is done,
// for the calls it cancelled to be recorded.
var shutdownGrace = 10 * time.Second

// Handler returns the streamable HTTP handler of the server: the SDK's
// StreamableHTTPHandler (stateful sessions, so that approvals can be asked
// by elicitation, progress and cancellation delivered, on the session the
// call came by) behind a bearer-token check. Every request must carry
// "Authorization: Bearer TOKEN" with exactly token; any other gets 401 and
// never reaches the MCP server. The comparison is constant-time (of the
// tokens' SHA-256). A request body over Config.MaxMessage gets 413. All
// HTTP clients share this server's gate, call budget and record; each
// initialize is one MCP session. token must not be empty.
func (s *Server) Handler(token []byte) (http.Handler, error) {
	if len(token) == 0 {
		return nil, errors.New("mcp: Handler needs a bearer token")
	}
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s.sdk },
		&sdk.StreamableHTTPOptions{MaxRequestBodyBytes: s.maxMsg})
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
			http.Error(w, "unauthorized: this server needs Authorization: Bearer TOKEN (the token in its --token-file)", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}), nil
}

// ServeStreamable serves MCP streamable HTTP on ln (see Handler) until ctx
// is done or ln fails, and returns ctx.Err() or the failure. When ctx ends
// it stops accepting, closes every HTTP connection, cancels the calls in
// flight (the gate records them cancelled) and waits up to 10 seconds for
// them to end, so that the session's record is complete when it returns.
// ln is closed; removing a socket file is the caller's (Listener.Close).
// logf receives the HTTP server's own errors (TLS handshakes, bad
// requests); nil discards them. Neither carries the token.
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
	select {
	case err := <-errc:
		s.stopCalls()
		s.closeSessions()
		return err
	case <-ctx.Done():
	}
	hs.Close()
	<-errc
	s.stopCalls()
	s.closeSessions()
	return ctx.Err()
}

// closeSessions closes every session and waits, at most shutdownGrace, for
// their calls to end.
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
	case <-time.After(shutdownGrace):
	}
}

// logWriter turns the lines of a log.Logger into logf calls.
type logWriter func(format string, args ...any)

func (f logWriter) Write(p []byte) (int, error) {
	f("%s", strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
