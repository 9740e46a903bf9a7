package seccomp

import (
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Refused is one system call the filter refused a child, as its seccomp
// user notification carries it: the number and the arguments (struct
// seccomp_data, native architecture only: the filter kills any other).
type Refused struct {
	Nr   uint32
	Args [6]uint64
}

// commonNames names the calls the filter refuses on every architecture
// beside deniedSyscalls: the mount family, the argument rules and
// truncate.
var commonNames = map[uintptr]string{
	unix.SYS_MOUNT: "mount", unix.SYS_UMOUNT2: "umount2", unix.SYS_PIVOT_ROOT: "pivot_root",
	unix.SYS_OPEN_TREE: "open_tree", unix.SYS_MOVE_MOUNT: "move_mount", unix.SYS_FSOPEN: "fsopen",
	unix.SYS_FSCONFIG: "fsconfig", unix.SYS_FSMOUNT: "fsmount", unix.SYS_FSPICK: "fspick",
	unix.SYS_MOUNT_SETATTR: "mount_setattr", unix.SYS_OPEN_TREE_ATTR: "open_tree_attr",
	unix.SYS_CLONE: "clone", unix.SYS_UNSHARE: "unshare", unix.SYS_SOCKET: "socket",
	unix.SYS_IOCTL: "ioctl", unix.SYS_PRLIMIT64: "prlimit64", unix.SYS_TRUNCATE: "truncate",
	unix.SYS_FCHMOD: "fchmod", unix.SYS_FCHMODAT: "fchmodat", unix.SYS_FCHMODAT2: "fchmodat2",
	unix.SYS_OPENAT: "openat", unix.SYS_MKNODAT: "mknodat",
}

// Name is the name of system call nr of this architecture, as the filter
// knows it, or "syscall N".
func Name(nr uint32) string {
	for _, c := range deniedSyscalls {
		if c.nr == uintptr(nr) {
			return c.name
		}
	}
	if n, ok := commonNames[uintptr(nr)]; ok {
		return n
	}
	if n, ok := archNames[uintptr(nr)]; ok {
		return n
	}
	return "syscall " + strconv.FormatUint(uint64(nr), 10)
}

// ioctlNames names deniedIoctls.
var ioctlNames = map[uint32]string{unix.TIOCSTI: "TIOCSTI", unix.TIOCLINUX: "TIOCLINUX", unix.TIOCSETD: "TIOCSETD", unix.TIOCCONS: "TIOCCONS"}

// String says what was refused as a denial line's operation: the call's
// name, and in parentheses the argument that is the reason where a rule
// refuses the call for an argument ("socket(AF_PACKET)",
// "unshare(CLONE_NEWUSER)", "fchmodat(S_ISUID)", "ioctl(TIOCSTI)",
// "prlimit64(another process)"); the bare name where the call is refused
// whatever its arguments ("mount", "bpf").
func (r Refused) String() string {
	name := Name(r.Nr)
	low := func(i int) uint32 { return uint32(r.Args[i]) }
	switch uintptr(r.Nr) {
	case unix.SYS_CLONE, unix.SYS_UNSHARE:
		if low(0)&unix.CLONE_NEWUSER != 0 {
			return name + "(CLONE_NEWUSER)"
		}
	case unix.SYS_SOCKET:
		switch low(0) {
		case afPacket:
			return name + "(AF_PACKET)"
		case afVsock:
			return name + "(AF_VSOCK)"
		}
	case unix.SYS_IOCTL:
		if n, ok := ioctlNames[low(1)]; ok {
			return name + "(" + n + ")"
		}
	case unix.SYS_PRLIMIT64:
		if low(0) != 0 {
			return name + "(another process)"
		}
	}
	for _, m := range modeSyscalls {
		if m.Nr == uintptr(r.Nr) {
			var bits []string
			if low(m.Arg)&unix.S_ISUID != 0 {
				bits = append(bits, "S_ISUID")
			}
			if low(m.Arg)&unix.S_ISGID != 0 {
				bits = append(bits, "S_ISGID")
			}
			if len(bits) > 0 {
				return name + "(" + strings.Join(bits, "|") + ")"
			}
		}
	}
	return name
}
