package helper

import (
	"encoding/binary"
	"errors"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
)

// init runs the helper as soon as this package is initialised, when the
// process was started as the helper: the rest of the binary never
// initialises. In any other process it does nothing.
func init() {
	if len(os.Args) > 0 && os.Args[0] == Argv0 {
		Main()
	}
}

// newRootBase is where the child's new root is assembled before
// pivot_root. It is mounted over in the helper's private mount namespace
// only; the host's directory is untouched, and sources beneath it were
// detached (open_tree) before it was covered.
const newRootBase = "/tmp"

// opError names a failed operation and its operand.
type opError struct {
	op, operand string
	err         error
}

func (e *opError) Error() string { return e.op + "(" + e.operand + "): " + e.err.Error() }
func (e *opError) Unwrap() error { return e.err }

func opErr(op, operand string, err error) error {
	if err == nil {
		return nil
	}
	return &opError{op, operand, err}
}

// Main runs in the new namespaces as their PID 1, in two stages.
//
// This first stage builds the view, then forks the second, the program's
// stage (startProgram), which runs no Go of its own (stage_unsafe.go): in
// a user and mount namespace nested in this one's when there is a user
// namespace (so every mount of the view is locked: it was made in a more
// privileged namespace than the program's), as an unprivileged id
// otherwise. The stage confines itself and executes the program, which is
// then never PID 1: this stage stays as the namespace's init (see
// initLoop) and exits with the program's status.
//
// Every failure before the program's execve is reported on the status
// pipe and ends the helper, and with it the namespace.
func Main() {
	sigs := catchSignals()
	p := startStage()
	// Nothing this stage holds (the helper image, the runtime's own
	// descriptors) reaches the program: the stage inherits all of it and
	// marks it close-on-exec again, with what it made since.
	if _, _, e := syscall.RawSyscall(sysCloseRangeNr, StatusFD+1, ^uintptr(0), closeRangeCloexec); e != 0 {
		fail("close descriptors", opErr("close_range", "CLOEXEC", e))
	}
	masks, step, err := buildRoot(p)
	if err != nil {
		fail(step, err)
	}
	if err := sysSethostname(p.Hostname); err != nil {
		fail("sethostname", err)
	}
	var noRoute *noRoutes
	if p.Loopback {
		if err := loopbackUp(); err != nil {
			fail("loopback up", err)
		}
		noRoute = openNoRoutes()
		if p.ProxyFD > 0 {
			if err := proxyListener(p.ProxyFD, p.ProxyPort); err != nil {
				fail("proxy listener", err)
			}
		}
	}
	st, err := startProgram(p)
	if err != nil {
		var se *stepError
		if errors.As(err, &se) {
			fail(se.step, se.err)
		}
		fail("start the program's stage", err)
	}
	var refused *refusals
	if st.notify >= 0 {
		refused = &refusals{}
		go serveRefusals(st.notify, refused)
	}
	st.wait(p)
	initLoop(st.pid, sigs, refused, noRoute, masks)
}

// startStage begins the first stage: it locks the thread (every step
// must run on one thread: the mount and capability state are per thread,
// and the program's stage is a copy of this thread), marks the status pipe
// close-on-exec and reads the plan.
func startStage() *Plan {
	runtime.LockOSThread()
	if _, _, e := syscall.RawSyscall(syscall.SYS_FCNTL, StatusFD, syscall.F_SETFD, syscall.FD_CLOEXEC); e != 0 {
		os.Exit(ExitSetup)
	}
	p, err := readPlan()
	if err != nil {
		fail("read plan", err)
	}
	return p
}

// fail reports a failed step and ends the process (in the first stage, as
// PID 1, its whole namespace).
func fail(step string, err error) {
	var e Encoder
	e.U8(StatusFailed)
	e.Str(step)
	e.Error(err)
	_ = sysWriteAll(StatusFD, e.B)
	os.Exit(ExitSetup)
}

