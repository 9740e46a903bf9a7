package main

import (
	"github.com/b10x/harness/gate"
)

// chooseApprover maps --approve/--yes to an approver, and says what the
// harness must tell the user once at start.
func chooseApprover(p *policyFlags, ceiling gate.Risk, e *env) (gate.Approver, string, error) {
	mode := p.Approve
	if p.Yes {
		if mode != "auto" && mode != "all" {
			return nil, "", usagef("--yes means --approve all; it contradicts --approve %s", mode)
		}
		mode = "all"
	}
	switch mode {
	case "all":
		return gate.ApproveAll{}, "", nil
	case "deny":
		return gate.DenyAll{}, "", nil
	}
	tty, err := openTTY()
	if err != nil {
		if mode == "prompt" {
			return nil, "", usagef("--approve prompt needs an interactive terminal (/dev/tty): %v", err)
		}
		return gate.DenyAll{}, "no terminal: calls above " + ceiling.String() + " risk will be denied (use --approve-up-to, --approve all or --yes to change this)", nil
	}
	return gate.NewTTYApprover(tty, tty), "", nil
}
