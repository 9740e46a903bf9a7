// Package interop tests `b10x-harness mcp` with the agents people use as
// its clients — Claude Code, Codex CLI, Gemini CLI — and a program written
// with the MCP TypeScript SDK, each run for real (pinned, from npm) and
// driven offline by a fake model API on loopback (interop/fakemodel).
// `make interoptest` installs the clients and runs these tests; without the
// clients installed they are skipped (see clientPath). docs/mcp.md,
// section "Tests with the agents people use", says what each test checks.
package interop

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// teeFlag makes the test binary the tee (see tee): the clients start it
// as their MCP server, as `TESTBINARY -interop-tee LOG DELAY HARNESS
// ARGS...`. It runs the tee proper as its child, with teeInnerFlag in
// place of teeFlag (see keep).
const (
	teeFlag      = "-interop-tee"
	teeInnerFlag = "-interop-tee-inner"
)

// built is the harness binary TestMain built (when B10X_HARNESS is unset).
var built string

func TestMain(m *testing.M) {
	if len(os.Args) > 4 && os.Args[1] == teeFlag {
		os.Exit(keep(os.Args[2:]))
	}
	if len(os.Args) > 4 && os.Args[1] == teeInnerFlag {
		delay, err := time.ParseDuration(os.Args[3])
		if err != nil {
			fmt.Fprintln(os.Stderr, "tee:", err)
			os.Exit(1)
		}
		os.Exit(tee(os.Args[2], delay, os.Args[4], os.Args[5:]))
	}
	code := func() int {
		if os.Getenv("B10X_HARNESS") == "" && interopCache() != "" {
			dir, err := os.MkdirTemp("", "b10x-interop-bin")
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			defer os.RemoveAll(dir)
			if built, err = buildHarness(dir); err != nil {
				fmt.Fprintln(os.Stderr, "interop: building the harness:", err)
				return 1
			}
		}
		return m.Run()
	}()
	os.Exit(code)
}

// buildHarness builds cmd/b10x-harness from this tree into dir, with the
// helper image the tree holds stamped in as `make build` does (without it,
// the binary runs itself as its helper).
func buildHarness(dir string) (string, error) {
	root, err := filepath.Abs("..")
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, "b10x-harness")
	ld := "-s -w"
	if b, err := os.ReadFile(filepath.Join(root, "confine/spawn/internal/helperimage/bin/helper-"+runtime.GOARCH)); err == nil {
		sum := sha256.Sum256(b)
		ld += " -X=github.com/b10x/harness/confine/spawn/internal/helperimage.stamp=" + hex.EncodeToString(sum[:])
	}
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags="+ld, "-o", out, "./cmd/b10x-harness")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("%v\n%s", err, b)
	}
	return out, nil
}

// wireEvent is one line of a tee log.
type wireEvent struct {
	// Dir is "in" (client to server), "out" (server to client), "signal"
	// (the tee got Line, a signal's name, and passed it on), "eof" (the
	// client closed the server's stdin) or "exit" (the harness ended;
	// Line is its status).
	Dir  string          `json:"dir"`
	Line json.RawMessage `json:"line,omitempty"`
	Text string          `json:"text,omitempty"`
	MS   int64           `json:"ms"`
}

// keep is the process the client starts: it runs the tee (the test
// binary with teeInnerFlag and args) in a process group of its own, on
// its own stdin, stdout and stderr, passes it SIGINT, SIGTERM and SIGHUP,
// and exits as it did. A client may kill the server it started: Codex
// SIGKILLs it (its Tokio child's kill on drop) soon after its SIGTERM,
// and a tee killed before the harness behind it had finished stopping
// logged no "exit" (one run in 2 to 20, by the load). The tee, in
// another group and not the client's child, outlives that and logs the
// harness's end.
func keep(args []string) int {
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "tee:", err)
		return 1
	}
	cmd := exec.Command(self, append([]string{teeInnerFlag}, args...)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	signal.Ignore(syscall.SIGPIPE)
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "tee:", err)
		return 1
	}
	go func() {
		for s := range sigs {
			_ = cmd.Process.Signal(s)
		}
	}()
	_ = cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code >= 0 {
		return code
	}
	return 1
}

