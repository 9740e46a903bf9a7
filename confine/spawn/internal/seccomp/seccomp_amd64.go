package seccomp

import "golang.org/x/sys/unix"

const (
	archSupported = true
	auditArch     = unix.AUDIT_ARCH_X86_64
	// x32Bit marks the x32 system call table; any number at or above
	// it is killed.
	x32Bit = 0x40000000
)

// archMountSyscalls are amd64's numbers of the mount calls older than the
// tables' unification at 424.
var archMountSyscalls = []uintptr{unix.SYS_MOUNT, unix.SYS_UMOUNT2, unix.SYS_PIVOT_ROOT}

// archNames names amd64's legacy calls the filter refuses, for Describe.
var archNames = map[uintptr]string{unix.SYS_CHMOD: "chmod", unix.SYS_OPEN: "open", unix.SYS_CREAT: "creat", unix.SYS_MKNOD: "mknod"}

// archModeSyscalls are amd64's legacy calls that take a file mode.
var archModeSyscalls = []modeArg{{unix.SYS_CHMOD, 1}, {unix.SYS_OPEN, 2}, {unix.SYS_CREAT, 1}, {unix.SYS_MKNOD, 1}}
