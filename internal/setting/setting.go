// Package setting names the policy settings in errors, without a user
// interface's vocabulary.
//
// Library code that refuses a setting's value returns an *Error whose Key is
// the setting's policy-file name (snake_case: "allow_program",
// "max_calls"). A command line words the same error with its flag instead
// (Flag, Flagged); a policy file or an API caller keeps the key.
package setting

import (
	"fmt"
	"strconv"
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
	ApproveUpTo  = "approve_up_to"
	Provider     = "provider"
	BaseURL      = "base_url"
	Model        = "model"
	// Of the run command's provider only.
	MaxTokens      = "max_tokens"
	RequestTimeout = "request_timeout"
)

// Error is an error of one setting: a value refused (it is wrong, or
// names what the host cannot enforce), or a step the setting asked for
// that failed. It is the one setting error of the module: package policy
// names it policy.Error, and the session's errors are the same type.
//
// Key is the setting's policy-file name ("allow_program"; "" for the
// policy as a whole). Value is the value as the message shows it, quoted
// by Errorf (`"x"`), "" when the message needs none. Err says why, without
// naming the setting again. Usage is true when nothing was started: the
// policy is wrong or cannot be enforced here (a command exits 2); false
// when a step the policy asked for failed (exit 1). Pos is the value's
// position in a policy file ("ci.toml:3:1"), "" when it came from
// elsewhere. Phrase: the message continues the name as a sentence
// ("pids_max was given but ..."), with no colon between them. In names
// the component that refused the value ("anthropic"), said before the
// setting, "" for none.
type Error struct {
	Key    string
	Value  string
	Err    error
	Usage  bool
	Pos    string
	Phrase bool
	In     string
}

// Error words e by its key, or, with a position, as a policy file's
// error: `allow_program "x": not found in PATH`, "ci.toml:4:1:
// max_calls: must not be negative", `ci.toml:2:1: tmp_size: "0": must be
// a positive size`.
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
// position and key): "name value: err", "name: err" without a value,
// after In when e has one.
func (e *Error) Render(name string) string {
	var b strings.Builder
	if e.In != "" {
		b.WriteString(e.In + ": ")
	}
	switch {
	case name == "":
	case e.Value == "" && e.Phrase:
		b.WriteString(name + " ")
	case e.Value == "":
		b.WriteString(name + ": ")
	default:
		b.WriteString(name + " " + e.Value + ": ")
	}
	if e.Err != nil {
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Unwrap returns Err.
func (e *Error) Unwrap() error { return e.Err }

// Errorf returns an *Error for key and value (quoted in the message when
// not empty) whose Err is fmt.Errorf(format, args...).
func Errorf(key, value, format string, args ...any) *Error {
	return &Error{Key: key, Value: Quote(value), Err: fmt.Errorf(format, args...)}
}

// Quote is value as an Error's Value shows it: quoted, "" for none.
func Quote(value string) string {
	if value == "" {
		return ""
	}
	return strconv.Quote(value)
}

// Flag returns the command-line flag of a setting key: "allow_program"
// gives "--allow-program".
func Flag(key string) string { return "--" + strings.ReplaceAll(key, "_", "-") }

// Flagged returns err worded for a command line: when err is an *Error,
// the returned error's message names the setting by Flag(Key) instead of
// Key (a policy file's error, with a position, keeps its position and
// key). Any other error is returned unchanged: an *Error wrapped by
// fmt.Errorf is said with its key, since its wrapper's words are not the
// harness's to rewrite. The result unwraps to err, so errors.As and
// errors.Is see what they saw.
func Flagged(err error) error {
	e, ok := err.(*Error)
	if !ok || e.Key == "" || e.Pos != "" {
		return err
	}
	return &flagged{msg: e.Render(Flag(e.Key)), err: err}
}

type flagged struct {
	msg string
	err error
}

func (f *flagged) Error() string { return f.msg }
func (f *flagged) Unwrap() error { return f.err }

// BoolWord reads a boolean as a command line's flag or the environment
// gives it: true, 1, yes; false, 0, no; in any case. ok is false for any
// other word.
func BoolWord(v string) (b, ok bool) {
	switch strings.ToLower(v) {
	case "true", "1", "yes":
		return true, true
	case "false", "0", "no":
		return false, true
	}
	return false, false
}