// tee runs the harness (bin, args) as a client's stdio MCP server and
// writes to log every line each way, each signal it passes on (SIGINT,
// SIGTERM, SIGHUP: to the harness, as the client sent it) and the end of
// stdin, so that a test sees the protocol as the client spoke it. The
// harness's first answer is held back delay (a harness slow to start, as
// under load). It exits as the harness did.
func tee(log string, delay time.Duration, bin string, args []string) int {
	lf, err := os.OpenFile(log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, "tee:", err)
		return 1
	}
	defer lf.Close()
	start := time.Now()
	var mu sync.Mutex
	note := func(ev wireEvent) {
		ev.MS = time.Since(start).Milliseconds()
		b, _ := json.Marshal(ev)
		mu.Lock()
		defer mu.Unlock()
		_, _ = lf.Write(append(b, '\n'))
	}
	cmd := exec.Command(bin, args...)
	cmd.Stderr = os.Stderr
	// Its own process group: it gets the client's signals once, from here.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	in, err := cmd.StdinPipe()
	if err != nil {
		return 1
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return 1
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	// A client gone closes the tee's stdout: a write there must fail
	// with EPIPE (handled below), not kill the tee by SIGPIPE, as Go
	// does for a write to a broken pipe on fd 1 when it is not caught.
	signal.Ignore(syscall.SIGPIPE)
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "tee:", err)
		return 1
	}
	go func() {
		for s := range sigs {
			note(wireEvent{Dir: "signal", Text: unix.SignalName(s.(syscall.Signal))})
			_ = cmd.Process.Signal(s)
		}
	}()
	line := func(dir string, b []byte) {
		ev := wireEvent{Dir: dir}
		if json.Valid(b) {
			ev.Line = append(json.RawMessage(nil), b...)
		} else {
			ev.Text = string(b)
		}
		note(ev)
	}
	go func() {
		r := bufio.NewReaderSize(os.Stdin, 1<<20)
		for {
			b, err := r.ReadBytes('\n')
			if len(b) > 0 {
				line("in", trimNL(b))
				if _, werr := in.Write(b); werr != nil {
					break
				}
			}
			if err != nil {
				break
			}
		}
		note(wireEvent{Dir: "eof"})
		_ = in.Close()
	}()
	r := bufio.NewReaderSize(out, 1<<20)
	for first := true; ; first = false {
		b, err := r.ReadBytes('\n')
		if first && delay > 0 {
			time.Sleep(delay)
		}
		if len(b) > 0 {
			line("out", trimNL(b))
			if _, werr := os.Stdout.Write(b); werr != nil {
				_, _ = io.Copy(io.Discard, r)
				break
			}
		}
		if err != nil {
			break
		}
	}
	err = cmd.Wait()
	code := cmd.ProcessState.ExitCode()
	note(wireEvent{Dir: "exit", Text: fmt.Sprint(code)})
	if err != nil && code < 0 {
		return 1
	}
	return code
}

func trimNL(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}

// wire reads a tee log, once the harness behind it has exited (its
// "exit" event): a client may be gone before the harness it stopped has
// finished stopping. It waits at most 30 s, then returns what is there.
func wire(t *testing.T, log string) []wireEvent {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		evs := readWire(t, log)
		if slices.ContainsFunc(evs, func(ev wireEvent) bool { return ev.Dir == "exit" }) || time.Now().After(deadline) {
			return evs
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// readWire reads a tee log as it is now.
func readWire(t *testing.T, log string) []wireEvent {
	t.Helper()
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatalf("the tee log: %v", err)
	}
	// A line still being written is read next time.
	b = b[:bytes.LastIndexByte(b, '\n')+1]
	var evs []wireEvent
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var ev wireEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("tee log line %q: %v", sc.Text(), err)
		}
		evs = append(evs, ev)
	}
	return evs
}
