package egress

import (
	"bufio"
	"bytes"
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

	"golang.org/x/sys/unix"
)

// Event is one connection attempt: its destination, the decision and the
// rule that made it, and what moved.
//
// Every connection the proxy takes from its listener ends with exactly one
// Event, and a keep-alive connection with one more for each further
// request it sends: one that named no destination (it sent nothing, too
// little, too slowly, or not HTTP or SOCKS5) is "denied" with an empty
// Host and a Rule that says so; one refused by a limit (max_conns,
// max_bytes) is "denied" by that limit; one whose program left before it
// was dialled is "allowed" by its rule with an Error saying it was not
// dialled.
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

// Destination is host and port as one would write them (host:port, an
// IPv6 address in brackets), or what is known of them: a request refused
// before it named a destination (a malformed one, a limit reached first)
// has neither.
func Destination(host string, port int) string {
	switch {
	case host == "" && port == 0:
		return "(no destination named)"
	case port == 0:
		return host
	case host == "":
		return fmt.Sprintf("(no host named):%d", port)
	}
	return net.JoinHostPort(host, strconv.Itoa(port))
}

// Denied reports whether the attempt was refused by a rule or a limit.
func (e Event) Denied() bool { return e.Decision == "denied" }

// Options are what Serve needs besides the policy; the zero value resolves
// with the system's resolver and dials with a net.Dialer.
type Options struct {
	// Lookup resolves a name (nil: net.DefaultResolver.LookupNetIP).
	Lookup func(ctx context.Context, host string) ([]netip.Addr, error)
	// Dial connects to an address already checked (nil: a net.Dialer with a
	// 30 s timeout). A tunnel between two *net.TCPConn is moved with
	// splice(2); any other net.Conn through a buffer.
	Dial func(ctx context.Context, addr netip.AddrPort) (net.Conn, error)
	// Report receives every attempt once it has ended (nil: none). It is
	// called from the connection's goroutine, or from Close for the
	// connections the call's end left unserved; it must be safe for
	// concurrent use.
	Report func(Event)
}

// LookupForTest is nil in the harness. A test binary that stands for the
// harness sets it to resolve names of its own (a test server's name to
// 127.0.0.1) without touching the machine's resolver; Options.Lookup
// overrides it.
var LookupForTest func(ctx context.Context, host string) ([]netip.Addr, error)

