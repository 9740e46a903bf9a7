// Package surface presents the gate's published catalogue to a model in one
// of two shapes and decodes the model's calls back into gate calls:
//
//   - flat: one tool per published entry (the default; lowest discovery
//     overhead);
//   - verbs: tool_search, tool_describe and tool_invoke. tool_invoke is
//     resolved here to its catalogue entry, so the gate (and approvers, hooks,
//     write scope, budget and narrowing) sees the entry, never the verb.
//
// A surface never bypasses the gate: every call that could act goes through
// gate.Gate.Call, and a call to a name the surface did not present is refused
// by the gate's publication rule.
package surface

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/b10x/harness/gate"
	"github.com/b10x/harness/tools"
)

// Kind names a surface shape.
type Kind string

// Surface shapes.
const (
	Flat  Kind = "flat"
	Verbs Kind = "verbs"
)

// ParseKind parses "flat" or "verbs".
func ParseKind(s string) (Kind, error) {
	switch Kind(s) {
	case Flat, Verbs:
		return Kind(s), nil
	}
	return "", fmt.Errorf("invalid surface %q: want flat or verbs", s)
}

// Def is one tool definition as a provider receives it. InputSchema is valid
// both as Anthropic's input_schema and as OpenAI's function parameters.
type Def struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// Options configures a Surface. The zero value states the write-scope rules
// to the model (the spec's default, --scope-announce stated).
type Options struct {
	SilentScope bool // --scope-announce silent: keep the gate, withhold the text
}

// Surface is one shape over one gate. It is safe for concurrent use.
type Surface struct {
	kind Kind
	g    *gate.Gate
	opt  Options
}

// New returns a surface of the given kind over g.
func New(kind Kind, g *gate.Gate, opt Options) (*Surface, error) {
	if _, err := ParseKind(string(kind)); err != nil {
		return nil, err
	}
	return &Surface{kind: kind, g: g, opt: opt}, nil
}

// Kind reports the surface's shape.
func (s *Surface) Kind() Kind { return s.kind }

// entryDef is the flat definition of one published entry.
func (s *Surface) entryDef(e gate.Entry) Def {
	t, _ := s.g.Tool(e.Name)
	desc := t.Description()
	if (e.Name == "file_write" || e.Name == "file_edit" || e.Name == "run") && !s.opt.SilentScope {
		desc += scopeText(s.g.Scope())
	}
	return Def{Name: e.Name, Description: desc, InputSchema: t.Schema()}
}

// scopeText states the write-scope rules in plain words.
func scopeText(rules []gate.ScopeRule) string {
	var b strings.Builder
	b.WriteString("\n\nWrite rules (checked on the real path after links are resolved; the first matching rule wins):")
	for _, r := range rules {
		switch r.Access {
		case gate.Allowed:
			fmt.Fprintf(&b, "\n- %s: whole-file writes and exact edits are allowed", r.Glob)
		case gate.PartialOnly:
			fmt.Fprintf(&b, "\n- %s: only exact edits (file_edit); whole-file replacement is refused", r.Glob)
		case gate.Denied:
			fmt.Fprintf(&b, "\n- %s: no write tool may change these paths", r.Glob)
		}
	}
	b.WriteString("\n- paths no rule mentions are unrestricted, except .git/ and the harness's own files, which are protected")
	b.WriteString("\n- run is held to these rules too: a path a denied or partial-only rule matches is read-only to the program (up to 256 such paths per call; a change to one beyond that is detected after the call and fails it), and whatever the program creates there is removed after the call, which then fails")
	return b.String()
}

// Definitions lists what the model sees.
func (s *Surface) Definitions() []Def {
	if s.kind == Verbs {
		return verbDefs()
	}
	var defs []Def
	for _, e := range s.g.Published() {
		defs = append(defs, s.entryDef(e))
	}
	return defs
}

// Refuse records a call the caller refused before it reached the gate (a
// model's call that cannot be answered on its own, such as one reusing an
// earlier call's id) and returns the outcome with its sequence number. The
// call never acts and does not count against the call budget.
func (s *Surface) Refuse(name string, args json.RawMessage, out gate.Outcome) gate.Outcome {
	return s.g.Record(gate.Call{Surface: string(s.kind), Name: name, Args: args}, out)
}

// Dispatch decodes one call in the shape the model saw and passes it to the
// gate. A name this surface does not present is refused as unpublished.
func (s *Surface) Dispatch(ctx context.Context, name string, args json.RawMessage) gate.Outcome {
	return s.DispatchWith(ctx, name, args, With{})
}

// With is what a caller of DispatchWith gives a call besides its name
// and arguments.
type With struct {
	// Ignored lists, as NAME=VALUE, arguments the caller removed from
	// the call's because a client adds them to every tool and no tool
	// takes them (an MCP client's own scheduling hint); the record says
	// they were ignored (gate.Call.Ignored).
	Ignored []string
	// Progress is told a run call's output as it arrives
	// (gate.Call.Progress).
	Progress func(outBytes int64)
}

// DispatchWith is Dispatch with what the caller adds to the call (w).
func (s *Surface) DispatchWith(ctx context.Context, name string, args json.RawMessage, w With) gate.Outcome {
	ignored := w.Ignored
	if s.kind == Flat {
		return s.g.Call(ctx, gate.Call{Surface: string(Flat), Name: name, Args: args, Ignored: ignored, Progress: w.Progress})
	}
	switch name {
	case "tool_search":
		return s.search(args, ignored)
	case "tool_describe":
		return s.describe(args, ignored)
	case "tool_invoke":
		var a invokeArgs
		if err := decodeStrict(args, &a); err != nil {
			return s.g.Record(gate.Call{Surface: string(Verbs), Name: name, Args: args, Ignored: ignored}, gate.Outcome{Status: gate.Refused, Reason: tools.ReasonInvalidArgument, Message: "tool_invoke: " + err.Error()})
		}
		inner := a.Arguments
		if len(inner) == 0 || string(inner) == "null" {
			inner = json.RawMessage("{}")
		}
		return s.g.Call(ctx, gate.Call{Surface: string(Verbs), Via: "tool_invoke", Name: a.Name, Args: inner, Ignored: ignored, Progress: w.Progress})
	}
	// A catalogue entry called directly under verbs was never presented.
	return s.g.Call(ctx, gate.Call{Surface: string(Verbs), Name: name, Args: args, Unpresented: true, Ignored: ignored, Progress: w.Progress})
}
