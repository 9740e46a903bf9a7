package interop

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// longArgs are the harness's flags for the long calls: sh may run, and
// run (risk high) needs no approval, which the SDK client cannot give.
var longArgs = []string{"--allow-program", "sh", "--approve-up-to", "high"}

// TestTypeScriptSDKLongRun: a run call whose program prints a line every
// half second, through the MCP TypeScript SDK over stdio with an
// onprogress handler, hears of its progress while it runs (the output so
// far growing); a second one, aborted through its AbortSignal after its
// first progress, is rejected at once on the client's side, and the
// harness kills its whole tree and records it cancelled, and the session
// goes on.
func TestTypeScriptSDKLongRun(t *testing.T) {
	clientPath(t, "sdk")
	t.Parallel() // it waits, mostly: beside its HTTP twin
	f := newFixture(t)
	f.give(t)
	runLong(t, f, append([]string{"stdio", f.harness}, f.mcpArgs(longArgs...)...)...)
	checkEnd(t, f, "client_closed")
	checkNoCancelledAtEnd(t, f)
}

// TestTypeScriptSDKLongRunHTTP is TestTypeScriptSDKLongRun over streamable
// HTTP (mcp --listen, with the bearer token): progress comes on the call's
// response stream, the cancellation as a POST of its own.
func TestTypeScriptSDKLongRunHTTP(t *testing.T) {
	clientPath(t, "sdk")
	t.Parallel()
	f := newFixture(t)
	f.give(t)
	h := startHTTP(t, f, longArgs...)
	runLong(t, f, "http", h.url, h.token)
	h.stop(t)
	checkEnd(t, f, "stopped")
	checkNoCancelledAtEnd(t, f)
}

// sdkEvent is one line sdk-long.mjs prints.
type sdkEvent struct {
	Event    string `json:"event"`
	MS       int64  `json:"ms"`
	Progress json.RawMessage
	Message  string `json:"message"`
	Error    string `json:"error"`
	Code     any    `json:"code"`
	Result   *sdkResult
	Read     *sdkResult
}

type sdkResult struct {
	Content []struct{ Type, Text string } `json:"content"`
	IsError bool                          `json:"isError"`
}

type sdkProgress struct {
	MS       int64   `json:"ms"`
	Progress float64 `json:"progress"`
	Message  string  `json:"message"`
}

var (
	// The first call's result: its five lines, all of them.
	firstResult = regexp.MustCompile(`^exit status 0 \(\d+ ms\)\n--- stdout \(10 bytes\) ---\n1\n2\n3\n4\n5\n--- stderr \(0 bytes\) ---\n$`)
	// A progress message, with the output so far.
	progressMessage = regexp.MustCompile(`^running for \d+s, (\d+) bytes of output so far$`)
)

