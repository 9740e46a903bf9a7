package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/b10x/harness/egress"
	"github.com/b10x/harness/internal/testenv"
)

// testHostsEnv names, in the harness test binary's environment, the names
// its proxy resolves by itself ("good.test=127.0.0.1,other.test=..."),
// so a test server on loopback can stand for a host on the Internet
// without touching the machine's resolver.
const testHostsEnv = "B10X_TEST_HOSTS"

func testHosts(spec string) func(context.Context, string) ([]netip.Addr, error) {
	table := map[string][]netip.Addr{}
	for _, kv := range strings.Split(spec, ",") {
		name, addr, _ := strings.Cut(kv, "=")
		if a, err := netip.ParseAddr(addr); err == nil {
			table[name] = append(table[name], a)
		}
	}
	return func(_ context.Context, host string) ([]netip.Addr, error) {
		if a, ok := table[host]; ok {
			return a, nil
		}
		return nil, fmt.Errorf("lookup %s: no such host (test resolver)", host)
	}
}

// netRig is a workspace, an HTTPS and an HTTP server on loopback, and curl.
type netRig struct {
	ws, rec          string
	httpsPort, plain string
	curl             string
}

func newNetRig(t *testing.T) *netRig {
	t.Helper()
	curl, err := exec.LookPath("curl")
	testenv.Require(t, err == nil, "curl", testenv.InGuest()...)
	tlsSrv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "SECURE-HELLO") }))
	t.Cleanup(tlsSrv.Close)
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "PLAIN-HELLO "+r.Host) }))
	t.Cleanup(plain.Close)
	_, tp, _ := net.SplitHostPort(tlsSrv.Listener.Addr().String())
	_, pp, _ := net.SplitHostPort(plain.Listener.Addr().String())
	ws := t.TempDir()
	return &netRig{ws: ws, rec: filepath.Join(t.TempDir(), "rec.jsonl"), httpsPort: tp, plain: pp, curl: curl}
}

// call runs curl with args in a run call through the proxy, the policy
// allowing good.test and 127.0.0.1/32 (the test servers' address) unless
// flags say otherwise.
func (r *netRig) call(t *testing.T, flags []string, argv ...string) (netOutcome, result) {
	t.Helper()
	args := append([]string{"call", "--workspace", r.ws, "--record", r.rec, "--yes", "--allow-program", "curl"}, flags...)
	b, _ := json.Marshal(map[string]any{"argv": append([]string{"curl"}, argv...), "timeout_s": 30})
	args = append(args, "run", string(b))
	cmd := harnessCommand(args...)
	cmd.Env = append(os.Environ(), "B10X_TEST_MAIN=1", testHostsEnv+"=good.test=127.0.0.1,loopy.test=127.0.0.1,other.test=127.0.0.1")
	res := runHarnessCmd(t, cmd, "")
	var o netOutcome
	if err := json.Unmarshal([]byte(res.stdout), &o); err != nil {
		t.Fatalf("no netOutcome (exit %d): %v\nstdout %s\nstderr %s", res.code, err, res.stdout, res.stderr)
	}
	return o, res
}

type netOutcome struct {
	Status string         `json:"status"`
	Reason string         `json:"reason"`
	Result string         `json:"result"`
	Meta   map[string]any `json:"meta"`
}

// netLines reads the record's net lines.
func netLines(t *testing.T, rec string) []map[string]any {
	t.Helper()
	f, err := os.Open(rec)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil && m["event"] == "net" {
			out = append(out, m)
		}
	}
	return out
}

