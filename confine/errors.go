package confine

import (
	"fmt"

	"github.com/b10x/harness/cgroup"
)

// ErrNotSupported is matched, with errors.Is, by every error this package
// returns because the running kernel (or its configuration) lacks a feature:
// *UnsupportedFeatureError and *StrictError both match it. It never means
// "probe failed"; an inconclusive probe returns its own cause. It is the
// harness's one not-supported sentinel: the same value as
// cgroup.ErrNotSupported, so one errors.Is answers for either layer.
var ErrNotSupported = cgroup.ErrNotSupported

// UnsupportedFeatureError says which feature is missing and what would
// provide it. It matches ErrNotSupported with errors.Is.
//
// The zero value reports an unnamed feature; construct it with both fields.
// It is a plain value, safe to copy and to share between goroutines.
type UnsupportedFeatureError struct {
	// Name names the feature, e.g. "Landlock" or "Landlock truncate right".
	Name string
	// MinimumVersion is the first version that has the feature, e.g.
	// "Linux 5.13 (Landlock ABI 1)". Empty when no kernel version alone
	// provides it (a boot parameter or sysctl is needed instead).
	MinimumVersion string
}

// Error names the feature and, when known, the version that provides it.
func (e *UnsupportedFeatureError) Error() string {
	if e.MinimumVersion == "" {
		return fmt.Sprintf("%s not supported", e.Name)
	}
	return fmt.Sprintf("%s not supported (requires %s)", e.Name, e.MinimumVersion)
}

// Is reports whether target is ErrNotSupported.
func (e *UnsupportedFeatureError) Is(target error) bool {
	return target == ErrNotSupported
}
