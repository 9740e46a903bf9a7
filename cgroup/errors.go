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

// Error is this package's error: what failed (Err) said as the cgroup
// layer's ("cgroup: " and Err). A caller that already says it is the
// cgroup layer's (doctor, ProbeHost's Problem) words Err alone.
type Error struct{ Err error }

// Error returns "cgroup: " followed by Err's text.
func (e *Error) Error() string { return "cgroup: " + e.Err.Error() }

// Unwrap returns Err.
func (e *Error) Unwrap() error { return e.Err }

// errorf is an *Error whose Err is fmt.Errorf(format, args...).
func errorf(format string, args ...any) error {
	return &Error{Err: fmt.Errorf(format, args...)}
}

// problem words err for a line already said to be the cgroup layer's:
// an *Error's Err, or err itself.
func problem(err error) string {
	if e, ok := err.(*Error); ok {
		return e.Err.Error()
	}
	return err.Error()
}
