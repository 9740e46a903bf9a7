package main

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/b10x/harness/internal/testenv"
)

// httpToken is the bearer token of the HTTP tests: 40 bytes.
const httpToken = "b10x-test-token-0123456789abcdefghijklmn"

// tokenFile writes tok to a private file and returns its path.
func tokenFile(t *testing.T, tok string, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "token")
	must(t, os.WriteFile(p, []byte(tok), mode))
	must(t, os.Chmod(p, mode))
	return p
}

// httpServer is `b10x-harness mcp --listen ...` as a subprocess.
type httpServer struct {
	cmd    *exec.Cmd
	addr   string // as the server printed it: unix:/PATH or HOST:PORT
	stderr *syncBuf
	done   chan struct{}
	code   int
}

// startHTTP starts `b10x-harness mcp --token-file FILE args...` and waits
// for the line saying where it listens. The server is stopped (SIGTERM) at
// the end of the test if the test has not stopped it.
func startHTTP(t *testing.T, tokFile string, args ...string) *httpServer {
	t.Helper()
	cmd := harnessCommand(append([]string{"mcp", "--token-file", tokFile}, args...)...)
	cmd.Env = append(os.Environ(), "B10X_TEST_MAIN=1")
	se, err := cmd.StderrPipe()
	must(t, err)
	s := &httpServer{cmd: cmd, stderr: &syncBuf{}, done: make(chan struct{})}
	must(t, cmd.Start())
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(se)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(s.stderr, line)
			if a, ok := strings.CutPrefix(line, "b10x-harness: mcp: listening on "); ok {
				addr <- a
			}
		}
		io.Copy(io.Discard, se)
		err := cmd.Wait()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			s.code = ee.ExitCode()
		}
		close(s.done)
	}()
	t.Cleanup(func() { s.stop(t) })
	select {
	case s.addr = <-addr:
	case <-s.done:
		t.Fatalf("the server exited %d before listening:\n%s", s.code, s.stderr)
	case <-time.After(60 * time.Second):
		t.Fatalf("the server did not say where it listens:\n%s", s.stderr)
	}
	return s
}

// stop sends SIGTERM and waits for the exit; it returns the exit code.
func (s *httpServer) stop(t *testing.T) int {
	t.Helper()
	select {
	case <-s.done:
		return s.code
	default:
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(30 * time.Second):
		s.cmd.Process.Kill()
		<-s.done
		t.Errorf("the server did not stop on SIGTERM:\n%s", s.stderr)
	}
	if e := s.stderr.String(); strings.Contains(e, "goroutine ") || strings.Contains(e, "panic:") {
		t.Errorf("a stack trace reached stderr:\n%s", e)
	}
	return s.code
}

// bearer adds an Authorization header to every request.
type bearer struct {
	header string // the whole value; "": none
	next   http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if b.header != "" {
		r.Header.Set("Authorization", b.header)
	}
	return b.next.RoundTrip(r)
}

// client returns an HTTP client for the server and the URL to use: a Unix
// socket is dialled whatever the URL's host.
func (s *httpServer) client(auth string) (*http.Client, string) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	url := "http://" + s.addr + "/mcp"
	if path, ok := strings.CutPrefix(s.addr, "unix:"); ok {
		tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", path)
		}
		url = "http://localhost/mcp"
	}
	return &http.Client{Transport: bearer{auth, tr}}, url
}

// connect opens an MCP session over streamable HTTP with the go-sdk
// client, closed at the end of the test.
func (s *httpServer) connect(t *testing.T, opts *sdk.ClientOptions) *mcpServer {
	t.Helper()
	hc, url := s.client("Bearer " + httpToken)
	c := sdk.NewClient(&sdk.Implementation{Name: "b10x-test", Version: "1"}, opts)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: url, HTTPClient: hc, DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatalf("connect to %s: %v\nstderr:\n%s", s.addr, err, s.stderr)
	}
	m := &mcpServer{cs: cs, stderr: s.stderr}
	t.Cleanup(func() { m.close(t) })
	return m
}

