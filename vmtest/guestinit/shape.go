package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/b10x/harness/vmtest/internal/protocol"
)

// The init binary, started again as an ordinary process, is a helper for
// the shape checks: noopArg exits 0; tryCloneArg FLAGS starts a child with
// those clone flags and exits 0 only if that worked, so the clone is made by
// whoever runs the helper (clone flags given to os/exec are applied by the
// parent, before the child's uid changes).
const (
	noopArg     = "vmtest-noop"
	tryCloneArg = "vmtest-try-clone"
)

func helperMain(args []string) int {
	switch {
	case len(args) == 1 && args[0] == noopArg:
		return 0
	case len(args) == 2 && args[0] == tryCloneArg:
		flags, err := strconv.ParseUint(args[1], 10, 64)
		if err != nil {
			fmt.Fprintf(os.Stderr, "guestinit: bad clone flags %q\n", args[1])
			return 2
		}
		cmd := exec.Command("/proc/self/exe", noopArg)
		cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: uintptr(flags)}
		if err := cmd.Run(); err != nil {
			fmt.Fprintf(os.Stderr, "guestinit: clone with flags %#x as uid %d: %v\n", flags, os.Getuid(), err)
			return 1
		}
		return 0
	}
	fmt.Fprintln(os.Stderr, "guestinit: must run as PID 1 of a vmtest guest")
	return 2
}

// guestEnv is what the shape set-up decided for the test binaries.
type guestEnv struct {
	shape string
	// cgroupParent is the cgroup2 directory under which each test binary
	// gets its own cgroup; "" when the shape has no cgroup2.
	cgroupParent string
	// v1Mounts are the cgroup v1 hierarchies mounted (cgroup-v1 only).
	v1Mounts []string
	// uid and gid the tests run as; unprivileged reports uid != 0.
	uid, gid     int
	unprivileged bool
}

type mnt struct {
	source, target, fstype string
	flags                  uintptr
	data                   string
	mode                   os.FileMode
}

// leaveRootfs makes / an ordinary mount. The initramfs is unpacked into the
// kernel's rootfs, the one mount with no parent, and pivot_root(2) refuses
// to move a root that has no parent: code that pivots into a new root (as
// container runtimes and the run helper do) would fail in the guest and work
// on every booted host. So, as switch_root does, init binds rootfs onto a
// directory, moves that mount over / and chroots into it; the new root's
// parent is rootfs. No file is copied.
func leaveRootfs() error {
	const newRoot = "/.root"
	if err := os.Mkdir(newRoot, 0o755); err != nil {
		return fmt.Errorf("mkdir %s: %w", newRoot, err)
	}
	if err := unix.Mount("/", newRoot, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind / on %s: %w", newRoot, err)
	}
	if err := unix.Chdir(newRoot); err != nil {
		return fmt.Errorf("chdir %s: %w", newRoot, err)
	}
	if err := unix.Mount(".", "/", "", unix.MS_MOVE, ""); err != nil {
		return fmt.Errorf("move %s over /: %w", newRoot, err)
	}
	if err := unix.Chroot("."); err != nil {
		return fmt.Errorf("chroot into the new root: %w", err)
	}
	if err := unix.Chdir("/"); err != nil {
		return fmt.Errorf("chdir /: %w", err)
	}
	// The bind shows rootfs's own /.root, an empty directory; remove it so
	// the guest's / looks like the image.
	_ = unix.Rmdir(newRoot)
	return nil
}

