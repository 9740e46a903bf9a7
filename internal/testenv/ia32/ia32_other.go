//go:build !amd64

package ia32

const supported = false

// Syscall returns -ENOSYS: only amd64 builds have the i386 entry point.
func Syscall(nr, a1, a2, a3, a4, a5 uint32) int32 { return -38 }
