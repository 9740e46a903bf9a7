package seccomp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/b10x/harness/confine/spawn/internal/seccomp/seccomptest"
	"github.com/b10x/harness/internal/reexec"
	"github.com/b10x/harness/internal/testenv"
)

// loadedEntry is a re-run child of this test binary that loads the filter
// for the Landlock ABI its first argument names and then runs the probe
// (seccomptest.Probe) on the rest.
const loadedEntry = "seccomp-test-loaded"

func init() { reexec.Register(loadedEntry, loadedMain) }

func loadedMain() {
	abi, err := strconv.Atoi(os.Args[1])
	if err != nil {
		fatal("ABI %q: %v", os.Args[1], err)
	}
	if os.Geteuid() == 0 {
		// Were a call let through that the filter should refuse, it reaches
		// the kernel as nobody's, as a run child's reaches it without a
		// capability on the host: it cannot act on the machine.
		if err := dropRoot(); err != nil {
			fatal("drop root: %v", err)
		}
	}
	raw, err := Filter(abi)
	if err != nil {
		fatal("%v", err)
	}
	if err := load(raw); err != nil {
		fatal("load the filter: %v", err)
	}
	seccomptest.Probe(os.Args[2:])
	os.Exit(0)
}

func fatal(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
	os.Exit(1)
}

// dropRoot makes every thread of the process nobody (65534), which drops
// every capability.
func dropRoot() error {
	if err := syscall.Setgroups(nil); err != nil {
		return err
	}
	if err := syscall.Setresgid(65534, 65534, 65534); err != nil {
		return err
	}
	return syscall.Setresuid(65534, 65534, 65534)
}

// load installs the raw filter on every thread of the process, with
// no_new_privs set, as the helper's program stage loads it before execve.
// no_new_privs is a thread's: the thread that sets it must be the one that
// installs the filter (which then sets it on the others), so the goroutine
// stays on it.
func load(raw []byte) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("PR_SET_NO_NEW_PRIVS: %w", err)
	}
	prog := make([]unix.SockFilter, len(raw)/8)
	for i := range prog {
		b := raw[8*i:]
		prog[i] = unix.SockFilter{Code: binary.LittleEndian.Uint16(b), Jt: b[2], Jf: b[3], K: binary.LittleEndian.Uint32(b[4:])}
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	if _, _, e := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&fprog))); e != 0 {
		return fmt.Errorf("seccomp SET_MODE_FILTER: %w", e)
	}
	return nil
}

// TestSeccompLoadedInKernel loads each flavour of the filter, the one for
// Landlock ABI 2 (which denies truncate) and the one for ABI 7, in a re-run
// child of this test binary, and makes there each call seccomptest.Cases
// lists: the kernel judges them, whatever this host's own Landlock ABI.
// Package spawn's TestSeccompInKernel makes the same calls in every
// runner's sandbox.
func TestSeccompLoadedInKernel(t *testing.T) {
	testenv.Require(t, Supported, "a seccomp filter for this architecture")
	for _, abi := range []int{2, 7} {
		cases := seccomptest.Cases(t, abi, MaxKnownSyscall)
		cmd := reexec.Command(loadedEntry, append([]string{strconv.Itoa(abi)}, seccomptest.Args(cases)...)...)
		out, err := cmd.Output()
		if err != nil {
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				err = fmt.Errorf("%w: %s", err, ee.Stderr)
			}
			t.Fatalf("ABI %d: the probe did not end normally (a call killed it?): %v\n%s", abi, err, out)
		}
		seccomptest.Check(t, "ABI "+strconv.Itoa(abi)+" filter", cases, out)
	}
}

// orphanedEntry is loadedEntry with the filter's EPERMs made user
// notifications (as the helper loads it for a call whose refusals are
// told, decision 0090) and its listener closed at once: nobody answers.
const orphanedEntry = "seccomp-test-orphaned"

func init() { reexec.Register(orphanedEntry, orphanedMain) }

func orphanedMain() {
	raw, err := Filter(7)
	if err != nil {
		fatal("%v", err)
	}
	if os.Geteuid() == 0 {
		if err := dropRoot(); err != nil {
			fatal("drop root: %v", err)
		}
	}
	notify := append([]byte(nil), raw...)
	for i := 0; i < len(notify); i += 8 {
		if binary.LittleEndian.Uint16(notify[i:]) == unix.BPF_RET|unix.BPF_K && binary.LittleEndian.Uint32(notify[i+4:]) == unix.SECCOMP_RET_ERRNO|uint32(unix.EPERM) {
			binary.LittleEndian.PutUint32(notify[i+4:], unix.SECCOMP_RET_USER_NOTIF)
		}
	}
	runtime.LockOSThread()
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		fatal("PR_SET_NO_NEW_PRIVS: %v", err)
	}
	prog := make([]unix.SockFilter, len(notify)/8)
	for i := range prog {
		b := notify[8*i:]
		prog[i] = unix.SockFilter{Code: binary.LittleEndian.Uint16(b), Jt: b[2], Jf: b[3], K: binary.LittleEndian.Uint32(b[4:])}
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	const flags = unix.SECCOMP_FILTER_FLAG_TSYNC | unix.SECCOMP_FILTER_FLAG_NEW_LISTENER | unix.SECCOMP_FILTER_FLAG_TSYNC_ESRCH
	fd, _, e := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, flags, uintptr(unsafe.Pointer(&fprog)))
	if e != 0 {
		fatal("seccomp SET_MODE_FILTER NEW_LISTENER: %v", e)
	}
	unix.Close(int(fd))
	seccomptest.Probe(os.Args[1:])
	os.Exit(0)
}

// TestSeccompListenerGoneRefuses: a call the notifying filter hands to a
// listener that is gone fails with ENOSYS, never reaches the kernel; the
// calls the filter allows are unchanged. The init's listener failing, or
// the init dying, fails closed.
func TestSeccompListenerGoneRefuses(t *testing.T) {
	testenv.Require(t, Supported, "a seccomp filter for this architecture")
	cases := seccomptest.Cases(t, 7, MaxKnownSyscall)
	for i := range cases {
		if cases[i].Want == "EPERM" {
			cases[i].Want = "ENOSYS"
		}
	}
	out, err := reexec.Command(orphanedEntry, seccomptest.Args(cases)...).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			err = fmt.Errorf("%w: %s", err, ee.Stderr)
		}
		t.Fatalf("the probe did not end normally: %v\n%s", err, out)
	}
	seccomptest.Check(t, "notifying filter without a listener", cases, out)
}
