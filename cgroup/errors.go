package cgroup

import (
	"errors"
	"fmt"
)

// ErrNotSupported is matched (with errors.Is) by every error that says the
// host lacks something this package needs: no cgroup2 mount, a controller
// that is not available to the harness's leaves. Other errors (permission,
// I/O, bad input) do not match it.
var ErrNotSupported = errors.New("not supported on this host")

// UnavailableError is returned by NewLeaf when a limit was requested whose
// controller the Manager could not give its leaves. It matches
// ErrNotSupported. Reason is the same line Manager.Missing reports for the
// controller.
type UnavailableError struct {
	Controller string // "pids", "memory" or "cpu"
	Limit      string // the Limits field that needs it, e.g. "PidsMax"
	Reason     string // why, and how to get it
}

// Error names the limit, the controller and why it is missing.
func (e *UnavailableError) Error() string {
	return fmt.Sprintf("cgroup: %s needs the %s controller, which leaves cannot use here: %s", e.Limit, e.Controller, e.Reason)
}

// Is makes errors.Is(err, ErrNotSupported) true.
func (e *UnavailableError) Is(target error) bool { return target == ErrNotSupported }