// Served is a running proxy; Close stops it.
//
// How a connection is served: the proxy takes it from the listener while
// fewer than 2×MaxConns of its connections are open (past that it stays in
// the kernel's backlog); its request must be complete within
// HandshakeTimeout of that; the rules decide it, and a spent max_bytes
// refuses it, without a slot; an admitted one then takes one of MaxConns
// slots, waiting at most QueueWait (refused with 503 past it); one that
// waited is dialled only if its program is still connected.
type Served struct {
	ln         net.Listener
	pol        *Policy
	opt        Options
	ctx        context.Context
	cancel     context.CancelFunc
	wg         sync.WaitGroup // the connections' goroutines
	acceptDone chan struct{}
	held       chan struct{} // one per connection taken from the listener and not ended: 2×MaxConns
	slots      chan struct{} // one per connection being served: MaxConns
	waiting    atomic.Int64  // connections waiting for a slot now
	moved      atomic.Int64

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

// maxDrained bounds how many connections Close takes from the kernel's
// backlog to report them (the helper listens with a backlog of 256).
const maxDrained = 4096

// Serve accepts connections on ln (the listener inside a child's network
// namespace) until Close, deciding each by pol. It takes ownership of ln.
func Serve(ln net.Listener, pol *Policy, opt Options) *Served {
	ctx, cancel := context.WithCancel(context.Background())
	s := &Served{ln: ln, pol: pol, opt: opt, ctx: ctx, cancel: cancel, acceptDone: make(chan struct{}), conns: map[net.Conn]struct{}{}}
	s.slots = make(chan struct{}, s.maxConns())
	s.held = make(chan struct{}, 2*s.maxConns())
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
	go s.accept()
	return s
}

// Close stops accepting, reports every connection still waiting in the
// listener's backlog (each gets its Event, "the call ended before the
// proxy served it"), closes every connection (the program's and the
// destination's), waits for their goroutines, so that every attempt has
// been reported when it returns, and returns the denied attempts. It is
// safe to call more than once.
//
// A connection that reaches the backlog after Close has drained it, while
// the listener is being closed, is reset without an Event: the call it
// belongs to has ended.
func (s *Served) Close() []Event {
	s.mu.Lock()
	first := !s.closed
	s.closed = true
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.cancel()
	if first {
		s.stopAccepting()
		s.drainBacklog()
	}
	s.ln.Close()
	<-s.acceptDone
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

// stopAccepting ends the accept loop without closing the listener, whose
// backlog Close still has to report: a deadline in the past wakes Accept.
func (s *Served) stopAccepting() {
	if dl, ok := s.ln.(interface{ SetDeadline(time.Time) error }); !ok || dl.SetDeadline(time.Unix(1, 0)) != nil {
		s.ln.Close()
	}
	<-s.acceptDone
}

// drainBacklog takes each connection still in the listener's backlog,
// reads what its program already sent (without waiting), and reports it.
func (s *Served) drainBacklog() {
	sc, ok := s.ln.(syscall.Conn)
	if !ok {
		return
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return
	}
	buf := make([]byte, 4096)
	_ = rc.Control(func(fd uintptr) {
		for i := 0; i < maxDrained; i++ {
			nfd, _, err := unix.Accept4(int(fd), unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK)
			if err == unix.EINTR || err == unix.ECONNABORTED {
				continue
			}
			if err != nil {
				return // EAGAIN: the backlog is empty
			}
			n, _ := unix.Read(nfd, buf)
			unix.Close(nfd)
			s.report(s.unserved(buf[:max(n, 0)]))
		}
	})
}

// unserved is the Event of a connection the call's end left unserved,
// with the destination its program named in b (what it had sent), if any.
func (s *Served) unserved(b []byte) Event {
	e := Event{Time: time.Now(), Decision: "denied", Rule: "the call ended before the proxy served the connection"}
	e.Protocol, e.Host, e.Port = target(b)
	if e.Host != "" {
		e.Host = s.pol.Decide(e.Host).Name
	}
	return e
}

// target is the destination the first bytes of a connection name: an HTTP
// request (CONNECT or an absolute URI) or a SOCKS5 greeting and request.
func target(b []byte) (protocol, host string, port int) {
	br := bufio.NewReader(bytes.NewReader(b))
	if len(b) > 0 && b[0] == 5 {
		if _, err := readSocksGreeting(br); err != nil {
			return "socks5", "", 0
		}
		_, host, port, _ := readSocksRequest(br)
		return "socks5", host, port
	}
	req, err := http.ReadRequest(br)
	switch {
	case err != nil:
		return "", "", 0
	case req.Method == http.MethodConnect:
		host, port = splitHostPort(req.Host, 443)
		return "connect", host, port
	case req.URL != nil:
		host, port = splitHostPort(req.URL.Host, 80)
		return "http", host, port
	}
	return "http", "", 0
}

// Open is the number of connections open now (for tests and progress).
func (s *Served) Open() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// track adds c to the connections Close closes; false (c untouched) when
// Close has begun.
func (s *Served) track(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
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
	defer close(s.acceptDone)
	for {
		// A place first, then the connection: past 2×MaxConns the
		// program's connections wait in the listener's backlog, which the
		// kernel bounds and holds in the call's own namespace, and cost
		// the harness nothing; Close reports those still there.
		select {
		case s.held <- struct{}{}:
		case <-s.ctx.Done():
			return
		}
		c, err := s.ln.Accept()
		if err != nil {
			<-s.held
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
			<-s.held
			s.report(s.unserved(nil))
			c.Close()
			return
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer func() { <-s.held }()
			defer s.untrack(c)
			cl := &client{c: c, accepted: time.Now()}
			defer cl.release(s)
			s.serve(cl)
		}()
	}
}

// client is one connection from the program, as the proxy reads it.
type client struct {
	c        net.Conn
	br       *bufio.Reader
	hb       *headerBudget
	accepted time.Time
	slot     bool // it holds one of the MaxConns slots
}

func (cl *client) release(s *Served) {
	if cl.slot {
		cl.slot = false
		<-s.slots
	}
}

// serve handles one connection from the program: SOCKS5 when its first
// byte is 5, HTTP otherwise. Its request must be complete within the
// handshake timeout of its acceptance.
func (s *Served) serve(cl *client) {
	cl.hb = &headerBudget{r: cl.c, c: cl.c}
	cl.br = bufio.NewReader(cl.hb)
	_ = cl.c.SetDeadline(cl.accepted.Add(s.handshake()))
	b, err := cl.br.Peek(1)
	if err != nil {
		e, _ := s.noRequest(cl, "", err, true)
		s.report(e)
		return
	}
	if b[0] == 5 {
		s.report(s.socks(cl))
		return
	}
	s.http(cl)
}

func (s *Served) idle() time.Duration {
	if s.pol.IdleTimeout > 0 {
		return s.pol.IdleTimeout
	}
	return DefaultIdleTimeout
}

func (s *Served) handshake() time.Duration {
	if s.pol.HandshakeTimeout > 0 {
		return s.pol.HandshakeTimeout
	}
	return DefaultHandshakeTimeout
}

func (s *Served) queueWait() time.Duration {
	if s.pol.QueueWait > 0 {
		return s.pol.QueueWait
	}
	return DefaultQueueWait
}

func (s *Served) maxConns() int {
	if s.pol.MaxConns > 0 {
		return s.pol.MaxConns
	}
	return DefaultMaxConns
}

// noRequest is the Event of a connection whose request could not be read
// (err), and the HTTP status to answer it with (0: none). first is true
// for a connection's first request, whose absence is an attempt too.
func (s *Served) noRequest(cl *client, protocol string, err error, first bool) (Event, int) {
	e := Event{Time: cl.accepted, Protocol: protocol, Decision: "denied", Duration: time.Since(cl.accepted)}
	status := 0
	switch {
	case errors.Is(err, errHeaderBudget):
		e.Rule, status = "request headers larger than 64 KiB", http.StatusForbidden
	case s.ctx.Err() != nil:
		e.Rule = "the call ended before the connection's request was complete"
	case errors.Is(err, os.ErrDeadlineExceeded) || !time.Now().Before(cl.accepted.Add(s.handshake())):
		// A deadline that falls mid-line reaches the parser as a short
		// line, not as the deadline (bufio.Reader.ReadLine).
		e.Rule, status = fmt.Sprintf("no complete request within %v (handshake_timeout)", s.handshake()), http.StatusRequestTimeout
	case errors.Is(err, io.EOF) && first && protocol == "":
		e.Rule = "closed without sending a request"
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		e.Rule = "closed before its request was complete"
	case errors.Is(err, syscall.ECONNRESET):
		e.Rule = "reset before its request was complete"
	default:
		e.Rule, status = "not a proxy request (want CONNECT, an absolute http:// URL or SOCKS5)", http.StatusBadRequest
	}
	if protocol == "socks5" {
		status = 0
	}
	return e, status
}

// admit decides host:port for the connection and, when the rules admit
// it, gives it a slot. It fills e and returns 0, or the HTTP status to
// refuse it with: 403 (a rule, a spent max_bytes), 503 (no slot within
// the queue wait), -1 (nothing to answer: the program left, or the call
// ended).
func (s *Served) admit(cl *client, host string, port int, e *Event) int {
	e.Host, e.Port = host, port
	d := s.pol.Decide(host)
	e.Host, e.Rule, e.Decision = d.Name, d.Rule, "allowed"
	switch {
	case !d.Allowed:
		e.Decision = "denied"
		return http.StatusForbidden
	case port <= 0 || port > 65535:
		e.Decision, e.Rule = "denied", "no port"
		return http.StatusForbidden
	case s.spent():
		e.Decision, e.Rule = "denied", fmt.Sprintf("max_bytes %d spent (all connections of the call)", s.pol.MaxBytes)
		return http.StatusForbidden
	}
	return s.acquire(cl, e)
}

// spent reports whether max_bytes leaves nothing for a new request.
func (s *Served) spent() bool {
	return s.pol.MaxBytes > 0 && s.moved.Load() >= s.pol.MaxBytes
}

// acquire gives cl one of the MaxConns slots, waiting at most the queue
// wait; see admit for what it returns. A connection that waited is
// checked before it is dialled: if its program closed it meanwhile (the
// proxy holds its FIN or its reset), it is not dialled.
func (s *Served) acquire(cl *client, e *Event) int {
	if cl.slot {
		return 0
	}
	select {
	case s.slots <- struct{}{}:
		cl.slot = true
		return 0
	default:
	}
	start := time.Now()
	s.waiting.Add(1)
	t := time.NewTimer(s.queueWait())
	var ended bool
	select {
	case s.slots <- struct{}{}:
		cl.slot = true
	case <-t.C:
	case <-s.ctx.Done():
		ended = true
	}
	t.Stop()
	s.waiting.Add(-1)
	e.Duration = time.Since(start)
	switch {
	case gone(cl.c):
		e.Error = fmt.Sprintf("the program closed the connection while it waited for a slot (max_conns %d): not dialled", s.maxConns())
		return -1
	case ended:
		e.Decision, e.Rule = "denied", fmt.Sprintf("the call ended while the connection waited for a slot (max_conns %d)", s.maxConns())
		return -1
	case !cl.slot:
		e.Decision, e.Rule = "denied", fmt.Sprintf("max_conns %d: no slot came free within %v (queue_wait)", s.maxConns(), s.queueWait())
		return http.StatusServiceUnavailable
	}
	return 0
}

// TCP states (include/net/tcp_states.h).
const (
	tcpClose     = 7
	tcpCloseWait = 8
)

// gone reports whether the program has closed c (or reset it): the kernel
// holds its FIN. A half-close cannot be told from a close, so a program
// that half-closed after its request, while it waited, is taken as gone.
func gone(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	state := -1
	if err := rc.Control(func(fd uintptr) {
		if info, err := unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO); err == nil {
			state = int(info.State)
		}
	}); err != nil {
		return false // closed here, by Close: the program did not leave
	}
	return state == tcpCloseWait || state == tcpClose
}

// connect resolves the admitted e.Host and connects to the first reachable
// address. It fills e and returns the connection, or nil with e saying why.
func (s *Served) connect(e *Event) net.Conn {
	port := e.Port
	ctx, cancel := context.WithTimeout(s.ctx, 30*time.Second)
	defer cancel()
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(e.Host); err == nil {
		addrs = []netip.Addr{a} // admitted by a CIDR rule
	} else {
		var err error
		addrs, err = s.opt.Lookup(ctx, e.Host)
		if err != nil {
			e.Error = "resolving " + e.Host + ": " + err.Error()
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
		e.Addr = netip.AddrPortFrom(a.Unmap(), uint16(port)).String()
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
	e.Error = "connecting: " + strings.Join(why, "; ")
	if len(addrs) == 0 {
		e.Error = "resolving " + e.Host + ": no address"
	}
	return nil
}

// take counts k bytes against max_bytes; false when they cross it (they
// are then not to be passed on).
func (s *Served) take(k int) bool {
	if s.pol.MaxBytes > 0 && s.moved.Add(int64(k)) > s.pol.MaxBytes {
		return false
	}
	return true
}

// pipe copies both ways until either side ends, nothing moves either way
// for the idle timeout, the byte cap is reached or the proxy closes; it
// fills e's counters, and e.Error when a limit ended it. Between two TCP
// connections it moves bytes with splice(2), never through the harness's
// memory.
func (s *Served) pipe(cl *client, dst net.Conn, e *Event) {
	if !s.track(dst) {
		dst.Close()
		e.Error = "the call ended before the tunnel opened"
		return
	}
	defer s.untrack(dst)
	client := cl.c
	start := time.Now()
	var wg sync.WaitGroup
	var up, down atomic.Int64
	var capped, idled atomic.Bool
	// The tunnel is idle when nothing moved either way for the idle
	// timeout: a download the program sends nothing during is not.
	var last atomic.Int64 // when a byte last moved, either way (UnixNano)
	last.Store(start.UnixNano())
	touch := func() { last.Store(time.Now().UnixNano()) }
	copyDir := func(w net.Conn, m mover, rc net.Conn, n *atomic.Int64) {
		defer wg.Done()
		defer m.close()
		for {
			_ = rc.SetReadDeadline(time.Unix(0, last.Load()).Add(s.idle()))
			k, err := m.in()
			if k > 0 {
				if !s.take(k) {
					capped.Store(true)
					client.Close()
					dst.Close()
					return
				}
				touch()
				_ = w.SetWriteDeadline(time.Now().Add(s.idle()))
				if werr := m.out(k, touch); werr != nil {
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
	// What the program sent past its request is already in the reader.
	pre, _ := cl.br.Peek(cl.br.Buffered())
	pre = bytes.Clone(pre)
	_, _ = cl.br.Discard(len(pre))
	wg.Add(2)
	go copyDir(dst, newMover(client, dst, pre, s.idle()), client, &up)
	go copyDir(client, newMover(dst, client, nil, s.idle()), dst, &down)
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
// one at a time (each decided on its own, each its own Event).
func (s *Served) http(cl *client) {
	for first := true; ; first = false {
		e, more := s.httpRequest(cl, first)
		if e != nil {
			s.report(*e)
		}
		if !more {
			return
		}
	}
}

// httpRequest reads and serves one request of cl; its Event (nil when the
// connection ended cleanly between requests) and whether the connection
// goes on.
func (s *Served) httpRequest(cl *client, first bool) (*Event, bool) {
	c, br := cl.c, cl.br
	if !first {
		// A keep-alive connection idles between requests; once the next
		// one begins, it has the handshake timeout to be complete.
		_ = c.SetReadDeadline(time.Now().Add(s.idle()))
		if _, err := br.Peek(1); err != nil {
			return nil, false
		}
		cl.accepted = time.Now()
		_ = c.SetReadDeadline(cl.accepted.Add(s.handshake()))
	}
	cl.hb.limit()
	req, err := http.ReadRequest(br)
	if err != nil {
		e, status := s.noRequest(cl, "http", err, first)
		if status > 0 {
			s.refuseHTTP(c, status, &e)
		}
		return &e, false
	}
	// The body and a tunnel's bytes are the program's to move.
	cl.hb.unlimited = true
	e := &Event{Time: time.Now(), Protocol: "http"}
	var host string
	var port int
	switch {
	case req.Method == http.MethodConnect:
		e.Protocol = "connect"
		host, port = splitHostPort(req.Host, 443)
	case req.URL == nil || req.URL.Host == "" || (req.URL.Scheme != "http" && req.URL.Scheme != ""):
		e.Decision, e.Rule, e.Host = "denied", "not a proxy request (want CONNECT or an absolute http:// URL)", req.Host
		s.refuseHTTP(c, http.StatusForbidden, e)
		return e, false
	default:
		host, port = splitHostPort(req.URL.Host, 80)
	}
	if status := s.admit(cl, host, port, e); status != 0 {
		s.refuseHTTP(c, status, e)
		return e, false
	}
	dst := s.connect(e)
	if dst == nil {
		s.refuseHTTP(c, http.StatusForbidden, e) // 502 unless a rule refused every address
		return e, false
	}
	if e.Protocol == "connect" {
		_ = c.SetWriteDeadline(time.Now().Add(s.handshake()))
		if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
			dst.Close()
			e.Error = "answering the program: " + err.Error()
			return e, false
		}
		s.pipe(cl, dst, e)
		return e, false
	}
	return e, s.forward(cl, req, dst, e)
}

// forward sends one request to dst and its response back; false when the
// client connection cannot go on. Idleness is measured on movement: every
// read and write, either way, has the idle timeout to move a byte, so a
// response that takes longer than it but keeps moving is not cut; every
// byte counts against max_bytes as it moves.
func (s *Served) forward(cl *client, req *http.Request, dst net.Conn, e *Event) bool {
	if !s.track(dst) {
		dst.Close()
		e.Error = "the call ended before the request was forwarded"
		return false
	}
	defer s.untrack(dst)
	c := cl.c
	start := time.Now()
	req.RequestURI = ""
	req.Header.Del("Proxy-Connection")
	req.Header.Del("Proxy-Authorization")
	req.Close = true
	_ = c.SetReadDeadline(time.Time{})
	cl.hb.idle = s.idle() // the request's body, read from the program
	md := &moving{Conn: dst, s: s}
	mc := &moving{Conn: c, s: s}
	defer func() { e.BytesUp, e.BytesDown, e.Duration = md.wrote, mc.wrote, time.Since(start) }()
	if err := req.Write(md); err != nil {
		e.Error = s.forwardError("forwarding the request", err)
		if !errors.Is(err, errCapped) {
			writeRefusal(c, http.StatusBadGateway, e.Error)
		}
		return false
	}
	resp, err := http.ReadResponse(bufio.NewReader(md), req)
	if err != nil {
		e.Error = s.forwardError("reading the response", err)
		writeRefusal(c, http.StatusBadGateway, e.Error)
		return false
	}
	defer resp.Body.Close()
	if err := resp.Write(mc); err != nil {
		e.Error = s.forwardError("forwarding the response", err)
		return false
	}
	return !resp.Close
}

func (s *Served) forwardError(what string, err error) string {
	switch {
	case errors.Is(err, errCapped):
		return fmt.Sprintf("closed at the byte cap (max_bytes %d, all connections of the call)", s.pol.MaxBytes)
	case errors.Is(err, os.ErrDeadlineExceeded):
		return fmt.Sprintf("closed after %v with nothing moved (idle_timeout)", s.idle())
	}
	return what + ": " + err.Error()
}

var errCapped = errors.New("egress: max_bytes reached")

// moving is a connection whose every read and write has the idle timeout
// to move a byte, and whose writes count against max_bytes.
type moving struct {
	net.Conn
	s     *Served
	wrote int64
}

func (m *moving) Read(b []byte) (int, error) {
	_ = m.Conn.SetReadDeadline(time.Now().Add(m.s.idle()))
	return m.Conn.Read(b)
}

func (m *moving) Write(b []byte) (int, error) {
	if !m.s.take(len(b)) {
		return 0, errCapped
	}
	_ = m.Conn.SetWriteDeadline(time.Now().Add(m.s.idle()))
	n, err := m.Conn.Write(b)
	m.wrote += int64(n)
	return n, err
}

// refuseHTTP answers a refused or failed attempt: the status with the
// reason in a header and the body (403 for a denial, 503 past the queue
// wait, 502 for a connection that failed); nothing when status < 0.
func (s *Served) refuseHTTP(c net.Conn, status int, e *Event) {
	if status < 0 {
		return
	}
	if e.Decision == "" {
		e.Decision = "denied"
	}
	why := "b10x-harness denied " + e.Host + ": " + e.Rule
	if e.Host == "" {
		why = "b10x-harness refused the request: " + e.Rule
	}
	if !e.Denied() {
		status, why = http.StatusBadGateway, "b10x-harness could not reach "+e.Host+": "+e.Error
	}
	_ = c.SetWriteDeadline(time.Now().Add(s.handshake()))
	writeRefusal(c, status, why)
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
	socksFailure     = 0x01
	socksNotAllowed  = 0x02
	socksHostUnreach = 0x04
	socksCmdUnsupp   = 0x07
	socksAddrUnsupp  = 0x08
)

var errSocksAddr = errors.New("egress: SOCKS5 address type not supported")

// readSocksGreeting reads a SOCKS5 greeting; whether it offers "no
// authentication".
func readSocksGreeting(br *bufio.Reader) (bool, error) {
	var hdr [2]byte
	if _, err := io.ReadFull(br, hdr[:]); err != nil {
		return false, err
	}
	methods := make([]byte, hdr[1])
	if _, err := io.ReadFull(br, methods); err != nil {
		return false, err
	}
	return slices.Contains(methods, 0), nil
}

// readSocksRequest reads a SOCKS5 request: its command and destination.
func readSocksRequest(br *bufio.Reader) (cmd byte, host string, port int, err error) {
	var req [4]byte
	if _, err := io.ReadFull(br, req[:]); err != nil {
		return 0, "", 0, err
	}
	if req[0] != 5 {
		return 0, "", 0, errors.New("egress: not a SOCKS5 request")
	}
	switch req[3] {
	case 1, 4:
		n := 4
		if req[3] == 4 {
			n = 16
		}
		b := make([]byte, n)
		if _, err := io.ReadFull(br, b); err != nil {
			return 0, "", 0, err
		}
		a, _ := netip.AddrFromSlice(b)
		host = a.String()
	case 3:
		l, err := br.ReadByte()
		if err != nil {
			return 0, "", 0, err
		}
		b := make([]byte, l)
		if _, err := io.ReadFull(br, b); err != nil {
			return 0, "", 0, err
		}
		host = string(b)
	default:
		return req[1], "", 0, errSocksAddr
	}
	var pb [2]byte
	if _, err := io.ReadFull(br, pb[:]); err != nil {
		return 0, "", 0, err
	}
	return req[1], host, int(binary.BigEndian.Uint16(pb[:])), nil
}

// socks serves one SOCKS5 CONNECT (no authentication; names are resolved
// here, by the proxy: socks5h) and returns its Event.
func (s *Served) socks(cl *client) Event {
	c, br := cl.c, cl.br
	noAuth, err := readSocksGreeting(br)
	if err != nil {
		e, _ := s.noRequest(cl, "socks5", err, true)
		return e
	}
	if !noAuth {
		_, _ = c.Write([]byte{5, 0xff})
		return Event{Time: cl.accepted, Protocol: "socks5", Decision: "denied", Rule: "SOCKS5 without the no-authentication method"}
	}
	if _, err := c.Write([]byte{5, 0}); err != nil {
		e, _ := s.noRequest(cl, "socks5", err, true)
		return e
	}
	cmd, host, port, err := readSocksRequest(br)
	if errors.Is(err, errSocksAddr) {
		socksReply(c, socksAddrUnsupp)
		return Event{Time: cl.accepted, Protocol: "socks5", Decision: "denied", Rule: "SOCKS5 address type not supported"}
	}
	if err != nil {
		e, _ := s.noRequest(cl, "socks5", err, true)
		return e
	}
	e := Event{Time: time.Now(), Protocol: "socks5"}
	if cmd != 1 {
		e.Host, e.Port, e.Decision, e.Rule = host, port, "denied", "only CONNECT is served (no BIND, no UDP ASSOCIATE)"
		socksReply(c, socksCmdUnsupp)
		return e
	}
	status := s.admit(cl, host, port, &e)
	_ = c.SetWriteDeadline(time.Now().Add(s.handshake()))
	switch status {
	case 0:
	case http.StatusForbidden:
		socksReply(c, socksNotAllowed)
		return e
	case http.StatusServiceUnavailable:
		socksReply(c, socksFailure)
		return e
	default:
		return e
	}
	dst := s.connect(&e)
	if dst == nil {
		code := byte(socksNotAllowed)
		if !e.Denied() {
			code = socksHostUnreach
		}
		socksReply(c, code)
		return e
	}
	_ = c.SetWriteDeadline(time.Now().Add(s.handshake()))
	socksReply(c, socksOK)
	cl.hb.unlimited = true
	s.pipe(cl, dst, &e)
	return e
}

func socksReply(c net.Conn, code byte) {
	_, _ = c.Write([]byte{5, code, 0, 1, 0, 0, 0, 0, 0, 0})
}

// maxHeader bounds what a program may send before its request's headers
// end (or its SOCKS5 greeting and request): the proxy holds it in memory.
const maxHeader = 64 << 10

// headerBudget reads from r, failing once maxHeader bytes have been read
// since the last reset, until unlimited is set (a tunnel's bytes are the
// program's to move). With idle set, each read gives c that long to move
// a byte (a forwarded request's body).
type headerBudget struct {
	r         io.Reader
	c         net.Conn
	n         int
	unlimited bool
	idle      time.Duration
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
	if h.idle > 0 {
		_ = h.c.SetReadDeadline(time.Now().Add(h.idle))
	}
	n, err := h.r.Read(p)
	h.n += n
	return n, err
}

// limit starts a new budget (before a request's headers).
func (h *headerBudget) limit() { h.n, h.unlimited, h.idle = 0, false, 0 }

var errHeaderBudget = errors.New("egress: request headers larger than 64 KiB")
