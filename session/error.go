package session

import (
	"fmt"

	"github.com/b10x/harness/policy"
)

// Error is an error of one setting of a policy (policy.Error): the policy
// cannot be used as given (a value is wrong, or names what this host cannot
// enforce), or a step that the setting asked for failed. Key is the
// setting's name as a policy file spells it ("confine", "allow_program",
// "memory_max"; "" for the policy as a whole); a command line words it as
// its flag (--allow-program), a policy file by its position.
//
// Open and the functions of this package return *Error for everything a
// policy decides; other errors are failures of the host.
type Error = policy.Error

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
func IsUsage(err error) bool { return policy.IsUsage(err) }
