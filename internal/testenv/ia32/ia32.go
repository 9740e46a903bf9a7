// Package ia32 makes a system call through the i386 entry point (int
// 0x80) from a 64-bit process, for tests that check what a seccomp filter
// does with a foreign architecture's system call table. It is for tests
// only: nothing of the harness imports it.
package ia32

// Supported reports whether this build can make an i386 system call (only
// amd64 builds can). Whether the kernel runs it is another matter: a
// kernel without IA32 emulation answers int 0x80 with SIGSEGV, or ENOSYS
// when it is built in but disabled at boot.
const Supported = supported
