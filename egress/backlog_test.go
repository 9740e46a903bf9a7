package egress

// The proxy's backlog as a program meets it: past max_conns a connection
// waits a bounded time and is refused with its own event; a program that
// left is not dialled; every connection gets exactly one event, those the
// call's end leaves unserved too; a spent byte budget refuses new
// requests; slow and silent clients hold no slot.

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/proxy"
)

func loopbackPolicy(t *testing.T, names ...string) *Policy {
	return &Policy{Allow: pats(t, names...), CIDRs: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}
}

func loopbackNames(names ...string) map[string][]string {
	m := map[string][]string{}
	for _, n := range names {
		m[n] = []string{"127.0.0.1"}
	}
	return m
}

// socksConnect greets the proxy at addr and asks for host:port; it returns
// the connection and the reply code (-1 when no reply came).
func socksConnect(t *testing.T, addr, host string, port int) (net.Conn, int) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	req := append([]byte{5, 1, 0, 5, 1, 0, 3, byte(len(host))}, host...)
	req = append(req, byte(port>>8), byte(port))
	if _, err := c.Write(req); err != nil {
		t.Fatal(err)
	}
	var rep [12]byte // the method selection, then the reply
	if _, err := io.ReadFull(c, rep[:]); err != nil {
		return c, -1
	}
	_ = c.SetDeadline(time.Time{})
	return c, int(rep[3])
}

// holdTunnels opens n tunnels to srv through r and leaves them open.
func holdTunnels(t *testing.T, r *rig, host string, srv *server, n int) []net.Conn {
	t.Helper()
	var out []net.Conn
	for i := 0; i < n; i++ {
		c, _, line := r.connect(host, srv.port)
		if !strings.Contains(line, " 200 ") {
			t.Fatalf("tunnel %d: %q", i, line)
		}
		out = append(out, c)
	}
	return out
}

// TestQueueWaitRefuses: past max_conns a connection whose request was read
// waits for a slot for the queue wait, then is refused (HTTP 503, SOCKS5
// general failure), each with its own denied event, and is never dialled.
func TestQueueWaitRefuses(t *testing.T) {
	const wait = 200 * time.Millisecond
	hold := newServer(t, echoHandler)
	pol := loopbackPolicy(t, "hold.test")
	pol.MaxConns, pol.QueueWait = 1, wait
	r := newRig(t, pol, loopbackNames("hold.test"))
	holdTunnels(t, r, "hold.test", hold, 1)

	start := time.Now()
	_, _, line := r.connect("hold.test", hold.port)
	if !strings.Contains(line, " 503 ") {
		t.Fatalf("CONNECT past max_conns 1: %q, want 503 after the queue wait", line)
	}
	if took := time.Since(start); took < wait {
		t.Errorf("refused %v after asking, before the queue wait of %v", took, wait)
	}
	p, _ := net.LookupPort("tcp", hold.port)
	if _, code := socksConnect(t, r.addr, "hold.test", p); code != socksFailure {
		t.Errorf("SOCKS5 past max_conns 1: reply %d, want %d (general failure)", code, socksFailure)
	}
	want := fmt.Sprintf("max_conns 1: no slot came free within %v (queue_wait)", wait)
	ev := r.waitEvent("hold.test", 2) // the tunnel's comes when it ends
	n := 0
	for _, e := range ev {
		if e.Rule == want {
			n++
			if !e.Denied() || e.Addr != "" || e.Duration < wait {
				t.Errorf("event %+v, want denied, not dialled, after the wait", e)
			}
		}
	}
	if n != 2 {
		t.Errorf("%d events say %q, want 2 (CONNECT and SOCKS5): %+v", n, want, ev)
	}
	if got := hold.accepted.Load(); got != 1 {
		t.Errorf("the destination took %d connections, want the one tunnel's", got)
	}
}

