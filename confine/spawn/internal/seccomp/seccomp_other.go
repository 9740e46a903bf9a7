//go:build !amd64 && !arm64

package seccomp

const (
	archSupported = false
	auditArch     = 0
	x32Bit        = 0
)

var (
	archMountSyscalls []uintptr
	archModeSyscalls  []modeArg
	archNames         map[uintptr]string
)
