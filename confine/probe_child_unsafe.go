package confine

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// seccompActionAvail asks the kernel whether the seccomp filter action is
// available (seccomp SECCOMP_GET_ACTION_AVAIL, which reads it through a
// pointer and has no side effect): 0 when it is, else the errno.
func seccompActionAvail(action uint32) unix.Errno {
	_, _, e := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_GET_ACTION_AVAIL, 0, uintptr(unsafe.Pointer(&action)))
	return e
}