// TestLeftWhileWaitingNotDialled: a program that closes its connection
// while it waits for a slot is not dialled when the slot comes free; its
// event says so.
func TestLeftWhileWaitingNotDialled(t *testing.T) {
	for _, how := range []string{"close", "reset"} {
		t.Run(how, func(t *testing.T) {
			hold := newServer(t, echoHandler)
			pol := loopbackPolicy(t, "hold.test")
			pol.MaxConns, pol.QueueWait = 1, time.Minute
			r := newRig(t, pol, loopbackNames("hold.test"))
			tunnel := holdTunnels(t, r, "hold.test", hold, 1)[0]

			c, err := net.Dial("tcp", r.addr)
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(c, "CONNECT hold.test:%s HTTP/1.1\r\n\r\n", hold.port)
			r.waitWaiting(1)
			if how == "reset" {
				_ = c.(*net.TCPConn).SetLinger(0)
			}
			c.Close()
			tunnel.Close() // the slot comes free
			hold.waitEnded(t, "the tunnel")
			r.waitWaiting(0)
			ev := r.waitEvent("hold.test", 2)
			var left *Event
			for i := range ev {
				if ev[i].Error != "" && strings.Contains(ev[i].Error, "while it waited") {
					left = &ev[i]
				}
			}
			if left == nil || left.Denied() || left.Addr != "" || !strings.Contains(left.Error, "not dialled") {
				t.Errorf("events %+v, want one allowed, not dialled, saying the program left while it waited", ev)
			}
			if got := hold.accepted.Load(); got != 1 {
				t.Errorf("the destination took %d connections: the program that left was dialled", got)
			}
		})
	}
}

