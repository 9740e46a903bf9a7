package ia32

const supported = true

// Syscall makes system call nr of the i386 table with up to five 32-bit
// arguments (pointers must be 0 or below 4 GiB) and returns the kernel's
// raw result: a negative errno on failure.
func Syscall(nr, a1, a2, a3, a4, a5 uint32) int32
