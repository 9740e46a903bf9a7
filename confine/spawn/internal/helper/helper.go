package spawn

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"unsafe"

	"github.com/b10x/harness/confine"
	"github.com/b10x/harness/internal/reexec"
	"golang.org/x/sys/unix"
)

func init() { reexec.Register(helperEntry, helperMain) }

// The helper's descriptors, as startOnce arranges them (ExtraFiles).
const (
	statusFD = 3 // write end of the status pipe
	planFD   = 4 // read end of the plan pipe
)

// newRootBase is where the child's new root is assembled before
// pivot_root. It is mounted over in the helper's private mount namespace
// only; the host's directory is untouched, and sources beneath it were
// detached (open_tree) before it was covered.
const newRootBase = "/tmp"

// helperMain runs in the new namespaces as their PID 1. It builds the view,
// confines itself and executes the program; it never returns. Every failure
// is reported on the status pipe and ends the helper before execve.
func helperMain() {
	// Every step below, up to execve, must run on this one thread: the
	// capability, no_new_privs, seccomp and Landlock state are per thread.
	runtime.LockOSThread()
	if _, err := unix.FcntlInt(statusFD, unix.F_SETFD, unix.FD_CLOEXEC); err != nil {
		os.Exit(exitSetup)
	}
	p, err := readPlan()
	if err != nil {
		helperFail("read plan", err)
	}
	layers, step, err := applyPlan(p)
	if err != nil {
		helperFail(step, err)
	}
	var e encoder
	e.u8(statusReady)
	e.strs(layers)
	if err := writeStatus(e.b); err != nil {
		os.Exit(exitSetup)
	}
	err = unix.Exec(p.Path, p.Argv, p.Env)
	helperFail("exec "+p.Path, err)
}

// helperFail reports a failed step and ends the helper (and with it, as
// PID 1, its whole namespace).
func helperFail(step string, err error) {
	var e encoder
	e.u8(statusFailed)
	e.str(step)
	e.error(err)
	_ = writeStatus(e.b)
	os.Exit(exitSetup)
}

