package main

import (
	"github.com/b10x/harness/gate"
	"github.com/b10x/harness/tools"
)

// confinement is what the host's kernel confinement allows this session to
// publish, and the step that applies the harness's own domain.
type confinement struct {
	tools        []tools.Tool
	host         gate.Host
	record       any      // for run_start
	protected    []string // extra protected workspace paths
	programNames []string
	restrict     func() error // confines the harness's own writes; called after the record is open
}

// confineSession probes the host, applies --confine and decides which tools
// can exist.
func confineSession(p *policyFlags, ws *tools.Workspace, s *session) (*confinement, error) {
	c := &confinement{tools: tools.ReadTools(), restrict: func() error { return nil }}
	c.record = map[string]any{"mode": p.Confine, "enforced": []string{}}
	c.host.WorkspaceWhy = "kernel confinement is not wired yet"
	c.host.ExecutionWhy = "kernel confinement is not wired yet"
	return c, nil
}
