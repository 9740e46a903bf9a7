package spawn

import "golang.org/x/sys/unix"

const (
	seccompArchSupported = true
	seccompAuditArch     = unix.AUDIT_ARCH_X86_64
	// seccompX32Bit marks the x32 system call table; any number at or above
	// it is killed.
	seccompX32Bit = 0x40000000
)
