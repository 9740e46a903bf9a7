package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/b10x/harness/confine"
	"github.com/b10x/harness/gate"
	"github.com/b10x/harness/tools"
)

// confinement is what the host's kernel confinement allows this session to
// publish, and the step that applies the harness's own domain.
type confinement struct {
	mode         confine.Mode
	report       confine.Report
	plan         confine.Plan
	tools        []tools.Tool
	host         gate.Host
	record       confinementRecord
	protected    []string // extra protected workspace paths
	programNames []string
	tmpDir       string
	restrict     func() error // confines the harness's own writes; called after the record is open
}

// confinementRecord is run_start's "confinement".
type confinementRecord struct {
	Mode          string           `json:"mode"`
	Enforced      []string         `json:"enforced"`
	Missing       []confine.Layer  `json:"missing"`
	WholeTreeKill string           `json:"whole_tree_kill,omitempty"`
	Self          *confine.Applied `json:"self,omitempty"`
	SelfError     string           `json:"self_error,omitempty"`
}

// planConfinement probes the host and applies --confine. Strict on a host
// that lacks a layer is a configuration error (exit 2) naming each layer.
func planConfinement(mode string) (confine.Mode, confine.Report, confine.Plan, error) {
	m, err := confine.ParseMode(mode)
	if err != nil {
		return 0, confine.Report{}, confine.Plan{}, usageError{err}
	}
	if m == confine.Off {
		// Off enforces nothing, so there is nothing to probe.
		plan, err := confine.Report{}.Plan(m)
		return m, confine.Report{}, plan, err
	}
	rep := confine.Probe()
	plan, err := rep.Plan(m)
	if err != nil {
		var se *confine.StrictError
		if errors.As(err, &se) {
			return m, rep, plan, usagef("--confine strict: this host cannot enforce every layer; refusing to start:\n%s\n(run `b10x-harness doctor` for the full picture)", se.Error())
		}
		return m, rep, plan, err
	}
	return m, rep, plan, nil
}

// confineSession probes the host, applies --confine and decides which tools
// can exist.
func confineSession(p *policyFlags, ws *tools.Workspace, s *session) (*confinement, error) {
	m, rep, plan, err := planConfinement(p.Confine)
	if err != nil {
		return nil, err
	}
	c := &confinement{mode: m, report: rep, plan: plan, tools: tools.ReadTools(), restrict: func() error { return nil }}
	c.record = confinementRecord{Mode: m.String(), Enforced: plan.Enforced, Missing: plan.Missing, WholeTreeKill: plan.WholeTreeKill}
	if m == confine.Off {
		c.host.WorkspaceWhy = "--confine off"
		c.host.ExecutionWhy = "--confine off"
		return c, nil
	}
	if len(plan.Missing) > 0 {
		var names []string
		for _, l := range plan.Missing {
			names = append(names, l.Name)
		}
		s.notes = append(s.notes, fmt.Sprintf("confine auto: missing layers: %s; entries that need them are not published (see `b10x-harness doctor`)", strings.Join(names, ", ")))
	}

	if !plan.ConfinedWorkspace {
		c.host.WorkspaceWhy = "this host cannot confine the harness's own writes (Landlock unavailable)"
	} else {
		tmp, err := os.MkdirTemp("", "b10x-harness-")
		if err != nil {
			return nil, fmt.Errorf("creating the harness's temporary directory: %w", err)
		}
		c.tmpDir = tmp
		s.closers = append(s.closers, func() { os.RemoveAll(tmp) })
		c.restrict = func() error {
			applied, err := confine.RestrictSelf(confine.SelfPolicy{
				Workspace:  ws.Dir(),
				WritePaths: []string{tmp},
				Devices:    confine.DefaultDevices(),
			})
			if err != nil {
				if m == confine.Strict {
					return fmt.Errorf("--confine strict: confining the harness's own writes failed: %w", err)
				}
				c.record.SelfError = err.Error()
				c.host.WorkspaceWhy = "confining the harness's own writes failed: " + err.Error()
				s.notes = append(s.notes, "confine auto: "+c.host.WorkspaceWhy+"; file_write and file_edit are not published")
				return nil
			}
			c.record.Self = &applied
			c.host.ConfinedWorkspace = true
			c.tools = append(c.tools, tools.WriteTools()...)
			return nil
		}
	}

	c.host.ExecutionWhy = "confined execution is not available yet"
	return c, nil
}