// TestProxyEgress: curl through the proxy reaches an allowed name (a
// local HTTPS server, its address allowed by a CIDR rule), and nothing
// else: a denied name, an IP literal, a name that resolves to loopback
// without a CIDR rule, and a direct connection that ignores the proxy
// variables. Each attempt is a net line of its call in the record, and a
// denial is in the call's netOutcome.
func TestProxyEgress(t *testing.T) {
	r := newNetRig(t)
	allow := []string{"--allow-domain", "good.test", "--allow-domain", "*.ok.test", "--deny-domain", "bad.ok.test", "--allow-cidr", "127.0.0.1/32"}

	o, res := r.call(t, allow, "-sS", "-k", "https://good.test:"+r.httpsPort+"/")
	if o.Status != "executed" || !strings.Contains(o.Result, "SECURE-HELLO") || !strings.Contains(o.Result, "exit status 0") {
		t.Fatalf("HTTPS to an allowed name: %+v\n%s", o, res.stderr)
	}
	o, _ = r.call(t, allow, "-sS", "http://good.test:"+r.plain+"/x")
	if !strings.Contains(o.Result, "PLAIN-HELLO good.test:"+r.plain) {
		t.Errorf("plain HTTP to an allowed name: %+v", o)
	}

	for _, c := range []struct {
		name  string
		flags []string
		argv  []string
		rule  string // in the netOutcome and the record; "" for a direct connection
	}{
		{"denied name", allow, []string{"-sS", "https://other.test:" + r.httpsPort + "/"}, "no allow_domain rule matches"},
		{"deny wins", allow, []string{"-sS", "-k", "https://bad.ok.test:" + r.httpsPort + "/"}, "deny_domain bad.ok.test"},
		{"ip literal", allow, []string{"-sS", "-k", "https://127.0.0.2:" + r.httpsPort + "/"}, "an IP address outside every allow_cidr"},
		{"loopback without a cidr rule", []string{"--allow-domain", "loopy.test"}, []string{"-sS", "-k", "https://loopy.test:" + r.httpsPort + "/"}, "resolves only to addresses no rule admits (127.0.0.1 is loopback)"},
		{"plain http denied", allow, []string{"-sS", "-i", "http://other.test:" + r.plain + "/"}, "no allow_domain rule matches"},
		{"direct, ignoring the proxy", allow, []string{"-sS", "--noproxy", "*", "--connect-timeout", "5", "-k", "https://127.0.0.1:" + r.httpsPort + "/"}, ""},
	} {
		before := len(netLines(t, r.rec))
		o, _ := r.call(t, c.flags, c.argv...)
		if strings.Contains(o.Result, "SECURE-HELLO") || strings.Contains(o.Result, "PLAIN-HELLO") {
			t.Errorf("%s: reached the server: %s", c.name, o.Result)
			continue
		}
		lines := netLines(t, r.rec)[before:]
		if c.rule == "" {
			if len(lines) != 0 || !strings.Contains(o.Result, "exit status 7") {
				t.Errorf("%s: want curl's could-not-connect (7) and no proxy attempt; got %s, %v", c.name, o.Result, lines)
			}
			continue
		}
		if !strings.Contains(o.Result, c.rule) {
			t.Errorf("%s: the netOutcome does not name the rule %q: %s", c.name, c.rule, o.Result)
		}
		if len(lines) != 1 || lines[0]["decision"] != "denied" || !strings.Contains(fmt.Sprint(lines[0]["rule"]), c.rule) {
			t.Errorf("%s: record net lines %v", c.name, lines)
		}
	}
	r403, _ := r.call(t, allow, "-sS", "-i", "http://other.test:"+r.plain+"/")
	if !strings.Contains(r403.Result, "403") || !strings.Contains(r403.Result, "X-B10x-Harness-Denied: b10x-harness denied other.test") {
		t.Errorf("a denied plain request is not a 403 naming the reason: %s", r403.Result)
	}

	// The record: every attempt is a net line with its call's seq.
	for _, l := range netLines(t, r.rec) {
		if l["seq"] == nil || l["host"] == "" || l["decision"] == "" || l["rule"] == "" {
			t.Errorf("net line lacks a field: %v", l)
		}
	}
	sum := harness(t, "", "record", "summary", r.rec)
	if !strings.Contains(sum.stdout, "other.test:") || !strings.Contains(sum.stdout, "denied") {
		t.Errorf("record summary does not list the denied hosts:\n%s", sum.stdout)
	}
}