func readPlan() (*Plan, error) {
	var buf []byte
	chunk := make([]byte, 64<<10)
	for {
		n, err := sysRead(PlanFD, chunk)
		if err != nil {
			return nil, opErr("read", "plan pipe", err)
		}
		if n == 0 {
			break
		}
		buf = append(buf, chunk[:n]...)
		if len(buf) > MaxWire {
			return nil, errors.New("plan too large")
		}
	}
	sysClose(PlanFD)
	d := Decoder{B: buf}
	p := DecodePlan(&d)
	if err := d.End(); err != nil {
		return nil, err
	}
	return p, nil
}

// buildRoot assembles the view on a tmpfs at newRootBase and makes it the
// root. It returns the masked files' descriptors (makeMasks), or the
// failed step's name with the error.
func buildRoot(p *Plan) (*maskFiles, string, error) {
	if err := sysMount("", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
		if errors.Is(err, syscall.EPERM) {
			err = opErr("mount", "/, MS_REC|MS_PRIVATE", &hintError{err, "the spawning process may not mount: it is Landlock-restricted or lacks CAP_SYS_ADMIN; start a Broker before restricting the harness"})
		}
		return nil, "make mounts private", err
	}
	// Detach every bind source first, while the host tree is intact.
	trees, step, err := detachBindSources(p.Mounts)
	defer closeTrees(trees)
	if err != nil {
		return nil, step, err
	}
	base := newRootBase
	// The masks' files first, on a tmpfs the new root then covers.
	masks, step, err := makeMasks(base, p.Mounts, trees)
	if err != nil {
		return nil, step, err
	}
	ok := false
	defer func() {
		if !ok {
			masks.close()
		}
	}()
	if err := mountTmpfs(base, syscall.MS_NOSUID|syscall.MS_NODEV, "mode=0755"); err != nil {
		return nil, "new root", err
	}
	var roMounts []string
	for i, m := range p.Mounts {
		if err := placeMount(base, m, trees[i]); err != nil {
			return nil, mountStep(m), err
		}
		if m.Kind == Tmpfs && m.RO {
			roMounts = append(roMounts, base+m.Dst)
		}
	}
	roMounts = append(roMounts, base)
	for i := len(roMounts) - 1; i >= 0; i-- {
		if err := sysMountSetattr(atFDCWDInt, roMounts[i], 0, mountAttrRdonly); err != nil {
			return nil, "read-only " + strings.TrimPrefix(roMounts[i], base), opErr("mount_setattr", roMounts[i], err)
		}
	}
	if err := pivotInto(base); err != nil {
		return nil, "pivot_root", err
	}
	ok = true
	return masks, "", nil
}

// detachBindSources returns, for each of mounts, the detached tree (a
// descriptor) that will be attached at its destination: for a Bind, the
// tree the parent made (Mount.TreeFD) or a clone of its source made here,
// with its mount attributes set; -1 for every other kind. On error it
// returns the step that failed; the trees it returns must be closed
// (closeTrees) whatever happened.
func detachBindSources(mounts []Mount) ([]int, string, error) {
	trees := make([]int, len(mounts))
	for i := range trees {
		trees[i] = -1
	}
	for i, m := range mounts {
		if m.Kind != Bind {
			continue
		}
		if m.TreeFD > 0 {
			trees[i] = m.TreeFD
			continue
		}
		fd, err := bindTree(m)
		if err != nil {
			return trees, "bind " + m.Dst, err
		}
		trees[i] = fd
		attr := uint64(mountAttrNosuid)
		if !m.Dev {
			attr |= mountAttrNodev
		}
		if m.RO {
			attr |= mountAttrRdonly
		}
		if err := sysMountSetattr(fd, "", atEmptyPath|atRecursive, attr); err != nil {
			return trees, "bind " + m.Dst, opErr("mount_setattr", m.Src, err)
		}
	}
	return trees, "", nil
}

// closeTrees closes the trees detachBindSources returned.
func closeTrees(trees []int) {
	for _, fd := range trees {
		if fd >= 0 {
			sysClose(fd)
		}
	}
}

