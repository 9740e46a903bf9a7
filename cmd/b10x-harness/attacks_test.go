package main

// The attack corpus (ATTACKS.md in the project's shared notes) end to end:
// every case is a real attack on the real CLI, started as a subprocess, and
// each refusal is checked three ways: the exit status, the JSON outcome, and
// the run record's call line. Nothing outside the workspace may be read (no
// outside byte in any output) or changed (the outside tree is compared
// before and after).
//
// This file holds the shared machinery: a workspace with secrets around it,
// a runner for `call`, the record checks, and a probe the child side runs
// when an attack needs raw system calls (the test binary re-executed as the
// program, since the VM shapes have only busybox).
//
// The sections are in attacks_read_test.go, attacks_write_test.go,
// attacks_exec_test.go and attacks_policy_test.go.

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/b10x/harness/internal/testenv"
)

// atkSecret marks every byte that lives outside a workspace. No output of
// the harness may ever contain it.
const atkSecret = "B10X-OUTSIDE-SECRET"

// atkPattern is a search pattern that matches atkSecret without holding it
// (arguments are written to the record).
const atkPattern = "B10X-OUTSIDE-SEC[R]ET"

// atkProbeArg, as the first argument of the test binary, turns it into the
// child-side probe (see atkProbeMain). The run tool starts the test binary
// by its absolute path, so reexec's argv[0] convention cannot select it.
const atkProbeArg = "b10x-attack-probe"

func init() {
	if len(os.Args) > 1 && os.Args[1] == atkProbeArg {
		os.Exit(atkProbeMain(os.Args[2:]))
	}
}

// atkWS is a workspace "<base>/data" with siblings whose names share its
// prefix, each holding a secret.
type atkWS struct {
	base, ws string
	before   map[string]string // snapshot of everything outside ws
	n        atomic.Int64
}

// newAtkWS builds:
//
//	<base>/data/               the workspace: hello.txt, sub/inner.txt, a/
//	<base>/data-archived/x     secret
//	<base>/data2/x             secret
//	<base>/data_backup         secret (a file)
//	<base>/data.bak            secret (a file)
//	<base>/outdir/x            secret
func newAtkWS(t *testing.T) *atkWS {
	t.Helper()
	base, err := filepath.EvalSymlinks(t.TempDir())
	must(t, err)
	a := &atkWS{base: base, ws: filepath.Join(base, "data")}
	for _, d := range []string{"data/sub", "data/a", "data-archived", "data2", "outdir"} {
		must(t, os.MkdirAll(filepath.Join(base, d), 0o755))
	}
	a.write(t, "hello.txt", "hello\nworld\n")
	a.write(t, "sub/inner.txt", "inner\n")
	for _, f := range []string{"data-archived/x", "data2/x", "data_backup", "data.bak", "outdir/x"} {
		must(t, os.WriteFile(filepath.Join(base, f), []byte(atkSecret+" "+f+"\n"), 0o644))
	}
	return a
}

// write creates a file in the workspace (parents included).
func (a *atkWS) write(t *testing.T, rel, content string) {
	t.Helper()
	p := filepath.Join(a.ws, rel)
	must(t, os.MkdirAll(filepath.Dir(p), 0o755))
	must(t, os.WriteFile(p, []byte(content), 0o644))
}

// link plants a symbolic link in the workspace.
func (a *atkWS) link(t *testing.T, target, rel string) {
	t.Helper()
	p := filepath.Join(a.ws, rel)
	must(t, os.MkdirAll(filepath.Dir(p), 0o755))
	must(t, os.Symlink(target, p))
}

// seal snapshots everything outside the workspace; check compares later.
func (a *atkWS) seal(t *testing.T) {
	t.Helper()
	a.before = atkSnapshot(t, a.base, a.ws)
}

