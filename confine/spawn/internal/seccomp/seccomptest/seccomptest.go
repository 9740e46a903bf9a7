// Package seccomptest holds what the tests of the run child's seccomp filter
// expect of it, written apart from the filter (package seccomp) so that a
// call dropped from the filter's lists fails a test instead of vanishing
// from both: the calls it must refuse, and a kernel probe that makes each
// call for real and reports what the kernel answered.
//
// Two tests run the probe: package seccomp's, which loads the filter in a
// re-run child of its test binary, and package spawn's, which runs it as a
// call's program in every runner's sandbox. It is imported by tests only.
package seccomptest

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/sys/unix"

	"github.com/b10x/harness/internal/reexec"
)

// MustDeny are the system calls the filter must refuse with EPERM,
// written out here rather than read from the filter (decision 0032).
var MustDeny = []string{
	"ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd", "process_madvise",
	"io_uring_setup", "io_uring_enter", "io_uring_register",
	"setns", "bpf", "keyctl", "add_key", "request_key", "perf_event_open", "userfaultfd",
	"kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
	"open_by_handle_at", "swapon", "swapoff", "reboot", "syslog", "acct", "quotactl", "quotactl_fd",
}

// MustDenyIoctls are the terminal ioctls the filter must refuse.
var MustDenyIoctls = map[string]uint32{"TIOCSTI": unix.TIOCSTI, "TIOCLINUX": unix.TIOCLINUX, "TIOCSETD": unix.TIOCSETD, "TIOCCONS": unix.TIOCCONS}

// Entry is the re-run entry point of the probe: a process started under it
// (reexec) makes the calls its arguments name (Args) and exits 0. It must
// already run under the filter: the probe loads nothing.
const Entry = "seccomp-test-syscalls"

func init() { reexec.Register(Entry, func() { Probe(os.Args[1:]); os.Exit(0) }) }

// Probe makes each call args name and prints "label=result" per line on
// stdout, where result is "ok" or an errno name. An argument is
// "label=nr,a0,a1,..." (a raw call, integers as strconv reads them with
// base 0, -1 for all bits set) or "label=@name" for the calls that need more
// than integers (buffers, a path, a child to end).
func Probe(args []string) {
	w := bufio.NewWriter(os.Stdout)
	for _, arg := range args {
		label, spec, _ := strings.Cut(arg, "=")
		fmt.Fprintf(w, "%s=%s\n", label, kernelCall(spec))
		w.Flush()
	}
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
		_, err := unix.Write(p[1], b)
		if name == "write" || err != nil {
			return errName(err)
		}
		_, err = unix.Read(p[0], b)
		return errName(err)
	case "openat":
		fd, err := unix.Openat(unix.AT_FDCWD, "/proc/self/stat", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err == nil {
			unix.Close(fd)
		}
		return errName(err)
	case "mmap":
		addr, _, e := unix.RawSyscall6(unix.SYS_MMAP, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS, ^uintptr(0), 0)
		if e == 0 {
			unix.RawSyscall(unix.SYS_MUNMAP, addr, 4096, 0)
		}
		return errName(rawErr(e))
	}
	return "unknown-call"
}

func rawErr(e unix.Errno) error {
	if e == 0 {
		return nil
	}
	return e
}

func errName(err error) string {
	if err == nil {
		return "ok"
	}
	var errno unix.Errno
	if errors.As(err, &errno) {
		if n := unix.ErrnoName(errno); n != "" {
			return n
		}
		return "errno" + strconv.Itoa(int(errno))
	}
	return "error:" + strings.ReplaceAll(err.Error(), "\n", " ")
}

// Case is one call the probe makes and what the filter must make of it:
// an errno name, "ok", or "allowed" (it reaches the kernel: anything but
// the filter's EPERM and ENOSYS, the process alive; ENOSYS too on a kernel
// older than Since, which does not have the call).
type Case struct {
	Label, Spec, Want string
	Since             [2]int // major, minor; zero: every kernel has it
}

// Args returns the probe's arguments for cases, in order.
func Args(cases []Case) []string {
	out := make([]string, len(cases))
	for i, c := range cases {
		out[i] = c.Label + "=" + c.Spec
	}
	return out
}

// Cases returns the calls the filter for Landlock ABI abi refuses, with
// arguments that would be harmless (and mostly fail otherwise than EPERM: a
// descriptor -1, a NULL or -1 pointer) were it let through: every listed
// denial, the mount family, the argument rules (clone and unshare with
// CLONE_NEWUSER, socket AF_VSOCK and AF_PACKET, prlimit64 on another
// process, the terminal ioctls, set-id mode bits), clone3 and openat2
// (ENOSYS), numbers above maxKnown, the highest the filter knows (ENOSYS),
// and truncate below Landlock ABI 3; and beside each rule the same call the
// rule lets through, and a sample of ordinary calls (getpid, read, write,
// openat, mmap), which must reach the kernel. The numbers come from
// go-seccomp-bpf's table, not the filter's. The last case, let through,
// would move the probe into a user namespace of its own.
func Cases(t testing.TB, abi int, maxKnown uint64) []Case {
	t.Helper()
	nr := numbers(t)
	call := func(name string, args ...string) string {
		return strings.Join(append([]string{nr(name)}, args...), ",")
	}
	var cases []Case
	add := func(label, spec, want string) {
		cases = append(cases, Case{Label: label, Spec: spec, Want: want})
	}

	for _, name := range MustDeny {
		add(name, call(name, "-1"), "EPERM")
	}
	mountFamily := []string{"mount", "umount2", "pivot_root", "open_tree", "move_mount", "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr", "open_tree_attr"}
	for _, name := range mountFamily {
		add(name, call(name, "-1"), "EPERM")
	}
	add("clone3", call("clone3", "0", "0"), "ENOSYS")
	add("openat2", call("openat2", "-1", "0", "0", "0"), "ENOSYS")
	for _, n := range []uint64{maxKnown + 1, maxKnown + 2, maxKnown + 64, 1000, 0x3fffffff} {
		add("unknown-"+strconv.FormatUint(n, 10), strconv.FormatUint(n, 10)+",-1", "ENOSYS")
	}
	if abi < 3 {
		add("truncate", call("truncate", "-1", "0"), "EPERM")
	} else {
		add("truncate", call("truncate", "-1", "0"), "allowed")
	}
	cases = append(cases, argumentCases(call)...)
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
	return cases
}

