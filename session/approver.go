package session

import (
	"os"

	"github.com/b10x/harness/gate"
	"github.com/b10x/harness/internal/setting"
	"github.com/b10x/harness/tools"
	"github.com/b10x/harness/workspace"
)

// chooseApprover maps the approve mode to an approver, and says what the
// harness must tell the user once at start.
// The note names the settings that change it as name words them (the
// caller's flags, or the policy keys).
func chooseApprover(p Policy, name func(key string) string) (gate.Approver, string, error) {
	switch p.Approve {
	case ApproveAll:
		return gate.ApproveAll{}, "", nil
	case ApproveDeny:
		return gate.DenyAll{}, "", nil
	}
	tty, err := openTTY()
	if err != nil {
		if p.Approve == ApprovePrompt {
			return nil, "", policyErr("approve", "prompt", "needs an interactive terminal (/dev/tty): %v", err)
		}
		return gate.DenyAll{}, "no terminal: calls above " + p.ApproveUpTo.String() + " risk will be denied (set " +
			name(setting.ApproveUpTo) + ", or " + name(setting.Approve) + " all, to change this)", nil
	}
	return gate.NewTTYApprover(tty, tty), "", nil
}

// MayPrompt reports whether a run call of the session may stop to ask on
// the terminal: its approver asks there (approve auto or prompt, with a
// terminal) and run's risk is above the ceiling.
func (s *Session) MayPrompt() bool {
	cfg := s.gate.Config()
	_, tty := cfg.Approver.(*gate.TTYApprover)
	run, _ := gate.Lookup("run")
	return tty && run.Risk > cfg.ApproveUpTo
}

// openTTY opens the controlling terminal. It fails when the process has none
// (ENXIO), even when stdin and stdout are terminals of another session.
func openTTY() (*os.File, error) {
	return os.OpenFile("/dev/tty", os.O_RDWR, 0)
}

// note records a note said once at start.
func (s *Session) note(n string) { s.notes = append(s.notes, note{text: n}) }

// note is one thing a session says once, at start. ifAbove: only when a
// published tool is above the risk ceiling (the approval fallback).
type note struct {
	text    string
	ifAbove bool
}

// resolvePrograms resolves the allow_program declarations through the
// harness's PATH and pins them; links planted in view's writable areas are
// refused.
func resolvePrograms(decl []string, view tools.RunView) (tools.Programs, error) {
	progs, err := tools.ResolvePrograms(decl, os.Getenv("PATH"), view)
	if err != nil {
		return nil, &Error{Err: err, Usage: true}
	}
	return progs, nil
}

// pinView pins the workspace and the extra paths once, at start.
func pinView(p *Policy, ws *workspace.Workspace) (tools.RunView, error) {
	view, err := tools.PinRunView(p.Workspace, p.Run.AllowRead, p.Run.AllowWrite)
	if err == nil && view.Workspace.Path != ws.Dir() {
		return view, policyErr("workspace", p.Workspace, "changed while it was resolved (%s, then %s)", ws.Dir(), view.Workspace.Path)
	}
	if err != nil {
		return view, &Error{Err: err, Usage: true}
	}
	return view, nil
}

// name words key as o.Name does, or as the key itself.
func (o Options) name(key string) string {
	if o.Name == nil {
		return key
	}
	return o.Name(key)
}