// mountTmpfs mounts a tmpfs at base (the new root's, or the masks' files'
// beneath it) with flags and data.
func mountTmpfs(base string, flags uintptr, data string) error {
	err := sysMount("tmpfs", base, "tmpfs", flags, data)
	if errors.Is(err, syscall.ENOENT) {
		// A minimal container image without /tmp: the mount point is made
		// (an empty directory, the usual one); the tmpfs on it is this
		// namespace's own.
		if merr := sysMkdir(base, 0o1777); merr != nil && !errors.Is(merr, syscall.EEXIST) {
			return opErr("mkdir", base, &hintError{merr, "the root filesystem has no " + base + " and none can be made: add an empty " + base + " to the image"})
		}
		err = sysMount("tmpfs", base, "tmpfs", flags, data)
	}
	return opErr("mount tmpfs", base, err)
}

// placeMount makes m in the view at base; tree is m's detached tree when m
// is a Bind (detachBindSources) or a mask of a file (makeMasks). A
// read-only Tmpfs is left writable: the caller makes it read-only once
// everything beneath it is in place.
func placeMount(base string, m Mount, tree int) error {
	dst := base + m.Dst
	switch m.Kind {
	case Bind:
		if err := mountPoint(base, m.Dst, !m.File); err != nil {
			return err
		}
		if err := opErr("move_mount", m.Src, sysMoveMount(tree, dst)); err != nil {
			return err
		}
		// A tree cloned from a shared mount (open_tree OPEN_TREE_CLONE,
		// here or in the parent for an idmapped workspace) and attached
		// after "/" was made private is not covered by that: on Debian's
		// 6.12 kernel the mounts made beneath it later (the rebinds of held
		// paths) appeared in the host's namespace, over the real files (on
		// 6.1 they did not). Making each attached tree private keeps them
		// in the view.
		return opErr("mount", m.Dst+", MS_REC|MS_PRIVATE", sysMount("", dst, "", syscall.MS_REC|syscall.MS_PRIVATE, ""))
	case Symlink:
		if err := mountPointParents(base, m.Dst); err != nil {
			return err
		}
		return opErr("symlink", m.Dst, sysSymlink(m.Src, dst))
	case Tmpfs:
		if err := mountPoint(base, m.Dst, true); err != nil {
			return err
		}
		return opErr("mount tmpfs", m.Dst, sysMount("tmpfs", dst, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, m.Data))
	case Proc:
		if err := mountPoint(base, m.Dst, true); err != nil {
			return err
		}
		err := sysMount("proc", dst, "proc", syscall.MS_NOSUID|syscall.MS_NODEV|syscall.MS_NOEXEC, "")
		if errors.Is(err, syscall.EPERM) {
			err = &hintError{err, ProcHint}
		}
		return opErr("mount proc", m.Dst, err)
	case Rebind:
		return rebind(base, m)
	case MaskBeneath:
		return maskBeneath(base, m, tree)
	case MaskFile:
		return opErr("move_mount", m.Dst, sysMoveMount(tree, dst))
	case MaskDir:
		flags := uintptr(syscall.MS_NOSUID | syscall.MS_NODEV | syscall.MS_NOEXEC)
		if m.RO {
			flags |= syscall.MS_RDONLY
		}
		return opErr("mount tmpfs", m.Dst, sysMount("tmpfs", dst, "tmpfs", flags, "mode=0755,size=4k"))
	}
	return errors.New("bug: unknown mount kind")
}

// pivotInto makes base the root: pivot_root(".", ".") stacks the old root
// on the new one; detaching it leaves the new root alone, with nothing of
// the old reachable.
func pivotInto(base string) error {
	if err := sysChdir(base); err != nil {
		return opErr("chdir", base, err)
	}
	if err := sysPivotRoot(".", "."); err != nil {
		return opErr("pivot_root", base, err)
	}
	if err := sysUmount(".", syscall.MNT_DETACH); err != nil {
		return opErr("umount2", "old root", err)
	}
	if err := sysChdir("/"); err != nil {
		return opErr("chdir", "/", err)
	}
	return nil
}

// ProcHint says why a user namespace may not mount a new proc, and the fix.
// Package spawn exports it.
const ProcHint = "this host refuses a new proc mount, as a container whose /proc has masked or read-only paths does: " +
	"run the container with an unmasked /proc (podman and docker: --security-opt systempaths=unconfined; " +
	"Kubernetes: securityContext.procMount: Unmasked)"

// hintError adds advice to an errno, keeping it matchable.
type hintError struct {
	err  error
	hint string
}

