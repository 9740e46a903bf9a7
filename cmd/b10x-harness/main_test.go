package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/b10x/harness/confine/spawn"
	"github.com/b10x/harness/egress"
	"github.com/b10x/harness/internal/reexec"
	"github.com/b10x/harness/internal/testenv"
	"github.com/b10x/harness/session"
)

// TestMain lets the test binary act as b10x-harness itself: with
// B10X_TEST_MAIN=1 it runs the real main. Tests start it as a subprocess, so
// the harness may confine its own process without confining the test.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == netClientArg {
		os.Exit(netClient(os.Args[2:]))
	}
	if len(os.Args) > 1 && os.Args[1] == swapperArg {
		os.Exit(swapper(os.Args[2:]))
	}
	reexec.Init()
	if os.Getenv("B10X_TEST_MAIN") == "1" {
		if os.Getenv(brokenResolverEnv) != "" {
			session.AfterRestrictForTest = func(ws string) { brokenResolver(ws, os.Stderr) }
		}
		if hosts := os.Getenv(testHostsEnv); hosts != "" {
			egress.LookupForTest = testHosts(hosts)
		}
		os.Exit(realMain(os.Args[1:], env{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr}))
	}
	os.Exit(m.Run())
}

type result struct {
	code           int
	stdout, stderr string
}

// runOwner is the unprivileged user a test gives its workspace to where a
// run child cannot be given a root-owned one (a root harness on a
// filesystem without idmapped mounts: tmpfs before Linux 6.3, the VM
// shapes' /tmp), as the harness's refusal tells a user to do. Elsewhere
// the workspace stays root's and the idmapped path is what runs.
const runOwner = 1000

// harnessCommand is the CLI as a subprocess with args; the workspace they
// name is given to runOwner first where it must be (see runOwner).
func harnessCommand(args ...string) *exec.Cmd {
	giveWorkspace(args)
	return exec.Command(os.Args[0], args...)
}

// giveWorkspace chowns the tree of the --workspace in args, and of each
// --allow-write path, to runOwner when this root process could not give
// the workspace to a run child as it is.
func giveWorkspace(args []string) {
	if os.Geteuid() != 0 {
		return
	}
	value := func(i int, flag string) (string, bool) {
		a := args[i]
		switch {
		case a == flag && i+1 < len(args):
			return args[i+1], true
		case strings.HasPrefix(a, flag+"="):
			return strings.TrimPrefix(a, flag+"="), true
		}
		return "", false
	}
	var ws string
	var writable []string
	for i := range args {
		if v, ok := value(i, "--workspace"); ok {
			ws = v
		}
		if v, ok := value(i, "--allow-write"); ok {
			writable = append(writable, v)
		}
	}
	if ws == "" {
		return
	}
	if _, err := spawn.ProbeIdentity(ws); !errors.Is(err, spawn.ErrRootWorkspace) {
		return
	}
	for _, dir := range append([]string{ws}, writable...) {
		_ = filepath.WalkDir(dir, func(p string, _ fs.DirEntry, err error) error {
			if err == nil {
				_ = os.Lchown(p, runOwner, runOwner)
			}
			return nil
		})
	}
}

// harness runs the CLI as a subprocess with args, in dir, with stdin.
func harness(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	return harnessIn(t, -1, stdin, args...)
}

// harnessIn is harness started in the cgroup whose directory descriptor is
// cgroupFD (-1: the test's own). A harness alone in its cgroup can enable
// controllers for its run leaves; one sharing the test's cannot.
func harnessIn(t *testing.T, cgroupFD int, stdin string, args ...string) result {
	t.Helper()
	cmd := harnessCommand(args...)
	if cgroupFD >= 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: cgroupFD}
	}
	cmd.Env = append(os.Environ(), "B10X_TEST_MAIN=1")
	return runHarnessCmd(t, cmd, stdin)
}