// TestProxyDiesWithTheCall: a killed call leaves no connection open: a
// program holding a tunnel open is killed at its deadline, and the test
// server sees its connection closed.
func TestProxyDiesWithTheCall(t *testing.T) {
	testenv.Require(t, atkExecution(), "confined execution", testenv.ShapeNoLandlock, testenv.ShapeNoUserns)
	self, err := filepath.Abs(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	ws := t.TempDir()
	hold, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := hold.Accept()
		if err == nil {
			accepted <- c
		}
	}()
	_, port, _ := net.SplitHostPort(hold.Addr().String())
	b, _ := json.Marshal(map[string]any{"argv": []string{self, netClientArg, "tunnel", "good.test:" + port}, "timeout_s": 2})
	cmd := harnessCommand("call", "--workspace", ws, "--yes", "--allow-program", self, "--allow-domain", "good.test", "--allow-cidr", "127.0.0.1/32", "run", string(b))
	cmd.Env = append(os.Environ(), "B10X_TEST_MAIN=1", testHostsEnv+"=good.test=127.0.0.1")
	res := runHarnessCmd(t, cmd, "")
	var o netOutcome
	_ = json.Unmarshal([]byte(res.stdout), &o)
	if o.Reason != "timeout" {
		t.Fatalf("want the call killed at its deadline: %+v %s", o, res.stderr)
	}
	var c net.Conn
	select {
	case c = <-accepted:
	case <-time.After(10 * time.Second):
		t.Fatalf("the tunnel never reached the server (%s)", o.Result)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("the server's end of the killed call's tunnel: %v, want EOF (the proxy closed it)", err)
	}
}

// netClientArg makes the test binary a small network client, the program
// of a run call in TestProxyEgressEverywhere: every VM guest has it (it has
// no curl), and it honours the proxy variables as Go programs do.
const netClientArg = "-b10x-netclient"

// netClient: get URL | direct HOST:PORT | udp HOST:PORT | raw | packet.
// It prints one line, "ok ..." or "error ...", and exits 0 when it
// reached what it tried.
func netClient(args []string) int {
	if len(args) == 0 {
		return 2
	}
	say := func(err error, ok string) int {
		if err != nil {
			fmt.Println("error", err)
			return 1
		}
		fmt.Println("ok", ok)
		return 0
	}
	switch args[0] {
	case "get":
		c := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{Proxy: http.ProxyFromEnvironment, TLSClientConfig: insecureTLS()}}
		resp, err := c.Get(args[1])
		if err != nil {
			return say(err, "")
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			return say(fmt.Errorf("status %d, %s: %s", resp.StatusCode, resp.Header.Get("X-B10x-Harness-Denied"), strings.TrimSpace(string(b))), "")
		}
		return say(nil, strings.TrimSpace(string(b)))
	case "direct":
		c, err := net.DialTimeout("tcp", args[1], 5*time.Second)
		if err == nil {
			c.Close()
		}
		return say(err, "connected to "+args[1])
	case "udp":
		c, err := net.Dial("udp", args[1])
		if err == nil {
			defer c.Close()
			if _, err = c.Write([]byte("x")); err == nil {
				c.SetReadDeadline(time.Now().Add(3 * time.Second))
				_, err = c.Read(make([]byte, 16))
			}
		}
		return say(err, "a datagram came back from "+args[1])
	case "tunnel":
		// A CONNECT through HTTPS_PROXY, then hold the tunnel open.
		c, err := net.DialTimeout("tcp", strings.TrimPrefix(os.Getenv("HTTPS_PROXY"), "http://"), 5*time.Second)
		if err != nil {
			return say(err, "")
		}
		fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", args[1], args[1])
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil || !strings.Contains(line, " 200 ") {
			return say(fmt.Errorf("CONNECT: %q %v", line, err), "")
		}
		fmt.Println("ok tunnel open")
		time.Sleep(time.Hour)
		return 0
	case "raw", "packet":
		family, typ, proto := syscall.AF_INET, syscall.SOCK_RAW, syscall.IPPROTO_ICMP
		if args[0] == "packet" {
			family, typ, proto = syscall.AF_PACKET, syscall.SOCK_RAW, 0x0300 // htons(ETH_P_ALL)
		}
		fd, err := syscall.Socket(family, typ, proto)
		if err == nil {
			syscall.Close(fd)
		}
		return say(err, args[0]+" socket opened")
	}
	return 2
}