// checkOutside fails when anything outside the workspace was created,
// removed or changed since seal.
func (a *atkWS) checkOutside(t *testing.T) {
	t.Helper()
	if a.before == nil {
		t.Fatal("test bug: checkOutside without seal")
	}
	after := atkSnapshot(t, a.base, a.ws)
	for k, v := range after {
		if b, ok := a.before[k]; !ok {
			t.Errorf("outside the workspace, %s was created: %q", k, v)
		} else if b != v {
			t.Errorf("outside the workspace, %s changed: %q -> %q", k, b, v)
		}
	}
	for k := range a.before {
		if _, ok := after[k]; !ok {
			t.Errorf("outside the workspace, %s was removed", k)
		}
	}
}

// atkSnapshot describes every entry beneath root except skip: kind, mode,
// content or link target.
func atkSnapshot(t *testing.T, root, skip string) map[string]string {
	t.Helper()
	m := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == skip {
			return filepath.SkipDir
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		desc := fi.Mode().String()
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			l, err := os.Readlink(p)
			if err != nil {
				return err
			}
			desc += " -> " + l
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			desc += " " + string(b)
		}
		m[p] = desc
		return nil
	})
	must(t, err)
	return m
}

// atkRun is one finished harness process.
type atkRun struct {
	code           int
	stdout, stderr string
	state          *os.ProcessState
}

