// Package gate is the one chokepoint every tool call passes through, whatever
// the surface (flat, verbs, MCP, the CLI's call): publication, arguments,
// paths and write scope, hooks, approval, execution, the result cap and the
// run record, in that order.
//
// The published toolset is the policy: an operation the model cannot be
// allowed to perform is not published, and a call to anything unpublished is
// refused by the same rule whether it arrives by name or inside tool_invoke.
// Approval is a second, per-call gate for capabilities that do exist.
//
// gate does not talk to a provider.
package gate

import (
	"fmt"
	"strings"
)

// Risk orders catalogue entries for the approval ceiling: Low < Medium < High.
// The zero value is Low.
type Risk int

// Risks.
const (
	Low Risk = iota
	Medium
	High
)

func (r Risk) String() string {
	switch r {
	case Low:
		return "low"
	case Medium:
		return "medium"
	case High:
		return "high"
	}
	return fmt.Sprintf("risk(%d)", int(r))
}

// MarshalText renders the risk as its name.
func (r Risk) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// ParseRisk parses "low", "medium" or "high".
func ParseRisk(s string) (Risk, error) {
	switch strings.ToLower(s) {
	case "low":
		return Low, nil
	case "medium":
		return Medium, nil
	case "high":
		return High, nil
	}
	return 0, fmt.Errorf("invalid risk %q: want low, medium or high", s)
}

// Needs is what an entry needs from the host before it can be published.
type Needs int

// Availability classes, as in the spec's catalogue.
const (
	Always            Needs = iota // the read tools
	ConfinedWorkspace              // file_write, file_edit: the harness's own writes are Landlock-confined
	ConfinedExecution              // run: confined execution and at least one allowed program
)

func (n Needs) String() string {
	switch n {
	case Always:
		return "always"
	case ConfinedWorkspace:
		return "confined workspace"
	case ConfinedExecution:
		return "confined execution and an allowed program"
	}
	return fmt.Sprintf("needs(%d)", int(n))
}

// Entry is one row of the workspace catalogue.
type Entry struct {
	Name      string // the tool name the model sees, e.g. "file_read"
	Operation string // the neutral operation, e.g. "file.read"
	Risk      Risk
	Needs     Needs
}

// Catalogue is the workspace catalogue, exactly as the spec lists it.
var Catalogue = []Entry{
	{"file_read", "file.read", Low, Always},
	{"dir_list", "dir.list", Low, Always},
	{"search", "search", Low, Always},
	{"find", "find", Low, Always},
	{"file_write", "file.write", Medium, ConfinedWorkspace},
	{"file_edit", "file.edit", Medium, ConfinedWorkspace},
	{"run", "shell", High, ConfinedExecution},
}

// Lookup returns the catalogue entry with the given name.
func Lookup(name string) (Entry, bool) {
	for _, e := range Catalogue {
		if e.Name == name {
			return e, true
		}
	}
	return Entry{}, false
}