func insecureTLS() *tls.Config { return &tls.Config{InsecureSkipVerify: true} } // the test server's own certificate

// TestProxyEgressEverywhere is TestProxyEgress with a Go client as the
// program, so it runs in every VM shape too: the allowed name is reached
// through the proxy; a denied name and a loopback-only name are refused
// with a 403 naming the rule; a direct connection, UDP, a raw and a packet
// socket reach nothing.
func TestProxyEgressEverywhere(t *testing.T) {
	testenv.Require(t, atkExecution(), "confined execution", testenv.ShapeNoLandlock, testenv.ShapeNoUserns)
	self, err := filepath.Abs(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	tlsSrv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "SECURE-HELLO") }))
	defer tlsSrv.Close()
	udp, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer udp.Close()
	go func() {
		buf := make([]byte, 64)
		for {
			n, from, err := udp.ReadFrom(buf)
			if err != nil {
				return
			}
			udp.WriteTo(buf[:n], from)
		}
	}()
	_, port, _ := net.SplitHostPort(tlsSrv.Listener.Addr().String())
	ws := t.TempDir()
	rec := filepath.Join(t.TempDir(), "rec.jsonl")
	run := func(flags []string, args ...string) netOutcome {
		b, _ := json.Marshal(map[string]any{"argv": append([]string{self, netClientArg}, args...), "timeout_s": 40})
		argv := append([]string{"call", "--workspace", ws, "--record", rec, "--yes", "--allow-program", self}, flags...)
		cmd := harnessCommand(append(argv, "run", string(b))...)
		cmd.Env = append(os.Environ(), "B10X_TEST_MAIN=1", testHostsEnv+"=good.test=127.0.0.1,loopy.test=127.0.0.1")
		res := runHarnessCmd(t, cmd, "")
		var o netOutcome
		if err := json.Unmarshal([]byte(res.stdout), &o); err != nil {
			t.Fatalf("no outcome (exit %d): %s %s", res.code, res.stdout, res.stderr)
		}
		if o.Status != "executed" {
			t.Fatalf("%v: %+v\n%s", args, o, res.stderr)
		}
		return o
	}
	allow := []string{"--allow-domain", "good.test", "--allow-domain", "loopy.test", "--allow-cidr", "127.0.0.1/32"}
	if o := run(allow, "get", "https://good.test:"+port+"/"); !strings.Contains(o.Result, "ok SECURE-HELLO") {
		t.Fatalf("the allowed name through the proxy: %s", o.Result)
	}
	for _, c := range []struct {
		name  string
		flags []string
		args  []string
		want  string
	}{
		{"denied name", allow, []string{"get", "https://other.test:" + port + "/"}, "no allow_domain rule matches"},
		{"loopback without a cidr rule", []string{"--allow-domain", "loopy.test"}, []string{"get", "https://loopy.test:" + port + "/"}, "127.0.0.1 is loopback"},
		{"direct", allow, []string{"direct", "127.0.0.1:" + port}, "connection refused"},
		{"direct elsewhere", allow, []string{"direct", "192.0.2.1:443"}, "network is unreachable"},
		{"udp", allow, []string{"udp", udp.LocalAddr().String()}, "error"},
		{"raw socket", allow, []string{"raw"}, "operation not permitted"},
		{"packet socket", allow, []string{"packet"}, "operation not permitted"},
	} {
		o := run(c.flags, c.args...)
		if strings.Contains(o.Result, "\nok ") || !strings.Contains(o.Result, c.want) {
			t.Errorf("%s: %s (want %q)", c.name, o.Result, c.want)
		}
	}
}

