package egress

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/proxy"
)

func pats(t *testing.T, ss ...string) []Pattern {
	t.Helper()
	var ps []Pattern
	for _, s := range ss {
		p, err := ParsePattern(s)
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	return ps
}

func TestDecide(t *testing.T) {
	p := &Policy{
		Allow: pats(t, "proxy.golang.org", "*.example.com", "Bücher.example"),
		Deny:  pats(t, "evil.example.com"),
		CIDRs: []netip.Prefix{netip.MustParsePrefix("10.1.0.0/16")},
	}
	for host, want := range map[string]string{
		"proxy.golang.org":         "allow_domain proxy.golang.org",
		"PROXY.Golang.ORG.":        "allow_domain proxy.golang.org",
		"sum.golang.org":           "",
		"a.example.com":            "allow_domain *.example.com",
		"a.b.example.com":          "allow_domain *.example.com",
		"example.com":              "", // *.suffix does not match the bare suffix
		"notexample.com":           "",
		"evil.example.com":         "", // deny wins
		"xn--bcher-kva.example":    "allow_domain xn--bcher-kva.example",
		"bücher.example":           "allow_domain xn--bcher-kva.example",
		"10.1.2.3":                 "allow_cidr 10.1.0.0/16",
		"10.2.0.1":                 "",
		"[::1]":                    "",
		"127.0.0.1":                "",
		"proxy.golang.org\x00.x":   "",
		strings.Repeat("a.", 200):  "",
		"evil.example.com.":        "",
		"*.example.com":            "",
		"a.example.com:443":        "",
		"::ffff:10.1.0.1":          "allow_cidr 10.1.0.0/16",
		"xn--bcher-kva.example.":   "allow_domain xn--bcher-kva.example",
		"BÜCHER.example":           "allow_domain xn--bcher-kva.example",
		"proxy.golang.org.evil.io": "",
	} {
		d := p.Decide(host)
		if want == "" {
			if d.Allowed {
				t.Errorf("%q admitted by %s", host, d.Rule)
			}
			continue
		}
		if !d.Allowed || d.Rule != want {
			t.Errorf("%q: %+v, want allowed by %s", host, d, want)
		}
	}
	if d := p.Decide("evil.example.com"); d.Rule != "deny_domain evil.example.com" {
		t.Errorf("deny rule not named: %+v", d)
	}
	for _, bad := range []string{"", "*", "a.*.com", "10.0.0.1", "*."} {
		if _, err := ParsePattern(bad); err == nil {
			t.Errorf("ParsePattern(%q) accepted", bad)
		}
	}
}

func TestReachable(t *testing.T) {
	p := &Policy{CIDRs: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}
	for a, want := range map[string]bool{
		"127.0.0.1": true, "10.0.0.1": false, "192.168.1.1": false, "172.16.0.1": false, "169.254.169.254": false,
		"100.64.0.1": false, "0.0.0.0": false, "::1": false, "fe80::1": false, "fc00::1": false, "fd00::1": false,
		"224.0.0.1": false, "192.0.2.1": false, "::ffff:10.0.0.1": false, "::ffff:127.0.0.1": true, "8.8.8.8": true,
		"2001:4860:4860::8888": true, "255.255.255.255": false,
	} {
		if got, why := p.Reachable(netip.MustParseAddr(a)); got != want {
			t.Errorf("%s: reachable %v (%s), want %v", a, got, why, want)
		}
	}
}

// rig is a proxy on loopback whose names resolve through a table, with
// loopback admitted by a CIDR rule where the test says so.
type rig struct {
	t      *testing.T
	served *Served
	addr   string
	mu     sync.Mutex
	events []Event
	dialed []string
}

func newRig(t *testing.T, pol *Policy, names map[string][]string) *rig {
	t.Helper()
	return newRigWrap(t, pol, names, nil)
}

// newRigWrap is newRig whose dialled connections are passed through wrap
// (nil: none); a wrap that hides the *net.TCPConn makes the proxy move a
// tunnel through a buffer instead of splicing it.
func newRigWrap(t *testing.T, pol *Policy, names map[string][]string, wrap func(net.Conn) net.Conn) *rig {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{t: t, addr: ln.Addr().String()}
	d := &net.Dialer{Timeout: 5 * time.Second}
	r.served = Serve(ln, pol, Options{
		Lookup: func(_ context.Context, host string) ([]netip.Addr, error) {
			var out []netip.Addr
			for _, a := range names[host] {
				out = append(out, netip.MustParseAddr(a))
			}
			if len(out) == 0 {
				return nil, fmt.Errorf("no such host %s", host)
			}
			return out, nil
		},
		Dial: func(ctx context.Context, a netip.AddrPort) (net.Conn, error) {
			r.mu.Lock()
			r.dialed = append(r.dialed, a.String())
			r.mu.Unlock()
			if !a.Addr().IsLoopback() {
				return nil, fmt.Errorf("test dials loopback only, not %s", a)
			}
			c, err := d.DialContext(ctx, "tcp", a.String())
			if err == nil && wrap != nil {
				c = wrap(c)
			}
			return c, err
		},
		Report: func(e Event) {
			r.mu.Lock()
			r.events = append(r.events, e)
			r.mu.Unlock()
		},
	})
	t.Cleanup(func() { r.served.Close() })
	return r
}

func (r *rig) eventsFor(host string) []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Event
	for _, e := range r.events {
		if e.Host == host {
			out = append(out, e)
		}
	}
	return out
}