// runLong runs testdata/sdk-long.mjs against the harness (mode: stdio and
// the harness's command line, or http, its URL and token) and checks each
// of its steps, from the client's side, the host's processes and the
// record.
func runLong(t *testing.T, f *fixture, mode ...string) {
	t.Helper()
	marker := fmt.Sprintf("%d.%d", 3000+os.Getpid()%1000, time.Now().UnixNano()%100000)
	t.Cleanup(func() { reapMarked(marker) })
	plan, _ := json.Marshal(map[string]any{
		"first":  []string{"sh", "-c", "for i in 1 2 3 4 5; do echo $i; sleep 0.5; done"},
		"second": []string{"sh", "-c", "sleep " + marker + " & while :; do echo tick; sleep 0.5; done"},
		"read":   "hello.txt",
	})
	script, err := filepath.Abs("testdata/sdk-long.mjs")
	if err != nil {
		t.Fatal(err)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node: %v", err)
	}
	// The plan in the environment, not in node's argv: only the call's
	// processes are to carry the marker.
	cmd := exec.Command(node, append([]string{script, clientPrefix(t, "sdk")}, mode...)...)
	cmd.Dir, cmd.Env = f.ws, baseEnv(f, "SDK_LONG_PLAN="+string(plan))
	stderr := &syncBuf{}
	cmd.Stderr = stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	events := make(chan sdkEvent, 8)
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var ev sdkEvent
			if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
				ev = sdkEvent{Event: "garbage", Error: sc.Text()}
			}
			events <- ev
		}
		_, _ = io.Copy(io.Discard, out)
		exited <- cmd.Wait()
		close(events)
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
	})
	next := func(want string, d time.Duration) sdkEvent {
		t.Helper()
		select {
		case ev, ok := <-events:
			if !ok || ev.Event != want {
				t.Fatalf("sdk-long.mjs: got %+v, want its %q line; stderr:\n%s", ev, want, stderr)
			}
			return ev
		case <-time.After(d):
			t.Fatalf("sdk-long.mjs: no %q line in %v; stderr:\n%s", want, d, stderr)
		}
		panic("unreachable")
	}
	say := func(line string) {
		t.Helper()
		if _, err := io.WriteString(in, line+"\n"); err != nil {
			t.Fatalf("telling sdk-long.mjs %q: %v", line, err)
		}
	}

	// 1. Progress while the call ran: at least two notifications, each
	// before the result, with the output so far never shrinking, the
	// first short of the whole. (A later one may see it whole: between
	// the program's last line and its exit, which a loaded host
	// stretches, the call still runs.)
	first := next("first", 30*time.Second)
	var progress []sdkProgress
	_ = json.Unmarshal(first.Progress, &progress)
	if first.Result == nil || first.Result.IsError || len(first.Result.Content) != 1 || !firstResult.MatchString(first.Result.Content[0].Text) {
		t.Errorf("the first call's result: %+v", first.Result)
	}
	if len(progress) < 2 {
		t.Errorf("%d progress notifications during a %d ms call: %+v", len(progress), first.MS, progress)
	}
	lastBytes, lastProgress := 0, 0.0
	for i, p := range progress {
		m := progressMessage.FindStringSubmatch(p.Message)
		n := 0
		if m != nil {
			n, _ = strconv.Atoi(m[1])
		}
		if m == nil || n < lastBytes || n > 10 || (i == 0 && n >= 10) || p.Progress <= lastProgress || p.MS >= first.MS {
			t.Errorf("progress %+v (the call's result came at %d ms); the notifications: %+v", p, first.MS, progress)
		}
		lastBytes, lastProgress = n, p.Progress
	}
	t.Logf("first call: %d ms, progress %+v", first.MS, progress)

	// 2. The second call, at its first progress: its tree runs (sh and
	// its sleep carry the marker); then the client aborts it.
	p := next("progress", 30*time.Second)
	if !progressMessage.MatchString(p.Message) {
		t.Errorf("the second call's first progress: %+v", p)
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(marked(marker)) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("the second call's processes are not running at its first progress: %v", marked(marker))
		}
		time.Sleep(20 * time.Millisecond)
	}
	say("abort")
	abortedAt := time.Now()
	ab := next("aborted", 10*time.Second)
	if !strings.Contains(ab.Error, "cancelled by the interop test") || ab.MS > 1000 {
		t.Errorf("the aborted call settled to %+v, %d ms after abort(); want rejected with the abort's reason at once", ab, ab.MS)
	}
	// The harness kills the whole tree, and records the call cancelled.
	for len(marked(marker)) > 0 {
		if time.Since(abortedAt) > 10*time.Second {
			t.Fatalf("processes left 10 s after the cancellation: %v", marked(marker))
		}
		time.Sleep(20 * time.Millisecond)
	}
	gone := time.Since(abortedAt)
	var rec map[string]any
	for rec == nil {
		if c := f.calls(t)[2]; c != nil {
			rec = c
		} else if time.Since(abortedAt) > 10*time.Second {
			t.Fatalf("no call line for the cancelled call 10 s after the cancellation: %s", dump(f.recordLines(t)))
		} else {
			time.Sleep(20 * time.Millisecond)
		}
	}
	if rec["entry"] != "run" || rec["reason"] != "cancelled" {
		t.Errorf("the cancelled call was recorded %s", dump(rec))
	}
	t.Logf("second call: first progress at %d ms (%s); the client's promise settled %d ms after abort() (%s, code %v); the tree gone %v after it; recorded %v (%v): %v",
		p.MS, p.Message, ab.MS, ab.Error, ab.Code, gone.Round(time.Millisecond), rec["status"], rec["reason"], rec["message"])

	// 3. The session goes on.
	say("go on")
	end := next("end", 30*time.Second)
	if end.Read == nil || end.Read.IsError || len(end.Read.Content) != 1 || end.Read.Content[0].Text != helloText {
		t.Errorf("file_read after the cancellation: %+v", end.Read)
	}
	_ = in.Close()
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("sdk-long.mjs: %v; stderr:\n%s", err, stderr)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("sdk-long.mjs did not exit; stderr:\n%s", stderr)
	}
	t.Logf("sdk-long.mjs ran %v", time.Since(start).Round(time.Millisecond))

	calls := f.calls(t)
	if len(calls) != 3 || calls[1]["status"] != "executed" || calls[3]["status"] != "executed" || calls[3]["entry"] != "file_read" {
		t.Errorf("the record's calls: %s", dump(calls))
	}
}

// checkNoCancelledAtEnd: the session's end cut no call short, so the call
// recorded cancelled was cancelled by the client's notification.
func checkNoCancelledAtEnd(t *testing.T, f *fixture) {
	t.Helper()
	lines := f.recordLines(t)
	if last := lines[len(lines)-1]; last["cancelled_calls"] != nil {
		t.Errorf("run_end: %s", dump(last))
	}
}

// marked lists the host's processes whose command line holds marker.
func marked(marker string) []string {
	var found []string
	dirs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, d := range dirs {
		b, err := os.ReadFile(d)
		if err == nil && bytes.Contains(b, []byte(marker)) {
			found = append(found, d+": "+strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	return found
}

// reapMarked kills what a failed test left of marker's processes.
func reapMarked(marker string) {
	for _, p := range marked(marker) {
		var pid int
		if _, err := fmt.Sscanf(p, "/proc/%d/", &pid); err == nil && pid != os.Getpid() {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}
