package helper

import (
	"syscall"
	"unsafe"
)

// Raw system calls for the helper. They bypass the Go scheduler's syscall
// hooks (RawSyscall): the helper is one goroutine on one locked thread, and
// with the hooks a slow mount hands the processor to another thread and
// wakes this one up again afterwards, a pair of context switches per call
// for nothing. Errors are the bare errno; callers name the operation.

func errnoErr(e syscall.Errno) error {
	if e == 0 {
		return nil
	}
	return e
}

func ptr(s string) (*byte, error) { return syscall.BytePtrFromString(s) }

// cstr returns a pointer to s as a C string, or nil for "" when nullable.
func cstr(s string, nullable bool) (unsafe.Pointer, error) {
	if s == "" && nullable {
		return nil, nil
	}
	p, err := ptr(s)
	return unsafe.Pointer(p), err
}

func sysMount(source, target, fstype string, flags uintptr, data string) error {
	src, err := cstr(source, true)
	if err != nil {
		return err
	}
	dst, err := cstr(target, false)
	if err != nil {
		return err
	}
	fs, err := cstr(fstype, true)
	if err != nil {
		return err
	}
	dt, err := cstr(data, true)
	if err != nil {
		return err
	}
	_, _, e := syscall.RawSyscall6(syscall.SYS_MOUNT, uintptr(src), uintptr(dst), uintptr(fs), flags, uintptr(dt), 0)
	return errnoErr(e)
}

func sysOpenTree(path string, flags uintptr) (int, error) {
	p, err := ptr(path)
	if err != nil {
		return -1, err
	}
	fd, _, e := syscall.RawSyscall(sysOpenTreeNr, atFDCWD, uintptr(unsafe.Pointer(p)), flags)
	if e != 0 {
		return -1, e
	}
	return int(fd), nil
}

// sysMountSetattr sets attr on the mount at fd+path (flags: AT_*).
func sysMountSetattr(fd int, path string, flags uintptr, attr uint64) error {
	p, err := ptr(path)
	if err != nil {
		return err
	}
	a := mountAttr{attrSet: attr}
	_, _, e := syscall.RawSyscall6(sysMountSetattrNr, uintptr(fd), uintptr(unsafe.Pointer(p)), flags, uintptr(unsafe.Pointer(&a)), unsafe.Sizeof(a), 0)
	return errnoErr(e)
}

func sysMoveMount(fromFD int, to string) error {
	empty, _ := ptr("")
	p, err := ptr(to)
	if err != nil {
		return err
	}
	_, _, e := syscall.RawSyscall6(sysMoveMountNr, uintptr(fromFD), uintptr(unsafe.Pointer(empty)), atFDCWD, uintptr(unsafe.Pointer(p)), moveMountFEmptyPath, 0)
	return errnoErr(e)
}

func sysPath1(trap uintptr, path string, a2, a3 uintptr) (uintptr, error) {
	p, err := ptr(path)
	if err != nil {
		return 0, err
	}
	r, _, e := syscall.RawSyscall(trap, uintptr(unsafe.Pointer(p)), a2, a3)
	return r, errnoErr(e)
}

func sysMkdir(path string, mode uint32) error {
	p, err := ptr(path)
	if err != nil {
		return err
	}
	_, _, e := syscall.RawSyscall(syscall.SYS_MKDIRAT, atFDCWD, uintptr(unsafe.Pointer(p)), uintptr(mode))
	return errnoErr(e)
}

func sysSymlink(target, path string) error {
	t, err := ptr(target)
	if err != nil {
		return err
	}
	p, err := ptr(path)
	if err != nil {
		return err
	}
	_, _, e := syscall.RawSyscall(syscall.SYS_SYMLINKAT, uintptr(unsafe.Pointer(t)), atFDCWD, uintptr(unsafe.Pointer(p)))
	return errnoErr(e)
}

func sysOpen(path string, flags int, mode uint32) (int, error) {
	p, err := ptr(path)
	if err != nil {
		return -1, err
	}
	fd, _, e := syscall.RawSyscall6(syscall.SYS_OPENAT, atFDCWD, uintptr(unsafe.Pointer(p)), uintptr(flags), uintptr(mode), 0, 0)
	if e != 0 {
		return -1, e
	}
	return int(fd), nil
}