// waitEvent waits for n events of host (they are reported when a
// connection ends).
func (r *rig) waitEvent(host string, n int) []Event {
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if ev := r.eventsFor(host); len(ev) >= n {
			return ev
		}
		time.Sleep(10 * time.Millisecond)
	}
	r.t.Fatalf("no event for %s: %+v", host, r.events)
	return nil
}

// waitWaiting waits until n connections wait for a slot.
func (r *rig) waitWaiting(n int64) {
	r.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for r.served.waiting.Load() != n {
		if time.Now().After(deadline) {
			r.t.Fatalf("%d connections wait for a slot, want %d", r.served.waiting.Load(), n)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func (r *rig) client(tlsCfg *tls.Config) *http.Client {
	u, _ := url.Parse("http://" + r.addr)
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: http.ProxyURL(u), TLSClientConfig: tlsCfg, DisableKeepAlives: true}}
}

func TestConnectAndForward(t *testing.T) {
	tlsSrv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "secure hello") }))
	defer tlsSrv.Close()
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "plain hello "+r.URL.Path) }))
	defer plain.Close()
	_, tport, _ := net.SplitHostPort(tlsSrv.Listener.Addr().String())
	_, pport, _ := net.SplitHostPort(plain.Listener.Addr().String())

	pol := &Policy{Allow: pats(t, "good.test", "*.ok.test", "loopy.test"), Deny: pats(t, "bad.ok.test"),
		CIDRs: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}
	names := map[string][]string{"good.test": {"127.0.0.1"}, "a.ok.test": {"127.0.0.1"}, "bad.ok.test": {"127.0.0.1"}, "loopy.test": {"127.0.0.2"}}
	r := newRig(t, pol, names)
	cfg := tlsSrv.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
	cfg.ServerName = "example.com" // httptest's certificate
	c := r.client(cfg)

	resp, err := c.Get("https://good.test:" + tport + "/")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "secure hello" {
		t.Fatalf("through CONNECT: %q", b)
	}
	ev := r.waitEvent("good.test", 1)
	if ev[0].Decision != "allowed" || ev[0].Protocol != "connect" || ev[0].Rule != "allow_domain good.test" || ev[0].BytesDown == 0 || ev[0].BytesUp == 0 || ev[0].Addr != "127.0.0.1:"+tport {
		t.Errorf("event %+v", ev[0])
	}

	resp, err = c.Get("http://a.ok.test:" + pport + "/path")
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "plain hello /path" {
		t.Fatalf("forwarded: %q", b)
	}

	for host, why := range map[string]string{
		"bad.ok.test": "deny_domain bad.ok.test",
		"other.test":  "no allow_domain rule matches",
		"127.0.0.2":   "outside every allow_cidr",
		"loopy.test":  "resolves only to addresses no rule admits (127.0.0.2 is loopback)",
	} {
		for _, scheme := range []string{"https", "http"} {
			resp, err := c.Get(scheme + "://" + host + ":" + pport + "/")
			if scheme == "https" {
				// Go's client turns a refused CONNECT into an error
				// carrying the status.
				if err == nil || !strings.Contains(err.Error(), "Forbidden") {
					t.Errorf("%s %s: %v, want a refused CONNECT", scheme, host, err)
				}
				continue
			}
			if err != nil {
				t.Errorf("%s %s: %v", scheme, host, err)
				continue
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 403 || !strings.Contains(resp.Header.Get("X-B10x-Harness-Denied"), why) || !strings.Contains(string(body), why) {
				t.Errorf("%s %s: %d %q %q, want 403 naming %q", scheme, host, resp.StatusCode, resp.Header.Get("X-B10x-Harness-Denied"), body, why)
			}
		}
		ev := r.waitEvent(host, 2)
		if !ev[0].Denied() || !strings.Contains(ev[0].Rule, why) {
			t.Errorf("%s: event %+v", host, ev[0])
		}
	}
	r.mu.Lock()
	for _, d := range r.dialed {
		if !strings.HasPrefix(d, "127.0.0.1:") {
			t.Errorf("the proxy dialled %s, which no rule admits", d)
		}
	}
	r.mu.Unlock()
}

