package seccomp

import "golang.org/x/sys/unix"

const (
	archSupported = true
	auditArch     = unix.AUDIT_ARCH_AARCH64
	x32Bit        = 0 // no second table on arm64 (compat is caught by the arch check)
)

// archMountSyscalls are arm64's numbers of the mount calls older than the
// tables' unification at 424.
var archMountSyscalls = []uintptr{unix.SYS_MOUNT, unix.SYS_UMOUNT2, unix.SYS_PIVOT_ROOT}

// archModeSyscalls: arm64 has only the *at forms.
var archModeSyscalls = []modeArg{}

// archNames: arm64 has no legacy calls to name.
var archNames = map[uintptr]string{}
