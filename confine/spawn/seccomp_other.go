//go:build !amd64 && !arm64

package spawn

const (
	seccompArchSupported = false
	seccompAuditArch     = 0
	seccompX32Bit        = 0
)

var (
	archMountSyscalls []uintptr
	archModeSyscalls  []modeArg
)
