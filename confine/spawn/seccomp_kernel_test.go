package spawn

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/sys/unix"

	"github.com/b10x/harness/internal/reexec"
	"github.com/b10x/harness/internal/testenv"
)

// syscallsEntry is a probe that makes system calls in a real sandbox and
// reports each one's errno: the kernel's own seccomp, not the userspace
// interpreter of TestSeccompEveryNumber, judges them.
const syscallsEntry = "spawn-test-syscalls"

func init() { reexec.Register(syscallsEntry, syscallsMain) }

// syscallsMain makes each call its arguments name and prints
// "label=result" per line, where result is "ok" or an errno name. An
// argument is "label=nr,a0,a1,..." (a raw call, integers as strconv
// reads them with base 0, -1 for all bits set) or "label=@name" for the
// calls that need more than integers (buffers, a path, a child to end).
func syscallsMain() {
	w := bufio.NewWriter(os.Stdout)
	for _, arg := range os.Args[1:] {
		label, spec, _ := strings.Cut(arg, "=")
		fmt.Fprintf(w, "%s=%s\n", label, kernelCall(spec))
		w.Flush()
	}
	os.Exit(0)
}

func kernelCall(spec string) string {
	if name, ok := strings.CutPrefix(spec, "@"); ok {
		return namedCall(name)
	}
	var a [7]uintptr
	fields := strings.Split(spec, ",")
	if len(fields) > len(a) {
		return "bad-spec"
	}
	for i, f := range fields {
		v, err := strconv.ParseInt(f, 0, 64)
		if err != nil {
			return "bad-spec"
		}
		a[i] = uintptr(v)
	}
	_, _, e := unix.RawSyscall6(a[0], a[1], a[2], a[3], a[4], a[5], a[6])
	return errName(rawErr(e))
}

func namedCall(name string) string {
	switch name {
	case "clone-newuser":
		// Without the filter the kernel makes a child: it ends at once.
		r, _, e := unix.RawSyscall6(unix.SYS_CLONE, unix.CLONE_NEWUSER|uintptr(unix.SIGCHLD), 0, 0, 0, 0, 0)
		if e == 0 && r == 0 {
			unix.RawSyscall(unix.SYS_EXIT_GROUP, 0, 0, 0)
		}
		return errName(rawErr(e))
	case "read", "write":
		var p [2]int
		if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
			return "pipe2:" + errName(err)
		}
		defer unix.Close(p[0])
		defer unix.Close(p[1])
		b := []byte{'x'}
		_, _, e := unix.RawSyscall(unix.SYS_WRITE, uintptr(p[1]), uintptr(unsafe.Pointer(&b[0])), 1)
		if name == "write" || e != 0 {
			return errName(rawErr(e))
		}
		_, _, e = unix.RawSyscall(unix.SYS_READ, uintptr(p[0]), uintptr(unsafe.Pointer(&b[0])), 1)
		return errName(rawErr(e))
	case "openat":
		path, _ := unix.BytePtrFromString("/proc/self/stat")
		fd, _, e := unix.RawSyscall6(unix.SYS_OPENAT, atFDCWD, uintptr(unsafe.Pointer(path)), unix.O_RDONLY|unix.O_CLOEXEC, 0, 0, 0)
		if e == 0 {
			unix.Close(int(fd))
		}
		return errName(rawErr(e))
	case "mmap":
		addr, _, e := unix.RawSyscall6(unix.SYS_MMAP, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS, ^uintptr(0), 0)
		if e == 0 {
			unix.RawSyscall(unix.SYS_MUNMAP, addr, 4096, 0)
		}
		return errName(rawErr(e))
	}
	return "unknown-call"
}

// kernelCase is one call the probe makes in the sandbox and what the
// filter must make of it: an errno name, or "allowed" (it reaches the
// kernel: anything but the filter's EPERM and ENOSYS, the process alive;
// ENOSYS too on a kernel older than since, which does not have the call).
type kernelCase struct {
	label, spec, want string
	since             [2]int // major, minor; zero: every kernel has it
}

// kernelVersion is the running kernel's major and minor version.
func kernelVersion(t *testing.T) [2]int {
	t.Helper()
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		t.Fatal(err)
	}
	rel := unix.ByteSliceToString(u.Release[:])
	var v [2]int
	if _, err := fmt.Sscanf(rel, "%d.%d", &v[0], &v[1]); err != nil {
		t.Fatalf("kernel release %q: %v", rel, err)
	}
	return v
}

