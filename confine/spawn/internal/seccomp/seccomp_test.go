package seccomp

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"

	"github.com/b10x/harness/confine/spawn/internal/seccomp/seccomptest"
	"github.com/b10x/harness/internal/testenv"
)

// filterVM runs the child's raw filter in x/net/bpf's interpreter, so every
// system call number and argument can be judged without a kernel.
type filterVM struct{ vm *bpf.VM }

func newFilterVM(t *testing.T, abi int) filterVM {
	t.Helper()
	testenv.Require(t, archSupported, "a seccomp filter for this architecture")
	raw, err := Filter(abi)
	if err != nil {
		t.Fatal(err)
	}
	var prog []bpf.Instruction
	for i := 0; i < len(raw); i += 8 {
		ri := bpf.RawInstruction{Op: binary.LittleEndian.Uint16(raw[i:]), Jt: raw[i+2], Jf: raw[i+3], K: binary.LittleEndian.Uint32(raw[i+4:])}
		prog = append(prog, ri.Disassemble())
	}
	vm, err := bpf.NewVM(prog)
	if err != nil {
		t.Fatalf("the filter does not load in the interpreter: %v", err)
	}
	return filterVM{vm}
}

// eval returns the filter's action for nr with the low halves of args.
// struct seccomp_data is laid out as the kernel does; the interpreter loads
// words big-endian, so each word is stored big-endian at its offset and
// loads as the value the kernel would see.
func (f filterVM) eval(t *testing.T, auditArch uint32, nr uint32, args ...uint32) uint32 {
	t.Helper()
	data := make([]byte, 64)
	binary.BigEndian.PutUint32(data[0:], nr)
	binary.BigEndian.PutUint32(data[4:], auditArch)
	for i, a := range args {
		binary.BigEndian.PutUint32(data[argLow(i):], a)
	}
	n, err := f.vm.Run(data)
	if err != nil {
		t.Fatalf("nr %d: %v", nr, err)
	}
	return uint32(n)
}

func actionName(a uint32) string {
	switch {
	case a == unix.SECCOMP_RET_ALLOW:
		return "allow"
	case a == unix.SECCOMP_RET_KILL_PROCESS:
		return "kill"
	case a&unix.SECCOMP_RET_ACTION_FULL == unix.SECCOMP_RET_ERRNO:
		return unix.ErrnoName(unix.Errno(a & unix.SECCOMP_RET_DATA))
	}
	return fmt.Sprintf("%#x", a)
}

// TestSeccompEveryNumber judges every system call number from 0 to 64
// above the highest one the filter was written for: the mount family and
// the listed calls are refused, unknown numbers fail with ENOSYS, and
// everything else is allowed (with zero arguments).
func TestSeccompEveryNumber(t *testing.T) {
	f := newFilterVM(t, 7)
	info, err := arch.GetInfo("")
	if err != nil {
		t.Fatal(err)
	}
	denied := map[uint32]string{}
	for _, c := range deniedSyscalls {
		// go-seccomp-bpf's table is an independent check of x/sys/unix's
		// numbers the filter uses.
		nr, ok := info.SyscallNames[c.name]
		if !ok || uintptr(nr) != c.nr {
			t.Fatalf("denied system call %q is %d in the filter, %d (%v) in the arch table", c.name, c.nr, nr, ok)
		}
		denied[uint32(nr)] = "EPERM"
	}
	for _, nr := range mountSyscalls {
		denied[uint32(nr)] = "EPERM"
	}
	denied[uint32(unix.SYS_CLONE3)] = "ENOSYS"
	denied[uint32(unix.SYS_OPENAT2)] = "ENOSYS"
	// The tests' own list, independent of the filter's: dropping a name
	// from deniedSyscalls must fail here.
	for _, name := range seccomptest.MustDeny {
		nr, ok := info.SyscallNames[name]
		if !ok {
			t.Fatalf("%q has no number on this architecture", name)
		}
		if denied[uint32(nr)] != "EPERM" {
			t.Errorf("%s (%d) is not in the filter's deny set", name, nr)
		}
	}
	for _, must := range []uintptr{unix.SYS_MOUNT, unix.SYS_UMOUNT2, unix.SYS_OPEN_TREE, unix.SYS_OPEN_TREE_ATTR, unix.SYS_MOVE_MOUNT, unix.SYS_MOUNT_SETATTR, unix.SYS_FSMOUNT, unix.SYS_FSOPEN, unix.SYS_FSPICK, unix.SYS_PIVOT_ROOT} {
		if denied[uint32(must)] != "EPERM" {
			t.Errorf("mount call %d is not in the filter's deny set", must)
		}
	}
	for nr := uint32(0); nr <= MaxKnownSyscall+64; nr++ {
		want := "allow"
		if w, ok := denied[nr]; ok {
			want = w
		} else if nr > MaxKnownSyscall {
			want = "ENOSYS"
		}
		if got := actionName(f.eval(t, auditArch, nr)); got != want {
			t.Errorf("system call %d (%s): %s, want %s", nr, info.SyscallNumbers[int(nr)], got, want)
		}
	}
	// The x32 table and a foreign architecture kill.
	if x32Bit != 0 {
		if got := actionName(f.eval(t, auditArch, x32Bit|uint32(unix.SYS_GETPID))); got != "kill" {
			t.Errorf("x32 getpid: %s, want kill", got)
		}
	}
	if got := actionName(f.eval(t, unix.AUDIT_ARCH_I386, uint32(unix.SYS_GETPID))); got != "kill" {
		t.Errorf("i386 getpid: %s, want kill", got)
	}
	if got := actionName(f.eval(t, auditArch, uint32(unix.SYS_TRUNCATE))); got != "allow" {
		t.Errorf("truncate at Landlock ABI 7: %s, want allow (Landlock refuses it by path)", got)
	}
	// Below ABI 3 Landlock cannot refuse truncate(2): the filter does.
	old := newFilterVM(t, 2)
	for nr, want := range map[uintptr]string{unix.SYS_TRUNCATE: "EPERM", unix.SYS_FTRUNCATE: "allow", unix.SYS_GETPID: "allow", unix.SYS_PTRACE: "EPERM"} {
		if got := actionName(old.eval(t, auditArch, uint32(nr))); got != want {
			t.Errorf("ABI 2 filter, system call %d: %s, want %s", nr, got, want)
		}
	}
}

