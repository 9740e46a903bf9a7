package egress

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/b10x/harness/record"
)

// Event is one connection attempt: its destination, the decision and the
// rule that made it, and what moved.
type Event struct {
	Time      time.Time     `json:"time"`
	Protocol  string        `json:"protocol"` // "connect" (HTTP CONNECT), "http" (a forwarded request), "socks5"
	Host      string        `json:"host"`
	Port      int           `json:"port"`
	Decision  string        `json:"decision"` // "allowed" or "denied"
	Rule      string        `json:"rule"`
	Addr      string        `json:"addr,omitempty"` // the address connected to
	BytesUp   int64         `json:"bytes_up"`       // from the program to the destination
	BytesDown int64         `json:"bytes_down"`
	Duration  time.Duration `json:"duration_ns"`
	Error     string        `json:"error,omitempty"` // why an allowed connection failed or ended early
}

// Line is the attempt as the run record's net line of call seq.
func (e Event) Line(seq int64) record.Net {
	return record.Net{Event: "net", Seq: seq, Time: e.Time.UTC(), Protocol: e.Protocol, Host: e.Host, Port: e.Port, Decision: e.Decision,
		Rule: e.Rule, Addr: e.Addr, BytesUp: e.BytesUp, BytesDown: e.BytesDown, DurationMS: e.Duration.Milliseconds(), Error: e.Error}
}

// Denied reports whether the attempt was refused by a rule or a limit.
func (e Event) Denied() bool { return e.Decision == "denied" }

// Options are what Serve needs besides the policy; the zero value resolves
// with the system's resolver and dials with a net.Dialer.
type Options struct {
	// Lookup resolves a name (nil: net.DefaultResolver.LookupNetIP).
	Lookup func(ctx context.Context, host string) ([]netip.Addr, error)
	// Dial connects to an address already checked (nil: a net.Dialer with a
	// 30 s timeout).
	Dial func(ctx context.Context, addr netip.AddrPort) (net.Conn, error)
	// Report receives every attempt once it has ended (nil: none). It is
	// called from the connection's goroutine; it must be safe for
	// concurrent use.
	Report func(Event)
}

// LookupForTest is nil in the harness. A test binary that stands for the
// harness sets it to resolve names of its own (a test server's name to
// 127.0.0.1) without touching the machine's resolver; Options.Lookup
// overrides it.
var LookupForTest func(ctx context.Context, host string) ([]netip.Addr, error)

// Served is a running proxy; Close stops it.
type Served struct {
	ln     net.Listener
	pol    *Policy
	opt    Options
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	slots  chan struct{}
	moved  atomic.Int64

	mu               sync.Mutex
	conns            map[net.Conn]struct{}
	denied           []Event
	closed           bool
	reported         int
	unreported       int
	unreportedDenied int
}

// MaxReported is how many attempts of one Serve are reported one by one;
// Close reports the rest as one count.
const MaxReported = 1000

// Serve accepts connections on ln (the listener inside a child's network
// namespace) until Close, deciding each by pol. It takes ownership of ln.
func Serve(ln net.Listener, pol *Policy, opt Options) *Served {
	ctx, cancel := context.WithCancel(context.Background())
	maxConns := pol.MaxConns
	if maxConns <= 0 {
		maxConns = DefaultMaxConns
	}
	s := &Served{ln: ln, pol: pol, opt: opt, ctx: ctx, cancel: cancel, slots: make(chan struct{}, maxConns), conns: map[net.Conn]struct{}{}}
	if s.opt.Lookup == nil {
		s.opt.Lookup = LookupForTest
	}
	if s.opt.Lookup == nil {
		s.opt.Lookup = func(ctx context.Context, host string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		}
	}
	if s.opt.Dial == nil {
		d := &net.Dialer{Timeout: 30 * time.Second}
		s.opt.Dial = func(ctx context.Context, a netip.AddrPort) (net.Conn, error) {
			return d.DialContext(ctx, "tcp", a.String())
		}
	}
	s.wg.Add(1)
	go s.accept()
	return s
}

