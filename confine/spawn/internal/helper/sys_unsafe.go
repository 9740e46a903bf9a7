package helper

import (
	"syscall"
	"unsafe"
)

// The raw system calls that pass the kernel a pointer (see sys.go), each a
// small wrapper that takes Go values and converts them in the call
// expression itself, where the conversion to uintptr keeps what it points
// at alive for the call (the rule unsafe.Pointer's documentation gives for
// syscall.Syscall and RawSyscall). Nothing outside this file converts a
// pointer.

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

func sysSethostname(name string) error {
	b := []byte(name)
	var p unsafe.Pointer
	if len(b) > 0 {
		p = unsafe.Pointer(&b[0])
	}
	_, _, e := syscall.RawSyscall(syscall.SYS_SETHOSTNAME, uintptr(p), uintptr(len(b)), 0)
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

// sysOpenat2 is openat2(2), retried on EINTR and EAGAIN.
func sysOpenat2(dirfd int, path string, flags int, resolve uint64) (int, error) {
	p, err := ptr(path)
	if err != nil {
		return -1, err
	}
	how := openHow{flags: uint64(flags), resolve: resolve}
	for {
		fd, _, e := syscall.RawSyscall6(sysOpenat2Nr, uintptr(dirfd), uintptr(unsafe.Pointer(p)), uintptr(unsafe.Pointer(&how)), unsafe.Sizeof(how), 0, 0)
		if e == syscall.EINTR || e == syscall.EAGAIN {
			continue
		}
		if e != 0 {
			return -1, e
		}
		return int(fd), nil
	}
}

// sysFstatFD is fstatat(fd, "", AT_EMPTY_PATH): the status of the file fd
// itself (an O_PATH descriptor too).
func sysFstatFD(fd int) (syscall.Stat_t, syscall.Errno) {
	var st syscall.Stat_t
	empty, _ := ptr("")
	_, _, e := syscall.RawSyscall6(sysFstatat, uintptr(fd), uintptr(unsafe.Pointer(empty)), uintptr(unsafe.Pointer(&st)), atEmptyPath, 0, 0)
	return st, e
}

// sysOpenTreeFD is open_tree(fd, "", flags|AT_EMPTY_PATH): the mount tree
// of the file fd itself.
func sysOpenTreeFD(fd int, flags uintptr) (int, syscall.Errno) {
	empty, _ := ptr("")
	tfd, _, e := syscall.RawSyscall(sysOpenTreeNr, uintptr(fd), uintptr(unsafe.Pointer(empty)), flags|atEmptyPath)
	if e != 0 {
		return -1, e
	}
	return int(tfd), 0
}

// sysMoveMountFD is move_mount(tree, "", onto, "", MOVE_MOUNT_F_EMPTY_PATH
// | MOVE_MOUNT_T_EMPTY_PATH): the detached tree is attached over the file
// onto itself.
func sysMoveMountFD(tree, onto int) syscall.Errno {
	empty, _ := ptr("")
	_, _, e := syscall.RawSyscall6(sysMoveMountNr, uintptr(tree), uintptr(unsafe.Pointer(empty)), uintptr(onto), uintptr(unsafe.Pointer(empty)), moveMountFEmptyPath|moveMountTEmptyPath, 0)
	return e
}

// ifreq is struct ifreq: the interface's name (16 bytes), then the union
// (its flags, a short, first).
type ifreq [40]byte

// sysIoctlIfreq is ioctl(fd, req, ifr) for the interface requests
// (SIOCGIFFLAGS, SIOCSIFFLAGS).
func sysIoctlIfreq(fd int, req uintptr, ifr *ifreq) syscall.Errno {
	_, _, e := syscall.RawSyscall(syscall.SYS_IOCTL, uintptr(fd), req, uintptr(unsafe.Pointer(&ifr[0])))
	return e
}

// sysNotifRecv waits for the next notification on a listener
// (SECCOMP_IOCTL_NOTIF_RECV; n must be zeroed). It blocks, so it is a
// Syscall, not a RawSyscall.
func sysNotifRecv(fd int, n *seccompNotif) syscall.Errno {
	_, _, e := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), seccompIoctlNotifRecv, uintptr(unsafe.Pointer(n)))
	return e
}

// sysPollIn waits, without a time limit, until fd is readable or hung up
// (ppoll with one struct pollfd asking POLLIN) and returns its revents.
// It blocks, so it is a Syscall.
func sysPollIn(fd int) (int16, syscall.Errno) {
	pfd := pollFD{fd: int32(fd), events: pollIn}
	_, _, e := syscall.Syscall6(syscall.SYS_PPOLL, uintptr(unsafe.Pointer(&pfd)), 1, 0, 0, 0, 0)
	return pfd.revents, e
}

// sysNotifSend answers a notification (SECCOMP_IOCTL_NOTIF_SEND).
func sysNotifSend(fd int, r *seccompNotifResp) syscall.Errno {
	_, _, e := syscall.RawSyscall(syscall.SYS_IOCTL, uintptr(fd), seccompIoctlNotifSend, uintptr(unsafe.Pointer(r)))
	return e
}
