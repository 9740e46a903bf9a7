package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/b10x/harness/internal/testenv"
)

// tmpCapScript writes 3 MiB (below a 4 MiB cap) and 6 MiB (past it) into
// each of the child's /tmp and /dev/shm.
const tmpCapScript = `for d in /tmp /dev/shm; do
  dd if=/dev/zero of=$d/below bs=1048576 count=3 2>/dev/null; echo "$d below=$?"
  rm -f $d/below
  dd if=/dev/zero of=$d/past bs=1048576 count=6 2>&1 | grep -c 'No space left' | sed "s|^|$d enospc=|"
done`

// TestTmpSizeFlag: --tmp-size caps the child's /tmp and /dev/shm through
// exec and through the run tool, and a bad size is a one-line usage error
// naming the flag.
func TestTmpSizeFlag(t *testing.T) {
	ws, _ := sampleWorkspace(t)
	for _, bad := range []string{"--tmp-size=0", "--tmp-size=-1", "--tmp-size=garbage", "--tmp-size=99999999999GiB", "--tmp-size=0MiB"} {
		for _, args := range [][]string{
			{"exec", "--workspace", ws, bad, "--", "true"},
			{"call", "--workspace", ws, bad, "dir_list", "{}"},
			{"call", "--workspace", ws, "--allow-program", "true", bad, "dir_list", "{}"},
			{"tools", "--workspace", ws, bad},
		} {
			r := harness(t, "", args...)
			if r.code != usageStatus(args) || !strings.Contains(r.stderr, "--tmp-size") || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 || r.stdout != "" {
				t.Errorf("%q: want exit %d and one line naming --tmp-size, got exit %d\nstdout: %s\nstderr: %s", args, usageStatus(args), r.code, r.stdout, r.stderr)
			}
		}
	}

	want := []string{"/tmp below=0\n", "/tmp enospc=1\n", "/dev/shm below=0\n", "/dev/shm enospc=1\n"}
	testenv.Require(t, execution(), "confined execution", testenv.ShapeNoLandlock, testenv.ShapeNoUserns)
	r := harness(t, "", "exec", "--workspace", ws, "--tmp-size", "4MiB", "--", "sh", "-c", tmpCapScript)
	if r.code != 0 {
		t.Fatalf("exec: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	for _, w := range want {
		if !strings.Contains(r.stdout, w) {
			t.Errorf("exec --tmp-size 4MiB: want %q in the output\n%s", w, r.stdout)
		}
	}

	o := outcome(t, harness(t, "", "call", "--workspace", ws, "--yes", "--allow-program", "sh", "--tmp-size", "4MiB",
		"run", `{"argv":["sh","-c",`+jsonString(tmpCapScript)+`]}`))
	text, _ := o["result"].(string)
	if o["status"] != "executed" {
		t.Fatalf("call run: %v", o)
	}
	for _, w := range want {
		if !strings.Contains(text, w) {
			t.Errorf("call run --tmp-size 4MiB: want %q in the result\n%s", w, text)
		}
	}
}

// tmpLeft lists the harness's temporary directories in dir.
func tmpLeft(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "b10x-harness-*"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// waitTmpLeft polls tmpLeft until it has n entries or 10 s pass.
func waitTmpLeft(t *testing.T, dir string, n int) []string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		m := tmpLeft(t, dir)
		if len(m) == n || time.Now().After(deadline) {
			return m
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A hook that writes a file in its TMPDIR, so the directory the harness
// removes is not empty. Where the harness confines its own writes, the hook
// inherits that domain, so it succeeds only in the harness's directory.
const tmpHook = `sh -c 'echo x > "$TMPDIR/hook-was-here"'`

// TestNothingLeftInTmp: no command leaves a b10x-harness-* directory in
// $TMPDIR, whatever the outcome: 50 calls (executed, refused, failed, a run
// call, a usage error), exec, doctor, tools, run with a replay provider,
// and a call whose harness gets SIGINT, SIGTERM or SIGKILL mid-call.
func TestNothingLeftInTmp(t *testing.T) {
	ws, _ := sampleWorkspace(t)
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	check := func(what string) {
		t.Helper()
		if left := tmpLeft(t, tmp); len(left) > 0 {
			t.Fatalf("after %s, left in $TMPDIR: %v", what, left)
		}
	}
	base := []string{"call", "--workspace", ws, "--yes", "--hook", tmpHook}
	runOK := execution()
	// Without Landlock the harness does not confine its own writes: no
	// directory is made, file_write is not published.
	selfConfined := testenv.Shape() != testenv.ShapeNoLandlock
	writeCode := exitOK
	if !selfConfined {
		writeCode = exitRefused
	}
	type variant struct {
		args []string
		code int
	}
	variants := []variant{
		{[]string{"call", "--workspace", ws, "dir_list", "{}"}, exitOK},                                                    // no hook
		{append(slices.Clone(base), "dir_list", "{}"), exitOK},                                                             // executed, hook passed
		{append(slices.Clone(base), "file_read", `{"path":"../data-archived/x"}`), exitRefused},                            // refused by the gate
		{append(slices.Clone(base), "file_read", `{"path":"no-such-file"}`), exitFailed},                                   // failed
		{append(slices.Clone(base), "--hook", "sh -c 'exit 2'", "dir_list", "{}"), exitRefused},                            // refused by a hook
		{append(slices.Clone(base), "file_write", `{"path":"w.txt","content":"x"}`), writeCode},                            // a write
		{append(slices.Clone(base), "--record", filepath.Join(ws, "no", "such", "dir", "r"), "dir_list", "{}"), exitUsage}, // usage error
	}
	if runOK {
		variants = append(variants, variant{append(slices.Clone(base), "--allow-program", "sh", "run", `{"argv":["sh","-c","echo hi > /tmp/x"]}`), exitOK})
	}
	calls := 50
	if testenv.InVM() {
		calls = 2 * len(variants) // each ending twice: a call costs a second there
	}
	for i := 0; i < calls; i++ {
		v := variants[i%len(variants)]
		r := harness(t, "", v.args...)
		if r.code != v.code {
			t.Fatalf("call %d %q: exit %d, want %d\nstdout: %s\nstderr: %s", i, v.args, r.code, v.code, r.stdout, r.stderr)
		}
		check(fmt.Sprintf("call %d %q", i, v.args))
	}

	if r := harness(t, "", "exec", "--workspace", ws, "--", "sh", "-c", "echo x > /tmp/x"); runOK && r.code != 0 {
		t.Fatalf("exec: exit %d %s", r.code, r.stderr)
	}
	check("exec")
	harness(t, "", "doctor")
	check("doctor")
	if r := harness(t, "", "tools", "--workspace", ws, "--hook", tmpHook); r.code != 0 {
		t.Fatalf("tools: exit %d %s", r.code, r.stderr)
	}
	check("tools")
	script := filepath.Join(t.TempDir(), "replay.jsonl")
	must(t, os.WriteFile(script, []byte(`{"text": "read", "tool_calls": [{"name": "file_read", "arguments": {"path": "hello.txt"}}]}`+"\n"+
		`{"text": "out", "tool_calls": [{"name": "file_read", "arguments": {"path": "../data-archived/x"}}]}`+"\n"), 0o644))
	if r := rnHarness(t, nil, "", "run", "--provider", "replay:"+script, "--workspace", ws, "--yes", "--hook", tmpHook); r.code != 0 {
		t.Fatalf("run: exit %d %s", r.code, r.stderr)
	}
	check("run")

	// Mid-call: a hook that sleeps; the harness gets a signal once its
	// directory exists.
	if !selfConfined {
		t.Logf("shape %s: the harness does not confine its own writes, so it makes no directory to watch mid-call", testenv.Shape())
		return
	}
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGKILL} {
		cmd := harnessCommand("call", "--workspace", ws, "--hook", tmpHook, "--hook", "sleep 60", "--hook-timeout", "90s", "dir_list", "{}")
		cmd.Env = append(os.Environ(), "B10X_TEST_MAIN=1")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		must(t, cmd.Start())
		if m := waitTmpLeft(t, tmp, 1); len(m) != 1 {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("%v: the call never made its directory (%v)", sig, m)
		}
		// The hook has written its file once the sleep hook runs.
		deadline := time.Now().Add(10 * time.Second)
		for !slices.ContainsFunc(tmpLeft(t, tmp), func(d string) bool { _, err := os.Stat(filepath.Join(d, "hook-was-here")); return err == nil }) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		must(t, cmd.Process.Signal(sig))
		_ = cmd.Wait()
		if left := waitTmpLeft(t, tmp, 0); len(left) > 0 {
			t.Fatalf("after %v mid-call, left in $TMPDIR: %v", sig, left)
		}
	}
}

// TestRelativeTmpdir: a relative $TMPDIR still gives the harness an
// absolute temporary directory: it confines its own writes (which takes
// absolute paths only) and leaves nothing behind.
func TestRelativeTmpdir(t *testing.T) {
	base := t.TempDir()
	ws := filepath.Join(base, "ws")
	must(t, os.MkdirAll(filepath.Join(base, "tmp"), 0o755))
	must(t, os.MkdirAll(ws, 0o755))
	cmd := harnessCommand("call", "--workspace", ws, "--hook", tmpHook, "dir_list", "{}")
	cmd.Dir = base
	cmd.Env = append(os.Environ(), "B10X_TEST_MAIN=1", "TMPDIR=tmp")
	r := runHarnessCmd(t, cmd, "")
	if r.code != 0 || strings.Contains(r.stderr, "not an absolute path") {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if left := waitTmpLeft(t, filepath.Join(base, "tmp"), 0); len(left) > 0 {
		t.Fatalf("left in the relative $TMPDIR: %v", left)
	}
}
