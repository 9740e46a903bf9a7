package confine

import (
	"errors"
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// LandlockInfo is what the kernel reports about Landlock.
// The zero value means Landlock is not available (ABI 0).
type LandlockInfo struct {
	ABI    int // 0 when Landlock is absent or disabled
	Errata int // errata bitmask (ABI 7+); 0 when not reported
}

const (
	landlockCreateRulesetVersion = 1 << 0
	landlockCreateRulesetErrata  = 1 << 1
)

// ProbeLandlock asks the kernel, with a raw landlock_create_ruleset(NULL, 0,
// LANDLOCK_CREATE_RULESET_VERSION), which Landlock ABI it offers. It never
// relies on a library's best-effort mode, which reports success even where
// nothing is enforced.
//
// ENOSYS (not built) and EOPNOTSUPP (built but disabled at boot) give ABI 0
// and a nil error: a conclusive "not supported". Any other error is returned:
// the probe was inconclusive.
func ProbeLandlock() (LandlockInfo, error) {
	v, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(nil)), 0, landlockCreateRulesetVersion)
	if errno != 0 {
		if errors.Is(errno, unix.ENOSYS) || errors.Is(errno, unix.EOPNOTSUPP) {
			return LandlockInfo{}, nil
		}
		return LandlockInfo{}, fmt.Errorf("landlock_create_ruleset(VERSION): %w", errno)
	}
	info := LandlockInfo{ABI: int(v)}
	if e, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, landlockCreateRulesetErrata); errno == 0 {
		info.Errata = int(e)
	}
	return info, nil
}