func TestSOCKS5(t *testing.T) {
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
	_, port, _ := net.SplitHostPort(echo.Addr().String())
	r := newRig(t, &Policy{Allow: pats(t, "echo.test"), CIDRs: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}, map[string][]string{"echo.test": {"127.0.0.1"}})
	d, err := proxy.SOCKS5("tcp", r.addr, nil, proxy.Direct)
	if err != nil {
		t.Fatal(err)
	}
	c, err := d.Dial("tcp", "echo.test:"+port)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(c, "ping\n")
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || line != "ping\n" {
		t.Fatalf("echo through SOCKS5: %q %v", line, err)
	}
	c.Close()
	if ev := r.waitEvent("echo.test", 1); ev[0].Protocol != "socks5" || ev[0].BytesUp != 5 || ev[0].BytesDown != 5 {
		t.Errorf("event %+v", ev[0])
	}
	for _, host := range []string{"other.test", "127.0.0.2"} {
		if _, err := d.Dial("tcp", host+":"+port); err == nil || !strings.Contains(err.Error(), "not allowed") {
			t.Errorf("SOCKS5 to %s: %v, want a refusal by ruleset", host, err)
		}
	}
}

// TestCloseEndsEverything: Close ends every open tunnel (a killed call
// leaves no connection), a connection past MaxConns waits unserved, and
// Close reports it.
func TestCloseEndsEverything(t *testing.T) {
	hold, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Close()
	var accepted atomic.Int64
	go func() {
		for {
			c, err := hold.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			go func() { io.Copy(io.Discard, c); c.Close() }()
		}
	}()
	_, port, _ := net.SplitHostPort(hold.Addr().String())
	r := newRig(t, &Policy{Allow: pats(t, "hold.test"), CIDRs: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}, MaxConns: 2}, map[string][]string{"hold.test": {"127.0.0.1"}})
	var tunnels []net.Conn
	for i := 0; i < 2; i++ {
		c, err := net.Dial("tcp", r.addr)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "CONNECT hold.test:%s HTTP/1.1\r\nHost: hold.test:%s\r\n\r\n", port, port)
		line, _ := bufio.NewReader(c).ReadString('\n')
		if !strings.Contains(line, "200") {
			t.Fatalf("tunnel %d: %q", i, line)
		}
		tunnels = append(tunnels, c)
	}
	// A third connection past max_conns 2 waits for a slot, its request
	// read: it gets no answer while both slots are taken.
	c, err := net.Dial("tcp", r.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "CONNECT hold.test:%s HTTP/1.1\r\n\r\n", port)
	r.waitWaiting(1)
	c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if line, err := bufio.NewReader(c).ReadString('\n'); err == nil {
		t.Errorf("a third connection past max_conns 2 was served: %q", line)
	}
	if n := r.served.Open(); n < 5 {
		t.Errorf("%d connections open, want the 2 tunnels, their 2 destinations and the one waiting", n)
	}
	// Close ends the tunnels itself: it does not wait for their idle
	// timeout (5 minutes here) to end them.
	closed := make(chan []Event, 1)
	go func() { closed <- r.served.Close() }()
	var denied []Event
	select {
	case denied = <-closed:
	case <-time.After(20 * time.Second):
		for _, c := range tunnels {
			c.Close() // so that Close, and the test, can end
		}
		t.Fatalf("Close has not returned after 20 s: it leaves the tunnels to their idle timeout")
	}
	if r.served.Open() != 0 {
		t.Errorf("%d connections open after Close", r.served.Open())
	}
	for _, c := range tunnels {
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		if _, err := c.Read(make([]byte, 1)); err == nil || strings.Contains(err.Error(), "timeout") {
			t.Errorf("a tunnel survived Close: %v", err)
		}
	}
	// The one that waited is the one denial: the call ended first.
	if len(denied) != 1 || denied[0].Host != "hold.test" || denied[0].Rule != "the call ended while the connection waited for a slot (max_conns 2)" {
		t.Errorf("denied %+v, want the waiting connection's, ended by the call", denied)
	}
	if n := accepted.Load(); n != 2 {
		t.Errorf("the destination took %d connections, want the 2 tunnels'", n)
	}
}