// atkHarness runs the CLI as a subprocess in its own session (so it never
// has a controlling terminal, whoever runs the tests), with extra
// environment variables and stdin.
func atkHarness(t *testing.T, env []string, stdin string, args ...string) atkRun {
	t.Helper()
	r, err := atkStart(env, stdin, args...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// atkCmd prepares the CLI as a subprocess in its own session, with the
// environment extended by env.
func atkCmd(env []string, stdin string, args ...string) *exec.Cmd {
	cmd := harnessCommand(args...)
	cmd.Env = append(append(os.Environ(), "B10X_TEST_MAIN=1"), env...)
	cmd.Stdin = strings.NewReader(stdin)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	return cmd
}

// atkStart is atkHarness for any goroutine: it reports instead of failing.
func atkStart(env []string, stdin string, args ...string) (atkRun, error) {
	return atkStartIn(-1, env, stdin, args...)
}

// atkStartIn is atkStart with the harness started in the cgroup whose
// directory descriptor is cgroupFD (-1: the test's own).
func atkStartIn(cgroupFD int, env []string, stdin string, args ...string) (atkRun, error) {
	cmd := atkCmd(env, stdin, args...)
	if cgroupFD >= 0 {
		cmd.SysProcAttr.UseCgroupFD = true
		cmd.SysProcAttr.CgroupFD = cgroupFD
	}
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	err := cmd.Run()
	r := atkRun{stdout: so.String(), stderr: se.String(), state: cmd.ProcessState}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		return r, fmt.Errorf("running the harness: %w", err)
	}
	if strings.Contains(r.stderr, "goroutine ") || strings.Contains(r.stderr, "panic:") {
		return r, fmt.Errorf("a stack trace reached the user:\n%s", r.stderr)
	}
	return r, nil
}

// atkAttempt is one `call`: the process, its outcome and its record.
type atkAttempt struct {
	desc string
	run  atkRun
	out  map[string]any   // the JSON outcome on stdout
	rec  map[string]any   // the record's call line
	all  []map[string]any // every record line
}

// call runs `call --workspace ws --record FRESH flags... tool args` and
// checks what every call must satisfy: one JSON outcome on stdout, a
// complete record (run_start, one call line, run_end) that agrees with it,
// the exit status that goes with the outcome, and no outside secret
// anywhere in the output or the record.
func (a *atkWS) call(t *testing.T, env []string, flags []string, tool, args string) atkAttempt {
	t.Helper()
	return a.callStdin(t, env, "", flags, tool, args)
}

// callStdin is call with stdin. Under --confine strict the harness is
// started alone in a fresh cgroup (atkAloneCgroup): the only place where
// cgroup v2 lets it enable the limit controllers strict needs.
func (a *atkWS) callStdin(t *testing.T, env []string, stdin string, flags []string, tool, args string) atkAttempt {
	t.Helper()
	fd := -1
	if atkIsStrict(flags) {
		fd = atkAloneCgroup(t)
	}
	at, err := a.tryIn(fd, env, stdin, flags, tool, args)
	if err != nil {
		t.Fatal(err)
	}
	return at
}

// callAlone is call with the harness started alone in a fresh cgroup (see
// atkAloneCgroup), where it may enable the limit controllers for its leaves.
func (a *atkWS) callAlone(t *testing.T, flags []string, tool, args string) atkAttempt {
	t.Helper()
	return a.callIn(t, atkAloneCgroup(t), flags, tool, args)
}

// callIn is call with the harness started in the cgroup cgroupFD.
func (a *atkWS) callIn(t *testing.T, cgroupFD int, flags []string, tool, args string) atkAttempt {
	t.Helper()
	at, err := a.tryIn(cgroupFD, nil, "", flags, tool, args)
	if err != nil {
		t.Fatal(err)
	}
	return at
}

// try is call for any goroutine: it reports instead of failing.
func (a *atkWS) try(env []string, stdin string, flags []string, tool, args string) (atkAttempt, error) {
	return a.tryIn(-1, env, stdin, flags, tool, args)
}

func (a *atkWS) tryIn(cgroupFD int, env []string, stdin string, flags []string, tool, args string) (atkAttempt, error) {
	rec := filepath.Join(a.base, fmt.Sprintf("record-%d.jsonl", a.n.Add(1)))
	argv := append([]string{"call", "--workspace", a.ws, "--record", rec}, flags...)
	argv = append(argv, tool, args)
	at := atkAttempt{desc: fmt.Sprintf("call %s %.200q (flags %v)", tool, args, flags)}
	// The record lives beside the workspace; no attack may touch it.
	defer os.Remove(rec)
	var err error
	if at.run, err = atkStartIn(cgroupFD, env, stdin, argv...); err != nil {
		return at, fmt.Errorf("%s: %w", at.desc, err)
	}
	fail := func(format string, args ...any) (atkAttempt, error) {
		return at, fmt.Errorf(at.desc+": "+format, args...)
	}
	if atkIsStrict(flags) && at.run.code == exitUsage && at.run.stdout == "" {
		return fail("--confine strict refused to start in shape %s:\n%s", testenv.Shape(), at.run.stderr)
	}
	if strings.Contains(at.run.stdout, atkSecret) || strings.Contains(at.run.stderr, atkSecret) {
		return fail("outside content leaked:\nstdout %s\nstderr %s", at.run.stdout, at.run.stderr)
	}
	if err := json.Unmarshal([]byte(at.run.stdout), &at.out); err != nil {
		return fail("no JSON outcome (exit %d): %v\nstdout %s\nstderr %s", at.run.code, err, at.run.stdout, at.run.stderr)
	}
	b, err := os.ReadFile(rec)
	if err != nil {
		return fail("no run record: %v", err)
	}
	if bytes.Contains(b, []byte(atkSecret)) {
		return fail("outside content reached the record:\n%s", atkClip(string(b)))
	}
	for i, l := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		var m map[string]any
		if err := json.Unmarshal(l, &m); err != nil {
			return fail("record line %d: %v", i+1, err)
		}
		at.all = append(at.all, m)
		if m["event"] == "call" {
			if at.rec != nil {
				return fail("two call lines for one call")
			}
			at.rec = m
		}
	}
	if len(at.all) < 3 || at.all[0]["event"] != "run_start" || at.all[len(at.all)-1]["event"] != "run_end" || at.rec == nil {
		return fail("record is not run_start, call, run_end:\n%s", atkClip(string(b)))
	}
	if h, _ := at.all[0]["runs_on"].(map[string]any); h == nil || h["seccomp"] == "unknown" || h["uid_map"] == nil {
		return fail("run_start's runs_on %v: want the seccomp mode and uid_map read at start", h)
	}
	for _, k := range []string{"status", "reason", "entry"} {
		if fmt.Sprint(at.out[k]) != fmt.Sprint(at.rec[k]) {
			return fail("outcome %s %v but record %s %v", k, at.out[k], k, at.rec[k])
		}
	}
	want, known := map[string]int{"executed": exitOK, "failed": exitFailed, "refused": exitRefused}[fmt.Sprint(at.out["status"])]
	if !known || at.run.code != want {
		return fail("status %v but exit %d\nstderr %s", at.out["status"], at.run.code, at.run.stderr)
	}
	if err := atkCheckConfinement(at, flags); err != nil {
		return fail("%v", err)
	}
	return at, nil
}