// Close stops accepting, closes every connection (the program's and the
// destination's) and waits for their goroutines; it returns the denied
// attempts. It is safe to call more than once.
func (s *Served) Close() []Event {
	s.mu.Lock()
	s.closed = true
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.cancel()
	s.ln.Close()
	s.wg.Wait()
	s.mu.Lock()
	denied := append([]Event(nil), s.denied...)
	n, nd := s.unreported, s.unreportedDenied
	s.unreported, s.unreportedDenied = 0, 0
	s.mu.Unlock()
	if n > 0 && s.opt.Report != nil {
		s.opt.Report(Event{Time: time.Now(), Decision: "denied", Host: "*", Rule: fmt.Sprintf("%d more attempts (%d denied) past the first %d, not recorded one by one", n, nd, MaxReported)})
	}
	return denied
}

// Open is the number of connections open now (for tests and progress).
func (s *Served) Open() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

func (s *Served) track(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		c.Close()
		return false
	}
	s.conns[c] = struct{}{}
	return true
}

func (s *Served) untrack(c net.Conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	c.Close()
}

func (s *Served) report(e Event) {
	s.mu.Lock()
	if e.Denied() && len(s.denied) < 1000 {
		s.denied = append(s.denied, e)
	}
	// Each attempt is reported until MaxReported; past it they are
	// counted and Close reports the count, so a program cannot grow the
	// record (which lives outside the sandbox) at its own pace.
	s.reported++
	over := s.reported > MaxReported
	if over {
		s.unreported++
		if e.Denied() {
			s.unreportedDenied++
		}
	}
	s.mu.Unlock()
	if s.opt.Report != nil && !over {
		s.opt.Report(e)
	}
}

func (s *Served) accept() {
	defer s.wg.Done()
	for {
		// A slot first, then the connection: past MaxConns the program's
		// connections wait in the listener's backlog, which the kernel
		// bounds and holds in the call's own namespace, and cost the
		// harness nothing.
		select {
		case s.slots <- struct{}{}:
		case <-s.ctx.Done():
			return
		}
		c, err := s.ln.Accept()
		if err != nil {
			<-s.slots
			if s.ctx.Err() != nil {
				return
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) || errors.Is(err, syscall.ENOBUFS) || errors.Is(err, syscall.ENOMEM) {
				// Out of descriptors for now: back off, and go on serving.
				select {
				case <-time.After(50 * time.Millisecond):
				case <-s.ctx.Done():
					return
				}
				continue
			}
			return // closed
		}
		if !s.track(c) {
			<-s.slots
			return
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer func() { <-s.slots }()
			defer s.untrack(c)
			s.serve(c)
		}()
	}
}

// serve handles one connection from the program: SOCKS5 when its first
// byte is 5, HTTP otherwise.
func (s *Served) serve(c net.Conn) {
	_ = c.SetDeadline(time.Now().Add(s.idle()))
	hb := &headerBudget{r: c}
	br := bufio.NewReader(hb)
	b, err := br.Peek(1)
	if err != nil {
		return
	}
	if b[0] == 5 {
		s.socks(c, br, hb)
		return
	}
	s.http(c, br, hb)
}

func (s *Served) idle() time.Duration {
	if s.pol.IdleTimeout > 0 {
		return s.pol.IdleTimeout
	}
	return DefaultIdleTimeout
}