// proxyHost is the host of the first proxy in `go env GOPROXY`: the
// machine's own configuration, never a name written here.
func proxyHost(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOPROXY").Output()
	if err != nil {
		t.Fatalf("go env GOPROXY: %v", err)
	}
	for _, p := range strings.Split(strings.TrimSpace(string(out)), ",") {
		if u, err := url.Parse(p); err == nil && (u.Scheme == "https" || u.Scheme == "http") && u.Hostname() != "" {
			return u.Hostname()
		}
	}
	t.Fatalf("GOPROXY %q names no proxy host", out)
	return ""
}

// cidrsFor allows, by CIDR rule, the addresses host resolves to here that
// are not global (a closed network may route its registries through such
// an address); none where they are global.
func cidrsFor(t *testing.T, host string) []string {
	t.Helper()
	addrs, err := net.DefaultResolver.LookupNetIP(context.Background(), "ip", host)
	if err != nil {
		t.Fatalf("resolving %s: %v", host, err)
	}
	var flags []string
	for _, a := range addrs {
		if ok, _ := (&egress.Policy{}).Reachable(a); !ok {
			flags = append(flags, "--allow-cidr", a.String())
		}
	}
	return flags
}

// TestExecGoModDownload is the done test: exec allows the Go
// module proxy (its host read from go env GOPROXY), `go mod download`
// fills a fresh module cache through the proxy, a curl to another host in
// the same sandbox fails with the proxy's 403, and the record holds both.
func TestExecGoModDownload(t *testing.T) {
	testenv.Require(t, !testenv.InVM(), "the Go module proxy (network) and a Go toolchain", testenv.InGuest()...)
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatal(err)
	}
	goBin, _ = filepath.EvalSymlinks(goBin)
	host := proxyHost(t)
	ws := t.TempDir()
	gomod := "module example.test/gm\n\ngo 1.21\n\nrequire github.com/google/uuid v1.6.0\n"
	gosum := "github.com/google/uuid v1.6.0 h1:NIvaJDMOsjHA8n1jAhLSgzrAzy1Hgr+hNrb57e+94F0=\ngithub.com/google/uuid v1.6.0/go.mod h1:TIyPZe4MgqvfeYDBFedMoGGpEw/LqOeaOT+nhxU+yHo=\n"
	for name, content := range map[string]string{"go.mod": gomod, "go.sum": gosum} {
		if err := os.WriteFile(filepath.Join(ws, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	rec := filepath.Join(t.TempDir(), "rec.jsonl")
	script := goBin + " mod download -x && echo DOWNLOADED; curl -sS --max-time 20 https://other.invalid/ ; echo curl=$?"
	args := append([]string{"exec", "--workspace", ws, "--allow-domain", host, "--pass-env", "GOMODCACHE", "--pass-env", "GOFLAGS", "--pass-env", "GOPROXY", "--record", rec}, cidrsFor(t, host)...)
	cmd := harnessCommand(append(args, "--", "/bin/sh", "-c", script)...)
	cmd.Env = append(os.Environ(), "B10X_TEST_MAIN=1", "GOMODCACHE="+filepath.Join(ws, "modcache"), "GOFLAGS=-modcacherw")
	r := runHarnessCmd(t, cmd, "")
	if r.code != 0 || !strings.Contains(r.stdout, "DOWNLOADED") {
		t.Fatalf("exec: %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(ws, "modcache", "github.com", "google", "uuid@v1.6.0", "uuid.go")); err != nil {
		t.Errorf("the module is not in the fresh cache: %v", err)
	}
	if !strings.Contains(r.stdout, "403") && !strings.Contains(r.stdout, "curl=56") {
		t.Errorf("curl to another host was not refused by the proxy:\n%s", r.stdout)
	}
	if !strings.Contains(r.stderr, "network: denied other.invalid:443 (no allow_domain rule matches)") {
		t.Errorf("exec does not say what it denied:\n%s", r.stderr)
	}
	var allowed, denied bool
	for _, l := range netLines(t, rec) {
		allowed = allowed || (l["host"] == host && l["decision"] == "allowed" && l["bytes_down"].(float64) > 0)
		denied = denied || (l["host"] == "other.invalid" && l["decision"] == "denied")
	}
	if !allowed || !denied {
		t.Errorf("the record lacks the allowed download (%v) or the denied curl (%v): %v", allowed, denied, netLines(t, rec))
	}
}

// TestGitCloneThroughProxy: git clones over HTTPS through the proxy (a
// local smart-HTTP server, git http-backend, stands for the forge), and
// the same clone from a name the policy does not admit fails with the
// proxy's refusal.
func TestGitCloneThroughProxy(t *testing.T) {
	gitBin, err := exec.LookPath("git")
	testenv.Require(t, err == nil, "git", testenv.InGuest()...)
	backend := "/usr/lib/git-core/git-http-backend"
	_, err = os.Stat(backend)
	testenv.Require(t, err == nil, backend, testenv.InGuest()...)
	root := t.TempDir()
	src := filepath.Join(root, "repo.git")
	for _, c := range [][]string{{"init", "-q", "--bare", src}, {"-C", src, "config", "http.receivepack", "false"}} {
		if out, err := exec.Command(gitBin, c...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", c, err, out)
		}
	}
	work := filepath.Join(root, "w")
	script := "set -e; git init -q " + work + "; cd " + work + "; echo CLONED-CONTENT > f; git add f; git -c user.email=t@t -c user.name=t commit -qm one; git push -q " + src + " HEAD:refs/heads/main; git -C " + src + " symbolic-ref HEAD refs/heads/main"
	if out, err := exec.Command("/bin/sh", "-c", script).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	srv := httptest.NewTLSServer(&cgi.Handler{Path: backend, Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"}})
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	ws := t.TempDir()
	clone := func(host, dir string) (netOutcome, result) {
		b, _ := json.Marshal(map[string]any{"argv": []string{"git", "-c", "http.sslVerify=false", "clone", "-q", "https://" + host + ":" + port + "/repo.git", dir}, "timeout_s": 60})
		cmd := harnessCommand("call", "--workspace", ws, "--yes", "--allow-program", "git", "--allow-domain", "forge.test", "--allow-cidr", "127.0.0.1/32", "run", string(b))
		cmd.Env = append(os.Environ(), "B10X_TEST_MAIN=1", testHostsEnv+"=forge.test=127.0.0.1,elsewhere.test=127.0.0.1")
		res := runHarnessCmd(t, cmd, "")
		var o netOutcome
		_ = json.Unmarshal([]byte(res.stdout), &o)
		return o, res
	}
	o, res := clone("forge.test", "ok")
	if o.Status != "executed" || !strings.Contains(o.Result, "exit status 0") {
		t.Fatalf("clone through the proxy: %+v\n%s", o, res.stderr)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "ok", "f")); err != nil || string(b) != "CLONED-CONTENT\n" {
		t.Errorf("the clone's file: %q %v", b, err)
	}
	o, _ = clone("elsewhere.test", "no")
	if strings.Contains(o.Result, "exit status 0") || !strings.Contains(o.Result, "elsewhere.test") || !strings.Contains(o.Result, "no allow_domain rule matches") {
		t.Errorf("a clone from a name not admitted: %s", o.Result)
	}
	if _, err := os.Stat(filepath.Join(ws, "no", "f")); err == nil {
		t.Error("the refused clone wrote the file")
	}
}
