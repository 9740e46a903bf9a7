package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/b10x/harness/internal/testenv"
)

// Tests of issue 20: deadlines and cancels, the record under faults, and
// input read from stdin.

// TestNegativeTimeoutsAreRefused: --timeout, like --run-timeout, refuses a
// negative duration instead of taking it for the default.
func TestNegativeTimeoutsAreRefused(t *testing.T) {
	ws, _ := sampleWorkspace(t)
	script := filepath.Join(t.TempDir(), "s.jsonl")
	must(t, os.WriteFile(script, []byte(`{"text":"done"}`+"\n"), 0o644))
	for _, args := range [][]string{
		{"call", "--workspace", ws, "--timeout=-1s", "file_read", `{"path":"hello.txt"}`},
		{"tools", "--workspace", ws, "--timeout=-1s"},
		{"exec", "--workspace", ws, "--timeout=-1s", "--", "true"},
		{"run", "--workspace", ws, "--timeout=-1s", "--provider", "replay:" + script},
		{"run", "--workspace", ws, "--run-timeout=-1s", "--provider", "replay:" + script},
		{"run", "--workspace", ws, "--request-timeout=-1s", "--provider", "replay:" + script},
	} {
		r := harness(t, "", args...)
		flag, _, _ := strings.Cut(args[3], "=")
		if r.code != usageStatus(args) || !strings.Contains(r.stderr, flag+" -1s: must not be negative") || strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q; want %d and one line saying it must not be negative", args, r.code, r.stderr, usageStatus(args))
		}
	}
}

// TestStdinTooLargeIsRefused: what run - and call - read from stdin is
// refused, naming the limit, when it is larger; never cut silently.
func TestStdinTooLargeIsRefused(t *testing.T) {
	ws, _ := sampleWorkspace(t)
	script := filepath.Join(t.TempDir(), "s.jsonl")
	must(t, os.WriteFile(script, []byte(`{"text":"done"}`+"\n"), 0o644))
	run := []string{"run", "--workspace", ws, "--confine", "off", "--provider", "replay:" + script, "-"}
	if r := harness(t, strings.Repeat("t", maxStdinTask), run...); r.code != 0 {
		t.Fatalf("a task of exactly the limit: exit %d: %s", r.code, r.stderr)
	}
	r := harness(t, strings.Repeat("t", maxStdinTask+1), run...)
	if r.code != 2 || !strings.Contains(r.stderr, "the task read from stdin are more than 1048576 bytes (1MiB), the limit") {
		t.Fatalf("a task above the limit: exit %d, stderr %q", r.code, r.stderr)
	}

	rec := filepath.Join(t.TempDir(), "rec.jsonl")
	r = harnessStdin(t, jsonWithString(`{"path":"hello.txt","x":"`, maxStdinArgs), "call", "--workspace", ws, "--confine", "off", "--record", rec, "file_read", "-")
	if r.code != 2 || !strings.Contains(r.stderr, "more than 67108864 bytes (64MiB), the limit") {
		t.Fatalf("arguments above the stdin limit: exit %d, stderr %q", r.code, r.stderr)
	}
	// Below it, the gate's own cap names the real size.
	mid := jsonWithString(`{"path":"hello.txt","x":"`, 9<<20)
	r = harnessStdin(t, mid, "call", "--workspace", ws, "--confine", "off", "--record", rec, "file_read", "-")
	if o := outcome(t, r); o["reason"] != "invalid_argument" || !strings.Contains(o["message"].(string), fmt.Sprintf("arguments are %d bytes", mid.size())) {
		t.Fatalf("arguments above the gate's cap: %v", o)
	}
}

// bigJSON is a JSON object, prefix + n times 'a' + `"}`, produced as it is
// read: a test that held it in memory would raise the test process's peak
// RSS, which every child forked after it inherits as its own (Linux copies
// the high-water mark at fork), and the tests that bound the harness's
// memory would measure the test instead.
type bigJSON struct {
	prefix string
	n, off int
}

func jsonWithString(prefix string, n int) *bigJSON { return &bigJSON{prefix: prefix, n: n} }

