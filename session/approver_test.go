package session

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/b10x/harness/gate"
	"github.com/b10x/harness/policy"
)

// TestMayPrompt: a run call may stop to ask on the terminal only when the
// session's approver is the terminal's and run is above the ceiling.
func TestMayPrompt(t *testing.T) {
	for _, c := range []struct {
		name     string
		approver gate.Approver
		upTo     policy.Risk
		want     bool
	}{
		{"terminal, run above the ceiling", gate.NewTTYApprover(strings.NewReader(""), io.Discard), policy.RiskMedium, true},
		{"terminal, run within the ceiling", gate.NewTTYApprover(strings.NewReader(""), io.Discard), policy.RiskHigh, false},
		{"deny all", gate.DenyAll{}, policy.RiskLow, false},
		{"approve all", gate.ApproveAll{}, policy.RiskLow, false},
	} {
		p := Defaults()
		p.Workspace = t.TempDir()
		p.Confine = policy.ConfineOff // nothing confines the test process
		p.ApproveUpTo = c.upTo
		s, err := Open(context.Background(), p, Options{Command: "test", Version: "test", Approver: c.approver})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := s.MayPrompt(); got != c.want {
			t.Errorf("%s: MayPrompt() = %v, want %v", c.name, got, c.want)
		}
		s.End("completed")
	}
}