// runHarnessCmd runs a prepared harness command with stdin and returns its
// exit code and output; a Go stack trace on stderr fails the test.
func runHarnessCmd(t *testing.T, cmd *exec.Cmd, stdin string) result {
	t.Helper()
	cmd.Stdin = strings.NewReader(stdin)
	return runHarnessReading(t, cmd)
}

// runHarnessReading is runHarnessCmd with the stdin cmd already has, and
// harnessDeadline to finish.
func runHarnessReading(t *testing.T, cmd *exec.Cmd) result {
	t.Helper()
	return runHarnessWithin(t, cmd, harnessDeadline())
}

// harnessDeadline is how long one harness subprocess may take before
// runHarnessReading kills it. Measured on the development host (the whole
// package, load average about 7 on two cores): 363 calls, median 0.05 s,
// longest 2.2 s (TestProxyDiesWithTheCall); the longest a test allows is
// the enclosing fork bomb's --timeout 60s. A guest under TCG is several
// times slower.
func harnessDeadline() time.Duration {
	if testenv.InVM() {
		return 6 * time.Minute
	}
	return 2 * time.Minute
}

// deadlineMargin is what a harness deadline leaves of the test binary's
// own -timeout, so that the test fails naming its case before go test
// panics naming only the test.
const deadlineMargin = 15 * time.Second

// runHarnessWithin runs a prepared harness command and kills it when it
// has not exited within d (or by the test binary's deadline less
// deadlineMargin, if that is sooner): a call that should end but hangs
// (a --listen that wrongly serves) fails the test naming the case and the
// command, instead of holding the package until go test's -timeout.
func runHarnessWithin(t *testing.T, cmd *exec.Cmd, d time.Duration) result {
	t.Helper()
	if end, ok := t.Deadline(); ok {
		d = min(d, time.Until(end)-deadlineMargin)
	}
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	if cmd.WaitDelay == 0 {
		// A killed harness's children may hold its stdout and stderr open.
		cmd.WaitDelay = 10 * time.Second
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting harness: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	stop := context.AfterFunc(ctx, func() { _ = cmd.Process.Kill() })
	err := cmd.Wait()
	if !stop() {
		t.Fatalf("%s: the harness did not exit within %s and was killed: %q\nstdout:\n%s\nstderr:\n%s", t.Name(), d.Round(time.Millisecond), cmd.Args[1:], so.String(), se.String())
	}
	if took := time.Since(start); took > d/2 {
		t.Logf("%s: the harness took %s of its %s deadline: %q", t.Name(), took.Round(time.Millisecond), d, cmd.Args[1:])
	}
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("running harness: %v", err)
	}
	if strings.Contains(se.String(), "goroutine ") || strings.Contains(se.String(), "panic:") {
		t.Fatalf("a stack trace reached the user:\n%s", se.String())
	}
	return result{code, so.String(), se.String()}
}

// outcome decodes a call's stdout.
func outcome(t *testing.T, r result) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &m); err != nil {
		t.Fatalf("call printed no JSON outcome (exit %d): %v\nstdout: %s\nstderr: %s", r.code, err, r.stdout, r.stderr)
	}
	return m
}

// readRecord parses a run record file.
func readRecord(t *testing.T, path string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var lines []map[string]any
	for i, l := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		var m map[string]any
		if err := json.Unmarshal(l, &m); err != nil {
			t.Fatalf("record line %d: %v: %s", i+1, err, l)
		}
		lines = append(lines, m)
	}
	return lines
}

// sampleWorkspace builds a workspace with an outside secret next to it.
func sampleWorkspace(t *testing.T) (ws, outside string) {
	t.Helper()
	dir := t.TempDir()
	ws = filepath.Join(dir, "data")
	outside = filepath.Join(dir, "data-archived")
	for _, d := range []string{ws, filepath.Join(ws, "sub"), outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	must(t, os.WriteFile(filepath.Join(ws, "hello.txt"), []byte("hello\nworld\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(outside, "x"), []byte("OUTSIDE-SECRET\n"), 0o644))
	must(t, os.Symlink("../data-archived/x", filepath.Join(ws, "link-out")))
	return ws, outside
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