func (b *bigJSON) size() int { return len(b.prefix) + b.n + 2 }

func (b *bigJSON) Read(p []byte) (int, error) {
	total := b.size()
	if b.off >= total {
		return 0, io.EOF
	}
	i := 0
	for ; i < len(p) && b.off < total; i, b.off = i+1, b.off+1 {
		switch {
		case b.off < len(b.prefix):
			p[i] = b.prefix[b.off]
		case b.off < len(b.prefix)+b.n:
			p[i] = 'a'
		case b.off == total-2:
			p[i] = '"'
		default:
			p[i] = '}'
		}
	}
	return i, nil
}

// harnessStdin is harness with stdin read from r.
func harnessStdin(t *testing.T, r io.Reader, args ...string) result {
	t.Helper()
	cmd := harnessCommand(args...)
	cmd.Env = append(os.Environ(), "B10X_TEST_MAIN=1")
	cmd.Stdin = r
	return runHarnessReading(t, cmd)
}

// TestRecordMustBeARegularFile: a FIFO (with no reader: it would block) or
// a device as --record is refused at start in one line.
func TestRecordMustBeARegularFile(t *testing.T) {
	ws, _ := sampleWorkspace(t)
	fifo := filepath.Join(t.TempDir(), "fifo")
	must(t, unix.Mkfifo(fifo, 0o600))
	for path, kind := range map[string]string{fifo: "a FIFO", "/dev/null": "a character device", t.TempDir(): "directory"} {
		cmd := harnessCommand("call", "--workspace", ws, "--confine", "off", "--record", path, "file_read", `{"path":"hello.txt"}`)
		cmd.Env = append(os.Environ(), "B10X_TEST_MAIN=1")
		var so, se bytes.Buffer
		cmd.Stdout, cmd.Stderr = &so, &se
		must(t, cmd.Start())
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			}
			if code != 2 || !strings.Contains(se.String(), kind) || strings.Count(se.String(), "\n") != 1 || so.Len() != 0 {
				t.Errorf("--record %s: exit %d, stdout %q, stderr %q; want 2 and one line naming %s", path, code, so.String(), se.String(), kind)
			}
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			t.Fatalf("--record %s: the harness hangs", path)
		}
	}
}

