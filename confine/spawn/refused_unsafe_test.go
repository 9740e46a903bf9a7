package spawn

import (
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// loadAllowListener loads prog on every thread of this process with a
// listener (SECCOMP_FILTER_FLAG_TSYNC|NEW_LISTENER|TSYNC_ESRCH, Linux
// 5.7), which it leaves open and never reads.
func loadAllowListener(prog []unix.SockFilter) error {
	fp := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	const flags = unix.SECCOMP_FILTER_FLAG_TSYNC | unix.SECCOMP_FILTER_FLAG_NEW_LISTENER | unix.SECCOMP_FILTER_FLAG_TSYNC_ESRCH
	_, _, e := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, flags, uintptr(unsafe.Pointer(&fp)))
	runtime.KeepAlive(prog)
	if e != 0 {
		return e
	}
	return nil
}
