package egress

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"
)

// FuzzParsePattern attacks ParsePattern and normalize with any text.
// ParsePattern never panics; a pattern it accepts has a name, gives itself
// back from its own String (and from that spelled in upper case or with a
// trailing dot), matches what it says it matches (an exact pattern its
// name and nothing below it, a suffix pattern the names below its suffix
// and not the suffix itself), and decides as an allow rule and as a deny
// rule accordingly. normalize keeps what the package promises of a name as
// rules compare it: lower case, no trailing dot, an IDN in its ASCII form,
// an address without brackets; and what it returns is its own normal form,
// a name that ParsePattern takes as the pattern of exactly that name.
func FuzzParsePattern(f *testing.F) {
	for _, s := range []string{
		"proxy.golang.org", "*.golang.org", "PROXY.Golang.ORG.", "Bücher.example", "*.xn--bcher-kva.example", " a.test ",
		"", "*", "*.", "a.*.com", "10.0.0.1", "[::1]", "[fe80::1%eth0]", "::ffff:10.1.0.1", "a..b", "a.", ".a", "a.。",
		"[a]", "[]", "[[a]]", "[A.B.]", "a\x00b", strings.Repeat("a.", 130), "xn--", "xn--a", "a\u3002b", "ｅxample.com",
		"*.*.a", "*.[x]", "ß.de", "İ.test", "a_b.test", "-a.test",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if n, err := normalize(s); err == nil {
			checkNormal(t, s, n)
		}
		p, err := ParsePattern(s)
		if err != nil {
			return
		}
		if p.name == "" {
			t.Fatalf("ParsePattern(%q) = %#v: a pattern without a name", s, p)
		}
		for _, again := range []string{p.String(), asciiUpper(p.String()), p.String() + "."} {
			q, err := ParsePattern(again)
			if err != nil {
				t.Fatalf("ParsePattern(%q) = %#v, but its spelling %q is refused: %v", s, p, again, err)
			}
			if q != p {
				t.Fatalf("ParsePattern(%q) = %#v, but its spelling %q gives %#v", s, p, again, q)
			}
		}
		if q, err := ParsePattern(asciiUpper(s)); err != nil || q != p {
			t.Fatalf("ParsePattern(%q) = %#v, but in upper case %#v, %v", s, p, q, err)
		}
		below := "a." + p.name
		if p.suffix {
			if p.Match(p.name) {
				t.Fatalf("%s matches its bare suffix %q", p, p.name)
			}
			if !p.Match(below) {
				t.Fatalf("%s does not match %q", p, below)
			}
		} else {
			if !p.Match(p.name) {
				t.Fatalf("%s does not match its own name", p)
			}
			if p.Match(below) {
				t.Fatalf("%s matches %q below it", p, below)
			}
		}
		target := p.name
		if p.suffix {
			target = below
		}
		if len(target) > 253 {
			return // a name below it would be too long to decide
		}
		allow := &Policy{Allow: []Pattern{p}}
		if d := allow.Decide(target); !d.Allowed || d.Rule != "allow_domain "+p.String() || d.Name != target {
			t.Fatalf("allow %s: %q decided %+v", p, target, d)
		}
		both := &Policy{Allow: []Pattern{p}, Deny: []Pattern{p}}
		if d := both.Decide(target); d.Allowed || d.Rule != "deny_domain "+p.String() {
			t.Fatalf("allow and deny %s: %q decided %+v", p, target, d)
		}
	})
}

