package egress

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// server is a loopback test server: each connection is handed to handle,
// and ended receives a value when handle returns. accepted counts the
// connections.
type server struct {
	port     string
	accepted atomic.Int64
	ended    chan struct{}
}

func newServer(t *testing.T, handle func(net.Conn)) *server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	s := &server{ended: make(chan struct{}, 16)}
	_, s.port, _ = net.SplitHostPort(ln.Addr().String())
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.accepted.Add(1)
			go func() {
				defer func() { s.ended <- struct{}{} }()
				defer c.Close()
				handle(c)
			}()
		}
	}()
	return s
}

func echoHandler(c net.Conn) { _, _ = io.Copy(c, c) }

// tunnelPaths are the two ways a tunnel moves: spliced between two TCP
// connections, and through a buffer when the destination's connection is
// not a *net.TCPConn.
var tunnelPaths = []struct {
	name string
	wrap func(net.Conn) net.Conn
}{
	{"splice", nil},
	{"copy", func(c net.Conn) net.Conn { return hiddenTCP{c} }},
}

// hiddenTCP is a TCP connection that is not a *net.TCPConn.
type hiddenTCP struct{ net.Conn }

func (h hiddenTCP) CloseWrite() error { return h.Conn.(*net.TCPConn).CloseWrite() }

// waitEnded waits for one of the server's connections to end.
func (s *server) waitEnded(t *testing.T, what string) {
	t.Helper()
	select {
	case <-s.ended:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: the server's connection did not end", what)
	}
}

// connect opens a CONNECT tunnel through the rig to host:port and returns
// the connection and the status line of the proxy's answer.
func (r *rig) connect(host, port string) (net.Conn, *bufio.Reader, string) {
	r.t.Helper()
	c, err := net.Dial("tcp", r.addr)
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "CONNECT %s:%s HTTP/1.1\r\nHost: %s:%s\r\n\r\n", host, port, host, port)
	br := bufio.NewReader(c)
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, _ := br.ReadString('\n')
	for {
		h, err := br.ReadString('\n')
		if err != nil || h == "\r\n" {
			break
		}
	}
	_ = c.SetReadDeadline(time.Time{})
	return c, br, line
}

func (r *rig) dialedNow() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.dialed...)
}

// TestDialsTheAddressChecked: of a name's several answers the proxy dials
// the one it checked and admitted, never another: with [a private address,
// 127.0.0.1 admitted by a CIDR rule, 127.0.0.2 not admitted] it connects to
// 127.0.0.1 and dials nothing else; with [a global address it cannot
// reach, 127.0.0.1 not admitted] the global one fails and 127.0.0.1 is not
// dialled (dialling the last answer would reach the host's loopback).
func TestDialsTheAddressChecked(t *testing.T) {
	echo := newServer(t, echoHandler)
	names := map[string][]string{"several.test": {"10.0.0.1", "127.0.0.1", "127.0.0.2"}, "rebind.test": {"2001:4860:4860::8888", "127.0.0.1"}}
	r := newRig(t, &Policy{Allow: pats(t, "several.test"), CIDRs: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}, names)
	c, br, line := r.connect("several.test", echo.port)
	if !strings.Contains(line, " 200 ") {
		t.Fatalf("CONNECT several.test: %q", line)
	}
	fmt.Fprintf(c, "ping\n")
	if got, err := br.ReadString('\n'); got != "ping\n" {
		t.Fatalf("echo through the tunnel: %q %v", got, err)
	}
	c.Close()
	if d := r.dialedNow(); len(d) != 1 || d[0] != "127.0.0.1:"+echo.port {
		t.Errorf("dialled %v, want only the address admitted, 127.0.0.1:%s", d, echo.port)
	}
	if ev := r.waitEvent("several.test", 1); ev[0].Addr != "127.0.0.1:"+echo.port {
		t.Errorf("event %+v, want the address 127.0.0.1:%s", ev[0], echo.port)
	}

	r = newRig(t, &Policy{Allow: pats(t, "rebind.test")}, names)
	_, _, line = r.connect("rebind.test", echo.port)
	if !strings.Contains(line, " 502 ") {
		t.Errorf("CONNECT rebind.test: %q, want a 502 (its one admitted address cannot be reached)", line)
	}
	if d := r.dialedNow(); len(d) != 1 || d[0] != "[2001:4860:4860::8888]:"+echo.port {
		t.Errorf("dialled %v, want only [2001:4860:4860::8888]:%s", d, echo.port)
	}
	if n := echo.accepted.Load(); n != 1 {
		t.Errorf("the loopback server took %d connections, want 1 (several.test's): rebind.test reached it", n)
	}
	if ev := r.waitEvent("rebind.test", 1); ev[0].Denied() || ev[0].Addr != "" || !strings.Contains(ev[0].Error, "127.0.0.1 is loopback") {
		t.Errorf("event %+v, want an allowed attempt that connected nowhere", ev[0])
	}
}

