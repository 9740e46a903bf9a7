package testenv

import (
	"golang.org/x/sys/unix"
)

// LandlockABI asks the kernel for its Landlock ABI version with the raw
// system call (landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION)),
// independently of the code under test. It returns 0 when the kernel has
// no Landlock or runs it disabled (ENOSYS, EOPNOTSUPP); any other error is
// returned as is.
func LandlockABI() (int, error) {
	const createRulesetVersion = 1
	v, _, e := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, createRulesetVersion)
	switch e {
	case 0:
		return int(v), nil
	case unix.ENOSYS, unix.EOPNOTSUPP:
		return 0, nil
	}
	return 0, e
}