// recordLines lists a record's events other than intent, with a call's
// entry and outcome: "call file_read executed".
func recordLines(t *testing.T, rec string) []string {
	t.Helper()
	var out []string
	for _, l := range readRecord(t, rec) {
		switch ev, _ := l["event"].(string); ev {
		case "intent":
		case "call":
			out = append(out, fmt.Sprint("call ", l["entry"], " ", mcpReason(l)))
		case "run_end":
			out = append(out, fmt.Sprint("run_end ", l["ended_by"]))
		default:
			out = append(out, ev)
		}
	}
	return out
}

// TestMCPHTTPServes: over a Unix socket and over a loopback port, the
// go-sdk client's streamable HTTP transport lists the tools `tools`
// shows and calls file_read through the gate; SIGTERM ends the server with
// the record's run_end (stopped: no call was in flight) and exit 0, and the
// socket is mode 0600.
func TestMCPHTTPServes(t *testing.T) {
	for _, listen := range []string{"unix", "127.0.0.1:0", "localhost:0"} {
		t.Run(strings.TrimSuffix(listen, ":0"), func(t *testing.T) {
			ws, _ := sampleWorkspace(t)
			rec := filepath.Join(t.TempDir(), "rec.jsonl")
			sock := filepath.Join(t.TempDir(), "mcp.sock")
			if listen == "unix" {
				listen = "unix:" + sock
			}
			r := harness(t, "", "tools", "--json", "--workspace", ws)
			var defs []struct{ Name string }
			if err := json.Unmarshal([]byte(r.stdout), &defs); err != nil {
				t.Fatalf("tools --json: %v\n%s", err, r.stdout)
			}
			var want []string
			for _, d := range defs {
				want = append(want, d.Name)
			}
			srv := startHTTP(t, tokenFile(t, httpToken+"\n", 0o600), "--listen", listen, "--workspace", ws, "--record", rec)
			if strings.HasPrefix(listen, "unix:") {
				if srv.addr != listen {
					t.Errorf("listening on %q, want %q", srv.addr, listen)
				}
				fi, err := os.Lstat(sock)
				if err != nil || fi.Mode().Type() != os.ModeSocket || fi.Mode().Perm() != 0o600 {
					t.Errorf("socket %v %v, want a socket of mode 0600", fi.Mode(), err)
				}
			} else if host, _, _ := net.SplitHostPort(srv.addr); !net.ParseIP(host).IsLoopback() {
				t.Errorf("listening on %q, not loopback", srv.addr)
			}
			c := srv.connect(t, nil)
			if got := c.names(t); !slices.Equal(got, want) {
				t.Errorf("tools/list %v, `tools` shows %v", got, want)
			}
			res, o := c.call(t, "file_read", json.RawMessage(`{"path":"hello.txt"}`))
			if res.IsError || o["result"] != "hello\nworld\n" {
				t.Errorf("file_read: %v", o)
			}
			if _, o := c.call(t, "file_read", json.RawMessage(`{"path":"link-out"}`)); mcpReason(o) != "denied_path" {
				t.Errorf("file_read link-out: %v", o)
			}
			// A second client shares the session: its call is the
			// record's third.
			c2 := srv.connect(t, nil)
			if _, o := c2.call(t, "file_read", json.RawMessage(`{"path":"hello.txt"}`)); o["seq"] != float64(3) {
				t.Errorf("the second client's call: %v, want seq 3", o)
			}
			c.close(t)
			c2.close(t)
			// SIGTERM with no call in flight is a normal stop.
			if code := srv.stop(t); code != 0 {
				t.Errorf("exit %d after SIGTERM, want 0\n%s", code, srv.stderr)
			}
			want = []string{"run_start", "call file_read executed", "call file_read denied_path", "call file_read executed", "run_end stopped"}
			if got := recordLines(t, rec); !slices.Equal(got, want) {
				t.Errorf("record %v, want %v", got, want)
			}
			if strings.Contains(srv.stderr.String(), httpToken) {
				t.Errorf("the token reached stderr:\n%s", srv.stderr)
			}
			if !strings.HasPrefix(listen, "unix:") {
				return
			}
			// The socket is removed at exit, though the harness's own
			// domain forbids it to remove files there: its reaper,
			// started before the harness confined itself, does.
			if _, err := os.Lstat(sock); err == nil {
				t.Errorf("the socket %s stays after mcp exited:\n%s", sock, srv.stderr)
			}
			// And when the harness is killed outright.
			again := startHTTP(t, tokenFile(t, httpToken, 0o600), "--listen", listen, "--workspace", ws)
			again.connect(t, nil).names(t)
			must(t, again.cmd.Process.Kill())
			<-again.done
			deadline := time.Now().Add(10 * time.Second)
			for {
				if _, err := os.Lstat(sock); errors.Is(err, os.ErrNotExist) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the socket %s stays 10 s after mcp was killed", sock)
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
}

// TestMCPHTTPUnauthorized: a request with a wrong token, another scheme,
// or none gets 401 and reaches nothing: the calls they carry are not in
// the record, and the token is nowhere in stderr or the record.
func TestMCPHTTPUnauthorized(t *testing.T) {
	ws, _ := sampleWorkspace(t)
	rec := filepath.Join(t.TempDir(), "rec.jsonl")
	srv := startHTTP(t, tokenFile(t, httpToken, 0o600), "--listen", "127.0.0.1:0", "--workspace", ws, "--record", rec)
	for _, auth := range []string{"", "Bearer " + httpToken[:len(httpToken)-1] + "X", "Bearer " + httpToken[:len(httpToken)-1], "Basic " + httpToken, httpToken} {
		hc, url := srv.client(auth)
		for _, body := range []string{initLine, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"file_read","arguments":{"path":"hello.txt"}}}`} {
			resp, b := postRaw(t, hc, url, body)
			if resp.StatusCode != http.StatusUnauthorized || strings.Contains(string(b), "jsonrpc") {
				t.Errorf("Authorization %q: %d %s", auth, resp.StatusCode, b)
			}
		}
	}
	// The SDK's client gets no session either.
	hc, url := srv.client("Bearer wrong-" + httpToken)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if cs, err := sdk.NewClient(&sdk.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx, &sdk.StreamableClientTransport{Endpoint: url, HTTPClient: hc, MaxRetries: -1}, nil); err == nil {
		cs.Close()
		t.Error("a client with a wrong token was served")
	}
	srv.stop(t)
	if got, want := recordLines(t, rec), []string{"run_start", "run_end stopped"}; !slices.Equal(got, want) {
		t.Errorf("record %v, want %v", got, want)
	}
	b, _ := os.ReadFile(rec)
	if strings.Contains(string(b), httpToken) || strings.Contains(srv.stderr.String(), httpToken) {
		t.Errorf("the token reached the record or stderr")
	}
}

// TestMCPHTTPElicitation: over HTTP, a file_write above the ceiling asks
// the client by elicitation on its session, and accept writes.
func TestMCPHTTPElicitation(t *testing.T) {
	testenv.Require(t, atkWrites(), "file_write (a confined workspace)", testenv.ShapeNoLandlock)
	ws, _ := sampleWorkspace(t)
	srv := startHTTP(t, tokenFile(t, httpToken, 0o600), "--listen", "unix:"+filepath.Join(t.TempDir(), "s"), "--workspace", ws, "--approve", "prompt")
	var mu sync.Mutex
	var asked []string
	c := srv.connect(t, &sdk.ClientOptions{ElicitationHandler: func(_ context.Context, req *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
		mu.Lock()
		defer mu.Unlock()
		asked = append(asked, req.Params.Message)
		return &sdk.ElicitResult{Action: "accept"}, nil
	}})
	r, o := c.call(t, "file_write", json.RawMessage(`{"path":"new.txt","content":"approved?\n"}`))
	b, err := os.ReadFile(filepath.Join(ws, "new.txt"))
	if r.IsError || o["status"] != "executed" || string(b) != "approved?\n" {
		t.Fatalf("%v; file %q %v", o, b, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(asked) != 1 || !strings.Contains(asked[0], "file_write (file.write, risk medium)") {
		t.Fatalf("asked %q", asked)
	}
}

// refusalDeadline bounds one refused start of TestMCPHTTPRefusals. A
// refusal is decided before anything is served: each of the cases took
// 10 to 32 ms on the development host.
func refusalDeadline() time.Duration {
	if testenv.InVM() {
		return time.Minute
	}
	return 15 * time.Second
}

// TestMCPHTTPRefusals: what --listen refuses at start, before serving or
// recording anything: non-loopback addresses without TLS, bad token
// files, an existing path that is not a socket, and the HTTP flags
// without --listen. Each is exit 2 with one line naming what is wrong,
// within refusalDeadline: a start that wrongly serves is killed then and
// fails its case.
func TestMCPHTTPRefusals(t *testing.T) {
	ws, _ := sampleWorkspace(t)
	good := tokenFile(t, httpToken, 0o600)
	notSock := filepath.Join(t.TempDir(), "file")
	must(t, os.WriteFile(notSock, nil, 0o600))
	fifo := filepath.Join(t.TempDir(), "fifo")
	must(t, syscall.Mkfifo(fifo, 0o600))
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"any interface", []string{"--token-file", good, "--listen", "0.0.0.0:0"}, "--listen 0.0.0.0:0: 0.0.0.0 is not a loopback address"},
		{"empty host", []string{"--token-file", good, "--listen", ":0"}, "--listen :0: an empty host"},
		{"documentation address", []string{"--token-file", good, "--listen", "192.0.2.7:8080"}, "192.0.2.7 is not a loopback address"},
		{"IPv6 any", []string{"--token-file", good, "--listen", "[::]:0"}, ":: is not a loopback address"},
		{"a name", []string{"--token-file", good, "--listen", "example.com:80"}, `"example.com" is not an IP address or localhost`},
		{"not an address", []string{"--token-file", good, "--listen", "nonsense"}, "want unix:PATH or HOST:PORT"},
		{"not a socket", []string{"--token-file", good, "--listen", "unix:" + notSock}, "exists and is not a socket"},
		{"missing token file", []string{"--token-file", filepath.Join(ws, "nope"), "--listen", "127.0.0.1:0"}, "no such file"},
		{"token fifo", []string{"--token-file", fifo, "--listen", "127.0.0.1:0"}, "is not a regular file"},
		{"empty token file", []string{"--token-file", tokenFile(t, "\n", 0o600), "--listen", "127.0.0.1:0"}, "is empty"},
		{"readable token file", []string{"--token-file", tokenFile(t, httpToken, 0o640), "--listen", "127.0.0.1:0"}, "accessible to group or others (mode 0640)"},
		{"short token", []string{"--token-file", tokenFile(t, "short-secret-31-bytes-long-abcd", 0o600), "--listen", "127.0.0.1:0"}, "a token of 31 bytes; at least 32"},
		{"no token file", []string{"--listen", "127.0.0.1:0"}, "mcp: --token-file is needed to serve HTTP"},
		{"token without listen", []string{"--token-file", good}, "mcp: --token-file is only for HTTP"},
		{"tls key alone", []string{"--token-file", good, "--listen", "127.0.0.1:0", "--tls-key", good}, "mcp: --tls-cert is needed with the key"},
		{"tls cert alone", []string{"--token-file", good, "--listen", "127.0.0.1:0", "--tls-cert", good}, "mcp: --tls-key is needed with the certificate"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec := filepath.Join(t.TempDir(), "rec.jsonl")
			cmd := harnessCommand(append([]string{"mcp", "--workspace", ws, "--record", rec}, c.args...)...)
			cmd.Env = append(os.Environ(), "B10X_TEST_MAIN=1")
			cmd.Stdin = strings.NewReader(initLine + "\n")
			r := runHarnessWithin(t, cmd, refusalDeadline())
			lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
			if r.code != exitUsage || r.stdout != "" || len(lines) != 1 || !strings.Contains(r.stderr, c.want) {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit 2 and one line with %q", r.code, r.stdout, r.stderr, c.want)
			}
			if strings.Contains(r.stderr, httpToken) || strings.Contains(r.stderr, "short-secret") {
				t.Errorf("a token reached stderr: %s", r.stderr)
			}
			if _, err := os.Stat(rec); !os.IsNotExist(err) {
				t.Errorf("a refused start wrote a record (%v)", err)
			}
		})
	}
	if fi, err := os.Lstat(notSock); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("the file in the socket's place was touched: %v %v", fi, err)
	}
}

// TestMCPHTTPTLS: with --tls-cert and --tls-key a non-loopback address
// (here every interface) is served, over TLS only.
func TestMCPHTTPTLS(t *testing.T) {
	ws, _ := sampleWorkspace(t)
	dir := t.TempDir()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "b10x-test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	must(t, err)
	kb, err := x509.MarshalECPrivateKey(key)
	must(t, err)
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	must(t, os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644))
	must(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600))

	srv := startHTTP(t, tokenFile(t, httpToken, 0o600), "--listen", "0.0.0.0:0", "--tls-cert", certFile, "--tls-key", keyFile, "--workspace", ws)
	_, port, err := net.SplitHostPort(srv.addr)
	must(t, err)
	cert, err := x509.ParseCertificate(der)
	must(t, err)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: pool}
	hc := &http.Client{Transport: bearer{"Bearer " + httpToken, tr}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx,
		&sdk.StreamableClientTransport{Endpoint: "https://127.0.0.1:" + port + "/mcp", HTTPClient: hc, DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatalf("connect over TLS: %v\n%s", err, srv.stderr)
	}
	c := &mcpServer{cs: cs, stderr: srv.stderr}
	defer c.close(t)
	if _, o := c.call(t, "file_read", json.RawMessage(`{"path":"hello.txt"}`)); o["result"] != "hello\nworld\n" {
		t.Errorf("file_read over TLS: %v", o)
	}
	resp, err := http.Get("http://127.0.0.1:" + port + "/mcp")
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode < 400 {
			t.Errorf("plain HTTP on the TLS port: %s", resp.Status)
		}
	}
}

// TestMCPHTTPRunCancelled: over HTTP, a run call with a progress token
// hears progress, and cancelling it (notifications/cancelled) kills its
// whole tree, checked by a scan of the host's processes, and records it
// cancelled.
func TestMCPHTTPRunCancelled(t *testing.T) {
	testenv.Require(t, atkExecution(), "confined execution", testenv.ShapeNoLandlock, testenv.ShapeNoUserns)
	ws, _ := sampleWorkspace(t)
	rec := filepath.Join(t.TempDir(), "rec.jsonl")
	srv := startHTTP(t, tokenFile(t, httpToken, 0o600), "--listen", "127.0.0.1:0", "--workspace", ws, "--allow-program", "sh", "--approve", "all", "--record", rec)
	progressed := make(chan struct{}, 1)
	c := srv.connect(t, &sdk.ClientOptions{ProgressNotificationHandler: func(context.Context, *sdk.ProgressNotificationClientRequest) {
		select {
		case progressed <- struct{}{}:
		default:
		}
	}})
	marker := fmt.Sprintf("%d.%d", 2000+os.Getpid()%1000, time.Now().UnixNano()%100000)
	args, _ := json.Marshal(map[string]any{"argv": []string{"sh", "-c", fmt.Sprintf("sleep %s & sleep %s & wait", marker, marker)}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		p := &sdk.CallToolParams{Name: "run", Arguments: json.RawMessage(args)}
		p.SetProgressToken("p1")
		_, err := c.cs.CallTool(ctx, p)
		errc <- err
	}()
	deadline := time.Now().Add(30 * time.Second)
	for len(mcpMarked(marker)) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("the program's tree did not start; stderr:\n%s", srv.stderr)
		}
		time.Sleep(20 * time.Millisecond)
	}
	select {
	case <-progressed:
	case <-time.After(10 * time.Second):
		t.Error("no progress notification within 10s")
	}
	mcpCancelLeavesNothing(t, cancel, errc, marker)
	c.close(t)
	srv.stop(t)
	// The client cancelled the call; the stop found nothing in flight.
	if got, want := recordLines(t, rec), []string{"run_start", "call run cancelled", "run_end stopped"}; !slices.Equal(got, want) {
		t.Errorf("record %v, want %v", got, want)
	}
}

// TestMCPHTTPSigtermDuringCall: SIGTERM while a run call is in flight
// kills the call's tree, records it cancelled, and ends the record.
func TestMCPHTTPSigtermDuringCall(t *testing.T) {
	testenv.Require(t, atkExecution(), "confined execution", testenv.ShapeNoLandlock, testenv.ShapeNoUserns)
	ws, _ := sampleWorkspace(t)
	rec := filepath.Join(t.TempDir(), "rec.jsonl")
	srv := startHTTP(t, tokenFile(t, httpToken, 0o600), "--listen", "unix:"+filepath.Join(t.TempDir(), "s"), "--workspace", ws, "--allow-program", "sh", "--approve", "all", "--record", rec)
	c := srv.connect(t, nil)
	marker := fmt.Sprintf("%d.%d", 3000+os.Getpid()%1000, time.Now().UnixNano()%100000)
	args, _ := json.Marshal(map[string]any{"argv": []string{"sh", "-c", fmt.Sprintf("sleep %s & wait", marker)}})
	go c.cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "run", Arguments: json.RawMessage(args)})
	deadline := time.Now().Add(30 * time.Second)
	for len(mcpMarked(marker)) < 1 {
		if time.Now().After(deadline) {
			t.Fatalf("the program did not start; stderr:\n%s", srv.stderr)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if code := srv.stop(t); code != exitInterrupted {
		t.Errorf("exit %d, want %d\n%s", code, exitInterrupted, srv.stderr)
	}
	if left := mcpMarked(marker); len(left) > 0 {
		t.Errorf("processes left after SIGTERM: %v", left)
	}
	if got, want := recordLines(t, rec), []string{"run_start", "call run cancelled", "run_end cancelled"}; !slices.Equal(got, want) {
		t.Errorf("record %v, want %v", got, want)
	}
}

// TestMCPHTTPMessageCap: an authorized request body over the message cap
// (9 MiB) gets 413 and the server goes on serving.
func TestMCPHTTPMessageCap(t *testing.T) {
	ws, _ := sampleWorkspace(t)
	srv := startHTTP(t, tokenFile(t, httpToken, 0o600), "--listen", "127.0.0.1:0", "--workspace", ws)
	c := srv.connect(t, nil)
	big := `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"file_read","arguments":{"path":"` + strings.Repeat("a", 10<<20) + `"}}}`
	hc, url := srv.client("Bearer " + httpToken)
	req, _ := http.NewRequest("POST", url, strings.NewReader(big))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", c.cs.ID())
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("a 10 MiB message: %s, want 413", resp.Status)
	}
	if _, o := c.call(t, "file_read", json.RawMessage(`{"path":"hello.txt"}`)); o["status"] != "executed" {
		t.Errorf("after the oversized message: %v", o)
	}
}

// postRaw POSTs body to url as an MCP client would and returns the
// response with its body read.
func postRaw(t *testing.T, hc *http.Client, url, body string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, b
}

// TestMCPHTTPJSONRPCStrict: over HTTP as over stdio, a body that is not
// one JSON-RPC message is answered by the book — a batch -32600, garbage
// -32700, id null, HTTP 400, in JSON — opens no session, and the server
// then serves a client as before.
func TestMCPHTTPJSONRPCStrict(t *testing.T) {
	ws, _ := sampleWorkspace(t)
	srv := startHTTP(t, tokenFile(t, httpToken, 0o600), "--listen", "127.0.0.1:0", "--workspace", ws)
	hc, url := srv.client("Bearer " + httpToken)
	for _, c := range []struct {
		body string
		code float64
	}{
		{`[` + initLine + `]`, -32600},
		{" \n[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]", -32600},
		{`{not json`, -32700},
		{initLine[:len(initLine)/2], -32700},
	} {
		resp, b := postRaw(t, hc, url, c.body)
		var m struct {
			ID    json.RawMessage `json:"id"`
			Error struct {
				Code float64 `json:"code"`
			} `json:"error"`
		}
		if resp.StatusCode != http.StatusBadRequest || resp.Header.Get("Content-Type") != "application/json" || json.Unmarshal(b, &m) != nil ||
			m.Error.Code != c.code || string(m.ID) != "null" || resp.Header.Get("Mcp-Session-Id") != "" {
			t.Errorf("body %q: %d %s %s; want 400, JSON, code %v, id null, no session", c.body, resp.StatusCode, resp.Header.Get("Content-Type"), b, c.code)
		}
	}
	cs := srv.connect(t, nil)
	if _, err := cs.cs.ListTools(context.Background(), nil); err != nil {
		t.Errorf("a client after the bad bodies: %v", err)
	}
	srv.stop(t)
}