// atkCheckConfinement checks what the record and the outcome say confined
// the call. Under --confine strict the record's run_start must say strict
// with nothing missing. Whenever a run child was started (the outcome's
// meta lists layers), those layers must hold the baseline every run child
// has, and under strict also the cgroup leaf and each limit the flags set
// (pids and memory always have one).
func atkCheckConfinement(at atkAttempt, flags []string) error {
	strict := atkIsStrict(flags)
	if strict {
		conf, _ := at.all[0]["confinement"].(map[string]any)
		if conf["mode"] != "strict" {
			return fmt.Errorf("--confine strict, but the record says the session ran under %v: %v", conf["mode"], conf)
		}
		if missing, _ := conf["missing"].([]any); len(missing) > 0 {
			return fmt.Errorf("--confine strict started with missing layers %v", missing)
		}
	}
	raw, ok := at.meta()["layers"]
	if !ok {
		return nil // no child was started
	}
	var layers []string
	list, _ := raw.([]any)
	for _, l := range list {
		layers = append(layers, fmt.Sprint(l))
	}
	if missing := atkMissingLayers(layers, flags, strict); len(missing) > 0 {
		return fmt.Errorf("the run child was confined by %v: %v missing", layers, missing)
	}
	return nil
}

// atkIsStrict reports whether flags select --confine strict.
func atkIsStrict(flags []string) bool { return atkFlag(flags, "--confine") == "strict" }

// atkFlag is the value of the last "NAME VALUE" pair in flags ("" when
// absent).
func atkFlag(flags []string, name string) string {
	v := ""
	for i := 0; i+1 < len(flags); i++ {
		if flags[i] == name {
			v = flags[i+1]
		}
	}
	return v
}

// atkMissingLayers names the layers a run child started with flags must
// have and layers lacks: the baseline (a Landlock domain, the PID, mount,
// IPC and UTS namespaces, the network namespace unless --net host, a user
// namespace when the harness is not root, no_new_privs, seccomp) and, under
// strict, the cgroup leaf and the pids, memory and (with --cpu-max) cpu
// limits.
func atkMissingLayers(layers, flags []string, strict bool) []string {
	want := []string{"landlock-child", "pidns", "mountns", "ipcns", "utsns", "no-new-privs", "seccomp"}
	if atkFlag(flags, "--net") != "host" {
		want = append(want, "netns")
	}
	if os.Geteuid() != 0 {
		want = append(want, "userns")
	}
	if strict {
		want = append(want, "cgroup-leaf", "pids-limit", "memory-limit")
		if atkFlag(flags, "--cpu-max") != "" {
			want = append(want, "cpu-limit")
		}
	}
	var missing []string
	for _, l := range want {
		if !slices.Contains(layers, l) {
			missing = append(missing, l)
		}
	}
	return missing
}