// mountBase mounts what every Linux userland expects. Failure of any is fatal.
func mountBase() error {
	const nosuid, nodev, noexec = unix.MS_NOSUID, unix.MS_NODEV, unix.MS_NOEXEC
	for _, m := range []mnt{
		{"proc", "/proc", "proc", nosuid | nodev | noexec, "", 0o555},
		{"sysfs", "/sys", "sysfs", nosuid | nodev | noexec, "", 0o555},
		{"devtmpfs", "/dev", "devtmpfs", nosuid, "mode=0755", 0o755},
		{"devpts", "/dev/pts", "devpts", nosuid | noexec, "gid=5,mode=0620,ptmxmode=0666", 0o755},
		{"tmpfs", "/dev/shm", "tmpfs", nosuid | nodev, "mode=1777", 0o1777},
		{"tmpfs", "/tmp", "tmpfs", nosuid | nodev, "mode=1777", 0o1777},
		{"tmpfs", "/run", "tmpfs", nosuid | nodev, "mode=0755", 0o755},
		{"securityfs", "/sys/kernel/security", "securityfs", nosuid | nodev | noexec, "", 0o755},
	} {
		if err := os.MkdirAll(m.target, m.mode.Perm()); err != nil {
			return fmt.Errorf("mkdir %s: %w", m.target, err)
		}
		if err := unix.Mount(m.source, m.target, m.fstype, m.flags, m.data); err != nil {
			return fmt.Errorf("mount %s on %s: %w", m.fstype, m.target, err)
		}
	}
	// devtmpfs has no /dev/fd and friends; programs and shells expect them.
	for name, target := range map[string]string{"/dev/fd": "/proc/self/fd", "/dev/stdin": "/proc/self/fd/0", "/dev/stdout": "/proc/self/fd/1", "/dev/stderr": "/proc/self/fd/2"} {
		if err := os.Symlink(target, name); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("symlink %s -> %s: %w", name, target, err)
		}
	}
	if err := unix.Sethostname([]byte("vmtest")); err != nil {
		return fmt.Errorf("sethostname: %w", err)
	}
	if err := loopbackUp(); err != nil {
		return err
	}
	// systemd makes every mount shared at boot; so does the guest, so that
	// code which forgets to make its own mount namespace private is caught
	// as it would be on a real host.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SHARED, ""); err != nil {
		return fmt.Errorf("make / shared: %w", err)
	}
	return nil
}

// loopbackUp brings lo up, as every booted host has it: tests listen on
// 127.0.0.1. The kernel gives lo its addresses itself.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("socket for lo: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return fmt.Errorf("ifreq lo: %w", err)
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("SIOCGIFFLAGS lo: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("SIOCSIFFLAGS lo up: %w", err)
	}
	return nil
}

// setupShape builds the shape and then checks that it holds.
func setupShape(shape string) (*guestEnv, error) {
	env := &guestEnv{shape: shape}
	switch shape {
	case protocol.ShapeDebian61, protocol.ShapeDebian612, protocol.ShapeDebian618, protocol.ShapeNoLandlock, protocol.ShapeOrdinary:
		if err := setupCgroup2(env); err != nil {
			return nil, err
		}
	case protocol.ShapeNoUserns:
		env.uid, env.gid, env.unprivileged = protocol.UnprivilegedUID, protocol.UnprivilegedGID, true
		if err := setupCgroup2(env); err != nil {
			return nil, err
		}
		if err := os.WriteFile("/proc/sys/user/max_user_namespaces", []byte("0\n"), 0); err != nil {
			return nil, fmt.Errorf("set user.max_user_namespaces=0: %w", err)
		}
	case protocol.ShapeCgroupV1:
		if err := setupCgroupV1(env); err != nil {
			return nil, err
		}
	case protocol.ShapeK8sNode:
		if err := setupCgroup2(env); err != nil {
			return nil, err
		}
		if err := loadModules(); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("unknown shape %q (known: %s)", shape, strings.Join(protocol.KnownVMShapes(), ", "))
	}
	return env, checkShape(env)
}

// cgroupRoot is where every shape with cgroup2 mounts it, as systemd does.
const cgroupRoot = "/sys/fs/cgroup"

// setupCgroup2 mounts cgroup2 alone, enables every controller the kernel
// offers at the root and in vmtest.slice, under which each test binary gets
// a cgroup of its own, the way systemd delegates a subtree to a service.
func setupCgroup2(env *guestEnv) error {
	if err := unix.Mount("cgroup2", cgroupRoot, "cgroup2", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "nsdelegate,memory_recursiveprot"); err != nil {
		return fmt.Errorf("mount cgroup2 on %s: %w", cgroupRoot, err)
	}
	if err := enableAllControllers(cgroupRoot); err != nil {
		return err
	}
	slice := filepath.Join(cgroupRoot, "vmtest.slice")
	if err := os.Mkdir(slice, 0o755); err != nil {
		return fmt.Errorf("mkdir %s: %w", slice, err)
	}
	if err := enableAllControllers(slice); err != nil {
		return err
	}
	env.cgroupParent = slice
	return nil
}