func writeStatus(b []byte) error {
	for len(b) > 0 {
		n, err := unix.Write(statusFD, b)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

func readPlan() (*plan, error) {
	var buf []byte
	chunk := make([]byte, 64<<10)
	for {
		n, err := unix.Read(planFD, chunk)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read plan pipe: %w", err)
		}
		if n == 0 {
			break
		}
		buf = append(buf, chunk[:n]...)
		if len(buf) > maxWire {
			return nil, fmt.Errorf("plan larger than %d bytes", maxWire)
		}
	}
	_ = unix.Close(planFD)
	d := decoder{b: buf}
	p := d.plan()
	if err := d.end(); err != nil {
		return nil, err
	}
	return p, nil
}

// applyPlan performs every step before execve, in order. It returns the
// layers it applied, or the failed step's name and its error.
func applyPlan(p *plan) (layers []string, step string, err error) {
	if err := buildRoot(p); err != nil {
		var se *SetupError
		if errors.As(err, &se) {
			return nil, se.Step, se.Err
		}
		return nil, "build view", err
	}
	layers = append(layers, confine.LayerMountNS)

	if err := unix.Sethostname([]byte(p.Hostname)); err != nil {
		return nil, "sethostname", err
	}
	if p.Loopback {
		if err := loopbackUp(); err != nil {
			return nil, "loopback up", err
		}
	}
	if err := unix.Chdir(p.Dir); err != nil {
		return nil, "chdir " + p.Dir, err
	}
	if p.DropCaps {
		if err := dropCapabilities(); err != nil {
			return nil, "drop capabilities", err
		}
	}
	// Every descriptor but 0-2 closes at execve: the status pipe (which
	// must stay open until then) and anything the runtime opened.
	if err := unix.CloseRange(statusFD, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil {
		return nil, "close descriptors", fmt.Errorf("close_range(CLOEXEC): %w", err)
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return nil, "no_new_privs", fmt.Errorf("prctl(PR_SET_NO_NEW_PRIVS): %w", err)
	}
	layers = append(layers, confine.LayerNoNewPrivs)
	if len(p.Seccomp) > 0 {
		if err := loadSeccomp(p.Seccomp); err != nil {
			return nil, "seccomp", err
		}
		layers = append(layers, confine.LayerSeccomp)
	}
	if p.LandlockABI > 0 {
		if err := restrictChild(p); err != nil {
			return nil, "landlock", err
		}
		layers = append(layers, confine.LayerLandlockChild)
	}
	return layers, "", nil
}

// buildRoot assembles the view on a tmpfs at newRootBase and makes it the
// root. Errors are *SetupError naming the mount.
func buildRoot(p *plan) error {
	fail := func(step string, err error) error { return &SetupError{Step: step, Err: err} }
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		if errors.Is(err, unix.EPERM) {
			err = fmt.Errorf("%w (the spawning process may not mount: it is Landlock-restricted or lacks CAP_SYS_ADMIN; start a Broker before restricting the harness)", err)
		}
		return fail("make mounts private", err)
	}
	// Detach every bind source first, while the host tree is intact.
	trees := make([]int, len(p.Mounts))
	for i := range trees {
		trees[i] = -1
	}
	defer func() {
		for _, fd := range trees {
			if fd >= 0 {
				_ = unix.Close(fd)
			}
		}
	}()
	for i, m := range p.Mounts {
		if m.Kind != mBind {
			continue
		}
		fd, err := unix.OpenTree(unix.AT_FDCWD, m.Src, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE)
		if err != nil {
			return fail("bind "+m.Dst, fmt.Errorf("open_tree(%s): %w", m.Src, err))
		}
		trees[i] = fd
		attr := uint64(unix.MOUNT_ATTR_NOSUID)
		if m.Data != "dev" {
			attr |= unix.MOUNT_ATTR_NODEV
		}
		if m.RO {
			attr |= unix.MOUNT_ATTR_RDONLY
		}
		if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, &unix.MountAttr{Attr_set: attr}); err != nil {
			return fail("bind "+m.Dst, fmt.Errorf("mount_setattr(%s): %w", m.Src, err))
		}
	}
	base := newRootBase
	if err := unix.Mount("tmpfs", base, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755"); err != nil {
		return fail("new root", fmt.Errorf("mount tmpfs on %s: %w", base, err))
	}
	var roMounts []string
	for i, m := range p.Mounts {
		dst := base + m.Dst
		var err error
		switch m.Kind {
		case mBind:
			if err = mountPoint(base, m.Dst, !m.File); err == nil {
				err = unix.MoveMount(trees[i], "", unix.AT_FDCWD, dst, unix.MOVE_MOUNT_F_EMPTY_PATH)
				if err != nil {
					err = fmt.Errorf("move_mount(%s): %w", m.Src, err)
				}
			}
		case mSymlink:
			if err = mountPointParents(base, m.Dst); err == nil {
				err = unix.Symlink(m.Src, dst)
			}
		case mTmpfs:
			if err = mountPoint(base, m.Dst, true); err == nil {
				err = unix.Mount("tmpfs", dst, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, m.Data)
			}
			if m.RO {
				roMounts = append(roMounts, dst)
			}
		case mProc:
			if err = mountPoint(base, m.Dst, true); err == nil {
				err = unix.Mount("proc", dst, "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "")
			}
		case mMaskFile:
			err = unix.Mount("/dev/null", dst, "", unix.MS_BIND, "")
		case mMaskDir:
			flags := uintptr(unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC)
			if m.RO {
				flags |= unix.MS_RDONLY
			}
			err = unix.Mount("tmpfs", dst, "tmpfs", flags, "mode=0755,size=4k")
		default:
			err = fmt.Errorf("bug: unknown mount kind %d", m.Kind)
		}
		if err != nil {
			return fail(mountStep(m), err)
		}
	}
	roMounts = append(roMounts, base)
	for i := len(roMounts) - 1; i >= 0; i-- {
		if err := unix.MountSetattr(unix.AT_FDCWD, roMounts[i], 0, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}); err != nil {
			return fail("read-only "+strings.TrimPrefix(roMounts[i], base), err)
		}
	}
	// pivot_root(".", ".") stacks the old root on the new one; detaching
	// it leaves the new root alone, with nothing of the old reachable.
	if err := unix.Chdir(base); err != nil {
		return fail("pivot_root", err)
	}
	if err := unix.PivotRoot(".", "."); err != nil {
		return fail("pivot_root", fmt.Errorf("pivot_root: %w", err))
	}
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return fail("pivot_root", fmt.Errorf("detach the old root: %w", err))
	}
	if err := unix.Chdir("/"); err != nil {
		return fail("pivot_root", err)
	}
	return nil
}

