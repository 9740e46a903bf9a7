package helper

import (
	"syscall"
	"unsafe"
)

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
		for {
			_, _, e := syscall.RawSyscall6(syscall.SYS_WAIT4, pid, uintptr(unsafe.Pointer(&ws)), 0, 0, 0, 0)
			if e != syscall.EINTR {
				break
			}
		}
		return 0, true
	}
	return e, false
}