// TestSeccompArguments judges the argument rules: set-id mode bits, nested
// user namespaces, AF_VSOCK and the terminal ioctls.
func TestSeccompArguments(t *testing.T) {
	f := newFilterVM(t, 7)
	type c struct {
		name string
		nr   uintptr
		args []uint32
		want string
	}
	cases := []c{
		{"clone NEWUSER", unix.SYS_CLONE, []uint32{unix.CLONE_NEWUSER | uint32(unix.SIGCHLD)}, "EPERM"},
		{"clone NEWNS", unix.SYS_CLONE, []uint32{unix.CLONE_NEWNS | uint32(unix.SIGCHLD)}, "allow"},
		{"unshare NEWUSER", unix.SYS_UNSHARE, []uint32{unix.CLONE_NEWUSER}, "EPERM"},
		{"socket AF_VSOCK", unix.SYS_SOCKET, []uint32{afVsock, unix.SOCK_STREAM}, "EPERM"},
		{"socket AF_PACKET", unix.SYS_SOCKET, []uint32{unix.AF_PACKET, unix.SOCK_RAW}, "EPERM"},
		{"socket AF_PACKET dgram", unix.SYS_SOCKET, []uint32{unix.AF_PACKET, unix.SOCK_DGRAM}, "EPERM"},
		{"socket AF_INET6", unix.SYS_SOCKET, []uint32{unix.AF_INET6, unix.SOCK_DGRAM}, "allow"},
		{"socket AF_INET", unix.SYS_SOCKET, []uint32{unix.AF_INET, unix.SOCK_STREAM}, "allow"},
		{"ioctl TCGETS", unix.SYS_IOCTL, []uint32{0, unix.TCGETS}, "allow"},
		{"prlimit64 self", unix.SYS_PRLIMIT64, []uint32{0, unix.RLIMIT_NOFILE}, "allow"},
		{"prlimit64 pid 1", unix.SYS_PRLIMIT64, []uint32{1, unix.RLIMIT_NOFILE}, "EPERM"},
		{"ioctl TIOCGWINSZ", unix.SYS_IOCTL, []uint32{0, unix.TIOCGWINSZ}, "allow"},
	}
	for name, io := range seccomptest.MustDenyIoctls {
		cases = append(cases, c{"ioctl " + name, unix.SYS_IOCTL, []uint32{1, io}, "EPERM"})
	}
	for _, m := range modeSyscalls {
		for _, mode := range []uint32{0o755, 0o1777, 0o644} {
			args := make([]uint32, m.Arg+1)
			args[m.Arg] = mode
			cases = append(cases, c{fmt.Sprintf("nr %d mode %o", m.Nr, mode), m.Nr, args, "allow"})
		}
		for _, mode := range []uint32{0o4755, 0o2755, 0o6755, unix.S_ISUID, unix.S_IFREG | 0o4644} {
			args := make([]uint32, m.Arg+1)
			args[m.Arg] = mode
			cases = append(cases, c{fmt.Sprintf("nr %d mode %o", m.Nr, mode), m.Nr, args, "EPERM"})
		}
	}
	for _, nr := range []uintptr{unix.SYS_FCHMODAT, unix.SYS_FCHMODAT2, unix.SYS_OPENAT, unix.SYS_FCHMOD, unix.SYS_MKNODAT} {
		if !slices.ContainsFunc(modeSyscalls, func(m modeArg) bool { return m.Nr == nr }) {
			t.Errorf("system call %d takes a mode but the filter does not check it", nr)
		}
	}
	for _, tc := range cases {
		if got := actionName(f.eval(t, auditArch, uint32(tc.nr), tc.args...)); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

// TestSeccompFilterAssembles checks the program's shape: whole
// instructions, the ABI 2 flavour longer by its truncate denial, and the
// architecture check first.
func TestSeccompFilterAssembles(t *testing.T) {
	testenv.Require(t, archSupported, "a seccomp filter for this architecture")
	with, err := Filter(2)
	if err != nil {
		t.Fatal(err)
	}
	without, err := Filter(7)
	if err != nil {
		t.Fatal(err)
	}
	if len(with)%8 != 0 || len(with) <= len(without) {
		t.Fatalf("filter sizes: ABI 2 %d bytes, ABI 7 %d bytes; the ABI 2 filter must also deny truncate", len(with), len(without))
	}
	// The first instructions: load the architecture, kill on any other.
	first := unix.SockFilter{Code: binary.LittleEndian.Uint16(without), K: binary.LittleEndian.Uint32(without[4:])}
	if first.Code != unix.BPF_LD|unix.BPF_W|unix.BPF_ABS || first.K != 4 {
		t.Fatalf("first instruction %+v, want ld [4] (arch)", first)
	}
	if k := binary.LittleEndian.Uint32(without[16+4:]); k != unix.SECCOMP_RET_KILL_PROCESS {
		t.Fatalf("third instruction returns %#x, want KILL_PROCESS for a foreign architecture", k)
	}
}

// TestRefusedNamed checks that every call the filter refuses with EPERM
// has a name in a denial line (not "syscall N"), and that the argument
// rules name the argument that is their reason.
func TestRefusedNamed(t *testing.T) {
	f := newFilterVM(t, 2)
	for nr := uint32(0); nr <= MaxKnownSyscall; nr++ {
		if actionName(f.eval(t, auditArch, nr)) != "EPERM" {
			continue
		}
		if n := Name(nr); strings.HasPrefix(n, "syscall ") {
			t.Errorf("system call %d is refused but has no name", nr)
		}
	}
	for _, c := range []struct {
		r    Refused
		want string
	}{
		{Refused{Nr: uint32(unix.SYS_UNSHARE), Args: [6]uint64{unix.CLONE_NEWUSER | unix.CLONE_NEWNS}}, "unshare(CLONE_NEWUSER)"},
		{Refused{Nr: uint32(unix.SYS_CLONE), Args: [6]uint64{unix.CLONE_NEWUSER | uint64(unix.SIGCHLD)}}, "clone(CLONE_NEWUSER)"},
		{Refused{Nr: uint32(unix.SYS_SOCKET), Args: [6]uint64{unix.AF_PACKET, unix.SOCK_RAW}}, "socket(AF_PACKET)"},
		{Refused{Nr: uint32(unix.SYS_SOCKET), Args: [6]uint64{afVsock}}, "socket(AF_VSOCK)"},
		{Refused{Nr: uint32(unix.SYS_IOCTL), Args: [6]uint64{0, unix.TIOCSTI}}, "ioctl(TIOCSTI)"},
		{Refused{Nr: uint32(unix.SYS_PRLIMIT64), Args: [6]uint64{1}}, "prlimit64(another process)"},
		{Refused{Nr: uint32(unix.SYS_FCHMODAT), Args: [6]uint64{0, 0, 0o6755}}, "fchmodat(S_ISUID|S_ISGID)"},
		{Refused{Nr: uint32(unix.SYS_MOUNT)}, "mount"},
		{Refused{Nr: uint32(unix.SYS_BPF)}, "bpf"},
		{Refused{Nr: 100000}, "syscall 100000"},
	} {
		if got := c.r.String(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.r, got, c.want)
		}
	}
}