func enableAllControllers(dir string) error {
	avail, err := readWords(filepath.Join(dir, "cgroup.controllers"))
	if err != nil {
		return err
	}
	for _, c := range avail {
		if err := os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte("+"+c), 0); err != nil {
			return fmt.Errorf("enable controller %s in %s: %w", c, dir, err)
		}
	}
	return nil
}

func readWords(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return strings.Fields(string(b)), nil
}

// setupCgroupV1 lays out cgroup v1 the way a legacy systemd host does: a
// tmpfs at /sys/fs/cgroup, one hierarchy per controller (cpu,cpuacct and
// net_cls,net_prio co-mounted, with the usual symlinks) and the named
// systemd hierarchy. cgroup2 is mounted nowhere.
func setupCgroupV1(env *guestEnv) error {
	if err := unix.Mount("tmpfs", cgroupRoot, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=0755"); err != nil {
		return fmt.Errorf("mount tmpfs on %s: %w", cgroupRoot, err)
	}
	ctrls, err := v1Controllers()
	if err != nil {
		return err
	}
	has := func(c string) bool { return slices.Contains(ctrls, c) }
	var groups [][]string
	done := map[string]bool{}
	for _, pair := range [][]string{{"cpu", "cpuacct"}, {"net_cls", "net_prio"}} {
		if has(pair[0]) && has(pair[1]) {
			groups = append(groups, pair)
			done[pair[0]], done[pair[1]] = true, true
		}
	}
	for _, c := range ctrls {
		if !done[c] {
			groups = append(groups, []string{c})
		}
	}
	for _, g := range groups {
		name := strings.Join(g, ",")
		dir := filepath.Join(cgroupRoot, name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			return fmt.Errorf("mkdir %s: %w", dir, err)
		}
		if err := unix.Mount("cgroup", dir, "cgroup", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, name); err != nil {
			return fmt.Errorf("mount cgroup v1 %s on %s: %w", name, dir, err)
		}
		env.v1Mounts = append(env.v1Mounts, dir)
		if len(g) > 1 {
			for _, c := range g {
				if err := os.Symlink(name, filepath.Join(cgroupRoot, c)); err != nil {
					return fmt.Errorf("symlink %s: %w", c, err)
				}
			}
		}
	}
	dir := filepath.Join(cgroupRoot, "systemd")
	if err := os.Mkdir(dir, 0o755); err != nil {
		return fmt.Errorf("mkdir %s: %w", dir, err)
	}
	if err := unix.Mount("cgroup", dir, "cgroup", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "none,name=systemd"); err != nil {
		return fmt.Errorf("mount cgroup v1 name=systemd on %s: %w", dir, err)
	}
	env.v1Mounts = append(env.v1Mounts, dir)
	return nil
}

