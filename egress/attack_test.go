package egress

// Red-team attacks on the proxy as a hostile run child would make them.
// The proxy is served on a loopback listener; the one allowed name
// (good.test) resolves to a global address that Dial maps to a test
// server; every other dial is recorded as an escape.

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

type atkRig struct {
	t       *testing.T
	s       *Served
	addr    string
	mu      sync.Mutex
	escapes []string
	hosts   []string // Host headers the upstream saw
}

var goodAddr = netip.MustParseAddr("93.184.216.34")

func newAtkRig(t *testing.T, pol *Policy) *atkRig {
	r := &atkRig{t: t}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.hosts = append(r.hosts, req.Host)
		r.mu.Unlock()
		io.WriteString(w, "UPSTREAM")
	}))
	t.Cleanup(up.Close)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r.addr = ln.Addr().String()
	opt := Options{
		Lookup: func(ctx context.Context, host string) ([]netip.Addr, error) {
			switch host {
			case "good.test":
				return []netip.Addr{goodAddr}, nil
			case "rebind.good.test":
				return []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("::7f00:1"), netip.MustParseAddr("::ffff:0:7f00:1"), netip.MustParseAddr("64:ff9b::7f00:1"), netip.MustParseAddr("2002:7f00:1::1"), netip.MustParseAddr("64:ff9b::a9fe:a9fe"), netip.MustParseAddr("64:ff9b::a00:1")}, nil
			}
			return nil, fmt.Errorf("no such host %s", host)
		},
		Dial: func(ctx context.Context, a netip.AddrPort) (net.Conn, error) {
			if a.Addr() == goodAddr {
				return net.Dial("tcp", up.Listener.Addr().String())
			}
			r.mu.Lock()
			r.escapes = append(r.escapes, a.String())
			r.mu.Unlock()
			return nil, fmt.Errorf("test: refusing to really dial %s", a)
		},
	}
	r.s = Serve(ln, pol, opt)
	t.Cleanup(func() { r.s.Close() })
	return r
}

func (r *atkRig) dial() net.Conn {
	c, err := net.Dial("tcp", r.addr)
	if err != nil {
		r.t.Fatal(err)
	}
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	return c
}

func (r *atkRig) noEscapes() {
	r.t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.escapes) > 0 {
		r.t.Errorf("the proxy dialled addresses no rule admits: %v", r.escapes)
	}
}

func goodPolicy() *Policy {
	return &Policy{Allow: []Pattern{mustPattern("good.test"), mustPattern("*.good.test")}}
}

func mustPattern(s string) Pattern {
	p, err := ParsePattern(s)
	if err != nil {
		panic(err)
	}
	return p
}

// Odd authorities through CONNECT and SOCKS5 ATYP 3: nothing but
// good.test's address is ever dialled, and each is refused.
func TestRedteamOddAuthorities(t *testing.T) {
	r := newAtkRig(t, goodPolicy())
	hosts := []string{"127.0.0.1", "2130706433", "0x7f.1", "0x7f000001", "127.1", "017700000001", "[::ffff:127.0.0.1]", "[::1]",
		"[fe80::1%25lo]", "[fe80::1%lo]", "localhost", "LOCALHOST.", "good.test.evil.net", "evil.net#good.test", "good.test@evil.net",
		"ɡood.test", "good.tеst", "xn--ood-xyz.test", "rebind.good.test", "169.254.169.254", "[::]", "0.0.0.0", "0", "good.test.."}
	for _, h := range hosts {
		c := r.dial()
		fmt.Fprintf(c, "CONNECT %s:80 HTTP/1.1\r\nHost: %s:80\r\n\r\n", h, h)
		line, _ := bufio.NewReader(c).ReadString('\n')
		c.Close()
		if strings.Contains(line, " 200 ") {
			t.Errorf("CONNECT %s: %q, want a refusal", h, line)
		}
		name := strings.Trim(h, "[]")
		c = r.dial()
		c.Write([]byte{5, 1, 0})
		io.ReadFull(c, make([]byte, 2))
		req := append([]byte{5, 1, 0, 3, byte(len(name))}, name...)
		req = binary.BigEndian.AppendUint16(req, 80)
		c.Write(req)
		rep := make([]byte, 10)
		_, err := io.ReadFull(c, rep)
		c.Close()
		if err == nil && rep[1] == 0 {
			t.Errorf("SOCKS5 ATYP 3 %q: admitted", name)
		}
	}
	r.noEscapes()
}