// numbers returns a function giving a system call's number by name, from
// go-seccomp-bpf's table; for the calls newer than the table, x/sys/unix's
// number, checked against the table's where it has one.
func numbers(t testing.TB) func(name string) string {
	t.Helper()
	info, err := arch.GetInfo("")
	if err != nil {
		t.Fatal(err)
	}
	newer := map[string]uintptr{
		"open_tree": unix.SYS_OPEN_TREE, "move_mount": unix.SYS_MOVE_MOUNT, "fsopen": unix.SYS_FSOPEN,
		"fsconfig": unix.SYS_FSCONFIG, "fsmount": unix.SYS_FSMOUNT, "fspick": unix.SYS_FSPICK,
		"mount_setattr": unix.SYS_MOUNT_SETATTR, "open_tree_attr": unix.SYS_OPEN_TREE_ATTR,
		"clone3": unix.SYS_CLONE3, "openat2": unix.SYS_OPENAT2, "fchmodat2": unix.SYS_FCHMODAT2,
		"quotactl_fd": unix.SYS_QUOTACTL_FD, "process_madvise": unix.SYS_PROCESS_MADVISE, "pidfd_getfd": unix.SYS_PIDFD_GETFD,
	}
	return func(name string) string {
		t.Helper()
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
}

func hex(v uint64) string { return "0x" + strconv.FormatUint(v, 16) }

// argumentCases are the argument rules, each beside the call it lets
// through; call makes a raw call's spec from a name and its arguments.
func argumentCases(call func(name string, args ...string) string) []Case {
	var cases []Case
	add := func(label, spec, want string) {
		cases = append(cases, Case{Label: label, Spec: spec, Want: want})
	}
	add("clone-newuser", "@clone-newuser", "EPERM")
	add("unshare-none", call("unshare", "0"), "ok")
	add("socket-vsock", call("socket", strconv.Itoa(unix.AF_VSOCK), strconv.Itoa(unix.SOCK_STREAM), "0"), "EPERM")
	add("socket-vsock-high", call("socket", hex(1<<32|unix.AF_VSOCK), strconv.Itoa(unix.SOCK_STREAM), "0"), "EPERM")
	add("socket-packet", call("socket", strconv.Itoa(unix.AF_PACKET), strconv.Itoa(unix.SOCK_DGRAM), "0"), "EPERM")
	add("socket-unix", call("socket", strconv.Itoa(unix.AF_UNIX), strconv.Itoa(unix.SOCK_STREAM|unix.SOCK_CLOEXEC), "0"), "ok")
	add("prlimit64-init", call("prlimit64", "1", strconv.Itoa(unix.RLIMIT_NOFILE), "0", "0"), "EPERM")
	add("prlimit64-self", call("prlimit64", "0", strconv.Itoa(unix.RLIMIT_NOFILE), "0", "0"), "ok")
	for name, io := range MustDenyIoctls {
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
			cases = append(cases, Case{fmt.Sprintf("%s-%o", mc.name, m.mode), call(mc.name, mc.args(m.mode)...), m.want, mc.since})
		}
	}
	return cases
}

// Check fails t for each case whose result in out (the probe's stdout) is
// not what the case wants, naming who ran the probe; a case without a
// result, and a result without a case, fail too.
func Check(t testing.TB, who string, cases []Case, out []byte) {
	t.Helper()
	got := map[string]string{}
	for _, l := range strings.Split(string(out), "\n") {
		if k, v, ok := strings.Cut(l, "="); ok {
			got[k] = v
		}
	}
	kernel := kernelVersion(t)
	older := func(v [2]int) bool { return kernel[0] < v[0] || kernel[0] == v[0] && kernel[1] < v[1] }
	for _, c := range cases {
		g, ok := got[c.Label]
		switch {
		case !ok:
			t.Errorf("%s: %s (%s): no result", who, c.Label, c.Spec)
		case c.Want == "allowed" && g == "ENOSYS" && older(c.Since):
			// The kernel has no such call yet.
		case c.Want == "allowed":
			if g == "EPERM" || g == "ENOSYS" || strings.HasPrefix(g, "bad-") || strings.HasPrefix(g, "unknown") {
				t.Errorf("%s: %s (%s): %s, want it let through to the kernel", who, c.Label, c.Spec, g)
			}
		case g != c.Want:
			t.Errorf("%s: %s (%s): %s, want %s", who, c.Label, c.Spec, g, c.Want)
		}
	}
	if len(got) != len(cases) {
		t.Errorf("%s: %d results for %d calls:\n%s", who, len(got), len(cases), out)
	}
}

// kernelVersion is the running kernel's major and minor version.
func kernelVersion(t testing.TB) [2]int {
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
