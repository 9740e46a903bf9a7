package spawn

import "golang.org/x/sys/unix"

const (
	seccompArchSupported = true
	seccompAuditArch     = unix.AUDIT_ARCH_AARCH64
	seccompX32Bit        = 0 // no second table on arm64 (compat is caught by the arch check)
)