// want asserts the outcome's status and reason (reason "" for executed).
func (at atkAttempt) want(t *testing.T, status, reason string) {
	t.Helper()
	if at.out["status"] != status || reason != "" && at.out["reason"] != reason {
		t.Fatalf("%s: got %v/%v, want %s/%s\nmessage: %s\nresult: %s\nrecord steps: %v", at.desc, at.out["status"], at.out["reason"], status, reason,
			atkClip(fmt.Sprint(at.out["message"])), atkClip(at.result()), at.rec["steps"])
	}
}

// atkClip shortens s for a failure message.
func atkClip(s string) string {
	if len(s) > 1500 {
		return s[:1000] + fmt.Sprintf("…[%d bytes]…", len(s)-1500) + s[len(s)-500:]
	}
	return s
}

// refusedAt asserts a refusal with reason, and that the record names step
// as the gate step that refused.
func (at atkAttempt) refusedAt(t *testing.T, reason, step string) {
	t.Helper()
	at.want(t, "refused", reason)
	if got := at.refusingStep(); got != step {
		t.Fatalf("%s: the record says step %q refused, want %q: %v", at.desc, got, step, at.rec["steps"])
	}
}

// refusingStep is the step the record marks refuse or fail.
func (at atkAttempt) refusingStep() string {
	steps, _ := at.rec["steps"].([]any)
	for _, s := range steps {
		m, _ := s.(map[string]any)
		if m["verdict"] == "refuse" || m["verdict"] == "fail" {
			return fmt.Sprint(m["step"])
		}
	}
	return ""
}

// result is the executed call's result text.
func (at atkAttempt) result() string {
	s, _ := at.out["result"].(string)
	return s
}

// meta is the outcome's meta object.
func (at atkAttempt) meta() map[string]any {
	m, _ := at.out["meta"].(map[string]any)
	return m
}

// atkJSON encodes v as JSON without HTML escaping.
func atkJSON(t *testing.T, v any) string {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	must(t, enc.Encode(v))
	return strings.TrimSpace(b.String())
}

// Shapes: which capabilities this shape is expected to publish.

// atkWrites reports whether file_write and file_edit are published here.
func atkWrites() bool { return testenv.Shape() != testenv.ShapeNoLandlock }

// atkExecution reports whether run is published (and exec runs) here.
func atkExecution() bool {
	return testenv.Shape() != testenv.ShapeNoLandlock && testenv.Shape() != testenv.ShapeNoUserns
}

var (
	atkDoctorOnce   sync.Once
	atkDoctorLayers map[string]bool
	atkDoctorABI    int
)

