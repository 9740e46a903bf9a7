package helper

import (
	"syscall"
)

// Raw system calls for the helper. They bypass the Go scheduler's syscall
// hooks (RawSyscall): the helper is one goroutine on one locked thread, and
// with the hooks a slow mount hands the processor to another thread and
// wakes this one up again afterwards, a pair of context switches per call
// for nothing. Errors are the bare errno; callers name the operation.
//
// The calls that pass the kernel a pointer (a path, a buffer, a structure)
// are in sys_unsafe.go, the one file of the package that imports unsafe;
// these pass integers only.

func errnoErr(e syscall.Errno) error {
	if e == 0 {
		return nil
	}
	return e
}

func ptr(s string) (*byte, error) { return syscall.BytePtrFromString(s) }

func sysClose(fd int) { syscall.RawSyscall(syscall.SYS_CLOSE, uintptr(fd), 0, 0) }

func sysChdir(path string) error {
	_, err := sysPath1(syscall.SYS_CHDIR, path, 0, 0)
	return err
}

func sysUmount(path string, flags uintptr) error {
	_, err := sysPath1(syscall.SYS_UMOUNT2, path, flags, 0)
	return err
}

func sysPrctl(option, a2, a3, a4, a5 uintptr) error {
	_, _, e := syscall.RawSyscall6(syscall.SYS_PRCTL, option, a2, a3, a4, a5, 0)
	return errnoErr(e)
}

// Landlock (struct landlock_ruleset_attr and landlock_path_beneath_attr).
const landlockRulePathBeneath = 1

// atFDCWD is AT_FDCWD (-100) as a system call argument.
var atFDCWD = func() uintptr { fd := atFDCWDInt; return uintptr(fd) }()

// maxDomainName is the longest name a thread keeps (TASK_COMM_LEN less
// its NUL).
const maxDomainName = 15
