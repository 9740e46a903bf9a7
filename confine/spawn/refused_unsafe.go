package spawn

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// seccompActionAvail asks the kernel whether a seccomp filter may return
// action (seccomp SECCOMP_GET_ACTION_AVAIL, which reads it through a
// pointer): 0 when it may.
func seccompActionAvail(action uint32) unix.Errno {
	_, _, e := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_GET_ACTION_AVAIL, 0, uintptr(unsafe.Pointer(&action)))
	return e
}