// TestEveryAttemptOneEvent: under load, with a mix of programs (served,
// denied, refused after the queue wait, leaving while they wait, sending
// nothing, sending half a request, SOCKS5), and with connections still
// waiting and still in the listener's backlog when the call ends, every
// connection gets exactly one event: those that named a destination are
// told apart by its port, the others counted.
func TestEveryAttemptOneEvent(t *testing.T) {
	echo := newServer(t, echoHandler)
	var mu sync.Mutex
	var events []Event
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	pol := loopbackPolicy(t, "ok.test")
	// A queue wait of a second: the four waiting at the end are refused
	// and replaced from the backlog once a second, so the call's end
	// does not fall while one just taken is still being read.
	pol.MaxConns, pol.QueueWait, pol.HandshakeTimeout = 4, time.Second, time.Second
	var dials atomic.Int64
	s := Serve(ln, pol, Options{
		Lookup: func(context.Context, string) ([]netip.Addr, error) {
			return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
		},
		// Every port leads to the echo server: the port only names the
		// connection.
		Dial: func(ctx context.Context, _ netip.AddrPort) (net.Conn, error) {
			dials.Add(1)
			var d net.Dialer
			return d.DialContext(ctx, "tcp", "127.0.0.1:"+echo.port)
		},
		Report: func(e Event) {
			mu.Lock()
			events = append(events, e)
			mu.Unlock()
		},
	})
	t.Cleanup(func() { s.Close() })

	var attempts, named, unnamed atomic.Int64 // connections made; of them, those whose port names them
	var open []net.Conn
	var openMu sync.Mutex
	keep := func(c net.Conn) {
		openMu.Lock()
		open = append(open, c)
		openMu.Unlock()
	}
	dial := func() net.Conn {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Errorf("dial the proxy: %v", err)
			return nil
		}
		attempts.Add(1)
		_ = c.SetDeadline(time.Now().Add(20 * time.Second))
		return c
	}
	const clients = 140
	var wg sync.WaitGroup
	// Two tunnels hold two of the four slots throughout.
	for i := 0; i < 2; i++ {
		c := dial()
		fmt.Fprintf(c, "CONNECT ok.test:%d HTTP/1.1\r\n\r\n", 60000+i)
		named.Add(1)
		if line, _ := bufio.NewReader(c).ReadString('\n'); !strings.Contains(line, " 200 ") {
			t.Fatalf("holding tunnel %d: %q", i, line)
		}
		keep(c)
	}
	for i := 0; i < clients; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			c := dial()
			if c == nil {
				return
			}
			port := 1000 + i
			switch i % 7 {
			case 0, 1: // served: an echo through a tunnel
				named.Add(1)
				fmt.Fprintf(c, "CONNECT ok.test:%d HTTP/1.1\r\n\r\nping\n", port)
				br := bufio.NewReader(c)
				if line, _ := br.ReadString('\n'); strings.Contains(line, " 200 ") {
					for h, _ := br.ReadString('\n'); h != "\r\n" && h != ""; h, _ = br.ReadString('\n') {
					}
					_, _ = br.ReadString('\n')
				}
				c.Close()
			case 2: // denied by the rules
				named.Add(1)
				fmt.Fprintf(c, "CONNECT no.test:%d HTTP/1.1\r\n\r\n", port)
				_, _ = bufio.NewReader(c).ReadString('\n')
				c.Close()
			case 3: // leaves while it may be waiting
				named.Add(1)
				fmt.Fprintf(c, "CONNECT ok.test:%d HTTP/1.1\r\n\r\n", port)
				time.Sleep(20 * time.Millisecond)
				c.Close()
			case 4: // sends nothing
				unnamed.Add(1)
				c.Close()
			case 5: // half a request, then silence until the handshake timeout
				unnamed.Add(1)
				fmt.Fprintf(c, "CONNECT ok.test:%d HTTP/1.1\r\n", port)
				_, _ = io.ReadAll(c)
				c.Close()
			case 6: // SOCKS5
				named.Add(1)
				req := append([]byte{5, 1, 0, 5, 1, 0, 3, 7}, "ok.test"...)
				req = append(req, byte(port>>8), byte(port), 'p', 'i', 'n', 'g', '\n')
				_, _ = c.Write(req)
				_, _ = io.ReadFull(c, make([]byte, 12))
				c.Close()
			}
		}(i)
	}
	wg.Wait()
	// The call ends with both other slots taken, connections waiting and
	// more in the listener's backlog.
	for i := 0; i < 2; i++ {
		c := dial()
		fmt.Fprintf(c, "CONNECT ok.test:%d HTTP/1.1\r\n\r\n", 60002+i)
		named.Add(1)
		if line, _ := bufio.NewReader(c).ReadString('\n'); !strings.Contains(line, " 200 ") {
			t.Fatalf("holding tunnel %d: %q", 2+i, line)
		}
		keep(c)
	}
	for i := 0; i < 20; i++ {
		c := dial()
		fmt.Fprintf(c, "CONNECT ok.test:%d HTTP/1.1\r\n\r\n", 61000+i)
		named.Add(1)
		keep(c)
	}
	// Four of them wait for a slot (the queue is 2×max_conns, four
	// holding tunnels), the other sixteen stay in the backlog.
	for deadline := time.Now().Add(10 * time.Second); s.waiting.Load() != 4; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections wait for a slot, want 4", s.waiting.Load())
		}
	}
	s.Close()
	for _, c := range open {
		c.Close()
	}

	mu.Lock()
	defer mu.Unlock()
	byPort := map[int]int{}
	gotUnnamed, drained, drainedNamed := 0, 0, 0
	for _, e := range events {
		if e.Port == 0 {
			gotUnnamed++
		} else {
			byPort[e.Port]++
		}
		if e.Rule == "the call ended before the proxy served the connection" {
			drained++
			if e.Port != 0 {
				drainedNamed++
			}
		}
	}
	for p, n := range byPort {
		if n != 1 {
			t.Errorf("the connection named by port %d got %d events", p, n)
		}
	}
	if int64(len(byPort)) != named.Load() || int64(gotUnnamed) != unnamed.Load() || int64(len(events)) != attempts.Load() {
		t.Errorf("%d connections (%d named, %d not) got %d events (%d named, %d not)", attempts.Load(), named.Load(), unnamed.Load(), len(events), len(byPort), gotUnnamed)
	}
	if drained == 0 || drainedNamed == 0 {
		t.Errorf("%d events of connections left in the backlog (%d naming their destination), want some: the call ended with 16 there", drained, drainedNamed)
	}
	t.Logf("%d connections, %d events, %d dials, %d from the backlog", attempts.Load(), len(events), dials.Load(), drained)
}

