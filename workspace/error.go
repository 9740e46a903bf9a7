package workspace

import (
	"fmt"
	"strconv"
	"unicode/utf8"
)

// Kind says what kind of refusal or failure an *Error is. Its values are
// spelled as the reason codes the tools report them with (tools.Reason:
// invalid_argument, denied_path, tool_error, conflict, timeout, cancelled),
// so a caller maps a Kind to its reason by conversion, and the text of an
// *Error is the text the tools' error of the same reason has.
type Kind string

// The kinds.
const (
	// Invalid: the path argument itself is malformed (empty, a NUL byte,
	// invalid UTF-8, over MaxPathBytes or MaxNameBytes, a quoted spelling
	// that does not unquote), or names nothing a write can make (a
	// trailing '/', '..' after a component that does not exist). Nothing
	// was opened.
	Invalid Kind = "invalid_argument"
	// Denied: the path leads outside the root ('..' above it, an absolute
	// path elsewhere, a symbolic link out of it), or was found changed
	// into a link or an escape after it was resolved.
	Denied Kind = "denied_path"
	// Failed: anything else: a missing file, a non-directory used as a
	// directory, a loop of links, a refused write (hard links, read-only,
	// an owner the harness cannot give), a system call that failed, a
	// closed Workspace.
	Failed Kind = "tool_error"
	// Conflict: a write's target kept changing under it, more often than
	// Commit starts over, or its directory stayed locked by another
	// process past the wait; nothing was written.
	Conflict Kind = "conflict"
	// Timeout: the context's deadline passed while a write waited for its
	// directory's lock; Cause wraps context.DeadlineExceeded.
	Timeout Kind = "timeout"
	// Cancelled: the context was cancelled while a write waited for its
	// directory's lock; Cause wraps context.Canceled.
	Cancelled Kind = "cancelled"
)

// Error is a refusal or failure of a workspace operation, meant for a
// model and a record at once. Public is the message a model may see: it
// names paths as they were given or as canonical workspace-relative paths,
// never a host path a symbolic link points to, and repeats at most
// maxEchoBytes of any argument. Cause is the internal error (an errno, a
// link's target), for the record only; it may be nil.
//
// Every error the resolving and writing methods of Workspace return is an
// *Error, unwrapped (err.(*Error) finds it). Errors of a Change's Read and
// Build callbacks are returned as they are.
type Error struct {
	Kind   Kind   // what kind of refusal or failure
	Public string // the message for a model
	Cause  error  // the internal error, for the record; may be nil
}

// Error returns "kind: public: cause", or "kind: public" without a cause.
func (e *Error) Error() string {
	if e.Cause != nil {
		return fmt.Sprintf("%s: %s: %v", e.Kind, e.Public, e.Cause)
	}
	return fmt.Sprintf("%s: %s", e.Kind, e.Public)
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Cause }

// errorf returns an *Error with a public message built from format and
// args. Internal details go in cause, never into the message.
func errorf(kind Kind, cause error, format string, args ...any) *Error {
	return &Error{Kind: kind, Public: fmt.Sprintf(format, args...), Cause: cause}
}

// maxEchoBytes bounds any piece of a path argument a message repeats, as
// the tools bound the arguments theirs repeat.
const maxEchoBytes = 256

// capText returns s, or its first n bytes (cut at a rune boundary) and a
// note of how many more there were.
func capText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	end := n
	for end > 0 && !utf8.RuneStart(s[end]) {
		end--
	}
	return fmt.Sprintf("%s[... %d more bytes]", s[:end], len(s)-end)
}

func quote(s string) string { return strconv.Quote(s) }