// dial decides host:port, resolves an admitted name and connects to the
// first reachable address. It fills e and returns the connection, or nil
// with e saying why.
func (s *Served) dial(host string, port int, e *Event) net.Conn {
	e.Time, e.Host, e.Port = time.Now(), host, port
	d := s.pol.Decide(host)
	e.Host, e.Rule = d.Name, d.Rule
	if !d.Allowed {
		e.Decision = "denied"
		return nil
	}
	if port <= 0 || port > 65535 {
		e.Decision, e.Rule = "denied", "no port"
		return nil
	}
	ctx, cancel := context.WithTimeout(s.ctx, 30*time.Second)
	defer cancel()
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(d.Name); err == nil {
		addrs = []netip.Addr{a} // admitted by a CIDR rule
	} else {
		var err error
		addrs, err = s.opt.Lookup(ctx, d.Name)
		if err != nil {
			e.Decision, e.Error = "allowed", "resolving "+d.Name+": "+err.Error()
			return nil
		}
	}
	// why holds, in the answers' order, each address refused and each
	// dial that failed; refused and rows say what the table refused.
	var why, refused, rows []string
	for _, a := range addrs {
		v := s.pol.judge(a)
		if !v.ok {
			why = append(why, a.String()+" is "+v.why)
			refused = append(refused, a.String()+" is "+v.why)
			if v.row != nil && !slices.Contains(rows, v.row.String()) {
				rows = append(rows, v.row.String())
			}
			continue
		}
		conn, err := s.opt.Dial(ctx, netip.AddrPortFrom(a.Unmap(), uint16(port)))
		if err != nil {
			why = append(why, a.String()+": "+err.Error())
			continue
		}
		e.Decision, e.Addr = "allowed", netip.AddrPortFrom(a.Unmap(), uint16(port)).String()
		return conn
	}
	if len(addrs) > 0 && len(refused) == len(addrs) {
		e.Decision = "denied"
		e.Rule = "resolves only to addresses no rule admits (" + strings.Join(refused, "; ") + ")"
		if len(rows) > 0 {
			e.Rule += "; not globally reachable: " + strings.Join(rows, ", ")
		}
		e.Rule += "; allow them with a CIDR rule"
		return nil
	}
	e.Decision = "allowed"
	e.Error = "connecting: " + strings.Join(why, "; ")
	if len(addrs) == 0 {
		e.Error = "resolving " + d.Name + ": no address"
	}
	return nil
}

// pipe copies both ways until either side ends, nothing moves either way
// for the idle timeout, the byte cap is reached or the proxy closes; it
// fills e's counters, and e.Error when a limit ended it.
func (s *Served) pipe(client net.Conn, clientR io.Reader, dst net.Conn, e *Event) {
	if !s.track(dst) {
		return
	}
	defer s.untrack(dst)
	start := time.Now()
	var wg sync.WaitGroup
	var up, down atomic.Int64
	var capped, idled atomic.Bool
	// The tunnel is idle when nothing moved either way for the idle
	// timeout: a download the program sends nothing during is not.
	var last atomic.Int64 // when a byte last moved, either way (UnixNano)
	last.Store(start.UnixNano())
	copyDir := func(w net.Conn, r io.Reader, rc net.Conn, n *atomic.Int64) {
		defer wg.Done()
		buf := make([]byte, 32<<10)
		for {
			_ = rc.SetReadDeadline(time.Unix(0, last.Load()).Add(s.idle()))
			k, err := r.Read(buf)
			if k > 0 {
				if s.pol.MaxBytes > 0 && s.moved.Add(int64(k)) > s.pol.MaxBytes {
					capped.Store(true)
					client.Close()
					dst.Close()
					return
				}
				last.Store(time.Now().UnixNano())
				_ = w.SetWriteDeadline(time.Now().Add(s.idle()))
				if _, werr := w.Write(buf[:k]); werr != nil {
					break
				}
				n.Add(int64(k))
			}
			if errors.Is(err, os.ErrDeadlineExceeded) {
				if time.Since(time.Unix(0, last.Load())) < s.idle() {
					continue // the other way moved meanwhile
				}
				idled.Store(true)
			}
			if err != nil {
				break
			}
		}
		// One side ended: let the other finish what it sends, then stop.
		if tc, ok := w.(interface{ CloseWrite() error }); ok {
			_ = tc.CloseWrite()
		} else {
			w.Close()
		}
	}
	_ = client.SetDeadline(time.Time{})
	wg.Add(2)
	go copyDir(dst, clientR, client, &up)
	go copyDir(client, dst, dst, &down)
	wg.Wait()
	e.BytesUp, e.BytesDown, e.Duration = up.Load(), down.Load(), time.Since(start)
	switch {
	case capped.Load():
		e.Error = fmt.Sprintf("closed at the byte cap (max_bytes %d, all connections of the call)", s.pol.MaxBytes)
	case idled.Load():
		e.Error = fmt.Sprintf("closed after %v with nothing moved either way (idle_timeout)", s.idle())
	}
}