func (e *hintError) Error() string { return e.err.Error() + " (" + e.hint + ")" }
func (e *hintError) Unwrap() error { return e.err }

func mountStep(m Mount) string {
	switch m.Kind {
	case Bind:
		return "bind " + m.Dst
	case Rebind:
		if m.RO {
			return "hold read-only " + m.Dst
		}
		return "hold in place " + m.Dst
	case Symlink:
		return "symlink " + m.Dst
	case Proc:
		return "mount proc " + m.Dst
	case MaskFile, MaskDir, MaskBeneath:
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
		err = sysMkdir(path, 0o755)
	} else {
		var fd int
		fd, err = sysOpen(path, syscall.O_CREAT|syscall.O_EXCL|syscall.O_WRONLY|syscall.O_CLOEXEC, 0o644)
		if err == nil {
			sysClose(fd)
		}
	}
	if err == nil {
		return nil
	}
	if mode, serr := sysLstatMode(path); serr == nil {
		if (mode&syscall.S_IFMT == syscall.S_IFDIR) == dir {
			return nil
		}
		return errors.New("mount point " + rel + " exists and is of another kind")
	}
	return opErr("create mount point", rel, err)
}

// loopbackUp brings lo up in the fresh network namespace, so programs that
// talk to themselves over 127.0.0.1 work; nothing else is reachable.
func loopbackUp() error {
	s, _, e := syscall.RawSyscall(syscall.SYS_SOCKET, syscall.AF_INET, syscall.SOCK_DGRAM|syscall.SOCK_CLOEXEC, 0)
	if e != 0 {
		return opErr("socket", "AF_INET", e)
	}
	fd := int(s)
	defer sysClose(fd)
	var ifr ifreq // name[16], then the flags (short)
	copy(ifr[:], "lo")
	if e := sysIoctlIfreq(fd, syscall.SIOCGIFFLAGS, &ifr); e != 0 {
		return opErr("ioctl SIOCGIFFLAGS", "lo", e)
	}
	flags := binary.NativeEndian.Uint16(ifr[16:]) | syscall.IFF_UP
	binary.NativeEndian.PutUint16(ifr[16:], flags)
	if e := sysIoctlIfreq(fd, syscall.SIOCSIFFLAGS, &ifr); e != 0 {
		return opErr("ioctl SIOCSIFFLAGS", "lo", e)
	}
	return nil
}

// sockFilters reads a raw program's instructions.
func sockFilters(raw []byte) ([]syscall.SockFilter, error) {
	n := len(raw) / 8
	if n == 0 || n > 4096 || len(raw)%8 != 0 {
		return nil, errors.New("seccomp program of a bad size")
	}
	prog := make([]syscall.SockFilter, n)
	for i := range prog {
		b := raw[8*i:]
		prog[i] = syscall.SockFilter{Code: binary.LittleEndian.Uint16(b), Jt: b[2], Jf: b[3], K: binary.LittleEndian.Uint32(b[4:])}
	}
	return prog, nil
}

// proxyListener opens a TCP listener at 127.0.0.1:port in the call's fresh
// network namespace and sends it to the harness on fd (SCM_RIGHTS), then
// closes both here: the harness alone accepts on it, and the program
// inherits neither.
func proxyListener(fd int, port uint16) error {
	defer sysClose(fd)
	lfd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return opErr("socket", "AF_INET stream", err)
	}
	defer sysClose(lfd)
	if err := syscall.SetsockoptInt(lfd, syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1); err != nil {
		return opErr("setsockopt", "SO_REUSEADDR", err)
	}
	if err := syscall.Bind(lfd, &syscall.SockaddrInet4{Port: int(port), Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		return opErr("bind", "127.0.0.1:"+strconv.Itoa(int(port)), err)
	}
	if err := syscall.Listen(lfd, 256); err != nil {
		return opErr("listen", "127.0.0.1:"+strconv.Itoa(int(port)), err)
	}
	if err := syscall.Sendmsg(fd, []byte{'L'}, syscall.UnixRights(lfd), nil, 0); err != nil {
		return opErr("sendmsg", "the proxy listener", err)
	}
	return nil
}
