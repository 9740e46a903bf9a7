// Package seccomp assembles the run child's seccomp filter: a classic BPF
// program, as raw bytes, that package spawn puts in the helper's plan and
// the helper's program stage loads with no_new_privs set, just before it
// executes the program. Nothing here loads a filter; the package only
// builds one, so it is pure computation and its tests judge every number
// without a kernel (x/net/bpf's interpreter) and with one (a re-run child
// that loads it). It is internal to spawn: no other package runs a child
// under it.
//
// # What the filter refuses
//
// The child's seccomp filter covers what Landlock and the namespaces do not:
// system calls that reach the kernel's attack surface or other processes
// without going through a path. Denied calls fail with EPERM (the program
// sees an ordinary refusal); clone3 and openat2 fail with ENOSYS so that C
// libraries fall back to clone(2) and openat(2), whose arguments the filter
// can read. A call made through another architecture's system call table
// (i386 int 0x80, x32) kills the process: the filter is written for the
// native table only.
//
// The filter fails closed on the future: every number above
// MaxKnownSyscall, the highest one it was written for, fails with ENOSYS,
// so a system call a newer kernel adds (as Linux 6.15 added open_tree_attr,
// which clones mounts) is refused until someone has read what it does and
// raised the bound.
//
// The decisions and their reasons are in
// docs/decisions/0032-spawn-seccomp-and-landlock.md, 0070-start-up-work.md
// (the assembly is ours alone) and 0086-seccomp-package.md (why it is a
// package of its own).
package seccomp

import (
	"encoding/binary"
	"fmt"
	"sync"

	"golang.org/x/sys/unix"
)

// Supported reports whether this architecture has a filter: Filter fails
// on any other.
const Supported = archSupported

// deniedSyscalls fail with EPERM for the child, whatever their arguments.
// Each is named for messages and tests; the numbers are x/sys/unix's for
// this architecture (the tests check each against an independent table).
var deniedSyscalls = []namedSyscall{
	// other processes' memory and tracing
	{"ptrace", unix.SYS_PTRACE}, {"process_vm_readv", unix.SYS_PROCESS_VM_READV}, {"process_vm_writev", unix.SYS_PROCESS_VM_WRITEV},
	// io_uring: a second system call interface seccomp cannot see into
	{"io_uring_setup", unix.SYS_IO_URING_SETUP}, {"io_uring_enter", unix.SYS_IO_URING_ENTER}, {"io_uring_register", unix.SYS_IO_URING_REGISTER},
	// namespaces of other processes
	{"setns", unix.SYS_SETNS},
	// another process's descriptors and memory advice (as ptrace)
	{"pidfd_getfd", unix.SYS_PIDFD_GETFD}, {"process_madvise", unix.SYS_PROCESS_MADVISE},
	// quotas of a filesystem
	{"quotactl", unix.SYS_QUOTACTL}, {"quotactl_fd", unix.SYS_QUOTACTL_FD},
	// kernel attack surface a build or test never needs
	{"bpf", unix.SYS_BPF}, {"keyctl", unix.SYS_KEYCTL}, {"add_key", unix.SYS_ADD_KEY}, {"request_key", unix.SYS_REQUEST_KEY},
	{"perf_event_open", unix.SYS_PERF_EVENT_OPEN}, {"userfaultfd", unix.SYS_USERFAULTFD},
	{"kexec_load", unix.SYS_KEXEC_LOAD}, {"kexec_file_load", unix.SYS_KEXEC_FILE_LOAD},
	{"init_module", unix.SYS_INIT_MODULE}, {"finit_module", unix.SYS_FINIT_MODULE}, {"delete_module", unix.SYS_DELETE_MODULE},
	{"open_by_handle_at", unix.SYS_OPEN_BY_HANDLE_AT}, {"swapon", unix.SYS_SWAPON}, {"swapoff", unix.SYS_SWAPOFF},
	{"reboot", unix.SYS_REBOOT}, {"syslog", unix.SYS_SYSLOG}, {"acct", unix.SYS_ACCT},
}

// truncateSyscall is denied too below Landlock ABI 3, which cannot refuse
// truncating a file by path.
var truncateSyscall = namedSyscall{"truncate", unix.SYS_TRUNCATE}

// namedSyscall is a system call's name and its number here.
type namedSyscall struct {
	name string
	nr   uintptr
}

