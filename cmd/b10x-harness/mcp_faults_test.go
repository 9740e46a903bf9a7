package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/sys/unix"

	"github.com/b10x/harness/internal/testenv"
)

// How an mcp session ends, through the binary (decision 0076): signals and
// the end of stdin stop the server the same way on every transport, an
// abandoned call is cancelled, HTTP sessions are bounded, and a record
// that cannot be written is an exit status.

// stdioProc is `b10x-harness mcp` on raw pipes: the test writes lines and
// reads the answers, and decides when stdin closes.
type stdioProc struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    io.ReadCloser
	lines  chan []byte // stdout, line by line; closed at its end
	stderr *syncBuf
	done   chan struct{}
	code   int
}

func startStdio(t *testing.T, args ...string) *stdioProc {
	t.Helper()
	cmd := harnessCommand(append([]string{"mcp"}, args...)...)
	cmd.Env = append(os.Environ(), "B10X_TEST_MAIN=1")
	return startStdioCmd(t, cmd)
}

func startStdioCmd(t *testing.T, cmd *exec.Cmd) *stdioProc {
	t.Helper()
	p := &stdioProc{cmd: cmd, lines: make(chan []byte, 64), stderr: &syncBuf{}, done: make(chan struct{})}
	cmd.Stderr = p.stderr
	in, err := cmd.StdinPipe()
	must(t, err)
	out, err := cmd.StdoutPipe()
	must(t, err)
	p.in, p.out = in, out
	must(t, cmd.Start())
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(nil, 16<<20)
		for sc.Scan() {
			p.lines <- append([]byte(nil), sc.Bytes()...)
		}
		close(p.lines)
	}()
	go func() {
		err := cmd.Wait()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			p.code = ee.ExitCode()
		}
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			p.cmd.Process.Kill()
			<-p.done
		}
		if e := p.stderr.String(); strings.Contains(e, "goroutine ") || strings.Contains(e, "panic:") {
			t.Errorf("a stack trace reached stderr:\n%s", e)
		}
	})
	return p
}

func (p *stdioProc) send(t *testing.T, lines ...string) {
	t.Helper()
	for _, l := range lines {
		if _, err := io.WriteString(p.in, l+"\n"); err != nil {
			t.Fatalf("writing to the server: %v\nstderr:\n%s", err, p.stderr)
		}
	}
}

// answer waits (d at most) for the answer to the request whose id is the
// JSON id, skipping every other line.
func (p *stdioProc) answer(t *testing.T, id string, d time.Duration) map[string]any {
	t.Helper()
	timeout := time.After(d)
	for {
		select {
		case l, ok := <-p.lines:
			if !ok {
				t.Fatalf("stdout ended before the answer to %s\nstderr:\n%s", id, p.stderr)
			}
			var m map[string]any
			if err := json.Unmarshal(l, &m); err != nil {
				t.Fatalf("stdout line %q: %v", l, err)
			}
			if b, _ := json.Marshal(m["id"]); string(b) == id && m["method"] == nil {
				return m
			}
		case <-timeout:
			t.Fatalf("no answer to %s within %s\nstderr:\n%s", id, d, p.stderr)
		}
	}
}

// exit waits (d at most) for the server to exit and returns its status.
func (p *stdioProc) exit(t *testing.T, d time.Duration) int {
	t.Helper()
	go func() {
		for range p.lines {
		}
	}()
	select {
	case <-p.done:
		return p.code
	case <-time.After(d):
		t.Fatalf("the server did not exit within %s\nstderr:\n%s", d, p.stderr)
		return -1
	}
}

// callOutcome is the gate's outcome in a tools/call answer: its
// structuredContent, or the outcome its _meta carries.
func callOutcome(t *testing.T, m map[string]any) map[string]any {
	t.Helper()
	res, _ := m["result"].(map[string]any)
	o, _ := res["structuredContent"].(map[string]any)
	if meta, _ := res["_meta"].(map[string]any); o == nil && meta != nil {
		o, _ = meta["b10x-harness/outcome"].(map[string]any)
	}
	if o == nil {
		t.Fatalf("no outcome in the answer %v", m)
	}
	return o
}