func sysLstatMode(path string) (uint32, error) {
	p, err := ptr(path)
	if err != nil {
		return 0, err
	}
	var st syscall.Stat_t
	_, _, e := syscall.RawSyscall6(sysFstatat, atFDCWD, uintptr(unsafe.Pointer(p)), uintptr(unsafe.Pointer(&st)), atSymlinkNofollow, 0, 0)
	return st.Mode, errnoErr(e)
}

func sysClose(fd int) { syscall.RawSyscall(syscall.SYS_CLOSE, uintptr(fd), 0, 0) }

func sysChdir(path string) error {
	_, err := sysPath1(syscall.SYS_CHDIR, path, 0, 0)
	return err
}

func sysPivotRoot(newRoot, putOld string) error {
	n, err := ptr(newRoot)
	if err != nil {
		return err
	}
	o, err := ptr(putOld)
	if err != nil {
		return err
	}
	_, _, e := syscall.RawSyscall(syscall.SYS_PIVOT_ROOT, uintptr(unsafe.Pointer(n)), uintptr(unsafe.Pointer(o)), 0)
	return errnoErr(e)
}

func sysUmount(path string, flags uintptr) error {
	_, err := sysPath1(syscall.SYS_UMOUNT2, path, flags, 0)
	return err
}

func sysSethostname(name string) error {
	b := []byte(name)
	var p unsafe.Pointer
	if len(b) > 0 {
		p = unsafe.Pointer(&b[0])
	}
	_, _, e := syscall.RawSyscall(syscall.SYS_SETHOSTNAME, uintptr(p), uintptr(len(b)), 0)
	return errnoErr(e)
}

func sysPrctl(option, a2, a3, a4, a5 uintptr) error {
	_, _, e := syscall.RawSyscall6(syscall.SYS_PRCTL, option, a2, a3, a4, a5, 0)
	return errnoErr(e)
}

func sysRead(fd int, b []byte) (int, error) {
	for {
		n, _, e := syscall.RawSyscall(syscall.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
		if e == syscall.EINTR {
			continue
		}
		if e != 0 {
			return 0, e
		}
		return int(n), nil
	}
}

func sysWriteAll(fd int, b []byte) error {
	for len(b) > 0 {
		n, _, e := syscall.RawSyscall(syscall.SYS_WRITE, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
		if e == syscall.EINTR {
			continue
		}
		if e != 0 {
			return e
		}
		b = b[n:]
	}
	return nil
}

// Landlock (struct landlock_ruleset_attr and landlock_path_beneath_attr).
const landlockRulePathBeneath = 1

func sysLandlockCreate(fs, scoped uint64) (int, error) {
	attr := landlockRulesetAttr{handledAccessFS: fs, scoped: scoped}
	// The kernel takes a prefix of the structure: the fields up to the
	// last one in use (a newer field must be zero or absent).
	size := unsafe.Offsetof(attr.handledAccessNet)
	if scoped != 0 {
		size = unsafe.Sizeof(attr)
	}
	fd, _, e := syscall.RawSyscall(sysLandlockCreateRulesetNr, uintptr(unsafe.Pointer(&attr)), size, 0)
	if e != 0 {
		return -1, e
	}
	return int(fd), nil
}

func sysLandlockAddPath(ruleset, parent int, access uint64) error {
	attr := landlockPathBeneathAttr{allowedAccess: access, parentFD: int32(parent)}
	_, _, e := syscall.RawSyscall6(sysLandlockAddRuleNr, uintptr(ruleset), landlockRulePathBeneath, uintptr(unsafe.Pointer(&attr)), 0, 0, 0)
	return errnoErr(e)
}

func sysLandlockRestrict(ruleset int, flags uint32) error {
	_, _, e := syscall.RawSyscall(sysLandlockRestrictSelfNr, uintptr(ruleset), uintptr(flags), 0)
	return errnoErr(e)
}

// atFDCWD is AT_FDCWD (-100) as a system call argument.
var atFDCWD = func() uintptr { fd := atFDCWDInt; return uintptr(fd) }()

// sysOpenat opens name relative to the directory descriptor dir.
func sysOpenat(dir int, name string, flags int) (int, error) {
	p, err := ptr(name)
	if err != nil {
		return -1, err
	}
	fd, _, e := syscall.RawSyscall6(syscall.SYS_OPENAT, uintptr(dir), uintptr(unsafe.Pointer(p)), uintptr(flags), 0, 0, 0)
	if e != 0 {
		return -1, e
	}
	return int(fd), nil
}