// http serves HTTP: CONNECT tunnels, and absolute-URI requests forwarded
// one at a time (each decided on its own).
func (s *Served) http(c net.Conn, br *bufio.Reader, hb *headerBudget) {
	for {
		hb.limit()
		req, err := http.ReadRequest(br)
		if err != nil {
			if errors.Is(err, errHeaderBudget) {
				e := Event{Time: time.Now(), Protocol: "http", Decision: "denied", Rule: "request headers larger than 64 KiB"}
				s.refuseHTTP(c, &e)
			}
			return
		}
		// The body and a tunnel's bytes are the program's to move.
		hb.unlimited = true
		if req.Method == http.MethodConnect {
			host, port := splitHostPort(req.Host, 443)
			e := Event{Protocol: "connect"}
			dst := s.dial(host, port, &e)
			if dst == nil {
				s.refuseHTTP(c, &e)
				return
			}
			if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
				dst.Close()
				return
			}
			s.pipe(c, br, dst, &e)
			s.report(e)
			return
		}
		if req.URL == nil || req.URL.Host == "" || (req.URL.Scheme != "http" && req.URL.Scheme != "") {
			e := Event{Time: time.Now(), Protocol: "http", Decision: "denied", Rule: "not a proxy request (want CONNECT or an absolute http:// URL)", Host: req.Host}
			s.refuseHTTP(c, &e)
			return
		}
		host, port := splitHostPort(req.URL.Host, 80)
		e := Event{Protocol: "http"}
		dst := s.dial(host, port, &e)
		if dst == nil {
			s.refuseHTTP(c, &e)
			return
		}
		if !s.forward(c, req, dst, &e) {
			s.report(e)
			return
		}
		s.report(e)
	}
}

// forward sends one request to dst and its response back; false when the
// client connection cannot go on.
func (s *Served) forward(c net.Conn, req *http.Request, dst net.Conn, e *Event) bool {
	if !s.track(dst) {
		return false
	}
	defer s.untrack(dst)
	start := time.Now()
	req.RequestURI = ""
	req.Header.Del("Proxy-Connection")
	req.Header.Del("Proxy-Authorization")
	req.Close = true
	_ = dst.SetDeadline(time.Now().Add(s.idle()))
	cw := &countWriter{w: dst}
	if err := req.Write(cw); err != nil {
		e.Error = "forwarding the request: " + err.Error()
		writeRefusal(c, http.StatusBadGateway, e.Error)
		return false
	}
	resp, err := http.ReadResponse(bufio.NewReader(dst), req)
	if err != nil {
		e.Error = "reading the response: " + err.Error()
		writeRefusal(c, http.StatusBadGateway, e.Error)
		return false
	}
	defer resp.Body.Close()
	ccw := &countWriter{w: c}
	_ = c.SetWriteDeadline(time.Now().Add(s.idle()))
	err = resp.Write(ccw)
	e.BytesUp, e.BytesDown, e.Duration = cw.n, ccw.n, time.Since(start)
	if s.pol.MaxBytes > 0 && s.moved.Add(cw.n+ccw.n) > s.pol.MaxBytes {
		e.Error = fmt.Sprintf("closed at the byte cap (max_bytes %d)", s.pol.MaxBytes)
		return false
	}
	return err == nil && !resp.Close
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n += int64(n)
	return n, err
}

// refuseHTTP answers a refused or failed attempt: 403 with the reason in a
// header and the body for a denial, 502 for a connection that failed.
func (s *Served) refuseHTTP(c net.Conn, e *Event) {
	if e.Decision == "" {
		e.Decision = "denied"
	}
	status, why := http.StatusForbidden, "b10x-harness denied "+e.Host+": "+e.Rule
	if !e.Denied() {
		status, why = http.StatusBadGateway, "b10x-harness could not reach "+e.Host+": "+e.Error
	}
	writeRefusal(c, status, why)
	s.report(*e)
}