// v1Controllers lists the enabled controllers from /proc/cgroups.
func v1Controllers() ([]string, error) {
	f, err := os.Open("/proc/cgroups")
	if err != nil {
		return nil, fmt.Errorf("open /proc/cgroups: %w", err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) == 4 && !strings.HasPrefix(fs[0], "#") && fs[3] == "1" {
			out = append(out, fs[0])
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read /proc/cgroups: %w", err)
	}
	if len(out) == 0 {
		return nil, errors.New("/proc/cgroups lists no enabled controller")
	}
	return out, nil
}

// checkShape verifies, independently of how it was set up, that the shape
// holds: the tests' expectations rest on it.
func checkShape(env *guestEnv) error {
	lsms, err := os.ReadFile("/sys/kernel/security/lsm")
	if err != nil {
		return fmt.Errorf("read the active LSM list: %w", err)
	}
	landlock := slices.Contains(strings.Split(strings.TrimSpace(string(lsms)), ","), "landlock")
	abi := landlockABI()
	mounts, err := cgroupMounts()
	if err != nil {
		return err
	}
	var v2, v1 int
	for _, m := range mounts {
		if m.fstype == "cgroup2" {
			v2++
		} else {
			v1++
		}
	}
	switch env.shape {
	case protocol.ShapeDebian61, protocol.ShapeNoUserns, protocol.ShapeCgroupV1, protocol.ShapeOrdinary:
		if !landlock || abi < 1 {
			return fmt.Errorf("the Landlock LSM should be active: LSM list %q, ABI %d", strings.TrimSpace(string(lsms)), abi)
		}
	case protocol.ShapeDebian612:
		// The shape exists for Landlock's network rights (ABI 4) and
		// scoping (ABI 6); a kernel without them would prove nothing new.
		if !landlock || abi < 6 {
			return fmt.Errorf("the Landlock LSM with ABI 6 or later should be active: LSM list %q, ABI %d", strings.TrimSpace(string(lsms)), abi)
		}
	case protocol.ShapeDebian618:
		// The shape exists for Landlock's audit records (ABI 7), which
		// the kernel emits only while audit is enabled (audit=1).
		if !landlock || abi < 7 {
			return fmt.Errorf("the Landlock LSM with ABI 7 or later should be active: LSM list %q, ABI %d", strings.TrimSpace(string(lsms)), abi)
		}
		if cmd, err := os.ReadFile("/proc/cmdline"); err != nil || !slices.Contains(strings.Fields(string(cmd)), "audit=1") {
			return fmt.Errorf("the kernel should be booted with audit=1: /proc/cmdline %q (%v)", cmd, err)
		}
	case protocol.ShapeK8sNode:
		if !landlock || abi < 7 {
			return fmt.Errorf("the Landlock LSM with ABI 7 or later should be active: LSM list %q, ABI %d", strings.TrimSpace(string(lsms)), abi)
		}
		for _, m := range nodeModules {
			if _, err := os.Stat("/sys/module/" + m); err != nil {
				return fmt.Errorf("kernel module %s should be loaded: %w", m, err)
			}
		}
	case protocol.ShapeNoLandlock:
		if landlock || abi != 0 {
			return fmt.Errorf("the Landlock LSM should be absent: LSM list %q, ABI %d", strings.TrimSpace(string(lsms)), abi)
		}
	}
	if env.shape == protocol.ShapeCgroupV1 {
		if v2 != 0 || v1 == 0 {
			return fmt.Errorf("want cgroup v1 hierarchies only, found %d cgroup2 and %d v1 mounts", v2, v1)
		}
		return nil
	}
	if v2 != 1 || v1 != 0 {
		return fmt.Errorf("want one cgroup2 mount and no v1, found %d cgroup2 and %d v1 mounts", v2, v1)
	}
	sub, err := readWords(filepath.Join(env.cgroupParent, "cgroup.subtree_control"))
	if err != nil {
		return err
	}
	for _, c := range []string{"cpu", "memory", "pids", "io", "cpuset"} {
		if !slices.Contains(sub, c) {
			return fmt.Errorf("controller %s is not enabled in %s (have %v)", c, env.cgroupParent, sub)
		}
	}
	if env.shape == protocol.ShapeNoUserns {
		return checkNoUserns(env)
	}
	return nil
}

// nodeModules are the modules the k8s-node shape loads, as vmtest packs
// them (protocol.ModulesDir/RELEASE/NAME.ko.xz).
var nodeModules = []string{"veth", "overlay"}

// loadModules loads nodeModules for the running kernel with finit_module;
// the kernel decompresses them (CONFIG_MODULE_DECOMPRESS).
func loadModules() error {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return fmt.Errorf("uname: %w", err)
	}
	release := unix.ByteSliceToString(u.Release[:])
	for _, m := range nodeModules {
		p := filepath.Join(protocol.ModulesDir, release, m+".ko.xz")
		f, err := os.Open(p)
		if err != nil {
			return fmt.Errorf("kernel module %s: %w (vmtest packs the modules of the kernel it boots)", m, err)
		}
		err = unix.FinitModule(int(f.Fd()), "", unix.MODULE_INIT_COMPRESSED_FILE)
		f.Close()
		if err != nil && !errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("load kernel module %s: %w", p, err)
		}
	}
	return nil
}