func TestEnv(t *testing.T) {
	env := strings.Join(Env(), "\n")
	for _, want := range []string{"HTTP_PROXY=http://127.0.0.1:3128", "https_proxy=http://127.0.0.1:3128", "ALL_PROXY=socks5h://127.0.0.1:3128", "no_proxy=localhost,127.0.0.1,::1", "JAVA_TOOL_OPTIONS=-Dhttp.proxyHost=127.0.0.1"} {
		if !strings.Contains(env, want) {
			t.Errorf("Env lacks %s", want)
		}
	}
}

// TestHeaderFlood: a program sending endless headers gets a refusal, and
// the proxy holds no more than its budget.
func TestHeaderFlood(t *testing.T) {
	r := newRig(t, &Policy{Allow: pats(t, "x.test")}, nil)
	c, err := net.Dial("tcp", r.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	go func() {
		fmt.Fprintf(c, "GET http://x.test/ HTTP/1.1\r\nHost: x.test\r\n")
		line := "X-Pad: " + strings.Repeat("a", 1000) + "\r\n"
		for i := 0; i < 1000; i++ {
			if _, err := io.WriteString(c, line); err != nil {
				return
			}
		}
	}()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || !strings.Contains(resp, "403") {
		t.Fatalf("a 1 MB header: %q %v, want a 403", resp, err)
	}
	if ev := r.waitEvent("", 1); !strings.Contains(ev[0].Rule, "larger than 64 KiB") {
		t.Errorf("event %+v", ev[0])
	}
}

func TestWithEnv(t *testing.T) {
	env := WithEnv([]string{"PATH=/bin", "HTTPS_PROXY=http://evil:1", "https_proxy=http://evil:1", "KEEP=1"})
	got := strings.Join(env, "\n")
	if strings.Contains(got, "evil") || !strings.Contains(got, "KEEP=1") || !strings.Contains(got, "PATH=/bin") || !strings.Contains(got, "HTTPS_PROXY=http://127.0.0.1:3128") {
		t.Errorf("WithEnv: %v", env)
	}
}