func writeRefusal(c net.Conn, status int, why string) {
	why = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, why)
	body := why + "\n"
	_, _ = fmt.Fprintf(c, "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nX-B10x-Harness-Denied: %s\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		status, http.StatusText(status), why, len(body), body)
}

func splitHostPort(hostport string, def int) (string, int) {
	host, p, err := net.SplitHostPort(hostport)
	if err != nil {
		return strings.Trim(hostport, "[]"), def
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		return host, -1
	}
	return host, n
}

// SOCKS5 reply codes (RFC 1928).
const (
	socksOK          = 0x00
	socksNotAllowed  = 0x02
	socksHostUnreach = 0x04
	socksCmdUnsupp   = 0x07
	socksAddrUnsupp  = 0x08
)

// socks serves one SOCKS5 CONNECT (no authentication; names are resolved
// here, by the proxy: socks5h).
func (s *Served) socks(c net.Conn, br *bufio.Reader, hb *headerBudget) {
	var hdr [2]byte
	if _, err := io.ReadFull(br, hdr[:]); err != nil {
		return
	}
	methods := make([]byte, hdr[1])
	if _, err := io.ReadFull(br, methods); err != nil {
		return
	}
	noAuth := false
	for _, m := range methods {
		noAuth = noAuth || m == 0
	}
	if !noAuth {
		_, _ = c.Write([]byte{5, 0xff})
		return
	}
	if _, err := c.Write([]byte{5, 0}); err != nil {
		return
	}
	var req [4]byte
	if _, err := io.ReadFull(br, req[:]); err != nil || req[0] != 5 {
		return
	}
	e := Event{Time: time.Now(), Protocol: "socks5"}
	var host string
	switch req[3] {
	case 1, 4:
		n := 4
		if req[3] == 4 {
			n = 16
		}
		b := make([]byte, n)
		if _, err := io.ReadFull(br, b); err != nil {
			return
		}
		a, _ := netip.AddrFromSlice(b)
		host = a.String()
	case 3:
		l, err := br.ReadByte()
		if err != nil {
			return
		}
		b := make([]byte, l)
		if _, err := io.ReadFull(br, b); err != nil {
			return
		}
		host = string(b)
	default:
		socksReply(c, socksAddrUnsupp)
		return
	}
	var pb [2]byte
	if _, err := io.ReadFull(br, pb[:]); err != nil {
		return
	}
	port := int(binary.BigEndian.Uint16(pb[:]))
	if req[1] != 1 {
		e.Host, e.Port, e.Decision, e.Rule = host, port, "denied", "only CONNECT is served (no BIND, no UDP ASSOCIATE)"
		socksReply(c, socksCmdUnsupp)
		s.report(e)
		return
	}
	dst := s.dial(host, port, &e)
	if dst == nil {
		code := byte(socksNotAllowed)
		if !e.Denied() {
			code = socksHostUnreach
		}
		socksReply(c, code)
		s.report(e)
		return
	}
	socksReply(c, socksOK)
	hb.unlimited = true
	s.pipe(c, br, dst, &e)
	s.report(e)
}

func socksReply(c net.Conn, code byte) {
	_, _ = c.Write([]byte{5, code, 0, 1, 0, 0, 0, 0, 0, 0})
}

// maxHeader bounds what a program may send before its request's headers
// end (or its SOCKS5 greeting and request): the proxy holds it in memory.
const maxHeader = 64 << 10

// headerBudget reads from r, failing once maxHeader bytes have been read
// since the last reset, until unlimited is set (a tunnel's bytes are the
// program's to move).
type headerBudget struct {
	r         io.Reader
	n         int
	unlimited bool
}

func (h *headerBudget) Read(p []byte) (int, error) {
	if !h.unlimited {
		if h.n >= maxHeader {
			return 0, errHeaderBudget
		}
		if len(p) > maxHeader-h.n {
			p = p[:maxHeader-h.n]
		}
	}
	n, err := h.r.Read(p)
	h.n += n
	return n, err
}

// limit starts a new budget (before a request's headers).
func (h *headerBudget) limit() { h.n, h.unlimited = 0, false }

var errHeaderBudget = errors.New("egress: request headers larger than 64 KiB")