// MaxKnownSyscall is the highest system call number the filter was
// written for: every number above it fails with ENOSYS.
const MaxKnownSyscall = unix.SYS_FILE_SETATTR

// mountSyscalls change or clone the mount table: denied by number, so a
// name table that does not know one (open_tree_attr is Linux 6.15) cannot
// let it through. Landlock denies most of them too, and the view's mounts
// are locked (made in a more privileged user namespace than the program's):
// three locks on one door.
var mountSyscalls = append(archMountSyscalls[:len(archMountSyscalls):len(archMountSyscalls)],
	unix.SYS_OPEN_TREE, unix.SYS_MOVE_MOUNT, unix.SYS_FSOPEN, unix.SYS_FSCONFIG, unix.SYS_FSMOUNT,
	unix.SYS_FSPICK, unix.SYS_MOUNT_SETATTR, unix.SYS_OPEN_TREE_ATTR)

// modeArg is a system call whose argument Arg is a file mode: the filter
// refuses set-user-ID and set-group-ID bits in it, so nothing the child
// creates or changes can run with another identity on the host (see
// docs/decisions/0037-child-identity.md).
type modeArg struct {
	Nr  uintptr
	Arg int
}

// setIDBits are S_ISUID and S_ISGID.
const setIDBits = unix.S_ISUID | unix.S_ISGID

// modeSyscalls are the calls that set a file's mode, native to every
// architecture (archModeSyscalls adds the legacy ones).
var modeSyscalls = append(archModeSyscalls[:len(archModeSyscalls):len(archModeSyscalls)],
	modeArg{unix.SYS_FCHMOD, 1}, modeArg{unix.SYS_FCHMODAT, 2}, modeArg{unix.SYS_FCHMODAT2, 2},
	modeArg{unix.SYS_OPENAT, 3}, modeArg{unix.SYS_MKNODAT, 2})

// The argument-dependent rules, in the filter's own prelude (see build).
const (
	afVsock  = 40 // AF_VSOCK
	afPacket = 17 // AF_PACKET: raw frames; a call's network is its own loopback and the proxy
)

// deniedIoctls act on a terminal beyond the child's own use of it: typing
// into it (TIOCSTI), the console's special functions (TIOCLINUX), its line
// discipline (TIOCSETD, which outlives the call) and console redirection
// (TIOCCONS).
var deniedIoctls = []uint32{unix.TIOCSTI, unix.TIOCLINUX, unix.TIOCSETD, unix.TIOCCONS}

// errnoRet is the filter's return value for "fail with errno e".
func errnoRet(e unix.Errno) uint32 { return unix.SECCOMP_RET_ERRNO | uint32(e) }

// argLow is the offset of the low 32 bits of argument i in struct
// seccomp_data on a little-endian machine. The rules compare only the low
// half, exactly what the kernel reads for an int argument, so high garbage
// bits cannot slip past them.
func argLow(i int) uint32 { return 16 + 8*uint32(i) }

// filterCache holds the assembled program per "deny truncate" flavour.
var filterCache struct {
	sync.Mutex
	prog map[bool][]byte
}

// Filter returns the raw filter (struct sock_filter instructions, eight
// bytes each, little-endian) for a child whose Landlock ABI is abi:
// truncate(2) is denied too below ABI 3, where Landlock cannot govern it.
// It returns an error when this architecture has no filter (Supported is
// false). The program is assembled once per flavour and kept for the life
// of the process; the slice returned is shared and must not be modified.
// Filter is safe for concurrent use.
func Filter(abi int) ([]byte, error) {
	denyTruncate := abi < 3
	filterCache.Lock()
	defer filterCache.Unlock()
	if p, ok := filterCache.prog[denyTruncate]; ok {
		return p, nil
	}
	p, err := buildFilter(denyTruncate)
	if err != nil {
		return nil, err
	}
	if filterCache.prog == nil {
		filterCache.prog = map[bool][]byte{}
	}
	filterCache.prog[denyTruncate] = p
	return p, nil
}