// TestTornRecordLine: a record ending in a torn line (a write cut short)
// gets a newline before the next run's first line, which parses; record
// summary reads the file and reports the torn line.
func TestTornRecordLine(t *testing.T) {
	ws, _ := sampleWorkspace(t)
	rec := filepath.Join(t.TempDir(), "rec.jsonl")
	args := []string{"call", "--workspace", ws, "--confine", "off", "--record", rec, "file_read", `{"path":"hello.txt"}`}
	harness(t, "", args...)
	f, err := os.OpenFile(rec, os.O_WRONLY|os.O_APPEND, 0)
	must(t, err)
	_, err = f.WriteString(`{"event":"call","seq":7,"ent`)
	must(t, err)
	f.Close()
	r := harness(t, "", args...)
	if r.code != 0 || !strings.Contains(r.stderr, "ended in a torn line (28 bytes") {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	b, _ := os.ReadFile(rec)
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	torn := -1
	for i, l := range lines {
		if strings.HasPrefix(l, `{"event":"call","seq":7,"ent`) {
			torn = i
			if l != `{"event":"call","seq":7,"ent` {
				t.Fatalf("the next run's line was appended to the torn one: %q", l)
			}
		}
	}
	if torn < 0 || !strings.HasPrefix(lines[torn+1], `{"event":"run_start","record_version":2,`) || !strings.Contains(lines[torn+1], `"torn_line_bytes":28`) {
		t.Fatalf("the torn line and the next run_start:\n%s", b)
	}
	s := harness(t, "", "record", "summary", rec)
	if s.code != 0 || !strings.Contains(s.stdout, "2 run(s), 2 call(s)") || !strings.Contains(s.stdout, fmt.Sprintf("torn: line %d (28 bytes)", torn+1)) {
		t.Fatalf("summary: exit %d\n%s%s", s.code, s.stdout, s.stderr)
	}
	s = harness(t, "", "record", "summary", "--json", rec)
	if s.code != 0 || !strings.Contains(s.stdout, `"torn_lines"`) {
		t.Fatalf("summary --json: exit %d\n%s%s", s.code, s.stdout, s.stderr)
	}
}

// recordPaths returns, for a record that may hold torn lines, the path
// argument of every intent and call line of entry.
func recordPaths(t *testing.T, rec, entry string) map[string]bool {
	t.Helper()
	f, err := os.Open(rec)
	if err != nil {
		if os.IsNotExist(err) {
			return map[string]bool{}
		}
		t.Fatal(err)
	}
	defer f.Close()
	seen := map[string]bool{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var l struct {
			Event string `json:"event"`
			Entry string `json:"entry"`
			Args  struct {
				Path string `json:"path"`
			} `json:"args"`
		}
		if json.Unmarshal(sc.Bytes(), &l) != nil {
			continue // a torn line
		}
		if (l.Event == "intent" || l.Event == "call") && l.Entry == entry {
			seen[l.Args.Path] = true
		}
	}
	return seen
}

// TestKillNineNeverLeavesAnEffectWithoutALine: call processes killed with
// SIGKILL at random moments of a file_write; every file that exists
// afterwards has a line in the record (its intent line is written before
// the write).
func TestKillNineNeverLeavesAnEffectWithoutALine(t *testing.T) {
	testenv.Require(t, atkWrites(), "file_write (a confined workspace)", testenv.ShapeNoLandlock)
	ws := t.TempDir()
	rec := filepath.Join(t.TempDir(), "rec.jsonl")
	start := func(name string) *exec.Cmd {
		cmd := harnessCommand("call", "--workspace", ws, "--yes", "--record", rec, "file_write", fmt.Sprintf(`{"path":%q,"content":"x"}`, name))
		cmd.Env = append(os.Environ(), "B10X_TEST_MAIN=1")
		must(t, cmd.Start())
		return cmd
	}
	// One whole call, to learn how long a call takes here.
	t0 := time.Now()
	if err := start("whole").Wait(); err != nil {
		t.Fatal(err)
	}
	whole := time.Since(t0)
	const n = 60
	for i := 0; i < n; i++ {
		cmd := start(fmt.Sprintf("f%03d", i))
		time.Sleep(time.Duration(rand.Int64N(int64(whole) * 5 / 4)))
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
	lines := recordPaths(t, rec, "file_write")
	effects, missing := 0, 0
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("f%03d", i)
		if _, err := os.Stat(filepath.Join(ws, name)); err != nil {
			continue
		}
		effects++
		if !lines[name] {
			missing++
			t.Errorf("%s was written but the record has no line for it", name)
		}
	}
	t.Logf("%d calls killed at random within %s: %d wrote their file, %d have a record line, %d effects without a line", n, whole*5/4, effects, len(lines), missing)
	if s := harness(t, "", "record", "summary", rec); s.code != 0 {
		t.Fatalf("record summary after the kills: exit %d: %s", s.code, s.stderr)
	}
}

// TestCallCancelledBySignal: SIGTERM to call during a run call stops it;
// the outcome and the record say cancelled (not timeout), and run_end says
// the run was cancelled.
func TestCallCancelledBySignal(t *testing.T) {
	testenv.Require(t, execution(), "confined execution", testenv.ShapeNoLandlock, testenv.ShapeNoUserns)
	ws, _ := sampleWorkspace(t)
	rec := filepath.Join(t.TempDir(), "rec.jsonl")
	cmd := harnessCommand("call", "--workspace", ws, "--yes", "--record", rec, "--allow-program", "sleep", "run", `{"argv":["sleep","60"]}`)
	cmd.Env = append(os.Environ(), "B10X_TEST_MAIN=1")
	var out bytes.Buffer
	cmd.Stdout = &out
	must(t, cmd.Start())
	// Wait for the intent line: the program is about to start.
	deadline := time.Now().Add(30 * time.Second)
	for {
		if b, _ := os.ReadFile(rec); bytes.Contains(b, []byte(`"event":"intent"`)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no intent line after 30 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond)
	t0 := time.Now()
	must(t, cmd.Process.Signal(syscall.SIGTERM))
	_ = cmd.Wait()
	bound := 10 * time.Second
	if testenv.InVM() {
		bound = 30 * time.Second // emulated CPUs, two guests at once
	}
	if took := time.Since(t0); took > bound {
		t.Errorf("the cancel took %s", took)
	}
	var o map[string]any
	if err := json.Unmarshal(out.Bytes(), &o); err != nil {
		t.Fatalf("no outcome: %v: %q", err, out.String())
	}
	if o["status"] != "failed" || o["reason"] != "cancelled" {
		t.Fatalf("outcome %v, want failed/cancelled", o)
	}
	lines := readRecord(t, rec)
	last := lines[len(lines)-1]
	if last["event"] != "run_end" || last["ended_by"] != "cancelled" {
		t.Fatalf("last record line %v, want run_end ended_by cancelled", last)
	}
	if call := lines[len(lines)-2]; call["event"] != "call" || call["reason"] != "cancelled" {
		t.Fatalf("call line %v", call)
	}
}

// TestRecordOnAFullDisk: a record on a 64 KiB tmpfs fills up while calls
// write files. A call whose intent line cannot be written does not run; a
// call whose call line cannot be written keeps its outcome and says the
// record failed; once full, calls are refused at start with the reason;
// every file written has a line; record summary still reads the record.
func TestRecordOnAFullDisk(t *testing.T) {
	// The host may run its tests unprivileged; no-userns runs them as uid 1000.
	testenv.Require(t, os.Geteuid() == 0, "root (to mount a tmpfs)", testenv.ShapeHost, testenv.ShapeNoUserns)
	testenv.Require(t, atkWrites(), "file_write (a confined workspace)", testenv.ShapeNoLandlock)
	mnt := t.TempDir()
	if err := unix.Mount("tmpfs", mnt, "tmpfs", 0, "size=64k"); err != nil {
		t.Fatalf("mount tmpfs: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(mnt, unix.MNT_DETACH) })
	ws := t.TempDir()
	rec := filepath.Join(mnt, "rec.jsonl")
	content := strings.Repeat("c", 900) // recorded as it is: below the body limit
	refusedAtStart, afterEffect, notRun := 0, 0, 0
	for i := 0; i < 200 && refusedAtStart < 3; i++ {
		name := fmt.Sprintf("f%03d", i)
		r := harness(t, "", "call", "--workspace", ws, "--yes", "--record", rec, "file_write", fmt.Sprintf(`{"path":%q,"content":%q}`, name, content))
		_, statErr := os.Stat(filepath.Join(ws, name))
		if r.stdout == "" {
			if r.code == 0 || !strings.Contains(r.stderr, "no space left on device") || strings.Count(r.stderr, "\n") != 1 {
				t.Fatalf("%s: exit %d, stderr %q; want a one-line refusal naming the full disk", name, r.code, r.stderr)
			}
			if statErr == nil {
				t.Fatalf("%s: refused at start, but the file was written", name)
			}
			refusedAtStart++
			continue
		}
		o := outcome(t, r)
		msg, _ := o["message"].(string)
		switch {
		case o["reason"] == "record_failed":
			notRun++
			if statErr == nil || !strings.Contains(msg, "no space left on device") || !strings.Contains(msg, "did not run") {
				t.Fatalf("%s: %v; file exists: %v", name, o, statErr == nil)
			}
		case o["meta"] != nil && o["meta"].(map[string]any)["record_error"] != nil:
			afterEffect++
			if o["status"] != "executed" || statErr != nil || !strings.Contains(msg, "the call ran") {
				t.Fatalf("%s: %v; file exists: %v", name, o, statErr == nil)
			}
		default:
			if o["status"] != "executed" || statErr != nil {
				t.Fatalf("%s: %v", name, o)
			}
		}
	}
	t.Logf("calls refused at start: %d, refused for the record before acting: %d, record failed after acting: %d", refusedAtStart, notRun, afterEffect)
	if refusedAtStart < 3 {
		t.Fatal("the record's disk never filled")
	}
	lines := recordPaths(t, rec, "file_write")
	entries, _ := os.ReadDir(ws)
	for _, e := range entries {
		if !lines[e.Name()] {
			t.Errorf("%s was written but the record has no line for it", e.Name())
		}
	}
	if s := harness(t, "", "record", "summary", rec); s.code != 0 {
		t.Fatalf("record summary of the full record: exit %d: %s", s.code, s.stderr)
	}
}

// TestHookDaemonDiesWithTheHarness: a hook that leaves a setsid daemon and
// keeps running when the harness is killed with SIGKILL: the daemon dies
// too (the file it writes a second later never appears). Under --confine
// off, and under auto, where the hook and its init inherit the harness's
// own Landlock domain (as an unprivileged user the init finds the daemon
// through /proc, which that domain leaves readable for it).
func TestHookDaemonDiesWithTheHarness(t *testing.T) {
	for _, mode := range []string{"off", "auto"} {
		t.Run(mode, func(t *testing.T) {
			ws, _ := sampleWorkspace(t)
			hook := "/bin/sh -c 'cat >/dev/null; setsid sh -c \"echo > started; sleep 1; echo x > late\" & sleep 30'"
			cmd := harnessCommand("call", "--workspace", ws, "--confine", mode, "--hook", hook, "--hook-timeout", "60s", "file_read", `{"path":"hello.txt"}`)
			cmd.Env = append(os.Environ(), "B10X_TEST_MAIN=1")
			must(t, cmd.Start())
			deadline := time.Now().Add(20 * time.Second)
			for {
				if _, err := os.Stat(filepath.Join(ws, "started")); err == nil {
					break
				}
				if time.Now().After(deadline) {
					_ = cmd.Process.Kill()
					t.Fatal("the hook's daemon did not start")
				}
				time.Sleep(10 * time.Millisecond)
			}
			must(t, cmd.Process.Kill())
			_ = cmd.Wait()
			time.Sleep(2 * time.Second)
			if _, err := os.Stat(filepath.Join(ws, "late")); err == nil {
				t.Fatal("the hook's daemon outlived the harness")
			}
		})
	}
}

// TestWriteOverMaxResultIsNotReportedFailed: an edit whose diff is above
// --max-result happened; it is reported executed with the result shortened
// (what was cut and the full size), so a retry is not invited, and the file
// holds the edit once.
func TestWriteOverMaxResultIsNotReportedFailed(t *testing.T) {
	testenv.Require(t, atkWrites(), "file_edit (a confined workspace)", testenv.ShapeNoLandlock)
	ws, _ := sampleWorkspace(t)
	must(t, os.WriteFile(filepath.Join(ws, "dbl"), []byte(strings.Repeat("x\n", 100000)), 0o644))
	r := harness(t, "", "call", "--workspace", ws, "--yes", "file_edit", `{"path":"dbl","old_string":"x\n","new_string":"x\ny\n","replace_all":true}`)
	o := outcome(t, r)
	res, _ := o["result"].(string)
	if r.code != 0 || o["status"] != "executed" || !strings.Contains(res, "result shortened") || len(res) > 256<<10 {
		t.Fatalf("exit %d, status %v, reason %v, result of %d bytes", r.code, o["status"], o["reason"], len(res))
	}
	meta, _ := o["meta"].(map[string]any)
	if full, _ := meta["result_full_bytes"].(float64); full <= 256<<10 || !strings.Contains(res, fmt.Sprintf("of %.0f bytes shown", full)) {
		t.Fatalf("meta %v; the note does not give the full size", meta)
	}
	b, _ := os.ReadFile(filepath.Join(ws, "dbl"))
	if n := strings.Count(string(b), "\n"); n != 200000 {
		t.Fatalf("dbl has %d lines, want 200000", n)
	}
}

// TestHugeErrorIsCapped: an invalid 7 MB regular expression is refused
// before it is compiled, in one short line naming the field, its size and
// the limit, with a bounded record line (issue 20, item 9).
func TestHugeErrorIsCapped(t *testing.T) {
	ws, _ := sampleWorkspace(t)
	rec := filepath.Join(t.TempDir(), "rec.jsonl")
	r := harnessStdin(t, jsonWithString(`{"pattern":"(`, 7<<20), "call", "--workspace", ws, "--confine", "off", "--record", rec, "search", "-")
	o := outcome(t, r)
	msg, _ := o["message"].(string)
	if o["status"] != "refused" || o["reason"] != "invalid_argument" || len(r.stdout) > 1<<10 ||
		!strings.Contains(msg, `field "pattern" is 7340033 bytes; the limit is 4096 bytes`) {
		t.Fatalf("status %v, stdout of %d bytes, message %.300q", o["status"], len(r.stdout), msg)
	}
	fi, err := os.Stat(rec)
	must(t, err)
	if fi.Size() > 64<<10 {
		t.Fatalf("the record is %d bytes", fi.Size())
	}
}

// TestCallTimeoutIsRecorded: a call stopped at --timeout is reason timeout
// and run_end says timeout.
func TestCallTimeoutIsRecorded(t *testing.T) {
	testenv.Require(t, execution(), "confined execution", testenv.ShapeNoLandlock, testenv.ShapeNoUserns)
	ws, _ := sampleWorkspace(t)
	rec := filepath.Join(t.TempDir(), "rec.jsonl")
	t0 := time.Now()
	r := harness(t, "", "call", "--workspace", ws, "--yes", "--record", rec, "--timeout", "1s", "--allow-program", "sleep", "run", `{"argv":["sleep","60"]}`)
	if took := time.Since(t0); took > 30*time.Second {
		t.Fatalf("took %s", took)
	}
	if o := outcome(t, r); o["reason"] != "timeout" {
		t.Fatalf("outcome %v", o)
	}
	lines := readRecord(t, rec)
	if last := lines[len(lines)-1]; last["ended_by"] != "timeout" {
		t.Fatalf("run_end %v", last)
	}
}

// TestRunCancelledBySignal: SIGTERM to run during a call: exit 130, the
// call's reason is cancelled and run_end says cancelled.
func TestRunCancelledBySignal(t *testing.T) {
	testenv.Require(t, execution(), "confined execution", testenv.ShapeNoLandlock, testenv.ShapeNoUserns)
	ws, _ := sampleWorkspace(t)
	rec := filepath.Join(t.TempDir(), "rec.jsonl")
	script := filepath.Join(t.TempDir(), "s.jsonl")
	must(t, os.WriteFile(script, []byte(`{"tool_calls":[{"name":"run","arguments":{"argv":["sleep","60"]}}]}`+"\n"+`{"text":"done"}`+"\n"), 0o644))
	cmd := harnessCommand("run", "--workspace", ws, "--yes", "--record", rec, "--allow-program", "sleep", "--provider", "replay:"+script)
	cmd.Env = append(os.Environ(), "B10X_TEST_MAIN=1")
	must(t, cmd.Start())
	deadline := time.Now().Add(30 * time.Second)
	for {
		if b, _ := os.ReadFile(rec); bytes.Contains(b, []byte(`"event":"intent"`)) {
			break
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			t.Fatal("no intent line after 30 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond)
	must(t, cmd.Process.Signal(syscall.SIGTERM))
	err := cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != exitInterrupted {
		t.Fatalf("exit %v, want %d", err, exitInterrupted)
	}
	lines := readRecord(t, rec)
	last := lines[len(lines)-1]
	if last["event"] != "run_end" || last["ended_by"] != "cancelled" {
		t.Fatalf("last record line %v, want run_end ended_by cancelled", last)
	}
	if call := lines[len(lines)-2]; call["event"] != "call" || call["reason"] != "cancelled" {
		t.Fatalf("call line %v", call)
	}
}
