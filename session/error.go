package session

import (
	"errors"
	"fmt"
)

// Error is an error of one setting of a policy: the policy cannot be used
// as given (a value is wrong, or names what this host cannot enforce), or a
// step that the setting asked for failed. Key is the setting's name as a
// policy file spells it ("confine", "allow_program", "memory_max"; "" for
// the policy as a whole); a command line words it as its flag
// (--allow-program), a policy file by its position.
//
// Open and the functions of this package return *Error for everything a
// policy decides; other errors are failures of the host.
type Error struct {
	Key   string
	Value string // the value as given, "" when the message needs none
	Err   error
	// Usage is true when nothing was started: the policy is wrong or
	// cannot be enforced here (a command exits 2). False: a step the
	// policy asked for failed (exit 1).
	Usage bool
	// Phrase: the message continues the name as a sentence ("--pids-max
	// was given but ..."), with no colon between them.
	Phrase bool
}

func (e *Error) Error() string { return e.Render(e.Key) }

// Render words the error with name standing for its key (a flag, a file
// position).
func (e *Error) Render(name string) string {
	switch {
	case name == "":
		return e.Err.Error()
	case e.Value == "" && e.Phrase:
		return name + " " + e.Err.Error()
	case e.Value == "":
		return name + ": " + e.Err.Error()
	}
	return name + " " + e.Value + ": " + e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// policyErr is a usage *Error of key.
func policyErr(key, value string, format string, args ...any) *Error {
	return &Error{Key: key, Value: value, Err: fmt.Errorf(format, args...), Usage: true}
}

// stepErr is a failure of a step key asked for.
func stepErr(key, value string, err error) *Error {
	return &Error{Key: key, Value: value, Err: err}
}

// IsUsage reports whether err says the policy cannot be used as given
// (nothing was started).
func IsUsage(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Usage
}
