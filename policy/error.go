package policy

import (
	"errors"
	"fmt"
)

// Error is an error of one setting of a policy: the policy cannot be used
// as given (a value is wrong, or names what the host cannot enforce), or a
// step that the setting asked for failed. Key is the setting's name as a
// policy file spells it ("confine", "allow_program", "memory_max"; "" for
// the policy as a whole); a command line words it as its flag
// (--allow-program), a policy file by its position.
//
// Every error this package returns is an *Error with Usage true.
type Error struct {
	Key   string
	Value string // the value as given, "" when the message needs none
	Err   error
	// Pos is the value's position in a policy file ("ci.toml:3:1"), ""
	// when the value did not come from a file read by this package.
	Pos string
	// Usage is true when nothing was started: the policy is wrong or
	// cannot be enforced here (a command exits 2). False: a step the
	// policy asked for failed (exit 1).
	Usage bool
	// Phrase: the message continues the name as a sentence ("--pids-max
	// was given but ..."), with no colon between them.
	Phrase bool
}

// Error words e by its key, or, with a position, as a policy file's error:
// "ci.toml:4:1: max_calls: must not be negative", `ci.toml:2:1:
// tmp_size: "0": must be a positive size`.
func (e *Error) Error() string {
	if e.Pos == "" {
		return e.Render(e.Key)
	}
	switch {
	case e.Key == "":
		return e.Pos + ": " + e.Err.Error()
	case e.Phrase:
		return e.Pos + ": " + e.Key + " " + e.Err.Error()
	case e.Value == "":
		return e.Pos + ": " + e.Key + ": " + e.Err.Error()
	}
	return e.Pos + ": " + e.Key + ": " + e.Value + ": " + e.Err.Error()
}

// Render words the error with name standing for its key (a flag, a file
// position and key): "name value: err", "name: err" without a value.
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

// Unwrap returns Err.
func (e *Error) Unwrap() error { return e.Err }

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
