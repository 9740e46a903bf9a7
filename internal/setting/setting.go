// Package setting names the policy settings in errors, without a user
// interface's vocabulary.
//
// Library code that refuses a setting's value returns an *Error whose Key is
// the setting's policy-file name (snake_case: "allow_program",
// "max_calls"). A command line words the same error with its flag instead
// (Flag, Flagged); a policy file or an API caller keeps the key.
package setting

import (
	"errors"
	"fmt"
	"strings"
)

// The keys of the settings library errors name.
const (
	AllowProgram = "allow_program"
	Workspace    = "workspace"
	AllowRead    = "allow_read"
	AllowWrite   = "allow_write"
	MaxCalls     = "max_calls"
	WriteScope   = "write_scope"
	Approve      = "approve"
	Provider     = "provider"
	BaseURL      = "base_url"
	Model        = "model"
)

// Error is a refused value of one policy setting. Key is the setting's
// policy-file name, Value the value as given ("" when none was), Err why
// it was refused. Err must not name the setting again.
type Error struct {
	Key   string
	Value string
	Err   error
}

// Error renders `KEY "VALUE": ERR`, or `KEY: ERR` when Value is empty:
// for example `allow_program "x": not found in PATH`.
func (e *Error) Error() string { return e.render(e.Key) }

// Unwrap returns Err.
func (e *Error) Unwrap() error { return e.Err }

func (e *Error) render(name string) string {
	var b strings.Builder
	b.WriteString(name)
	if e.Value != "" {
		fmt.Fprintf(&b, " %q", e.Value)
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Errorf returns an *Error for key and value whose Err is
// fmt.Errorf(format, args...).
func Errorf(key, value, format string, args ...any) *Error {
	return &Error{Key: key, Value: value, Err: fmt.Errorf(format, args...)}
}

// Flag returns the command-line flag of a setting key: "allow_program"
// gives "--allow-program".
func Flag(key string) string { return "--" + strings.ReplaceAll(key, "_", "-") }

// Flagged returns err worded for a command line: when err is, or ends
// with, an *Error's message (the *Error itself or a wrapping of it whose
// text ends with it), the returned error's message names the setting by
// Flag(Key) instead of Key. Otherwise err is returned unchanged. The
// result unwraps to err, so errors.As and errors.Is see what they saw.
func Flagged(err error) error {
	var e *Error
	if !errors.As(err, &e) {
		return err
	}
	msg, own := err.Error(), e.Error()
	if !strings.HasSuffix(msg, own) {
		return err
	}
	return &flagged{msg: strings.TrimSuffix(msg, own) + e.render(Flag(e.Key)), err: err}
}

type flagged struct {
	msg string
	err error
}

func (f *flagged) Error() string { return f.msg }
func (f *flagged) Unwrap() error { return f.err }