// runEnd is the record's run_end line.
func runEnd(t *testing.T, rec string) map[string]any {
	t.Helper()
	lines := readRecord(t, rec)
	last := lines[len(lines)-1]
	if last["event"] != "run_end" {
		t.Fatalf("the record's last line is %v, not run_end", last)
	}
	return last
}

// faultMarker is an argv word unique to one test's processes.
func faultMarker(base int) string {
	return fmt.Sprintf("%d.%d", base+os.Getpid()%1000, time.Now().UnixNano()%100000)
}

// waitMarked waits (d at most) until n processes carry marker.
func waitMarked(t *testing.T, marker string, n int, d time.Duration, stderr fmt.Stringer) {
	t.Helper()
	deadline := time.Now().Add(d)
	for len(mcpMarked(marker)) < n {
		if time.Now().After(deadline) {
			t.Fatalf("the program's processes did not start; stderr:\n%s", stderr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitUnmarked waits (d at most) until no process carries marker, and
// returns how long that took.
func waitUnmarked(t *testing.T, marker string, d time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for len(mcpMarked(marker)) > 0 {
		if time.Since(start) > d {
			t.Fatalf("processes left %s later: %v", d, mcpMarked(marker))
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Since(start)
}

func runLine(id int, argv ...string) string {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": "tools/call",
		"params": map[string]any{"name": "run", "arguments": map[string]any{"argv": argv}}})
	return string(b)
}

const initializedLine = `{"jsonrpc":"2.0","method":"notifications/initialized"}`

// TestMCPStdioEndsNormally: a stdio session the client ends with no call
// in flight — SIGINT (Claude Code), SIGTERM (Codex, Gemini CLI), or the end
// of stdin — exits 0 and is recorded ended_by client_closed, saying how.
func TestMCPStdioEndsNormally(t *testing.T) {
	for _, c := range []struct {
		name string
		sig  syscall.Signal
		how  string
	}{{"SIGINT", syscall.SIGINT, "SIGINT"}, {"SIGTERM", syscall.SIGTERM, "SIGTERM"}, {"EOF", 0, "the client closed its input"}} {
		t.Run(c.name, func(t *testing.T) {
			ws, _ := sampleWorkspace(t)
			rec := filepath.Join(t.TempDir(), "rec.jsonl")
			p := startStdio(t, "--workspace", ws, "--record", rec)
			p.send(t, initLine, initializedLine, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"file_read","arguments":{"path":"hello.txt"}}}`)
			if o := callOutcome(t, p.answer(t, "2", time.Minute)); o["status"] != "executed" {
				t.Fatalf("file_read: %v", o)
			}
			if c.sig != 0 {
				must(t, p.cmd.Process.Signal(c.sig))
			} else {
				p.in.Close()
			}
			if code := p.exit(t, 30*time.Second); code != 0 {
				t.Errorf("exit %d, want 0\n%s", code, p.stderr)
			}
			end := runEnd(t, rec)
			if end["ended_by"] != "client_closed" || end["how"] != c.how || end["cancelled_calls"] != nil {
				t.Errorf("run_end %v, want client_closed, how %q, no cancelled calls", end, c.how)
			}
		})
	}
}

// TestMCPStdioSignalDuringRun: SIGTERM or SIGINT to a stdio server while a
// run call is in flight stops it at once: the program gets SIGTERM and the
// policy's grace (here it ignores SIGTERM, so its whole tree is killed at
// the grace), the call's cancelled answer is written to the client, the
// record has the call cancelled and run_end cancelled with the signal, and
// the exit status is 130.
func TestMCPStdioSignalDuringRun(t *testing.T) {
	testenv.Require(t, atkExecution(), "confined execution", testenv.ShapeNoLandlock, testenv.ShapeNoUserns)
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(unix.SignalName(sig), func(t *testing.T) {
			ws, _ := sampleWorkspace(t)
			rec := filepath.Join(t.TempDir(), "rec.jsonl")
			const grace = 2 * time.Second
			p := startStdio(t, "--workspace", ws, "--allow-program", "sh", "--approve", "all", "--record", rec, "--grace", grace.String())
			marker := faultMarker(4000)
			p.send(t, initLine, initializedLine, runLine(2, "sh", "-c", fmt.Sprintf("trap '' TERM INT; sleep %s & sleep %s & wait", marker, marker)))
			waitMarked(t, marker, 2, 30*time.Second, p.stderr)
			start := time.Now()
			must(t, p.cmd.Process.Signal(sig))
			if o := callOutcome(t, p.answer(t, "2", 30*time.Second)); o["reason"] != "cancelled" {
				t.Fatalf("the run call's answer: %v", o)
			}
			took := time.Since(start)
			if code := p.exit(t, 30*time.Second); code != exitInterrupted {
				t.Errorf("exit %d, want %d\n%s", code, exitInterrupted, p.stderr)
			}
			if left := mcpMarked(marker); len(left) > 0 {
				t.Errorf("processes left after the exit: %v", left)
			}
			if took < grace-200*time.Millisecond || took > grace+10*time.Second {
				t.Errorf("the answer came %s after the signal; a program that ignores SIGTERM has the grace (%s), then the kill", took, grace)
			}
			if got, want := recordLines(t, rec), []string{"run_start", "call run cancelled", "run_end cancelled"}; !slices.Equal(got, want) {
				t.Errorf("record %v, want %v", got, want)
			}
			if end := runEnd(t, rec); end["how"] != unix.SignalName(sig) || end["cancelled_calls"] != float64(1) {
				t.Errorf("run_end %v", end)
			}
		})
	}
}

// TestMCPStdioEOFDuringRun: the end of stdin while a run call is in flight
// is the client's shutdown: the call is cancelled (its tree killed), its
// answer written, and the session recorded cancelled, exit 130. A call
// answered before then stays executed.
func TestMCPStdioEOFDuringRun(t *testing.T) {
	testenv.Require(t, atkExecution(), "confined execution", testenv.ShapeNoLandlock, testenv.ShapeNoUserns)
	ws, _ := sampleWorkspace(t)
	rec := filepath.Join(t.TempDir(), "rec.jsonl")
	p := startStdio(t, "--workspace", ws, "--allow-program", "sh", "--allow-program", "echo", "--approve", "all", "--record", rec)
	p.send(t, initLine, initializedLine, runLine(2, "echo", "quick"))
	if o := callOutcome(t, p.answer(t, "2", time.Minute)); o["status"] != "executed" {
		t.Fatalf("echo: %v", o)
	}
	marker := faultMarker(5000)
	p.send(t, runLine(3, "sh", "-c", fmt.Sprintf("sleep %s & wait", marker)))
	waitMarked(t, marker, 1, 30*time.Second, p.stderr)
	p.in.Close()
	if o := callOutcome(t, p.answer(t, "3", 30*time.Second)); o["reason"] != "cancelled" {
		t.Fatalf("the run call's answer at the end of input: %v", o)
	}
	if code := p.exit(t, 30*time.Second); code != exitInterrupted {
		t.Errorf("exit %d, want %d\n%s", code, exitInterrupted, p.stderr)
	}
	waitUnmarked(t, marker, 5*time.Second)
	if got, want := recordLines(t, rec), []string{"run_start", "call run executed", "call run cancelled", "run_end cancelled"}; !slices.Equal(got, want) {
		t.Errorf("record %v, want %v", got, want)
	}
	if end := runEnd(t, rec); end["how"] != "the client closed its input" || end["cancelled_calls"] != float64(1) {
		t.Errorf("run_end %v", end)
	}
}

// TestMCPStdioClientGone: a client that goes away whole (its ends of
// stdin and stdout both closed, as when it is killed) while a run call
// runs: the call is cancelled, its tree killed, and the harness, whose
// answer now meets a closed pipe, still records the end (a write to a
// closed stdout must fail, not kill the harness with SIGPIPE).
func TestMCPStdioClientGone(t *testing.T) {
	testenv.Require(t, atkExecution(), "confined execution", testenv.ShapeNoLandlock, testenv.ShapeNoUserns)
	ws, _ := sampleWorkspace(t)
	rec := filepath.Join(t.TempDir(), "rec.jsonl")
	p := startStdio(t, "--workspace", ws, "--allow-program", "sh", "--approve", "all", "--record", rec)
	marker := faultMarker(8000)
	p.send(t, initLine, initializedLine)
	p.answer(t, "1", time.Minute)
	p.send(t, runLine(2, "sh", "-c", fmt.Sprintf("sleep %s & wait", marker)))
	waitMarked(t, marker, 1, 30*time.Second, p.stderr)
	p.out.Close()
	p.in.Close()
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("the server did not exit after its client went away\n%s", p.stderr)
	}
	if ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		t.Fatalf("the harness was killed by %s", ws.Signal())
	}
	if p.code != exitInterrupted {
		t.Errorf("exit %d, want %d\n%s", p.code, exitInterrupted, p.stderr)
	}
	waitUnmarked(t, marker, 5*time.Second)
	if got, want := recordLines(t, rec), []string{"run_start", "call run cancelled", "run_end cancelled"}; !slices.Equal(got, want) {
		t.Errorf("record %v, want %v", got, want)
	}
}

// TestMCPHTTPSignalAnswersCall: SIGINT to an HTTP server while a run call
// is in flight: the client still gets the call's cancelled answer, the
// tree is gone, exit 130, and run_end says cancelled, how and how many.
// Without a call in flight the same signal is a normal stop: exit 0,
// ended_by stopped.
func TestMCPHTTPSignalAnswersCall(t *testing.T) {
	testenv.Require(t, atkExecution(), "confined execution", testenv.ShapeNoLandlock, testenv.ShapeNoUserns)
	ws, _ := sampleWorkspace(t)
	rec := filepath.Join(t.TempDir(), "rec.jsonl")
	srv := startHTTP(t, tokenFile(t, httpToken, 0o600), "--listen", "127.0.0.1:0", "--workspace", ws, "--allow-program", "sh", "--approve", "all", "--record", rec)
	c := srv.connect(t, nil)
	marker := faultMarker(6000)
	args, _ := json.Marshal(map[string]any{"argv": []string{"sh", "-c", fmt.Sprintf("sleep %s & wait", marker)}})
	type answer struct {
		o   map[string]any
		err error
	}
	ac := make(chan answer, 1)
	go func() {
		r, err := c.cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "run", Arguments: json.RawMessage(args)})
		if err != nil {
			ac <- answer{nil, err}
			return
		}
		b, _ := json.Marshal(r)
		var m map[string]any
		json.Unmarshal(b, &m)
		ac <- answer{callOutcome(t, map[string]any{"result": m}), nil}
	}()
	waitMarked(t, marker, 1, 30*time.Second, srv.stderr)
	must(t, srv.cmd.Process.Signal(syscall.SIGINT))
	select {
	case a := <-ac:
		if a.err != nil || a.o["reason"] != "cancelled" {
			t.Fatalf("the call in flight: %v %v", a.o, a.err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("no answer to the call in flight after SIGINT\n%s", srv.stderr)
	}
	<-srv.done
	if srv.code != exitInterrupted {
		t.Errorf("exit %d, want %d\n%s", srv.code, exitInterrupted, srv.stderr)
	}
	waitUnmarked(t, marker, 5*time.Second)
	if got, want := recordLines(t, rec), []string{"run_start", "call run cancelled", "run_end cancelled"}; !slices.Equal(got, want) {
		t.Errorf("record %v, want %v", got, want)
	}
	if end := runEnd(t, rec); end["how"] != "SIGINT" || end["cancelled_calls"] != float64(1) {
		t.Errorf("run_end %v", end)
	}
}

// rawSession opens an MCP session over HTTP by hand and returns its id.
func rawSession(t *testing.T, srv *httpServer) string {
	t.Helper()
	hc, url := srv.client("Bearer " + httpToken)
	resp, body := rawPost(t, hc, url, "", initLine)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `"result"`) {
		t.Fatalf("initialize: %s %s", resp.Status, body)
	}
	id := resp.Header.Get("Mcp-Session-Id")
	if resp, body := rawPost(t, hc, url, id, initializedLine); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("initialized: %s %s", resp.Status, body)
	}
	return id
}

func rawPost(t *testing.T, hc *http.Client, url, session, body string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// TestMCPHTTPResetCancelsRun: a client whose TCP connection is reset while
// its run call runs has abandoned the call: the tree is killed at once (not
// at --timeout) and the call recorded cancelled; the server goes on
// serving, and a SIGTERM with nothing in flight then exits 0.
func TestMCPHTTPResetCancelsRun(t *testing.T) {
	testenv.Require(t, atkExecution(), "confined execution", testenv.ShapeNoLandlock, testenv.ShapeNoUserns)
	ws, _ := sampleWorkspace(t)
	rec := filepath.Join(t.TempDir(), "rec.jsonl")
	srv := startHTTP(t, tokenFile(t, httpToken, 0o600), "--listen", "127.0.0.1:0", "--workspace", ws, "--allow-program", "sh", "--approve", "all", "--record", rec, "--timeout", "120s")
	session := rawSession(t, srv)
	marker := faultMarker(7000)
	body := runLine(2, "sh", "-c", fmt.Sprintf("sleep %s & wait", marker))
	conn, err := net.Dial("tcp", srv.addr)
	must(t, err)
	fmt.Fprintf(conn, "POST /mcp HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMcp-Session-Id: %s\r\nContent-Length: %d\r\n\r\n%s",
		srv.addr, httpToken, session, len(body), body)
	waitMarked(t, marker, 1, 30*time.Second, srv.stderr)
	must(t, conn.(*net.TCPConn).SetLinger(0))
	must(t, conn.Close()) // RST
	if took := waitUnmarked(t, marker, 20*time.Second); took > 15*time.Second {
		t.Errorf("the abandoned call's tree took %s to go", took)
	}
	deadline := time.Now().Add(20 * time.Second)
	for !slices.Contains(recordLines(t, rec), "call run cancelled") {
		if time.Now().After(deadline) {
			t.Fatalf("record %v: the abandoned call is not recorded cancelled", recordLines(t, rec))
		}
		time.Sleep(50 * time.Millisecond)
	}
	c := srv.connect(t, nil)
	if _, o := c.call(t, "file_read", json.RawMessage(`{"path":"hello.txt"}`)); mcpReason(o) != "executed" {
		t.Errorf("after the reset: %v", o)
	}
	c.close(t)
	if code := srv.stop(t); code != 0 {
		t.Errorf("exit %d after SIGTERM with nothing in flight, want 0\n%s", code, srv.stderr)
	}
	if got, want := recordLines(t, rec), []string{"run_start", "call run cancelled", "call file_read executed", "run_end stopped"}; !slices.Equal(got, want) {
		t.Errorf("record %v, want %v", got, want)
	}
}

// TestMCPHTTPSessionCap: with --max-sessions 2 a third initialize is
// answered 503 with a JSON-RPC error carrying its id; ending a session
// (DELETE) makes room.
func TestMCPHTTPSessionCap(t *testing.T) {
	ws, _ := sampleWorkspace(t)
	srv := startHTTP(t, tokenFile(t, httpToken, 0o600), "--listen", "127.0.0.1:0", "--workspace", ws, "--max-sessions", "2")
	a := rawSession(t, srv)
	rawSession(t, srv)
	hc, url := srv.client("Bearer " + httpToken)
	resp, body := rawPost(t, hc, url, "", strings.Replace(initLine, `"id":1`, `"id":"x-3"`, 1))
	var m struct {
		JSONRPC string `json:"jsonrpc"`
		ID      any    `json:"id"`
		Error   struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &m); err != nil || resp.StatusCode != http.StatusServiceUnavailable || m.JSONRPC != "2.0" || m.ID != "x-3" ||
		m.Error.Code >= -32000 || m.Error.Code < -32099 || !strings.Contains(m.Error.Message, "limit of 2 sessions") {
		t.Fatalf("the third session: %s %s (%v)", resp.Status, body, err)
	}
	req, _ := http.NewRequest("DELETE", url, nil)
	req.Header.Set("Mcp-Session-Id", a)
	dr, err := hc.Do(req)
	must(t, err)
	dr.Body.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, body := rawPost(t, hc, url, "", initLine)
		if resp.StatusCode == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after a DELETE: %s %s", resp.Status, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// vmRSS is a process's resident set, in KiB, from /proc.
func vmRSS(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	must(t, err)
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			must(t, err)
			return n
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

// TestMCPHTTPSessionsMemory: many sessions initialized and abandoned (never
// deleted) are closed by --session-idle, and the server's resident memory
// comes back near where it was before them. Measured on the server's
// process from /proc.
func TestMCPHTTPSessionsMemory(t *testing.T) {
	// The HTTP server's memory, nothing of a kernel's: the VM shapes add
	// nothing to it but emulated minutes.
	testenv.Require(t, !testenv.InVM(), "a host (the test measures the HTTP server's sessions, which no VM shape changes)", testenv.InGuest()...)
	t.Parallel() // most of it is waiting for sessions to expire
	n := 10000
	if testing.Short() {
		n = 2000
	}
	ws, _ := sampleWorkspace(t)
	srv := startHTTP(t, tokenFile(t, httpToken, 0o600), "--listen", "127.0.0.1:0", "--workspace", ws,
		"--session-idle", "3s", "--max-sessions", strconv.Itoa(2*n))
	pid := srv.cmd.Process.Pid
	for range 20 {
		rawSession(t, srv)
	}
	time.Sleep(5 * time.Second) // those expire too: the baseline has served sessions
	base := vmRSS(t, pid)
	start := time.Now()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failed []string
	next := make(chan int)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			hc, url := srv.client("Bearer " + httpToken)
			for range next {
				req, _ := http.NewRequest("POST", url, strings.NewReader(initLine))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				resp, err := hc.Do(req)
				if err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						err = errors.New(resp.Status)
					}
				}
				if err != nil {
					mu.Lock()
					failed = append(failed, err.Error())
					mu.Unlock()
				}
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	opened := time.Since(start)
	if len(failed) > 0 {
		t.Fatalf("%d of %d initializes failed, the first: %s", len(failed), n, failed[0])
	}
	peak := vmRSS(t, pid)
	// The sessions expire 3 s after their last request; the Go runtime
	// gives freed memory back to the system over the next seconds.
	var after int
	deadline := time.Now().Add(60 * time.Second)
	for {
		time.Sleep(time.Second)
		after = vmRSS(t, pid)
		if after <= base+base/4+4096 || time.Now().After(deadline) {
			break
		}
	}
	t.Logf("%d sessions opened in %s; RSS %d KiB before, %d KiB with them open, %d KiB %s after the last", n, opened.Round(time.Millisecond), base, peak, after, time.Since(start.Add(opened)).Round(time.Second))
	if after > base+base/4+4096 {
		t.Errorf("RSS %d KiB after the sessions expired, %d KiB before them (%d KiB with them open)", after, base, peak)
	}
}

// tmpfsChildEnv names the directory on which a re-run child of the test
// binary mounts a 64 KiB tmpfs before it execs itself as the harness. Its
// parent starts it in a mount namespace of its own (Unshareflags
// CLONE_NEWNS, which also makes every mount in it private), so the tmpfs
// exists for the harness alone and goes with it: the host's mounts are
// never touched.
const tmpfsChildEnv = "B10X_TEST_MCP_TMPFS"

func init() {
	dir := os.Getenv(tmpfsChildEnv)
	if dir == "" {
		return
	}
	os.Unsetenv(tmpfsChildEnv)
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "size=64k,mode=0755"); err != nil {
		fmt.Fprintf(os.Stderr, "test child: mount a tmpfs on %s: %v\n", dir, err)
		os.Exit(99)
	}
	err := syscall.Exec(os.Args[0], os.Args, os.Environ())
	fmt.Fprintf(os.Stderr, "test child: exec: %v\n", err)
	os.Exit(99)
}

// TestMCPRecordFullDiskExits1: a record that fills its filesystem mid
// session is told to the client (the next call is refused record_failed),
// said once on stderr, and ends mcp with exit 1, not 0, though the client
// ended the session normally.
func TestMCPRecordFullDiskExits1(t *testing.T) {
	testenv.Require(t, os.Geteuid() == 0, "root (to mount a tmpfs in a mount namespace of the test's own)", testenv.ShapeHost, testenv.ShapeNoUserns)
	ws, _ := sampleWorkspace(t)
	dir := t.TempDir()
	rec := filepath.Join(dir, "rec.jsonl")
	cmd := harnessCommand("mcp", "--workspace", ws, "--record", rec)
	cmd.Env = append(os.Environ(), "B10X_TEST_MAIN=1", tmpfsChildEnv+"="+dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
	p := startStdioCmd(t, cmd)
	read := func(id int) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"file_read","arguments":{"path":"hello.txt"}}}`, id)
	}
	p.send(t, initLine, initializedLine, read(2))
	if o := callOutcome(t, p.answer(t, "2", time.Minute)); o["status"] != "executed" {
		t.Fatalf("file_read before the disk is full: %v", o)
	}
	// The harness's view of the directory, from outside its namespace.
	inside := fmt.Sprintf("/proc/%d/root%s", p.cmd.Process.Pid, dir)
	if _, err := os.Stat(filepath.Join(inside, "rec.jsonl")); err != nil {
		t.Fatalf("the record in the harness's namespace: %v", err)
	}
	if _, err := os.Stat(rec); err == nil {
		t.Fatal("the record is on the host's filesystem: the tmpfs was not private to the harness")
	}
	fill, err := os.Create(filepath.Join(inside, "filler"))
	must(t, err)
	for {
		if _, err := fill.Write(make([]byte, 4096)); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("filling the tmpfs: %v", err)
			}
			break
		}
	}
	fill.Close()
	// The record's last page may still hold a line or two.
	told := false
	for id := 3; id < 20 && !told; id++ {
		p.send(t, read(id))
		o := callOutcome(t, p.answer(t, strconv.Itoa(id), time.Minute))
		meta, _ := o["meta"].(map[string]any)
		told = o["reason"] == "record_failed" || meta["record_error"] != nil
	}
	if !told {
		t.Fatal("no call was told the record failed")
	}
	p.send(t, read(20))
	if o := callOutcome(t, p.answer(t, "20", time.Minute)); o["reason"] != "record_failed" {
		t.Fatalf("a call after the record failed: %v", o)
	}
	p.in.Close()
	if code := p.exit(t, 30*time.Second); code != exitFailed {
		t.Errorf("exit %d after a record failure, want %d\n%s", code, exitFailed, p.stderr)
	}
	e := p.stderr.String()
	if strings.Count(e, "the run record could not be written") != 1 || !strings.Contains(e, "the run record is incomplete") {
		t.Errorf("stderr does not say the record failed, once, and what it means:\n%s", e)
	}
}

// TestMCPHelpAndSessionFlags: `mcp --help` says how a session ends and
// what each exit status means; --max-sessions below 1 and a negative
// --session-idle are refused before anything is served (exit 2, one line).
func TestMCPHelpAndSessionFlags(t *testing.T) {
	r := harness(t, "", "mcp", "--help")
	for _, want := range []string{"Exit status: 0 when the session ended with no call in flight", "130 when calls in flight were cut short",
		"1 when the session broke", "the run record could not be written", "--session-idle", "--max-sessions"} {
		if !strings.Contains(strings.Join(strings.Fields(r.stdout), " "), want) {
			t.Errorf("mcp --help does not say %q:\n%s", want, r.stdout)
		}
	}
	ws, _ := sampleWorkspace(t)
	for _, c := range []struct{ flag, want string }{
		{"--max-sessions=0", "--max-sessions 0: must be at least 1"},
		{"--max-sessions=-3", "--max-sessions -3: must be at least 1"},
		{"--session-idle=-1s", "--session-idle -1s: must not be negative"},
	} {
		r := harness(t, initLine+"\n", "mcp", "--workspace", ws, c.flag)
		if r.code != exitUsage || r.stdout != "" || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit 2 and one line with %q", c.flag, r.code, r.stdout, r.stderr, c.want)
		}
	}
}

// TestMCPStdioBadInput: malformed and invalid lines on stdio are each
// answered with their JSON-RPC error (-32700 parse error, -32600 invalid
// request), id null unless the line carries a valid one, and the session
// carries on: the request after each is answered, and the session ends
// normally. Ids come back exactly as written; a message over the 9 MiB cap
// is skipped and answered; a request whose id is in flight (here, waiting
// for its approval) is refused with that id while the first goes on.
func TestMCPStdioBadInput(t *testing.T) {
	testenv.Require(t, atkWrites(), "file_write (a confined workspace)", testenv.ShapeNoLandlock)
	ws, _ := sampleWorkspace(t)
	rec := filepath.Join(t.TempDir(), "rec.jsonl")
	p := startStdio(t, "--workspace", ws, "--record", rec, "--approve", "prompt")
	p.send(t, strings.Replace(initLine, `"capabilities":{}`, `"capabilities":{"elicitation":{}}`, 1), initializedLine)
	p.answer(t, "1", time.Minute)
	raw := func(id string) string {
		timeout := time.After(time.Minute)
		for {
			select {
			case l, ok := <-p.lines:
				if !ok {
					t.Fatalf("stdout ended before the answer to %s\n%s", id, p.stderr)
				}
				if bytes.HasPrefix(l, []byte(`{"jsonrpc":"2.0","id":`+id+`,`)) {
					return string(l)
				}
			case <-timeout:
				t.Fatalf("no answer to %s within a minute\n%s", id, p.stderr)
			}
		}
	}
	big := `{"jsonrpc":"2.0","id":99,"method":"tools/call","params":{"name":"file_read","arguments":{"path":"` + strings.Repeat("a", 10<<20) + `"}}}`
	for i, c := range []struct{ line, code, id string }{
		{"not json", "-32700", "null"},
		{"\x00\x01\xfe\xff", "-32700", "null"},
		{`{"jsonrpc":"2.0","id":2,"method":"ping"}` + "\x00", "-32700", "null"},
		{`{"jsonrpc":"2.0","id":3,"method":"ping","params":` + strings.Repeat("[", 1000) + strings.Repeat("]", 1000) + `}`, "-32700", "null"},
		{`[{"jsonrpc":"2.0","id":4,"method":"ping"}]`, "-32600", "null"},
		{`[]`, "-32600", "null"},
		{`{"jsonrpc":"1.0","id":5,"method":"ping"}`, "-32600", "5"},
		{`{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}`, "-32600", "null"},
		{`{"jsonrpc":"2.0","id":false,"method":"ping"}`, "-32600", "null"},
		{`{"jsonrpc":"2.0","id":null,"method":"ping"}`, "-32600", "null"},
		{big, "-32600", "null"},
	} {
		p.send(t, c.line)
		if l := raw(c.id); !strings.Contains(l, `"error":{"code":`+c.code+`,`) {
			t.Errorf("%.50q: answered %.200s, want code %s", c.line, l, c.code)
		}
		p.send(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":"ok-%d","method":"ping"}`, i))
		if l := raw(fmt.Sprintf(`"ok-%d"`, i)); !strings.Contains(l, `"result":{}`) {
			t.Fatalf("after %.50q: %s", c.line, l)
		}
	}
	for _, id := range []string{"1.5", "1e30", "-0", `"s"`} {
		p.send(t, `{"jsonrpc":"2.0","id":`+id+`,"method":"tools/call","params":{"name":"file_read","arguments":{"path":"hello.txt"}}}`)
		if l := raw(id); !strings.Contains(l, `hello\nworld`) {
			t.Errorf("id %s: %s", id, l)
		}
	}
	// A write waits for its approval: id 40 is in flight.
	p.send(t, `{"jsonrpc":"2.0","id":40,"method":"tools/call","params":{"name":"file_write","arguments":{"path":"new.txt","content":"x"}}}`)
	var ask map[string]any
	for ask["method"] != "elicitation/create" {
		select {
		case l := <-p.lines:
			json.Unmarshal(l, &ask)
		case <-time.After(time.Minute):
			t.Fatalf("no elicitation/create for the write\n%s", p.stderr)
		}
	}
	p.send(t, `{"jsonrpc":"2.0","id":40,"method":"ping"}`)
	if l := raw("40"); !strings.Contains(l, `"error":{"code":-32600,`) || !strings.Contains(l, "already in flight") {
		t.Errorf("a second request with id 40: %s", l)
	}
	askID, _ := json.Marshal(ask["id"])
	p.send(t, `{"jsonrpc":"2.0","id":`+string(askID)+`,"result":{"action":"decline"}}`)
	if l := raw("40"); !strings.Contains(l, "approval_rejected") {
		t.Errorf("the write after its approval was declined: %s", l)
	}
	p.in.Close()
	if code := p.exit(t, 30*time.Second); code != 0 {
		t.Errorf("exit %d, want 0\n%s", code, p.stderr)
	}
	if _, err := os.Stat(filepath.Join(ws, "new.txt")); !os.IsNotExist(err) {
		t.Error("the declined write wrote")
	}
	if got := recordLines(t, rec); len(got) != 7 || got[5] != "call file_write approval_rejected" || got[6] != "run_end client_closed" {
		t.Errorf("record %v", got)
	}
}
