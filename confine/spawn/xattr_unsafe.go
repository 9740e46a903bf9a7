package spawn

import (
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// xattrArgs is struct xattr_args of getxattrat(2).
type xattrArgs struct {
	value uint64
	size  uint32
	flags uint32
}

// noGetxattrat is set once getxattrat(2) answered ENOSYS (Linux before
// 6.13): hasCapabilities then opens the file instead.
var noGetxattrat atomic.Bool

// capabilitiesAt reports whether the entry name of the directory open at
// dirfd carries a security.capability attribute, read with getxattrat(2)
// from the directory's descriptor without following a link: nil when it
// does, ENODATA or ENOTSUP when it does not, ENOSYS where the kernel has
// no getxattrat.
func capabilitiesAt(dirfd int, name string) error {
	if noGetxattrat.Load() {
		return unix.ENOSYS
	}
	p, err := unix.BytePtrFromString(name)
	if err != nil {
		return err
	}
	attr, _ := unix.BytePtrFromString("security.capability")
	var args xattrArgs // size 0: only whether it is there
	_, _, e := unix.Syscall6(unix.SYS_GETXATTRAT, uintptr(dirfd), uintptr(unsafe.Pointer(p)), unix.AT_SYMLINK_NOFOLLOW,
		uintptr(unsafe.Pointer(attr)), uintptr(unsafe.Pointer(&args)), unsafe.Sizeof(args))
	if e == unix.ENOSYS {
		noGetxattrat.Store(true)
	}
	if e != 0 {
		return e
	}
	return nil
}