func mountStep(m mountOp) string {
	switch m.Kind {
	case mBind:
		return "bind " + m.Dst
	case mSymlink:
		return "symlink " + m.Dst
	case mProc:
		return "mount proc " + m.Dst
	case mMaskFile, mMaskDir:
		return "mask " + m.Dst
	default:
		return "mount tmpfs " + m.Dst
	}
}

// mountPointParents creates the missing parent directories of rel beneath
// base.
func mountPointParents(base, rel string) error {
	i := strings.LastIndexByte(rel, '/')
	if i <= 0 {
		return nil
	}
	return mountPoint(base, rel[:i], true)
}

// mountPoint makes base+rel exist as a directory (dir) or a file, creating
// missing parents as directories. An existing entry of the right kind is
// fine (it lies in a bind already made).
func mountPoint(base, rel string, dir bool) error {
	if err := mountPointParents(base, rel); err != nil {
		return err
	}
	path := base + rel
	var err error
	if dir {
		err = unix.Mkdir(path, 0o755)
	} else {
		var fd int
		fd, err = unix.Open(path, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
		if err == nil {
			_ = unix.Close(fd)
		}
	}
	if err == nil {
		return nil
	}
	var st unix.Stat_t
	if serr := unix.Lstat(path, &st); serr == nil {
		isDir := st.Mode&unix.S_IFMT == unix.S_IFDIR
		if isDir == dir {
			return nil
		}
		return fmt.Errorf("mount point %s exists and is not a %s", rel, map[bool]string{true: "directory", false: "file"}[dir])
	}
	return fmt.Errorf("create mount point %s: %w", rel, err)
}

// loopbackUp brings lo up in the fresh network namespace, so programs that
// talk to themselves over 127.0.0.1 work; nothing else is reachable.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("socket: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("SIOCGIFFLAGS lo: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("SIOCSIFFLAGS lo: %w", err)
	}
	return nil
}

// dropCapabilities empties the bounding, ambient, inheritable, permitted and
// effective sets of this thread, so the program (even as uid 0) holds and
// can gain no capability. Used when there is no user namespace.
func dropCapabilities() error {
	for c := 0; c < 64; c++ {
		err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0)
		if errors.Is(err, unix.EINVAL) {
			break
		}
		if err != nil {
			return fmt.Errorf("prctl(PR_CAPBSET_DROP, %d): %w", c, err)
		}
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("prctl(PR_CAP_AMBIENT_CLEAR_ALL): %w", err)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capset(0): %w", err)
	}
	return nil
}

// loadSeccomp installs the raw program on this thread (no_new_privs must be
// set).
func loadSeccomp(raw []byte) error {
	n := len(raw) / 8
	if n == 0 || n > 4096 {
		return fmt.Errorf("seccomp program of %d instructions", n)
	}
	prog := make([]unix.SockFilter, n)
	for i := range prog {
		b := raw[8*i:]
		prog[i] = unix.SockFilter{Code: binary.LittleEndian.Uint16(b), Jt: b[2], Jf: b[3], K: binary.LittleEndian.Uint32(b[4:])}
	}
	fprog := unix.SockFprog{Len: uint16(n), Filter: &prog[0]}
	if _, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(&fprog))); errno != 0 {
		return fmt.Errorf("seccomp(SET_MODE_FILTER): %w", errno)
	}
	runtime.KeepAlive(prog)
	return nil
}
