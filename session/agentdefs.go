package session

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/b10x/harness/agent"
	"github.com/b10x/harness/gate"
	"github.com/b10x/harness/internal/setting"
	"github.com/b10x/harness/policy"
)

// DefaultSystem is the system prompt of a model's run (RunAgent) with no
// named agent, and the note after a named agent's instructions.
const DefaultSystem = "You work on a software workspace through the tools provided, and only through them. " +
	"Every call is checked by the harness's policy before it runs. A call that is refused or fails returns a result " +
	"beginning with \"ERROR (\" that says why; read the reason and adapt instead of repeating the same call."

// LoadAgents loads every agent definition of p: those in its agents_dir
// and in the agents/ directory of each of its plugins, each checked even
// when no agent is named. Their directories are added to p.Protect (the
// harness reads them: a write tool must not change them). When p names an
// agent, p is narrowed to it: its ceiling when it is lower (approve_up_to)
// and its declared tools (Narrow), which the gate intersects with what the
// policy admits; its definition is returned, nil when p names none.
//
// Every error is a usage *Error: a plugin without an agents/ directory
// (key plugin), a definition that does not parse, an agent no definition
// gives (key agent), a ceiling above p's. Call it after Validate.
func LoadAgents(p *Policy) (*agent.Def, error) {
	c := p.Agent
	dirs := append([]string(nil), c.Dirs...)
	for _, pl := range c.Plugins {
		d := filepath.Join(pl, "agents")
		if fi, err := os.Stat(d); err != nil || !fi.IsDir() {
			return nil, policyErr("plugin", pl, "no agents/ directory in it")
		}
		dirs = append(dirs, d)
	}
	p.Protect = append(p.Protect, dirs...)
	var defs []agent.Def
	if len(dirs) > 0 {
		var err error
		if defs, err = agent.LoadDefs(dirs...); err != nil {
			return nil, &Error{Err: err, Usage: true}
		}
	}
	if c.Name == "" {
		return nil, nil
	}
	d, ok := agent.FindDef(defs, c.Name)
	if !ok {
		if len(dirs) == 0 {
			return nil, policyErr("agent", c.Name, "no agent definitions were given (agents_dir or plugin)")
		}
		names := []string{}
		for _, d := range defs {
			names = append(names, d.Name)
		}
		defined := strings.Join(names, ", ")
		if defined == "" {
			defined = "none"
		}
		return nil, policyErr("agent", c.Name, "no such agent in %s (defined: %s)", strings.Join(dirs, ", "), defined)
	}
	up, err := gate.ParseRisk(string(p.ApproveUpTo))
	if err != nil {
		return nil, policyErr("approve_up_to", string(p.ApproveUpTo), "%v", err)
	}
	ceiling, err := d.Ceiling(up)
	if err != nil {
		return nil, &Error{Key: setting.ApproveUpTo, Err: err, Usage: true}
	}
	p.ApproveUpTo = policy.Risk(ceiling.String())
	p.Narrow = d.Allow()
	return &d, nil
}