// TestNormalize pins normalize on the inputs that once broke its promises
// (brackets around a name, an empty name in brackets, a trailing dot left
// by IDNA or in brackets, a zone) and on ordinary names and addresses.
func TestNormalize(t *testing.T) {
	for in, want := range map[string]string{
		"PROXY.Golang.ORG.": "proxy.golang.org", "Bücher.example": "xn--bcher-kva.example", "a\u3002b": "a.b", " a.test ": "a.test",
		"[::1]": "::1", "[::1].": "::1", "[1.2.3.4]": "1.2.3.4", "::FFFF:10.1.0.1": "::ffff:10.1.0.1", "10.0.0.1": "10.0.0.1",
		"[]": "", "[a]": "", "[[a]]": "", "[A.B.]": "", "[ evil.test]": "", "[bücher.example]": "", "a.\u3002": "", "a\u3002": "",
		"a..b": "", ".a": "", "a..": "", "xn--": "", "a.xn--": "", "xn--.a": "", "[fe80::1%eth0]": "", "fe80::1%lo": "", "fe80::1%a..": "",
	} {
		got, err := normalize(in)
		if want == "" {
			if err == nil {
				t.Errorf("normalize(%q) = %q, want an error", in, got)
			}
			continue
		}
		if err != nil || got != want {
			t.Errorf("normalize(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	// A name in brackets was taken as it stood, past IDNA: the deny rule
	// (compared in ASCII) missed it and the allow rule admitted it.
	p := &Policy{Allow: []Pattern{mustPattern("*.example")}, Deny: []Pattern{mustPattern("bücher.example")}}
	for _, h := range []string{"bücher.example", "[bücher.example]", "[ bücher.example]", "[BÜCHER.example.]"} {
		if d := p.Decide(h); d.Allowed {
			t.Errorf("%q admitted: %+v", h, d)
		}
	}
}

// checkNormal holds n, normalize's answer for s, to its promises.
func checkNormal(t *testing.T, s, n string) {
	t.Helper()
	if n == "" {
		t.Fatalf("normalize(%q) = \"\"", s)
	}
	for i := 0; i < len(n); i++ {
		if c := n[i]; 'A' <= c && c <= 'Z' || c >= 0x80 {
			t.Fatalf("normalize(%q) = %q: byte %#x at %d is not lower-case ASCII", s, n, c, i)
		}
	}
	if strings.HasSuffix(n, ".") {
		t.Fatalf("normalize(%q) = %q: a trailing dot", s, n)
	}
	if strings.HasPrefix(n, "[") || strings.HasSuffix(n, "]") {
		t.Fatalf("normalize(%q) = %q: brackets", s, n)
	}
	m, err := normalize(n)
	if err != nil || m != n {
		t.Fatalf("normalize(%q) = %q, but normalize(%q) = %q, %v", s, n, n, m, err)
	}
	if _, err := netip.ParseAddr(n); err == nil {
		return
	}
	if len(n) > 253 {
		t.Fatalf("normalize(%q) = %q: %d bytes", s, n, len(n))
	}
	if strings.Contains(n, "*") {
		return // normalised, and refused as a pattern
	}
	p, err := ParsePattern(n)
	if err != nil || p.suffix || p.name != n || !p.Match(n) {
		t.Fatalf("normalize(%q) = %q, but ParsePattern gives %#v, %v", s, n, p, err)
	}
}

// asciiUpper is s with its ASCII letters in upper case and nothing else
// changed (strings.ToUpper would also change the non-ASCII ones).
func asciiUpper(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'a' <= c && c <= 'z' {
			b[i] = c - 'a' + 'A'
		}
	}
	return string(b)
}

// socksRequest is a SOCKS5 greeting offering no authentication, then a
// request: cmd, an address type and its bytes, a port.
func socksRequest(cmd, atyp byte, addr []byte, port uint16) []byte {
	b := []byte{5, 1, 0, 5, cmd, 0, atyp}
	if atyp == 3 {
		b = append(b, byte(len(addr)))
	}
	b = append(b, addr...)
	return binary.BigEndian.AppendUint16(b, port)
}

// socksSeeds are requests the SOCKS5 targets start from: names allowed,
// denied and unknown, addresses, other commands and address types, short
// and long reads.
func socksSeeds() [][]byte {
	return [][]byte{
		socksRequest(1, 3, []byte("good.test"), 443),
		append(socksRequest(1, 3, []byte("good.test"), 80), "GET / HTTP/1.0\r\n\r\n"...),
		socksRequest(1, 3, []byte("bad.ok.test"), 443),
		socksRequest(1, 3, []byte("a.ok.test"), 443),
		socksRequest(1, 3, []byte("loop.ok.test"), 443),
		socksRequest(1, 3, []byte("GOOD.test."), 443),
		socksRequest(1, 3, []byte("[good.test]"), 443),
		socksRequest(1, 3, []byte("other.test"), 443),
		socksRequest(1, 3, nil, 80),
		socksRequest(1, 3, []byte("good.test"), 0),
		socksRequest(1, 1, []byte{10, 9, 0, 5}, 80),
		socksRequest(1, 1, []byte{127, 0, 0, 1}, 80),
		socksRequest(1, 4, netip.MustParseAddr("::ffff:127.0.0.1").AsSlice(), 80),
		socksRequest(1, 4, netip.MustParseAddr("::ffff:10.9.0.1").AsSlice(), 80),
		socksRequest(2, 3, []byte("good.test"), 80),
		socksRequest(3, 3, []byte("good.test"), 80),
		socksRequest(1, 9, nil, 80),
		{5, 1, 2, 5, 1, 0, 3},
		{5, 0},
		{5, 255},
		{5},
		{4, 1, 0, 80, 127, 0, 0, 1, 0},
	}
}

// FuzzSocksHandshake attacks readSocksGreeting and readSocksRequest, and
// target (which reads a drained connection's first bytes with them), with
// any bytes. None panics; a greeting that reads consumed its two bytes and
// its methods and says whether "no authentication" was among them; a
// request that reads has a port in 0..65535, a host that is empty only
// when the request named an empty domain name (which the rules then
// refuse), and is exactly the bytes it consumed: written back in SOCKS5,
// it gives them again.
func FuzzSocksHandshake(f *testing.F) {
	for _, b := range socksSeeds() {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _, _ = target(b)
		rd := bytes.NewReader(b)
		br := bufio.NewReader(rd)
		// What a reader consumed: neither in br's buffer nor still in rd.
		consumed := func() int { return len(b) - br.Buffered() - rd.Len() }
		noAuth, err := readSocksGreeting(br)
		if err != nil {
			return
		}
		used := consumed()
		if used != 2+int(b[1]) {
			t.Fatalf("greeting %x: consumed %d bytes", b, used)
		}
		if noAuth != bytes.Contains(b[2:used], []byte{0}) {
			t.Fatalf("greeting %x: no authentication %v", b, noAuth)
		}
		cmd, host, port, err := readSocksRequest(br)
		if err != nil {
			return
		}
		req := b[used:consumed()]
		if port < 0 || port > 65535 {
			t.Fatalf("request %x: port %d", req, port)
		}
		if host == "" && !(req[3] == 3 && req[4] == 0) {
			t.Fatalf("request %x: no host", req)
		}
		if d := (&Policy{Allow: []Pattern{mustPattern("*.test")}, CIDRs: []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0")}}).Decide(host); host == "" && d.Allowed {
			t.Fatalf("request %x: the empty host is admitted: %+v", req, d)
		}
		var addr []byte
		switch req[3] {
		case 1, 4:
			a, err := netip.ParseAddr(host)
			if err != nil {
				t.Fatalf("request %x: host %q is not an address: %v", req, host, err)
			}
			addr = a.AsSlice()
			if req[3] == 4 {
				s := a.As16()
				addr = s[:]
			}
		case 3:
			addr = []byte(host)
		default:
			t.Fatalf("request %x: address type %d read", req, req[3])
		}
		again := socksRequest(cmd, req[3], addr, uint16(port))[3:]
		again[2] = req[2] // the reserved byte, not read
		if !bytes.Equal(again, req) {
			t.Fatalf("request %x read as cmd %d host %q port %d, which is %x", req, cmd, host, port, again)
		}
	})
}

// pipeListener hands Serve the server ends of net.Pipe connections.
type pipeListener struct {
	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), closed: make(chan struct{})}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }

// fuzzUpstream answers one request with a short response and takes
// whatever else it is sent, until either end closes.
func fuzzUpstream(c net.Conn) {
	defer c.Close()
	go func() { _, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok") }()
	_, _ = io.Copy(io.Discard, c)
}

// FuzzServe attacks the proxy itself with any bytes from a program: its
// first bytes choose SOCKS5 or HTTP (CONNECT, forwarded requests, one
// after another on a keep-alive connection). The connection is a
// net.Pipe; names resolve through a table and Dial gives a pipe to an
// in-memory upstream, so nothing leaves the process. It asserts: no
// panic; once the program closes its end, the connection is served to its
// end, and Close returns, within a bound far below the handshake and idle
// timeouts (so the close ended it, not a timer); every connection has an
// Event; only names the rules admit are resolved; every dial is of an
// address the policy calls reachable, for an Event the rules admitted,
// one dial per connected Event; a name the rules refuse is never dialled.
func FuzzServe(f *testing.F) {
	for _, b := range socksSeeds() {
		f.Add(b)
	}
	for _, s := range []string{
		"CONNECT good.test:443 HTTP/1.1\r\nHost: good.test:443\r\n\r\nhello",
		"CONNECT bad.ok.test:443 HTTP/1.1\r\nHost: bad.ok.test:443\r\n\r\n",
		"CONNECT loop.ok.test:443 HTTP/1.1\r\n\r\n",
		"CONNECT [::1]:443 HTTP/1.1\r\n\r\n",
		"CONNECT 10.9.0.7:22 HTTP/1.1\r\n\r\n",
		"CONNECT good.test:99999 HTTP/1.1\r\n\r\n",
		"CONNECT good.test:x HTTP/1.1\r\n\r\n",
		"GET http://a.ok.test/x HTTP/1.1\r\nHost: a.ok.test\r\n\r\nGET http://bad.ok.test/ HTTP/1.1\r\nHost: bad.ok.test\r\n\r\n",
		"GET http://good.test/ HTTP/1.1\r\nHost: good.test\r\n\r\nGET http://good.test/2 HTTP/1.1\r\nHost: good.test\r\n\r\n",
		"POST http://good.test/ HTTP/1.1\r\nHost: good.test\r\nContent-Length: 5\r\n\r\nhello",
		"POST http://good.test/ HTTP/1.1\r\nHost: good.test\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
		"GET https://good.test/ HTTP/1.1\r\n\r\n",
		"GET /relative HTTP/1.1\r\nHost: good.test\r\n\r\n",
		"GET http://[good.test]/ HTTP/1.1\r\n\r\n",
		"GET http://good.test@bad.ok.test/ HTTP/1.1\r\n\r\n",
		"GARBAGE\r\n\r\n",
		"",
	} {
		f.Add([]byte(s))
	}
	pol := &Policy{
		Allow:            []Pattern{mustPattern("good.test"), mustPattern("*.ok.test")},
		Deny:             []Pattern{mustPattern("bad.ok.test")},
		CIDRs:            []netip.Prefix{netip.MustParsePrefix("10.9.0.0/16")},
		HandshakeTimeout: time.Minute,
		IdleTimeout:      time.Minute,
	}
	names := map[string][]netip.Addr{
		"good.test":    {netip.MustParseAddr("93.184.216.34")},
		"a.ok.test":    {netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("93.184.216.35")},
		"loop.ok.test": {netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("::ffff:10.0.0.1")},
		"bad.ok.test":  {netip.MustParseAddr("93.184.216.36")},
	}
	const bound = 5 * time.Second
	f.Fuzz(func(t *testing.T, b []byte) {
		var mu sync.Mutex
		var events []Event
		var looked []string
		var dials []netip.AddrPort
		ln := newPipeListener()
		s := Serve(ln, pol, Options{
			Lookup: func(_ context.Context, host string) ([]netip.Addr, error) {
				mu.Lock()
				looked = append(looked, host)
				mu.Unlock()
				if a, ok := names[host]; ok {
					return a, nil
				}
				return nil, fmt.Errorf("no such host %q", host)
			},
			Dial: func(_ context.Context, a netip.AddrPort) (net.Conn, error) {
				mu.Lock()
				dials = append(dials, a)
				mu.Unlock()
				near, far := net.Pipe()
				go fuzzUpstream(far)
				return near, nil
			},
			Report: func(e Event) {
				mu.Lock()
				events = append(events, e)
				mu.Unlock()
			},
		})
		closing := sync.OnceFunc(func() {
			done := make(chan struct{})
			go func() {
				s.Close()
				close(done)
			}()
			select {
			case <-done:
			case <-time.After(bound):
				t.Errorf("%q: Close has not returned after %v", b, bound)
			}
		})
		defer closing()
		c, sc := net.Pipe()
		ln.conns <- sc
		ended := make(chan struct{})
		go func() {
			defer close(ended)
			_, _ = io.Copy(io.Discard, c)
		}()
		_ = c.SetWriteDeadline(time.Now().Add(bound))
		_, _ = c.Write(b)
		select {
		case <-ended:
		case <-time.After(time.Millisecond):
		}
		c.Close()
		deadline := time.Now().Add(bound)
		for {
			mu.Lock()
			n := len(events)
			mu.Unlock()
			if n > 0 && s.Open() == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%q: %d connections open and %d events %v after the program closed its end", b, s.Open(), n, bound)
			}
			time.Sleep(100 * time.Microsecond)
		}
		closing()
		if t.Failed() {
			return
		}

		mu.Lock()
		defer mu.Unlock()
		for _, h := range looked {
			if d := pol.Decide(h); !d.Allowed {
				t.Errorf("%q: resolved %q, which the rules refuse (%s)", b, h, d.Rule)
			}
		}
		connected := map[string]int{}
		for _, e := range events {
			if e.Decision != "allowed" && e.Decision != "denied" {
				t.Errorf("%q: event %+v: decision %q", b, e, e.Decision)
			}
			if e.Addr == "" {
				continue
			}
			connected[e.Addr]++
			if d := pol.Decide(e.Host); e.Decision != "allowed" || !d.Allowed {
				t.Errorf("%q: event %+v connected to %s, but the rules say %+v", b, e, e.Addr, d)
			}
		}
		if len(dials) != sumCounts(connected) {
			t.Errorf("%q: %d dials for %d connected events: %v; %+v", b, len(dials), sumCounts(connected), dials, events)
		}
		for _, a := range dials {
			if ok, why := pol.Reachable(a.Addr()); !ok || a.Port() == 0 {
				t.Errorf("%q: dialled %s: %s", b, a, why)
			}
			if connected[a.String()] == 0 {
				t.Errorf("%q: dialled %s, which no event connected to: %+v", b, a, events)
			}
			connected[a.String()]--
		}
	})
}

func sumCounts(m map[string]int) int {
	n := 0
	for _, k := range m {
		n += k
	}
	return n
}