// buildFilter assembles the program: the architecture and x32 checks,
// the bound on unknown numbers, clone3 and openat2, the argument rules,
// then the unconditional denials, one comparison each, and allow.
func buildFilter(denyTruncate bool) ([]byte, error) {
	if !archSupported {
		return nil, fmt.Errorf("spawn: no seccomp filter for this architecture")
	}
	type ins = unix.SockFilter
	stmt := func(code uint16, k uint32) ins { return ins{Code: code, K: k} }
	jump := func(code uint16, k uint32, jt, jf uint8) ins { return ins{Code: code, Jt: jt, Jf: jf, K: k} }
	const (
		ldAbs = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		jeq   = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
		jge   = unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K
		jgt   = unix.BPF_JMP | unix.BPF_JGT | unix.BPF_K
		jset  = unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K
		ret   = unix.BPF_RET | unix.BPF_K
	)
	kill := uint32(unix.SECCOMP_RET_KILL_PROCESS)
	eperm := errnoRet(unix.EPERM)

	var pre []ins
	pre = append(pre,
		stmt(ldAbs, 4), // arch
		jump(jeq, auditArch, 1, 0),
		stmt(ret, kill),
		stmt(ldAbs, 0), // nr
	)
	if x32Bit != 0 {
		pre = append(pre, jump(jge, x32Bit, 0, 1), stmt(ret, kill))
	}
	enosys := errnoRet(unix.ENOSYS)
	pre = append(pre,
		jump(jgt, MaxKnownSyscall, 0, 1),
		stmt(ret, enosys),
		jump(jeq, uint32(unix.SYS_CLONE3), 0, 1),
		stmt(ret, enosys),
		jump(jeq, uint32(unix.SYS_OPENAT2), 0, 1),
		stmt(ret, enosys),
	)
	for _, nr := range mountSyscalls {
		pre = append(pre, jump(jeq, uint32(nr), 0, 1), stmt(ret, eperm))
	}
	// flagRule: nr with (low half of argument arg) & bits != 0 → EPERM.
	flagRule := func(nr uintptr, arg int, bits uint32) {
		pre = append(pre,
			jump(jeq, uint32(nr), 0, 4),
			stmt(ldAbs, argLow(arg)),
			jump(jset, bits, 0, 1),
			stmt(ret, eperm),
			stmt(ldAbs, 0),
		)
	}
	// equalRule: nr with (low half of argument arg) == one of vals → EPERM.
	equalRule := func(nr uintptr, arg int, vals ...uint32) {
		n := len(vals)
		// jeq nr; ld arg; n × jeq v → ret; ja over ret; ret EPERM; ld nr
		pre = append(pre, jump(jeq, uint32(nr), 0, uint8(n+3)), stmt(ldAbs, argLow(arg)))
		for i, v := range vals {
			pre = append(pre, jump(jeq, v, uint8(n-i), 0))
		}
		pre = append(pre, stmt(unix.BPF_JMP|unix.BPF_JA, 1), stmt(ret, eperm), stmt(ldAbs, 0))
	}
	flagRule(unix.SYS_CLONE, 0, unix.CLONE_NEWUSER)
	flagRule(unix.SYS_UNSHARE, 0, unix.CLONE_NEWUSER)
	// zeroRule: nr with (low half of argument arg) != 0 → EPERM.
	zeroRule := func(nr uintptr, arg int) {
		pre = append(pre,
			jump(jeq, uint32(nr), 0, 4),
			stmt(ldAbs, argLow(arg)),
			jump(jeq, 0, 1, 0),
			stmt(ret, eperm),
			stmt(ldAbs, 0),
		)
	}
	for _, m := range modeSyscalls {
		flagRule(m.Nr, m.Arg, setIDBits)
	}
	// prlimit64 on another process (the init, which runs as the same host
	// id when the harness is not root) is refused; on itself it is not.
	zeroRule(unix.SYS_PRLIMIT64, 0)
	equalRule(unix.SYS_SOCKET, 0, afVsock, afPacket)
	equalRule(unix.SYS_IOCTL, 1, deniedIoctls...)

	denied := deniedSyscalls
	if denyTruncate {
		denied = append(denied[:len(denied):len(denied)], truncateSyscall)
	}
	for _, c := range denied {
		pre = append(pre, jump(jeq, uint32(c.nr), 0, 1), stmt(ret, eperm))
	}
	all := append(pre, stmt(ret, unix.SECCOMP_RET_ALLOW))
	if len(all) > 4096 {
		return nil, fmt.Errorf("spawn: seccomp program has %d instructions, the kernel takes 4096", len(all))
	}
	out := make([]byte, 0, 8*len(all))
	for _, f := range all {
		out = binary.LittleEndian.AppendUint16(out, f.Code)
		out = append(out, f.Jt, f.Jf)
		out = binary.LittleEndian.AppendUint32(out, f.K)
	}
	return out, nil
}
