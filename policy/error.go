package policy

import (
	"errors"
	"fmt"

	"github.com/b10x/harness/internal/setting"
)

// Error is an error of one setting of a policy: the policy cannot be used
// as given (a value is wrong, or names what the host cannot enforce), or a
// step that the setting asked for failed. Key is the setting's name as a
// policy file spells it ("confine", "allow_program", "memory_max"; "" for
// the policy as a whole); a command line words it as its flag
// (--allow-program), a policy file by its position. It is the module's one
// setting error (the libraries below policy return the same type); see
// its fields for what each says.
//
// Every error this package returns is an *Error with Usage true.
type Error = setting.Error

// errorf is a usage *Error of key.
func errorf(key, value string, format string, args ...any) *Error {
	return &Error{Key: key, Value: value, Err: fmt.Errorf(format, args...), Usage: true}
}

// at is a usage *Error at a position of a policy file.
func at(pos, key, value string, err error) *Error {
	return &Error{Pos: pos, Key: key, Value: value, Err: err, Usage: true}
}

// IsUsage reports whether err says the policy cannot be used as given
// (nothing was started).
func IsUsage(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Usage
}
