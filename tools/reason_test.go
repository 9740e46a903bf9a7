package tools

import (
	"errors"
	"testing"

	"github.com/b10x/harness/workspace"
)

// The workspace's kinds are spelled as reasons of this package, and
// fromWorkspace keeps an error's message and cause: what a tool returns
// from the workspace reaches the gate as the *Error of that reason.
func TestWorkspaceKindsAreReasons(t *testing.T) {
	reasons := map[Reason]bool{}
	for _, r := range []Reason{ReasonUnpublished, ReasonInvalidArgument, ReasonDeniedPath, ReasonProtectedPath, ReasonProgramNotAllowed,
		ReasonHookBlocked, ReasonApprovalRejected, ReasonBudgetExhausted, ReasonOversizedResult, ReasonTimeout, ReasonCancelled,
		ReasonTooLarge, ReasonConflict, ReasonToolError, ReasonRecordFailed} {
		reasons[r] = true
	}
	for _, k := range []workspace.Kind{workspace.Invalid, workspace.Denied, workspace.Failed, workspace.Conflict, workspace.Timeout, workspace.Cancelled} {
		if !reasons[Reason(k)] {
			t.Errorf("workspace kind %q is no reason", k)
		}
	}
	cause := errors.New("the cause")
	err := fromWorkspace(&workspace.Error{Kind: workspace.Conflict, Public: "the message", Cause: cause})
	if e, ok := err.(*Error); !ok || e.Reason != ReasonConflict || e.Public != "the message" || !errors.Is(err, cause) ||
		err.Error() != "conflict: the message: the cause" {
		t.Errorf("fromWorkspace: %#v", err)
	}
	if err := fromWorkspace(nil); err != nil {
		t.Errorf("fromWorkspace(nil) = %#v", err)
	}
	if plain := errors.New("plain"); fromWorkspace(plain) != plain {
		t.Error("fromWorkspace changed an error of its own")
	}
}
