package helper

import (
	"errors"
	"strconv"
	"syscall"
	"unsafe"
)

// limitProcs sets RLIMIT_NPROC to n, soft and hard, and proves that the
// kernel enforces it for this process before the program starts: with
// the soft limit at 1 (this stage alone counts already) a fork must be
// refused with EAGAIN. The kernel counts the tasks of a real uid in each
// user namespace (Linux 5.14's ucounts), so in the program's own user
// namespace n bounds the processes and threads of the call; it does not
// hold for uid 0 of the initial user namespace or a holder of
// CAP_SYS_RESOURCE or CAP_SYS_ADMIN there, which is what the proof
// catches (docs/decisions/0091).
func limitProcs(n uint64) error {
	errno, forked := nprocProof(n)
	switch {
	case errno == syscall.EAGAIN:
		// The fork was refused: enforced.
	case errno != 0:
		return opErr("prlimit RLIMIT_NPROC, or the proof's fork", strconv.FormatUint(n, 10), errno)
	case forked:
		return errors.New("RLIMIT_NPROC is not enforced for this process (uid 0 of the initial user namespace, or CAP_SYS_RESOURCE): a fork under a limit of 1 succeeded")
	default:
		return errors.New("RLIMIT_NPROC: the proof neither forked nor was refused")
	}
	var got rlimit
	if _, _, e := syscall.RawSyscall6(syscall.SYS_PRLIMIT64, 0, rlimitNproc, 0, uintptr(unsafe.Pointer(&got)), 0, 0); e != 0 {
		return opErr("prlimit RLIMIT_NPROC", "read", e)
	}
	if got.cur != n || got.max != n {
		return errors.New("RLIMIT_NPROC reads " + strconv.FormatUint(got.cur, 10) + "/" + strconv.FormatUint(got.max, 10) + ", want " + strconv.FormatUint(n, 10))
	}
	return nil
}

type rlimit struct{ cur, max uint64 }

// nprocProof lowers the soft RLIMIT_NPROC to 1 under a hard limit of n,
// tries one fork, and sets both limits to n. It returns the error of a
// prlimit (0 if none) and whether the fork happened; the fork's EAGAIN
// is the expected outcome and is returned as errno EAGAIN with forked
// false. A forked child exits at once. Nothing between the first prlimit
// and the last may allocate or be preempted: the runtime could not start
// a thread meanwhile, and the child, a copy of this process with one
// thread, must reach exit_group on this goroutine's stack.
//
//go:nosplit
//go:norace
func nprocProof(n uint64) (errno syscall.Errno, forked bool) {
	lo := rlimit{1, n}
	if _, _, e := syscall.RawSyscall6(syscall.SYS_PRLIMIT64, 0, rlimitNproc, uintptr(unsafe.Pointer(&lo)), 0, 0, 0); e != 0 {
		return e, false
	}
	pid, _, e := syscall.RawSyscall6(syscall.SYS_CLONE, uintptr(syscall.SIGCHLD), 0, 0, 0, 0, 0)
	if e == 0 && pid == 0 {
		syscall.RawSyscall(syscall.SYS_EXIT_GROUP, 0, 0, 0)
	}
	full := rlimit{n, n}
	if _, _, e2 := syscall.RawSyscall6(syscall.SYS_PRLIMIT64, 0, rlimitNproc, uintptr(unsafe.Pointer(&full)), 0, 0, 0); e2 != 0 {
		if e == 0 {
			e2 = syscall.EEXIST // forked, and the limit not restored: fail either way
		}
		return e2, false
	}
	if e == 0 {
		var ws syscall.WaitStatus
		_, _ = syscall.Wait4(int(pid), &ws, 0, nil)
		return 0, true
	}
	return e, false
}
