package probechild

import (
	"syscall"
	"unsafe"
)

// setModeFilter installs filter on this thread (seccomp
// SECCOMP_SET_MODE_FILTER, which reads the program through a pointer): 0
// when it took, else the errno.
func setModeFilter(filter []syscall.SockFilter) syscall.Errno {
	prog := syscall.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	_, _, e := syscall.RawSyscall(sysSeccomp, seccompSetFilter, 0, uintptr(unsafe.Pointer(&prog)))
	return e
}