// TestSeccompInKernel makes, in a real sandbox of every runner, each
// system call the filter refuses, with arguments that would be harmless
// (and mostly fail otherwise than EPERM: a descriptor -1, a NULL or -1
// pointer) were it let through: every listed denial, the mount family,
// the argument rules (clone and unshare with CLONE_NEWUSER, socket
// AF_VSOCK and AF_PACKET, prlimit64 on another process, the terminal
// ioctls, set-id mode bits), clone3 and openat2 (ENOSYS), numbers above
// the highest known one (ENOSYS), and truncate below Landlock ABI 3; and
// beside each rule the same call the rule lets through, and a sample of
// ordinary calls (getpid, read, write, openat, mmap), which must reach the
// kernel. The numbers come from go-seccomp-bpf's table, not the filter's.
func TestSeccompInKernel(t *testing.T) {
	testenv.Require(t, seccompArchSupported, "a seccomp filter for this architecture")
	info, err := arch.GetInfo("")
	if err != nil {
		t.Fatal(err)
	}
	// Calls newer than the table: x/sys/unix's number, checked against
	// the table's where it has one.
	newer := map[string]uintptr{
		"open_tree": unix.SYS_OPEN_TREE, "move_mount": unix.SYS_MOVE_MOUNT, "fsopen": unix.SYS_FSOPEN,
		"fsconfig": unix.SYS_FSCONFIG, "fsmount": unix.SYS_FSMOUNT, "fspick": unix.SYS_FSPICK,
		"mount_setattr": unix.SYS_MOUNT_SETATTR, "open_tree_attr": unix.SYS_OPEN_TREE_ATTR,
		"clone3": unix.SYS_CLONE3, "openat2": unix.SYS_OPENAT2, "fchmodat2": unix.SYS_FCHMODAT2,
		"quotactl_fd": unix.SYS_QUOTACTL_FD, "process_madvise": unix.SYS_PROCESS_MADVISE, "pidfd_getfd": unix.SYS_PIDFD_GETFD,
	}
	nr := func(name string) string {
		n, ok := info.SyscallNames[name]
		if u, known := newer[name]; known {
			if ok && uintptr(n) != u {
				t.Fatalf("%s is %d in x/sys/unix, %d in the arch table", name, u, n)
			}
			return strconv.FormatUint(uint64(u), 10)
		}
		if !ok {
			t.Fatalf("%s has no number on %s", name, runtime.GOARCH)
		}
		return strconv.Itoa(n)
	}
	call := func(name string, args ...string) string {
		return strings.Join(append([]string{nr(name)}, args...), ",")
	}
	var cases []kernelCase
	add := func(label, spec, want string) {
		cases = append(cases, kernelCase{label: label, spec: spec, want: want})
	}

	for _, name := range mustDeny {
		add(name, call(name, "-1"), "EPERM")
	}
	mountFamily := []string{"mount", "umount2", "pivot_root", "open_tree", "move_mount", "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr", "open_tree_attr"}
	for _, name := range mountFamily {
		add(name, call(name, "-1"), "EPERM")
	}
	add("clone3", call("clone3", "0", "0"), "ENOSYS")
	add("openat2", call("openat2", "-1", "0", "0", "0"), "ENOSYS")
	for _, n := range []uint64{maxKnownSyscall + 1, maxKnownSyscall + 2, maxKnownSyscall + 64, 1000, 0x3fffffff} {
		add("unknown-"+strconv.FormatUint(n, 10), strconv.FormatUint(n, 10)+",-1", "ENOSYS")
	}
	abi, err := testenv.LandlockABI()
	if err != nil {
		t.Fatal(err)
	}
	if abi < 3 {
		add("truncate", call("truncate", "-1", "0"), "EPERM")
	} else {
		add("truncate", call("truncate", "-1", "0"), "allowed")
	}

	// The argument rules, each beside the call it lets through.
	add("clone-newuser", "@clone-newuser", "EPERM")
	add("unshare-none", call("unshare", "0"), "ok")
	hex := func(v uint64) string { return "0x" + strconv.FormatUint(v, 16) }
	add("socket-vsock", call("socket", strconv.Itoa(unix.AF_VSOCK), strconv.Itoa(unix.SOCK_STREAM), "0"), "EPERM")
	add("socket-vsock-high", call("socket", hex(1<<32|unix.AF_VSOCK), strconv.Itoa(unix.SOCK_STREAM), "0"), "EPERM")
	add("socket-packet", call("socket", strconv.Itoa(unix.AF_PACKET), strconv.Itoa(unix.SOCK_DGRAM), "0"), "EPERM")
	add("socket-unix", call("socket", strconv.Itoa(unix.AF_UNIX), strconv.Itoa(unix.SOCK_STREAM|unix.SOCK_CLOEXEC), "0"), "ok")
	add("prlimit64-init", call("prlimit64", "1", strconv.Itoa(unix.RLIMIT_NOFILE), "0", "0"), "EPERM")
	add("prlimit64-self", call("prlimit64", "0", strconv.Itoa(unix.RLIMIT_NOFILE), "0", "0"), "ok")
	for name, io := range mustDenyIoctls {
		add("ioctl-"+name, call("ioctl", "-1", hex(uint64(io)), "0"), "EPERM")
	}
	add("ioctl-TIOCSTI-high", call("ioctl", "-1", hex(1<<32|uint64(unix.TIOCSTI)), "0"), "EPERM")
	add("ioctl-TCGETS", call("ioctl", "-1", hex(unix.TCGETS), "0"), "allowed")
	// Set-id mode bits, on a descriptor -1 or a NULL path: refused by the
	// filter, or the kernel's EBADF or EFAULT without those bits.
	type modeCall struct {
		name  string
		args  func(mode uint64) []string
		since [2]int
	}
	modeCalls := []modeCall{
		{"fchmod", func(m uint64) []string { return []string{"-1", hex(m)} }, [2]int{}},
		{"fchmodat", func(m uint64) []string { return []string{"-1", "0", hex(m)} }, [2]int{}},
		{"fchmodat2", func(m uint64) []string { return []string{"-1", "0", hex(m), "0"} }, [2]int{6, 6}},
		{"openat", func(m uint64) []string { return []string{"-1", "0", hex(unix.O_CREAT | unix.O_WRONLY), hex(m)} }, [2]int{}},
		{"mknodat", func(m uint64) []string { return []string{"-1", "0", hex(unix.S_IFREG | m), "0"} }, [2]int{}},
	}
	if runtime.GOARCH == "amd64" {
		modeCalls = append(modeCalls,
			modeCall{"chmod", func(m uint64) []string { return []string{"0", hex(m)} }, [2]int{}},
			modeCall{"open", func(m uint64) []string { return []string{"0", hex(unix.O_CREAT | unix.O_WRONLY), hex(m)} }, [2]int{}},
			modeCall{"creat", func(m uint64) []string { return []string{"0", hex(m)} }, [2]int{}},
			modeCall{"mknod", func(m uint64) []string { return []string{"0", hex(unix.S_IFREG | m), "0"} }, [2]int{}},
		)
	}
	for _, mc := range modeCalls {
		for _, m := range []struct {
			mode uint64
			want string
		}{{0o4755, "EPERM"}, {0o2755, "EPERM"}, {0o755, "allowed"}} {
			cases = append(cases, kernelCase{fmt.Sprintf("%s-%o", mc.name, m.mode), call(mc.name, mc.args(m.mode)...), m.want, mc.since})
		}
	}
	// Ordinary calls.
	add("getpid", call("getpid"), "ok")
	add("getppid", call("getppid"), "ok")
	add("close-bad", call("close", "-1"), "allowed")
	add("dup-bad", call("dup", "-1"), "allowed")
	for _, name := range []string{"read", "write", "openat", "mmap"} {
		add(name+"-real", "@"+name, "ok")
	}
	// Last: let through, it would move the probe into a user namespace
	// of its own.
	add("unshare-newuser", call("unshare", hex(unix.CLONE_NEWUSER)), "EPERM")

	kernel := kernelVersion(t)
	older := func(v [2]int) bool { return kernel[0] < v[0] || kernel[0] == v[0] && kernel[1] < v[1] }
	argv := []string{"b10x-reexec:" + syscallsEntry}
	for _, c := range cases {
		argv = append(argv, c.label+"="+c.spec)
	}
	for name, r := range runners(t) {
		ws := workspace(t)
		s := Spec{Program: pin(t, selfExe(t)), Argv: argv, Env: []string{"PATH=/usr/bin:/bin"}, Dir: ws, Workspace: pin(t, ws)}
		res, out, err := run(t, r, s)
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("%s: the probe did not end normally (a call killed it?): %v %+v\n%s", name, err, res, out)
		}
		t.Logf("%s: LAYERS: %v", name, res.Layers)
		got := probes(out)
		if name == "direct" {
			t.Logf("direct: %s", strings.Join(strings.Fields(string(out.stdout.Bytes())), " "))
		}
		for _, c := range cases {
			g, ok := got[c.label]
			switch {
			case !ok:
				t.Errorf("%s: %s (%s): no result", name, c.label, c.spec)
			case c.want == "allowed" && g == "ENOSYS" && older(c.since):
				// The kernel has no such call yet.
			case c.want == "allowed":
				if g == "EPERM" || g == "ENOSYS" || strings.HasPrefix(g, "bad-") || strings.HasPrefix(g, "unknown") {
					t.Errorf("%s: %s (%s): %s, want it let through to the kernel", name, c.label, c.spec, g)
				}
			case g != c.want:
				t.Errorf("%s: %s (%s): %s, want %s", name, c.label, c.spec, g, c.want)
			}
		}
		if len(got) != len(cases) {
			t.Errorf("%s: %d results for %d calls:\n%s", name, len(got), len(cases), out)
		}
	}
}