// atkLayer reports whether `doctor --json` says this host offers a layer.
func atkLayer(t *testing.T, name string) bool {
	t.Helper()
	atkDoctorOnce.Do(func() {
		// Started alone in a cgroup, as the limit tests start the harness.
		r, err := atkStartIn(atkAloneCgroup(t), nil, "", "doctor", "--json")
		if err != nil {
			t.Fatal(err)
		}
		var d struct {
			Probe struct {
				Landlock struct {
					ABI int `json:"abi"`
				} `json:"landlock"`
			} `json:"probe"`
			Layers []struct {
				Layer     string `json:"layer"`
				Available bool   `json:"available"`
			} `json:"layers"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &d); err != nil {
			t.Fatalf("doctor --json: %v\n%s", err, r.stdout)
		}
		atkDoctorABI = d.Probe.Landlock.ABI
		atkDoctorLayers = map[string]bool{}
		for _, l := range d.Layers {
			atkDoctorLayers[l.Layer] = l.Available
		}
	})
	if atkDoctorLayers == nil {
		t.Fatal("doctor --json failed earlier")
	}
	return atkDoctorLayers[name]
}

// atkLandlockABI is the Landlock ABI `doctor --json` reports (0: none).
func atkLandlockABI(t *testing.T) int {
	t.Helper()
	atkLayer(t, "landlock-child")
	return atkDoctorABI
}

// atkAloneCgroup creates an empty cgroup of the test's own (cgroup v2) and
// returns a descriptor of it for CLONE_INTO_CGROUP, both removed in
// t.Cleanup. A harness started there is alone in its cgroup: cgroup v2 lets
// it enable controllers for its leaves only then (the VM shapes start each
// test binary in a delegated cgroup shared with the test), and no other
// test's harness sweeps what it leaves. The cgroup is beside the test's
// own, or beneath the hierarchy's root when the test runs there. It
// returns -1 where there is no cgroup2 mount, or no right to make one.
func atkAloneCgroup(t *testing.T) int {
	t.Helper()
	mount, self := atkCgroup2(t)
	if mount == "" {
		return -1
	}
	up := filepath.Dir(self)
	if self == "/" {
		up = "/"
	}
	dir := filepath.Join(mount, up, fmt.Sprintf("b10x-attacktest-%d-%d", os.Getpid(), atkCounter.Add(1)))
	err := os.Mkdir(dir, 0o755)
	if errors.Is(err, os.ErrPermission) && os.Geteuid() != 0 {
		// Not root (the no-userns shape): only the test's own cgroup is
		// delegated to it.
		t.Logf("no cgroup of its own for the harness: %v", err)
		return -1
	}
	must(t, err)
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	must(t, err)
	t.Cleanup(func() {
		unix.Close(fd)
		// Once the harness has exited the cgroup holds no process; what
		// it left beneath (TestAttackExecLeavesNoCgroup asserts there is
		// nothing) is removed deepest first.
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			left := atkSubCgroups(dir)
			for i := len(left) - 1; i >= 0; i-- {
				os.Remove(left[i])
			}
			err := os.Remove(dir)
			if err == nil || errors.Is(err, os.ErrNotExist) {
				return
			}
			if time.Now().After(deadline) {
				t.Errorf("remove %s: %v", dir, err)
				return
			}
		}
	})
	return fd
}

// atkAloneDir is the directory of the cgroup atkAloneCgroup made last for
// fd (for tests that inspect it).
func atkAloneDir(t *testing.T, fd int) string {
	t.Helper()
	p, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", fd))
	must(t, err)
	return p
}

// atkSubCgroups lists the cgroups beneath dir, parents first.
func atkSubCgroups(dir string) []string {
	var out []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() && p != dir {
			out = append(out, p)
		}
		return nil
	})
	return out
}

// atkSample returns every item on the host and one in every n in the VM
// shapes, where each harness start costs seconds of emulated CPU and a
// test binary has five minutes. The kernel-dependent attacks (Executing)
// are not sampled.
func atkSample[T any](items []T, n int) []T {
	if !testenv.InVM() {
		return items
	}
	var out []T
	for i, it := range items {
		if i%n == 0 {
			out = append(out, it)
		}
	}
	return out
}

// atkCgroup2 returns the cgroup2 mount point and this process's cgroup
// relative to it ("" without a cgroup2 mount).
func atkCgroup2(t *testing.T) (mount, self string) {
	t.Helper()
	cg, err := os.ReadFile("/proc/self/cgroup")
	must(t, err)
	for _, l := range strings.Split(string(cg), "\n") {
		if p, ok := strings.CutPrefix(l, "0::"); ok {
			self = p
		}
	}
	mi, err := os.ReadFile("/proc/self/mountinfo")
	must(t, err)
	for _, l := range strings.Split(string(mi), "\n") {
		f := strings.Fields(l)
		for i, x := range f {
			if x == "-" && i+1 < len(f) && f[i+1] == "cgroup2" && len(f) > 4 && f[3] == "/" {
				return f[4], self
			}
		}
	}
	return "", ""
}

// atkSelf is the test binary's canonical path: the program the run tool
// starts for attacks that need raw system calls.
func atkSelf(t *testing.T) string {
	t.Helper()
	p, err := os.Executable()
	must(t, err)
	p, err = filepath.EvalSymlinks(p)
	must(t, err)
	return p
}

// atkProcs lists the live (non-zombie) processes whose command line
// contains marker, as "pid cmdline".
func atkProcs(marker string) []string {
	ents, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || !bytes.Contains(b, []byte(marker)) {
			continue
		}
		out = append(out, e.Name()+" "+string(bytes.ReplaceAll(b, []byte{0}, []byte{' '})))
	}
	return out
}

// atkReap kills the processes atkProcs finds for marker: the leftovers of
// a failed test (they were started through the harness by that test).
func atkReap(marker string) {
	for _, p := range atkProcs(marker) {
		pid, _ := strconv.Atoi(strings.Fields(p)[0])
		if pid > 0 {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// atkUnique returns a marker no other process on the machine carries.
func atkUnique(t *testing.T) string {
	return fmt.Sprintf("%d%04d", os.Getpid(), atkCounter.Add(1))
}

var atkCounter atomic.Int64

// The probe: the test binary started as the run tool's program.
//
//	PROG b10x-attack-probe argv ARGS...    print each argument in hex
//	PROG b10x-attack-probe alloc MIB       allocate and touch MIB MiB
//	PROG b10x-attack-probe spin DURATION   spin, print its wall and CPU time
//	PROG b10x-attack-probe PROBE...        run each probe, print name=result
//
// A probe result is "ok", an errno name, or data. The probe always exits 0
// (except alloc, which may be killed).
func atkProbeMain(args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "probe: no command")
		return 64
	}
	switch args[0] {
	case "argv":
		var hx []string
		for _, a := range args[1:] {
			hx = append(hx, hex.EncodeToString([]byte(a)))
		}
		fmt.Printf("argv=[%s]\n", strings.Join(hx, ","))
		return 0
	case "alloc":
		mib, _ := strconv.Atoi(args[1])
		var keep [][]byte
		for i := 0; i < mib; i++ {
			b := make([]byte, 1<<20)
			for j := 0; j < len(b); j += 4096 {
				b[j] = 1
			}
			keep = append(keep, b)
		}
		fmt.Println("alloc=done", len(keep))
		return 0
	case "spin":
		// Burn CPU on two threads for a wall-clock duration, then print
		// the wall time and the CPU time this process used meanwhile (its
		// start-up, before the spin, not counted), in nanoseconds.
		d, err := time.ParseDuration(args[1])
		if err != nil {
			fmt.Fprintln(os.Stderr, "probe: spin:", err)
			return 64
		}
		cpuTime := func() time.Duration {
			var ru unix.Rusage
			if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
				fmt.Fprintln(os.Stderr, "probe: getrusage:", err)
				os.Exit(64)
			}
			return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		}
		cpu0, start := cpuTime(), time.Now()
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() {
				for n := 0; time.Since(start) < d; n++ {
				}
			})
		}
		wg.Wait()
		wall, cpu := time.Since(start), cpuTime()-cpu0
		fmt.Printf("spin=%d,%d\n", int64(wall), int64(cpu))
		return 0
	}
	for _, a := range args {
		name, operand, _ := strings.Cut(a, ":")
		fmt.Printf("%s=%s\n", a, atkProbe(name, operand))
	}
	return 0
}

func atkErr(err error) string {
	if err == nil {
		return "ok"
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		if n := unix.ErrnoName(errno); n != "" {
			return n
		}
		return "errno" + strconv.Itoa(int(errno))
	}
	return "error:" + strings.ReplaceAll(err.Error(), "\n", " ")
}

func atkProbe(name, operand string) string {
	ip4 := func(hostport string) (*unix.SockaddrInet4, error) {
		h, p, _ := strings.Cut(hostport, ":")
		port, err := strconv.Atoi(p)
		if err != nil {
			return nil, err
		}
		sa := &unix.SockaddrInet4{Port: port}
		parts := strings.Split(h, ".")
		if len(parts) != 4 {
			return nil, fmt.Errorf("bad address %q", h)
		}
		for i, s := range parts {
			v, err := strconv.Atoi(s)
			if err != nil {
				return nil, err
			}
			sa.Addr[i] = byte(v)
		}
		return sa, nil
	}
	switch name {
	case "environ":
		b, err := os.ReadFile("/proc/self/environ")
		if err != nil {
			return atkErr(err)
		}
		var hx []string
		for _, e := range strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00") {
			hx = append(hx, hex.EncodeToString([]byte(e)))
		}
		return "[" + strings.Join(hx, ",") + "]"
	case "tcp", "udp":
		sa, err := ip4(operand)
		if err != nil {
			return atkErr(err)
		}
		typ := unix.SOCK_STREAM
		if name == "udp" {
			typ = unix.SOCK_DGRAM
		}
		fd, err := unix.Socket(unix.AF_INET, typ|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return "socket:" + atkErr(err)
		}
		defer unix.Close(fd)
		if name == "tcp" {
			if err := unix.Connect(fd, sa); err != nil {
				return atkErr(err)
			}
			_, err := unix.Write(fd, []byte(atkProbeArg+" tcp\n"))
			return atkErr(err)
		}
		return atkErr(unix.Sendto(fd, []byte(atkProbeArg+" udp\n"), 0, sa))
	case "icmp":
		// An unprivileged ping socket, then an echo request.
		sa, err := ip4(operand + ":0")
		if err != nil {
			return atkErr(err)
		}
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.IPPROTO_ICMP)
		if err != nil {
			fd, err = unix.Socket(unix.AF_INET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_ICMP)
			if err != nil {
				return "socket:" + atkErr(err)
			}
		}
		defer unix.Close(fd)
		echo := []byte{8, 0, 0xf7, 0xff, 0, 0, 0, 0} // type 8, checksum of the rest
		return atkErr(unix.Sendto(fd, echo, 0, sa))
	case "vsock":
		fd, err := unix.Socket(unix.AF_VSOCK, unix.SOCK_STREAM, 0)
		if err == nil {
			unix.Close(fd)
		}
		return atkErr(err)
	case "iouring":
		var params [120]byte
		fd, _, e := unix.RawSyscall(unix.SYS_IO_URING_SETUP, 4, uintptr(unsafe.Pointer(&params[0])), 0)
		if e != 0 {
			return atkErr(e)
		}
		unix.Close(int(fd))
		return "ok"
	case "unix", "abstract":
		fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return "socket:" + atkErr(err)
		}
		defer unix.Close(fd)
		path := operand
		if name == "abstract" {
			path = "@" + operand
		}
		if err := unix.Connect(fd, &unix.SockaddrUnix{Name: path}); err != nil {
			return atkErr(err)
		}
		_, err = unix.Write(fd, []byte(atkProbeArg+" unix\n"))
		return atkErr(err)
	case "kill0", "sigkill":
		pid, _ := strconv.Atoi(operand)
		sig := unix.Signal(0)
		if name == "sigkill" {
			sig = unix.SIGKILL
		}
		return atkErr(unix.Kill(pid, sig))
	case "killself":
		return atkErr(unix.Kill(os.Getpid(), 0))
	case "ptrace":
		pid, _ := strconv.Atoi(operand)
		_, _, e := unix.RawSyscall6(unix.SYS_PTRACE, unix.PTRACE_ATTACH, uintptr(pid), 0, 0, 0, 0)
		if e != 0 {
			return atkErr(e)
		}
		return "ok"
	case "read":
		b, err := os.ReadFile(operand)
		if err != nil {
			return atkErr(err)
		}
		return "data:" + hex.EncodeToString(b)
	}
	return "unknown-probe"
}

// atkProbes parses the probe's "name=result" lines.
func atkProbes(text string) map[string]string {
	m := map[string]string{}
	for _, l := range strings.Split(text, "\n") {
		if k, v, ok := strings.Cut(l, "="); ok && !strings.HasPrefix(k, "---") {
			m[k] = v
		}
	}
	return m
}
