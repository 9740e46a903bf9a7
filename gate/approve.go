package gate

import (
	"context"

	"github.com/b10x/harness/tools"
)

// Request is what an approver is asked about: always the resolved catalogue
// entry, never a generic verb. A tool_invoke of run is a Request for run.
type Request struct {
	Entry   Entry
	Args    any           // the decoded, typed arguments
	Writes  []tools.Write // canonical paths a write tool would change
	Surface string        // the surface the call arrived by
	Via     string        // "tool_invoke" when it came through the verbs surface
	// Preview is what the call would do (a file_edit's diff, a run's
	// resolved program and cwd), filled in only for an approver. Like
	// Args it is untrusted text: render it with internal/termsafe.
	Preview tools.Preview
}

// Decision is an approver's answer.
type Decision struct {
	Approved bool
	Standing bool   // "yes for this entry for the rest of the run"
	Reason   string // shown to the model when not approved
}

// Approver decides calls whose entry's risk is above the ceiling.
// Implementations must be safe for concurrent use. An error is treated as a
// rejection (fail closed) and recorded.
type Approver interface {
	// Name identifies the approver in the record ("deny", "all", "tty", ...).
	Name() string
	Approve(ctx context.Context, r Request) (Decision, error)
}

// DenyAll rejects every call. It is the library's default approver: a program
// using the Go API gets nothing above the ceiling approved unless it supplies
// an approver of its own.
type DenyAll struct{}

// Name implements Approver.
func (DenyAll) Name() string { return "deny" }

// Approve implements Approver.
func (DenyAll) Approve(context.Context, Request) (Decision, error) {
	return Decision{Reason: "calls above the risk ceiling are denied (approver: deny)"}, nil
}

// ApproveAll approves every call that asks. It declares that no person is
// watching (the CLI's --approve all and --yes); the record says so.
type ApproveAll struct{}

// Name implements Approver.
func (ApproveAll) Name() string { return "all" }

// Approve implements Approver.
func (ApproveAll) Approve(context.Context, Request) (Decision, error) {
	return Decision{Approved: true, Reason: `approved by the "all" approver`}, nil
}
