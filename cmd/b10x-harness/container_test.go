package main

import (
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/b10x/harness/internal/reexec"
	"github.com/b10x/harness/internal/testenv"
)

// containerEntry starts the harness as a root container runtime would: in
// a mount namespace of its own, without CAP_SYS_ADMIN. Its first argument
// lists, comma-separated, what else the container has: "masked" covers
// part of /proc (podman and docker mask /proc/kcore, /proc/timer_list and
// more, and bind /proc/sys read-only); "podman" leaves podman's mark
// (/run/.containerenv, on a tmpfs of the container's own); "nouserns" is a
// runtime seccomp profile that refuses user namespaces; "plain" is none of
// them. The rest are the harness's arguments.
const containerEntry = "cmd-test-container"

func init() { reexec.Register(containerEntry, containerMain) }

func containerMain() {
	// Every step below is per thread (the bounding set, no_new_privs, the
	// seccomp filter) and the exec inherits the exec-ing thread's: they
	// must all run on one thread, or the container the harness starts in
	// is a mix (a filter on one thread, exec from another, seen as a
	// flake where run was published in a container refusing userns).
	runtime.LockOSThread()
	die := func(what string, err error) {
		os.Stderr.WriteString("container setup: " + what + ": " + err.Error() + "\n")
		os.Exit(120)
	}
	has := func(f string) bool { return slices.Contains(strings.Split(os.Args[1], ","), f) }
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		die("make / private", err)
	}
	if has("masked") {
		if err := unix.Mount("/proc/sys", "/proc/sys", "", unix.MS_BIND, ""); err != nil {
			die("bind /proc/sys", err)
		}
		if err := unix.Mount("", "/proc/sys", "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
			die("remount /proc/sys read-only", err)
		}
	}
	if has("podman") {
		if err := unix.Mount("tmpfs", "/run", "tmpfs", 0, "mode=0755,size=64k"); err != nil {
			die("mount /run", err)
		}
		if err := os.WriteFile("/run/.containerenv", []byte("engine=\"podman-4.3.1\"\nrootless=0\n"), 0o644); err != nil {
			die("write /run/.containerenv", err)
		}
	}
	if err := unix.Prctl(unix.PR_CAPBSET_DROP, unix.CAP_SYS_ADMIN, 0, 0, 0); err != nil {
		die("drop CAP_SYS_ADMIN", err)
	}
	if has("nouserns") {
		// clone and unshare with CLONE_NEWUSER fail with EPERM; clone3,
		// whose flags a filter cannot read, with ENOSYS (callers fall back
		// to clone), as container runtimes' default profiles do.
		const (
			ld   = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
			jeq  = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
			jset = unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K
			ret  = unix.BPF_RET | unix.BPF_K
		)
		filter := []unix.SockFilter{
			{Code: ld, K: 0}, // 0: A = nr
			{Code: jeq, K: unix.SYS_CLONE, Jt: 1, Jf: 0},   // 1: clone? to 3
			{Code: jeq, K: unix.SYS_UNSHARE, Jt: 0, Jf: 3}, // 2: unshare? else 6
			{Code: ld, K: 16}, // 3: A = low word of args[0] (flags)
			{Code: jset, K: unix.CLONE_NEWUSER, Jt: 0, Jf: 3},            // 4: NEWUSER? else 8
			{Code: ret, K: unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)},  // 5
			{Code: jeq, K: unix.SYS_CLONE3, Jt: 0, Jf: 1},                // 6: clone3? else 8
			{Code: ret, K: unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)}, // 7
			{Code: ret, K: unix.SECCOMP_RET_ALLOW},                       // 8
		}
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			die("no_new_privs", err)
		}
		prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
		if err := unix.Prctl(unix.PR_SET_SECCOMP, unix.SECCOMP_MODE_FILTER, uintptr(unsafe.Pointer(&prog)), 0, 0); err != nil {
			die("seccomp", err)
		}
	}
	env := append(os.Environ(), "B10X_TEST_MAIN=1")
	err := syscall.Exec(reexec.Self, append([]string{"b10x-harness"}, os.Args[2:]...), env)
	die("exec", err)
}

// inContainer runs the harness with args in a container (see containerEntry).
func inContainer(t *testing.T, kind string, args ...string) result {
	t.Helper()
	cmd := reexec.Command(containerEntry, append([]string{kind}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNS}
	r := runHarnessCmd(t, cmd, "")
	if strings.Contains(r.stderr, "container setup:") {
		t.Fatalf("%s", r.stderr)
	}
	return r
}

// TestContainerRefusingProc: in a container whose /proc is partly covered
// the kernel refuses the new proc mount every run call needs. run must not
// be shown to a model there (a tool that fails on every call), a single
// call fails naming the step and the fix, doctor says so, and strict
// refuses to start. The same container without the cover runs the call:
// what refuses is the covered /proc, nothing else.
func TestContainerRefusingProc(t *testing.T) {
	testenv.Require(t, os.Geteuid() == 0, "root (to build a container)", testenv.ShapeNoUserns)
	testenv.Require(t, atkExecution(), "confined run calls", testenv.ShapeNoLandlock, testenv.ShapeNoUserns)
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
	start := func(kind string, extra ...string) result {
		return inContainer(t, kind, append(append([]string{args[0]}, extra...), args[1:]...)...)
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
	list := inContainer(t, "masked", "tools", "--workspace", ws, "--allow-program", prog)
	_, unpublished, _ := strings.Cut(list.stdout, "Not published:")
	if !strings.Contains(unpublished, "run: ") || !strings.Contains(unpublished, "refuses a new proc mount") {
		t.Errorf("tools in the container publishes run, or does not say why not:\n%s%s", list.stdout, list.stderr)
	}

	// doctor in the same container says what a call would meet, and the fix.
	doc := inContainer(t, "masked,podman", "doctor", "--workspace", ws)
	for _, want := range []string{"not run: run calls of " + ws + " cannot start", "mount proc /proc", "procMount: Unmasked", "container: podman (/run/.containerenv exists)"} {
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

// TestContainerRefusingUserns: a container whose runtime profile refuses
// user namespaces, around a root harness without CAP_SYS_ADMIN (which then
// needs one): run is not published, and doctor names the runtime and the
// fix for it (the project's seccomp profile) beside the host's remedy.
func TestContainerRefusingUserns(t *testing.T) {
	testenv.Require(t, os.Geteuid() == 0, "root (to build a container)", testenv.ShapeNoUserns)
	ws := t.TempDir()
	must(t, os.Chown(ws, runOwner, runOwner))
	doc := inContainer(t, "nouserns,podman", "doctor", "--workspace", ws)
	for _, want := range []string{
		"container: podman (/run/.containerenv exists)",
		"userns: in this podman container: podman run --security-opt seccomp=deploy/seccomp/b10x-harness.json",
		"; on the host: ",
	} {
		if !strings.Contains(doc.stdout, want) {
			t.Errorf("doctor does not say %q:\n%s%s", want, doc.stdout, doc.stderr)
		}
	}
	t.Logf("doctor in the container:\n%s", doc.stdout)
	list := inContainer(t, "nouserns,podman", "tools", "--workspace", ws, "--allow-program", "true")
	if _, unpublished, _ := strings.Cut(list.stdout, "Not published:"); !strings.Contains(unpublished, "run: ") {
		t.Errorf("tools in a container without user namespaces publishes run:\n%s%s", list.stdout, list.stderr)
	}
}