// checkNoUserns proves that no one can create a user namespace and that the
// test user can create no namespace at all, while root still can create the
// others (the control that shows the check itself can see a success).
func checkNoUserns(env *guestEnv) error {
	b, err := os.ReadFile("/proc/sys/user/max_user_namespaces")
	if err != nil || strings.TrimSpace(string(b)) != "0" {
		return fmt.Errorf("user.max_user_namespaces is %q (%v), want 0", strings.TrimSpace(string(b)), err)
	}
	canClone := func(cred *syscall.Credential, flags uintptr) bool {
		cmd := exec.Command("/proc/self/exe", tryCloneArg, strconv.FormatUint(uint64(flags), 10))
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		return cmd.Run() == nil
	}
	user := &syscall.Credential{Uid: uint32(env.uid), Gid: uint32(env.gid), Groups: []uint32{}}
	if !canClone(user, 0) {
		return fmt.Errorf("uid %d cannot even start a plain process", env.uid)
	}
	if !canClone(nil, unix.CLONE_NEWNS|unix.CLONE_NEWPID) {
		return errors.New("root cannot create mount and PID namespaces: the check would prove nothing")
	}
	if canClone(nil, unix.CLONE_NEWUSER) {
		return errors.New("root could still create a user namespace")
	}
	for _, ns := range []struct {
		name string
		flag uintptr
	}{{"user", unix.CLONE_NEWUSER}, {"mount", unix.CLONE_NEWNS}, {"pid", unix.CLONE_NEWPID}, {"net", unix.CLONE_NEWNET}, {"ipc", unix.CLONE_NEWIPC}, {"uts", unix.CLONE_NEWUTS}, {"cgroup", unix.CLONE_NEWCGROUP}} {
		if canClone(user, ns.flag) {
			return fmt.Errorf("uid %d could still create a %s namespace", env.uid, ns.name)
		}
	}
	return nil
}

// landlockABI asks the kernel directly; 0 when Landlock is absent or disabled.
func landlockABI() int {
	v, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, 1) // attr NULL, LANDLOCK_CREATE_RULESET_VERSION
	if errno != 0 {
		return 0
	}
	return int(v)
}

// cgroupMounts lists cgroup and cgroup2 mounts from mountinfo.
func cgroupMounts() ([]mountEntry, error) {
	all, err := readMountinfo()
	if err != nil {
		return nil, err
	}
	var out []mountEntry
	for _, m := range all {
		if m.fstype == "cgroup" || m.fstype == "cgroup2" {
			out = append(out, m)
		}
	}
	return out, nil
}

// reportGuest prints the facts a reader of the log needs to trust the shape.
func reportGuest(env *guestEnv) {
	var u unix.Utsname
	if err := unix.Uname(&u); err == nil {
		say(protocol.InfoLine("kernel", unix.ByteSliceToString(u.Release[:])))
	}
	if b, err := os.ReadFile("/sys/kernel/security/lsm"); err == nil {
		say(protocol.InfoLine("lsm", string(b)))
	}
	say(protocol.InfoLine("landlock-abi", fmt.Sprint(landlockABI())))
	if ms, err := cgroupMounts(); err == nil {
		var parts []string
		for _, m := range ms {
			parts = append(parts, m.fstype+":"+m.target+"("+m.super+")")
		}
		say(protocol.InfoLine("cgroup-mounts", strings.Join(parts, " ")))
	}
	if env.cgroupParent != "" {
		if b, err := os.ReadFile(filepath.Join(env.cgroupParent, "cgroup.subtree_control")); err == nil {
			say(protocol.InfoLine("cgroup-delegated-controllers", env.cgroupParent+": "+string(b)))
		}
	}
	if b, err := os.ReadFile("/proc/sys/user/max_user_namespaces"); err == nil {
		say(protocol.InfoLine("max-user-namespaces", string(b)))
	}
	say(protocol.InfoLine("test-uid", fmt.Sprint(env.uid)))
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err == nil {
		say(protocol.InfoLine("memory", fmt.Sprintf("%d MiB", uint64(si.Totalram)*uint64(si.Unit)>>20)))
	}
	say(protocol.InfoLine("cpus", fmt.Sprint(numCPU())))
}

func numCPU() int {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return 0
	}
	return set.Count()
}