// TestConnectAfterBudgetRefused: once max_bytes is spent, a new CONNECT is
// refused (403, not "200 Connection established" and a close), as are a
// SOCKS5 request and a plain HTTP request, none of them dialled.
func TestConnectAfterBudgetRefused(t *testing.T) {
	const maxBytes = 64 << 10
	sinkSrv := newServer(t, func(c net.Conn) { _, _ = io.Copy(io.Discard, c) })
	pol := loopbackPolicy(t, "big.test")
	pol.MaxBytes = maxBytes
	r := newRig(t, pol, loopbackNames("big.test"))
	c, _, line := r.connect("big.test", sinkSrv.port)
	if !strings.Contains(line, " 200 ") {
		t.Fatalf("CONNECT big.test: %q", line)
	}
	buf := make([]byte, 16<<10)
	for i := 0; i < 1000; i++ {
		_ = c.SetWriteDeadline(time.Now().Add(10 * time.Second))
		if _, err := c.Write(buf); err != nil {
			break
		}
	}
	sinkSrv.waitEnded(t, "the first tunnel")
	r.waitEvent("big.test", 1)

	want := fmt.Sprintf("max_bytes %d spent (all connections of the call)", maxBytes)
	_, _, line = r.connect("big.test", sinkSrv.port)
	if !strings.Contains(line, " 403 ") {
		t.Errorf("CONNECT after max_bytes is spent: %q, want a 403", line)
	}
	p, _ := net.LookupPort("tcp", sinkSrv.port)
	if _, code := socksConnect(t, r.addr, "big.test", p); code != socksNotAllowed {
		t.Errorf("SOCKS5 after max_bytes is spent: reply %d, want %d", code, socksNotAllowed)
	}
	resp, err := r.client(nil).Get("http://big.test:" + sinkSrv.port + "/")
	if err != nil || resp.StatusCode != http.StatusForbidden || !strings.Contains(resp.Header.Get("X-B10x-Harness-Denied"), want) {
		t.Errorf("GET after max_bytes is spent: %v %v, want a 403 naming %q", resp, err, want)
	}
	if resp != nil {
		resp.Body.Close()
	}
	ev := r.waitEvent("big.test", 4)
	n := 0
	for _, e := range ev {
		if e.Rule == want && e.Denied() && e.Addr == "" {
			n++
		}
	}
	if n != 3 {
		t.Errorf("%d events refused by %q, want 3: %+v", n, want, ev)
	}
	if got := sinkSrv.accepted.Load(); got != 1 {
		t.Errorf("the destination took %d connections, want the first tunnel's", got)
	}
}