// TestIdleTunnelClosed: a tunnel on which nothing moves for the policy's
// idle timeout is closed: the program sees its connection end (not the
// test's own, far later, deadline), the destination's ends too, and the
// attempt says why.
func TestIdleTunnelClosed(t *testing.T) {
	for _, path := range tunnelPaths {
		t.Run(path.name, func(t *testing.T) {
			const idle = 200 * time.Millisecond
			echo := newServer(t, echoHandler)
			r := newRigWrap(t, &Policy{Allow: pats(t, "idle.test"), CIDRs: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}, IdleTimeout: idle},
				map[string][]string{"idle.test": {"127.0.0.1"}}, path.wrap)
			c, br, line := r.connect("idle.test", echo.port)
			if !strings.Contains(line, " 200 ") {
				t.Fatalf("CONNECT idle.test: %q", line)
			}
			fmt.Fprintf(c, "ping\n")
			if got, err := br.ReadString('\n'); got != "ping\n" {
				t.Fatalf("echo through the tunnel: %q %v", got, err)
			}
			last := time.Now()
			// The bound is fifty idle timeouts: far past the proxy's, far short
			// of DefaultIdleTimeout.
			_ = c.SetReadDeadline(last.Add(50 * idle))
			_, err := br.ReadByte()
			took := time.Since(last)
			if errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("the tunnel is still open %v after its last byte, with an idle timeout of %v", took, idle)
			}
			if err == nil || took < idle {
				t.Errorf("the tunnel ended %v after its last byte (%v), before its idle timeout of %v", took, err, idle)
			}
			t.Logf("closed %v after its last byte (idle timeout %v)", took, idle)
			echo.waitEnded(t, "idle.test")
			if ev := r.waitEvent("idle.test", 1); ev[0].Denied() || ev[0].BytesUp != 5 || ev[0].BytesDown != 5 || !strings.Contains(ev[0].Error, "with nothing moved either way (idle_timeout)") {
				t.Errorf("event %+v, want it closed at the idle timeout", ev[0])
			}
		})
	}
}

// TestIdleIsBothWays: a tunnel is idle only when nothing moves either way:
// a download during which the program sends nothing outlasts the idle
// timeout several times without its upload half being closed (a server
// that sees the client's end mid-response cancels it), and is closed once
// the download stops too.
func TestIdleIsBothWays(t *testing.T) {
	for _, path := range tunnelPaths {
		t.Run(path.name, func(t *testing.T) {
			const idle, pace, writes = 400 * time.Millisecond, 40 * time.Millisecond, 40
			var early atomic.Bool
			srv := newServer(t, func(c net.Conn) {
				eof := make(chan struct{})
				go func() { _, _ = io.Copy(io.Discard, c); close(eof) }()
				for i := 0; i < writes; i++ {
					select {
					case <-eof:
						early.Store(true)
						return
					case <-time.After(pace):
					}
					if _, err := c.Write([]byte{'x'}); err != nil {
						return
					}
				}
				<-eof
			})
			r := newRigWrap(t, &Policy{Allow: pats(t, "down.test"), CIDRs: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}, IdleTimeout: idle},
				map[string][]string{"down.test": {"127.0.0.1"}}, path.wrap)
			c, br, line := r.connect("down.test", srv.port)
			if !strings.Contains(line, " 200 ") {
				t.Fatalf("CONNECT down.test: %q", line)
			}
			start := time.Now()
			_ = c.SetReadDeadline(start.Add(writes*pace + 20*idle))
			got, err := io.ReadAll(br)
			if errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("the tunnel is still open %v after it was opened (idle timeout %v): %v", time.Since(start), idle, err)
			}
			if early.Load() || len(got) != writes {
				t.Errorf("the program got %d of %d bytes over %v; the server saw the program's end before it had sent them all: %v", len(got), writes, time.Since(start), early.Load())
			}
			srv.waitEnded(t, "down.test")
			if ev := r.waitEvent("down.test", 1); ev[0].BytesDown != writes || !strings.Contains(ev[0].Error, "idle_timeout") {
				t.Errorf("event %+v, want %d bytes down and an end at the idle timeout", ev[0], writes)
			}
		})
	}
}

// TestMaxBytesCutsTunnel: a program pushing more than the policy's byte
// cap through a tunnel is cut off there: its writes fail, the destination
// gets no more than the cap, and the attempt says it was closed at the
// cap.
func TestMaxBytesCutsTunnel(t *testing.T) {
	for _, path := range tunnelPaths {
		t.Run(path.name, func(t *testing.T) {
			const maxBytes, push = 1 << 20, 64 << 20
			var got atomic.Int64
			sinkSrv := newServer(t, func(c net.Conn) {
				n, _ := io.Copy(io.Discard, c)
				got.Add(n)
			})
			r := newRigWrap(t, &Policy{Allow: pats(t, "big.test"), CIDRs: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}, MaxBytes: maxBytes},
				map[string][]string{"big.test": {"127.0.0.1"}}, path.wrap)
			c, _, line := r.connect("big.test", sinkSrv.port)
			if !strings.Contains(line, " 200 ") {
				t.Fatalf("CONNECT big.test: %q", line)
			}
			buf := make([]byte, 32<<10)
			sent := 0
			var err error
			for sent < push && err == nil {
				_ = c.SetWriteDeadline(time.Now().Add(10 * time.Second))
				var n int
				n, err = c.Write(buf)
				sent += n
			}
			if err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("pushed %d bytes through a tunnel with max_bytes %d (%v), want it cut off", sent, maxBytes, err)
			}
			sinkSrv.waitEnded(t, "big.test")
			if n := got.Load(); n > maxBytes {
				t.Errorf("the destination got %d bytes, past max_bytes %d", n, maxBytes)
			}
			ev := r.waitEvent("big.test", 1)
			if ev[0].Denied() || !strings.Contains(ev[0].Error, fmt.Sprintf("closed at the byte cap (max_bytes %d", maxBytes)) || ev[0].BytesUp > maxBytes || ev[0].BytesUp != got.Load() {
				t.Errorf("event %+v, want closed at the byte cap with %d bytes up", ev[0], got.Load())
			}
			t.Logf("the program wrote %d bytes before the error (%v); the destination got %d", sent, err, got.Load())
		})
	}
}
