package tools

import (
	"fmt"

	"github.com/b10x/harness/workspace"
)

// Reason is the closed set of reason codes for an outcome that is not a
// plain success. Every layer uses these and no others.
type Reason string

// The reason codes.
const (
	ReasonUnpublished     Reason = "unpublished"
	ReasonInvalidArgument Reason = "invalid_argument"
	ReasonDeniedPath      Reason = "denied_path"
	// ReasonProtectedPath: a run call's program created or changed a
	// protected workspace path (.git, the harness's own files) that the
	// kernel could not hold read-only because it did not exist yet; what
	// it created was removed again. A write-scope path a run call created
	// or changed is ReasonDeniedPath.
	ReasonProtectedPath     Reason = "protected_path"
	ReasonProgramNotAllowed Reason = "program_not_allowed"
	ReasonHookBlocked       Reason = "hook_blocked"
	ReasonApprovalRejected  Reason = "approval_rejected"
	ReasonBudgetExhausted   Reason = "budget_exhausted"
	ReasonOversizedResult   Reason = "oversized_result"
	ReasonTimeout           Reason = "timeout"
	// ReasonCancelled: the call's context was cancelled (the caller, a
	// signal to the harness), not its deadline (that is ReasonTimeout);
	// what it did until then stands. The error's Cause wraps
	// context.Canceled.
	ReasonCancelled Reason = "cancelled"
	// ReasonTooLarge: what the call would build or write is larger than a
	// limit (file_edit's new content, a file_write past MaxWriteBytes).
	// The message names the limit and the size; nothing was written.
	ReasonTooLarge Reason = "too_large"
	// ReasonConflict: a write found its target changed by someone else at
	// the moment it would commit, more often than it retries, or locked by
	// another process past the wait; nothing was written.
	ReasonConflict  Reason = "conflict"
	ReasonToolError Reason = "tool_error"
	// ReasonRecordFailed: the run record could not be written, so the
	// gate accepts no further calls (a call it cannot record does not run).
	ReasonRecordFailed Reason = "record_failed"
)

// Error is an error meant for a model and a record at once. Public is the
// message the model sees: it must not leak internals (host paths outside the
// workspace, environment, kernel details beyond the refusal). Cause is the
// internal error, written to the record only.
type Error struct {
	Reason Reason
	Public string
	Cause  error
}

func (e *Error) Error() string {
	if e.Cause != nil {
		return fmt.Sprintf("%s: %s: %v", e.Reason, e.Public, e.Cause)
	}
	return fmt.Sprintf("%s: %s", e.Reason, e.Public)
}

func (e *Error) Unwrap() error { return e.Cause }

// Errorf returns an *Error with a public message built from format and args.
// Do not format internal details into it; pass them as cause.
func Errorf(reason Reason, cause error, format string, args ...any) *Error {
	return &Error{Reason: reason, Public: fmt.Sprintf(format, args...), Cause: cause}
}

// fromWorkspace returns err with a *workspace.Error made the *Error of the
// reason its kind is spelled as (workspace.Kind); any other error, nil
// included, is returned as it is. Every error a tool gets from the
// workspace passes through it on its way out, so what the tools return
// stays an *Error.
func fromWorkspace(err error) error {
	if e, ok := err.(*workspace.Error); ok {
		return wsError(e)
	}
	return err
}

// wsError is the *Error of a workspace error: its message and cause, the
// reason its kind is spelled as.
func wsError(e *workspace.Error) *Error {
	return &Error{Reason: Reason(e.Kind), Public: e.Public, Cause: e.Cause}
}

// fsError turns a failed system call on a workspace path into an *Error,
// as workspace.FileError says.
func fsError(path, op string, err error) *Error {
	return wsError(workspace.FileError(path, op, err))
}