// TestHalfSentRequestsHoldNoSlot: 200 connections that send half a request
// and go silent hold no slot and are closed at the handshake timeout, not
// the idle timeout (5 minutes by default): the call's own connection,
// made after them, is served within a few handshake timeouts, and each of
// the 200 gets a 408 and its event.
func TestHalfSentRequestsHoldNoSlot(t *testing.T) {
	const handshake, flood = 300 * time.Millisecond, 200
	echo := newServer(t, echoHandler)
	pol := loopbackPolicy(t, "ok.test")
	pol.HandshakeTimeout = handshake
	r := newRig(t, pol, loopbackNames("ok.test"))
	var conns []net.Conn
	for i := 0; i < flood; i++ {
		c, err := net.Dial("tcp", r.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprintf(c, "CONNECT ok.test:%s HTTP/1.1\r\nHost: ok.test\r\n", echo.port)
		conns = append(conns, c)
	}
	start := time.Now()
	c, br, line := r.connect("ok.test", echo.port)
	took := time.Since(start)
	if !strings.Contains(line, " 200 ") {
		t.Fatalf("the call's own CONNECT behind %d half-sent requests: %q after %v", flood, line, took)
	}
	if took > 20*handshake {
		t.Errorf("the call's own CONNECT was answered %v after it was made, behind %d half-sent requests with a handshake timeout of %v", took, flood, handshake)
	}
	fmt.Fprintf(c, "ping\n")
	if got, err := br.ReadString('\n'); got != "ping\n" {
		t.Errorf("echo: %q %v", got, err)
	}
	c.Close()
	for i, c := range conns {
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		line, err := bufio.NewReader(c).ReadString('\n')
		if !strings.Contains(line, " 408 ") {
			t.Fatalf("half-sent request %d: %q %v, want a 408", i, line, err)
		}
	}
	want := fmt.Sprintf("no complete request within %v (handshake_timeout)", handshake)
	deadline := time.Now().Add(10 * time.Second)
	for len(r.eventsFor("")) < flood && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	ev := r.eventsFor("")
	for _, e := range ev {
		if e.Rule != want || !e.Denied() {
			t.Errorf("event %+v, want %q", e, want)
			break
		}
	}
	if len(ev) != flood {
		t.Errorf("%d events of half-sent requests, want %d", len(ev), flood)
	}
	t.Logf("the call's own CONNECT was answered %v after it was made", took)
}

// TestSlowAndSilentClients: a client that sends its request a byte at a
// time, slower than the handshake timeout allows, is cut there (408), as
// is a SOCKS5 client that sends only its first byte; neither is dialled,
// and both get their event.
func TestSlowAndSilentClients(t *testing.T) {
	const handshake = 300 * time.Millisecond
	echo := newServer(t, echoHandler)
	pol := loopbackPolicy(t, "ok.test")
	pol.HandshakeTimeout = handshake
	r := newRig(t, pol, loopbackNames("ok.test"))

	start := time.Now() // the handshake timeout counts from the proxy's accept, after this
	c, err := net.Dial("tcp", r.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	req := fmt.Sprintf("CONNECT ok.test:%s HTTP/1.1\r\nHost: ok.test\r\nUser-Agent: slow\r\n\r\n", echo.port)
	cut := make(chan time.Duration, 1)
	go func() {
		for i := 0; i < len(req); i++ {
			if _, err := c.Write([]byte{req[i]}); err != nil {
				break
			}
			time.Sleep(handshake / 10)
		}
	}()
	go func() {
		_ = c.SetReadDeadline(time.Now().Add(20 * handshake))
		line, _ := bufio.NewReader(c).ReadString('\n')
		if !strings.Contains(line, " 408 ") {
			t.Errorf("a request sent a byte every %v: %q, want a 408", handshake/10, line)
		}
		cut <- time.Since(start)
	}()
	if took := <-cut; took < handshake || took > 10*handshake {
		t.Errorf("the slow request was cut %v after it began, want at its handshake timeout of %v", took, handshake)
	}

	s, err := net.Dial("tcp", r.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, _ = s.Write([]byte{5})
	_ = s.SetReadDeadline(time.Now().Add(20 * handshake))
	if _, err := s.Read(make([]byte, 1)); err == nil {
		t.Errorf("a silent SOCKS5 client got an answer")
	}
	want := fmt.Sprintf("no complete request within %v (handshake_timeout)", handshake)
	ev := r.waitEvent("", 2)
	for _, e := range ev {
		if e.Rule != want {
			t.Errorf("event %+v, want %q", e, want)
		}
	}
	if ev[1].Protocol != "socks5" {
		t.Errorf("the silent SOCKS5 client's event %+v, want protocol socks5", ev[1])
	}
	if n := echo.accepted.Load(); n != 0 {
		t.Errorf("the destination took %d connections", n)
	}
}

// TestPipelinedBytesReachTheDestination: what a program sends right after
// its request, in the same write, goes through the tunnel first, both
// spliced and copied, over CONNECT and SOCKS5.
func TestPipelinedBytesReachTheDestination(t *testing.T) {
	for _, path := range tunnelPaths {
		t.Run(path.name, func(t *testing.T) {
			echo := newServer(t, echoHandler)
			r := newRigWrap(t, loopbackPolicy(t, "echo.test"), loopbackNames("echo.test"), path.wrap)
			c, err := net.Dial("tcp", r.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(10 * time.Second))
			fmt.Fprintf(c, "CONNECT echo.test:%s HTTP/1.1\r\n\r\nfirst\n", echo.port)
			br := bufio.NewReader(c)
			for h, err := br.ReadString('\n'); h != "\r\n"; h, err = br.ReadString('\n') {
				if err != nil {
					t.Fatal(err)
				}
			}
			fmt.Fprintf(c, "second\n")
			for _, want := range []string{"first\n", "second\n"} {
				if got, err := br.ReadString('\n'); got != want {
					t.Errorf("CONNECT: %q %v, want %q", got, err, want)
				}
			}
			p, _ := net.LookupPort("tcp", echo.port)
			d, err := proxy.SOCKS5("tcp", r.addr, nil, proxy.Direct)
			if err != nil {
				t.Fatal(err)
			}
			sc, err := d.Dial("tcp", fmt.Sprintf("echo.test:%d", p))
			if err != nil {
				t.Fatal(err)
			}
			defer sc.Close()
			fmt.Fprintf(sc, "third\n")
			if got, err := bufio.NewReader(sc).ReadString('\n'); got != "third\n" {
				t.Errorf("SOCKS5: %q %v", got, err)
			}
		})
	}
}
