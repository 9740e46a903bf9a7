// Package rawfork starts a child process that runs no Go: a copy of the
// calling thread made by clone(2) without CLONE_VM, which may only make raw
// system calls on its own stack until it calls execve or exit_group.
//
// It is how package syscall's ForkExec starts every child (the runtime's
// fork hooks around a raw clone), for the cases ForkExec cannot serve: a
// child that must take steps between its clone and its execve (apply
// Landlock and seccomp to itself, walk to a pinned file) or that never
// executes anything (one that only holds a user namespace open). Starting
// such a child costs a clone; starting a helper program for it costs a
// start of the Go runtime, about a millisecond on a quiet host and far more
// under load (docs/decisions/0094-stage-without-a-runtime.md).
//
// # What a child may do
//
// Between Fork's return of 0 and its execve or exit_group, the child is a
// single thread holding a copy of the parent's memory, in which the runtime
// is frozen mid-flight (other threads' locks may be held forever). It must
// therefore:
//
//   - run only functions marked //go:nosplit (BeforeFork makes any stack
//     check fail, so a missed mark crashes the child at once, not subtly);
//   - not allocate, not take a lock, not use a channel, a map, defer,
//     panic, a closure that escapes, or any function of package syscall
//     that is not RawSyscall or RawSyscall6;
//   - read only memory prepared before Fork (strings turned into C
//     strings, arrays of pointers, buffers it writes into).
//
// The child's signals are all blocked on return from Fork. ChildReady
// restores the dispositions to their defaults and the thread's mask, as a
// fresh process would have them; a child that never calls it runs with
// every signal but SIGKILL and SIGSTOP blocked.
package rawfork

import (
	"syscall"
	_ "unsafe" // go:linkname
)

// The runtime's fork hooks, as package syscall uses them. They are kept
// for packages outside the standard library (see go.dev/issue/67401):
// BeforeFork blocks every signal on this thread and forbids stack growth,
// AfterFork undoes both in the parent, AfterForkInChild resets the signal
// handlers to their defaults and restores the mask in the child.

//go:linkname runtimeBeforeFork syscall.runtime_BeforeFork
func runtimeBeforeFork()

//go:linkname runtimeAfterFork syscall.runtime_AfterFork
func runtimeAfterFork()

//go:linkname runtimeAfterForkInChild syscall.runtime_AfterForkInChild
func runtimeAfterForkInChild()

// Fork clones the calling thread into a new process with the clone flags
// flags (the exit signal included, normally SIGCHLD; namespace flags are
// allowed). It returns 0 in the child and the child's PID in the parent,
// or the clone's error in the parent.
//
// The caller must hold its OS thread (runtime.LockOSThread) from before
// Fork until Done, and must call Done in the parent once, whatever Fork
// returned, before anything else that may allocate or block. In the child
// it must follow the rules in the package documentation.
//
//go:nosplit
//go:norace
func Fork(flags uintptr) (pid int, err syscall.Errno) {
	runtimeBeforeFork()
	r, _, e := syscall.RawSyscall6(syscall.SYS_CLONE, flags, 0, 0, 0, 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(r), 0
}

// Done ends a Fork in the parent: signals are unblocked and the stack may
// grow again.
//
//go:nosplit
func Done() { runtimeAfterFork() }

// ChildReady is the child's first call after Fork returned 0, when it will
// run with signals delivered: every handler the runtime installed is reset
// to the default action and the thread's signal mask is restored.
//
//go:nosplit
//go:norace
func ChildReady() { runtimeAfterForkInChild() }

// Exit ends the child with status code, without running anything of Go's.
//
//go:nosplit
//go:norace
func Exit(code int) {
	for {
		syscall.RawSyscall(syscall.SYS_EXIT_GROUP, uintptr(code), 0, 0)
	}
}