// SOCKS5 edge cases: a name of length 0, port 0, IPv6 ATYP 4 of a mapped
// loopback, BIND and UDP ASSOCIATE.
func TestRedteamSocksEdges(t *testing.T) {
	r := newAtkRig(t, goodPolicy())
	cases := map[string][]byte{
		"empty name":    {5, 1, 0, 3, 0, 0, 80},
		"port 0":        append(append([]byte{5, 1, 0, 3, 9}, "good.test"...), 0, 0),
		"mapped v6":     append(append([]byte{5, 1, 0, 4}, netip.MustParseAddr("::ffff:127.0.0.1").AsSlice()...), 0, 80),
		"bind":          append(append([]byte{5, 2, 0, 3, 9}, "good.test"...), 0, 80),
		"udp associate": append(append([]byte{5, 3, 0, 3, 9}, "good.test"...), 0, 80),
		"nul in name":   append(append([]byte{5, 1, 0, 3, 19}, "127.0.0.1\x00good.test"...), 0, 80),
		"slash in name": append(append([]byte{5, 1, 0, 3, 20}, "evil.net/x.good.test"...), 0, 80),
	}
	for name, req := range cases {
		c := r.dial()
		c.Write([]byte{5, 1, 0})
		io.ReadFull(c, make([]byte, 2))
		c.Write(req)
		rep := make([]byte, 10)
		_, err := io.ReadFull(c, rep)
		c.Close()
		if err == nil && rep[1] == 0 {
			t.Errorf("SOCKS5 %s: admitted", name)
		}
	}
	r.noEscapes()
}

// Absolute-URI requests on one keep-alive connection: an allowed one,
// then a denied one, then Host-header games. Each is decided on its own
// URL host, and the upstream sees the admitted name as Host.
func TestRedteamKeepAliveSmuggling(t *testing.T) {
	r := newAtkRig(t, goodPolicy())
	c := r.dial()
	defer c.Close()
	br := bufio.NewReader(c)
	fmt.Fprintf(c, "GET http://good.test/ HTTP/1.1\r\nHost: evil.test\r\nConnection: keep-alive\r\n\r\n")
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	fmt.Fprintf(c, "GET http://127.0.0.1:80/ HTTP/1.1\r\nHost: good.test\r\n\r\n")
	resp, err = http.ReadResponse(br, nil)
	if err == nil && resp.StatusCode == 200 {
		t.Errorf("the second request of a keep-alive connection (to 127.0.0.1) was forwarded")
	}
	// A body carrying a second request, with both CL and TE.
	c2 := r.dial()
	defer c2.Close()
	inner := "GET http://127.0.0.1/ HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
	fmt.Fprintf(c2, "POST http://good.test/ HTTP/1.1\r\nHost: good.test\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n%s", inner)
	br2 := bufio.NewReader(c2)
	for i := 0; i < 2; i++ {
		resp, err := http.ReadResponse(br2, nil)
		if err != nil {
			break
		}
		b, _ := io.ReadAll(resp.Body)
		if i == 1 && resp.StatusCode == 200 {
			t.Errorf("a smuggled second request was forwarded: %s", b)
		}
	}
	r.mu.Lock()
	for _, h := range r.hosts {
		if h != "good.test" {
			t.Errorf("the upstream saw Host %q, not the admitted name", h)
		}
	}
	r.mu.Unlock()
	r.noEscapes()
}

// A child opens many connections that send nothing. Past MaxConns each is
// refused, but the harness holds every one (a descriptor, a goroutine and
// a 4 KiB reader) for up to 5 s: the program decides how many descriptors
// and how much memory the harness spends, without bound.
func TestRedteamConnectionFlood(t *testing.T) {
	pol := goodPolicy()
	pol.MaxConns = 8
	r := newAtkRig(t, pol)
	before := openFDs(t)
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := 0; i < 2000; i++ {
		c, err := net.Dial("tcp", r.addr)
		if err != nil {
			break
		}
		conns = append(conns, c)
	}
	time.Sleep(500 * time.Millisecond)
	if n := r.s.Open(); n > 4*pol.MaxConns {
		t.Errorf("with max_conns %d the harness holds %d connections of one call open at once", pol.MaxConns, n)
	}
	// What the kernel says this process holds: the clients' own
	// descriptors, and on the proxy's side no more than its bound (and a
	// few of the rig's own).
	held := openFDs(t) - before - len(conns)
	t.Logf("%d connections, the proxy side holds %d descriptors", len(conns), held)
	if held > 4*pol.MaxConns+8 {
		t.Errorf("with max_conns %d and %d connections open, the proxy's side holds %d descriptors (/proc/self/fd)", pol.MaxConns, len(conns), held)
	}
}

// openFDs counts this process's open descriptors, as the kernel lists them.
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}
