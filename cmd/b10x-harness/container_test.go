package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/b10x/harness/internal/reexec"
	"github.com/b10x/harness/internal/testenv"
)

// containerEntry starts the harness as a root container runtime would: in
// a mount namespace of its own where part of /proc is covered (podman and
// docker mask /proc/kcore, /proc/timer_list and more, and bind /proc/sys
// read-only), without CAP_SYS_ADMIN. Its first argument says whether to
// cover /proc ("masked") or not ("plain"); the rest are the harness's.
const containerEntry = "cmd-test-container"

func init() { reexec.Register(containerEntry, containerMain) }

func containerMain() {
	die := func(what string, err error) {
		os.Stderr.WriteString("container setup: " + what + ": " + err.Error() + "\n")
		os.Exit(120)
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		die("make / private", err)
	}
	if os.Args[1] == "masked" {
		if err := unix.Mount("/proc/sys", "/proc/sys", "", unix.MS_BIND, ""); err != nil {
			die("bind /proc/sys", err)
		}
		if err := unix.Mount("", "/proc/sys", "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
			die("remount /proc/sys read-only", err)
		}
	}
	if err := unix.Prctl(unix.PR_CAPBSET_DROP, unix.CAP_SYS_ADMIN, 0, 0, 0); err != nil {
		die("drop CAP_SYS_ADMIN", err)
	}
	env := append(os.Environ(), "B10X_TEST_MAIN=1")
	err := syscall.Exec(reexec.Self, append([]string{"b10x-harness"}, os.Args[2:]...), env)
	die("exec", err)
}

// TestContainerRefusingProc: in a container whose /proc is partly covered
// the kernel refuses the new proc mount every run call needs. run must not
// be shown to a model there (a tool that fails on every call), a single
// call fails naming the step and the fix, doctor says so, and strict
// refuses to start. The same container without the cover runs the call:
// what refuses is the covered /proc, nothing else.
func TestContainerRefusingProc(t *testing.T) {
	testenv.Require(t, os.Geteuid() == 0, "root (to build a container)", testenv.ShapeNoUserns)
	usernsOK := testenv.Shape() != testenv.ShapeNoUserns
	testenv.Require(t, usernsOK, "user namespaces", testenv.ShapeNoUserns)
	ws := t.TempDir()
	must(t, os.WriteFile(filepath.Join(ws, "hello.txt"), []byte("hello\n"), 0o644))
	// A root without CAP_SYS_ADMIN cannot idmap a root-owned workspace:
	// give it to an ordinary user, as a CI container's checkout often is.
	must(t, filepath.Walk(ws, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, runOwner, runOwner)
	}))
	prog, err := filepath.EvalSymlinks("/bin/true")
	must(t, err)
	args := []string{"call", "--workspace", ws, "--yes", "--allow-program", prog, "run", `{"argv":["` + prog + `"]}`}
	start := func(cover string, extra ...string) result {
		argv := append([]string{cover, args[0]}, extra...)
		cmd := reexec.Command(containerEntry, append(argv, args[1:]...)...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNS}
		r := runHarnessCmd(t, cmd, "")
		if strings.Contains(r.stderr, "container setup:") {
			t.Fatalf("%s", r.stderr)
		}
		return r
	}

	plain := start("plain")
	if o := outcome(t, plain); o["status"] != "executed" {
		t.Fatalf("without a covered /proc, the run call: %v\n%s", o, plain.stderr)
	}

	// A single call is its own probe: it fails, naming the step and the fix.
	masked := start("masked")
	o := outcome(t, masked)
	msg, _ := o["message"].(string)
	if o["status"] == "executed" {
		t.Fatalf("with a covered /proc the run call executed: %v", o)
	}
	for _, want := range []string{"mount proc /proc", "refuses a new proc mount", "systempaths=unconfined", "procMount: Unmasked"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the failed call does not say %q: %s", want, msg)
		}
	}

	// What a model would be shown: run is not published, for that reason.
	cmd := reexec.Command(containerEntry, "masked", "tools", "--workspace", ws, "--allow-program", prog)
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNS}
	list := runHarnessCmd(t, cmd, "")
	_, unpublished, _ := strings.Cut(list.stdout, "Not published:")
	if !strings.Contains(unpublished, "run: ") || !strings.Contains(unpublished, "refuses a new proc mount") {
		t.Errorf("tools in the container publishes run, or does not say why not:\n%s%s", list.stdout, list.stderr)
	}

	// doctor in the same container says what a call would meet, and the fix.
	cmd = reexec.Command(containerEntry, "masked", "doctor", "--workspace", ws)
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNS}
	doc := runHarnessCmd(t, cmd, "")
	for _, want := range []string{"not run: run calls of " + ws + " cannot start", "mount proc /proc", "procMount: Unmasked"} {
		if !strings.Contains(doc.stdout, want) {
			t.Errorf("doctor in the container does not say %q:\n%s%s", want, doc.stdout, doc.stderr)
		}
	}

	strict := start("masked", "--confine", "strict")
	switch {
	case strict.code != 2:
		t.Errorf("--confine strict in the container: exit %d, want 2\n%s", strict.code, strict.stderr)
	case strings.Contains(strict.stderr, "cannot enforce every layer"):
		// This host lacks a layer strict demands (cgroup limits): it
		// refuses before any call is tried, which is also right.
		t.Logf("strict refuses for a missing layer first:\n%s", strict.stderr)
	case !strings.Contains(strict.stderr, "refuses a new proc mount"):
		t.Errorf("--confine strict in the container does not name the /proc refusal:\n%s", strict.stderr)
	}
}
