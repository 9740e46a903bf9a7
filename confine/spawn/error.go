package spawn

import "fmt"

// Error is this package's refusal of a path or program it was given
// (Pin, PinProgram): Err says what, and Error adds that spawn refused it.
// A caller that says the refusal in its own words (a setting's error)
// words Err alone.
type Error struct{ Err error }

// Error returns "spawn: " followed by Err's text.
func (e *Error) Error() string { return "spawn: " + e.Err.Error() }

// Unwrap returns Err.
func (e *Error) Unwrap() error { return e.Err }

// errorf is an *Error whose Err is fmt.Errorf(format, args...).
func errorf(format string, args ...any) error {
	return &Error{Err: fmt.Errorf(format, args...)}
}
