package surface

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/b10x/harness/gate"
	"github.com/b10x/harness/tools"
)

type searchArgs struct {
	Query string `json:"query,omitempty" desc:"Words to look for in tool names and descriptions; empty lists every tool."`
}

type describeArgs struct {
	Name string `json:"name" desc:"The tool's name, as tool_search lists it."`
}

type invokeArgs struct {
	Name      string          `json:"name" desc:"The tool's name, as tool_search lists it."`
	Arguments json.RawMessage `json:"arguments"`
}

// invokeName is the generator's view of invokeArgs: the generator has no
// type for an open object, which invokeSchema adds.
type invokeName struct {
	Name string `json:"name" desc:"The tool's name, as tool_search lists it."`
}

// EntryOf is the catalogue entry a call of the tool name with args asks
// for on a surface of kind k: under verbs, tool_invoke's name argument
// when it has one; otherwise name itself. It reads args leniently, to
// show a call before it is made: DispatchWith decodes them strictly and
// may still refuse the call.
func (k Kind) EntryOf(name string, args json.RawMessage) string {
	if k == Verbs && name == "tool_invoke" {
		var a invokeName
		if json.Unmarshal(args, &a) == nil && a.Name != "" {
			return a.Name
		}
	}
	return name
}

func verbDefs() []Def {
	return []Def{
		{Name: "tool_search", Description: "Search the tools available in this workspace. Returns each matching tool's name, risk and one-line description.", InputSchema: tools.SchemaOf(searchArgs{})},
		{Name: "tool_describe", Description: "Describe one tool: its full description and the JSON Schema of its arguments.", InputSchema: tools.SchemaOf(describeArgs{})},
		{Name: "tool_invoke", Description: "Invoke one tool by name with its arguments object. The call is checked and approved as that tool.", InputSchema: invokeSchema()},
	}
}

// invokeSchema is generated from invokeName, plus the "arguments" object.
func invokeSchema() json.RawMessage {
	var m map[string]any
	if err := json.Unmarshal(tools.SchemaOf(invokeName{}), &m); err != nil {
		panic("surface: bug: invalid generated schema: " + err.Error())
	}
	m["properties"].(map[string]any)["arguments"] = map[string]any{
		"type":        "object",
		"description": "The tool's arguments object, as tool_describe's input_schema defines it.",
	}
	m["required"] = []string{"name", "arguments"}
	b, err := json.Marshal(m)
	if err != nil {
		panic("surface: bug: " + err.Error())
	}
	return b
}

func decodeStrict(raw json.RawMessage, v any) error {
	if len(raw) == 0 {
		raw = json.RawMessage("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return fmt.Errorf("argument %q must be %s", te.Field, te.Type)
		}
		return fmt.Errorf("invalid arguments: %v", err)
	}
	if dec.More() {
		return errors.New("invalid arguments: trailing data after the object")
	}
	return nil
}

func (s *Surface) search(raw json.RawMessage, ignored []string) gate.Outcome {
	c := gate.Call{Surface: string(Verbs), Name: "tool_search", Args: raw, Ignored: ignored}
	var a searchArgs
	if err := decodeStrict(raw, &a); err != nil {
		return s.g.Record(c, gate.Outcome{Status: gate.Refused, Reason: tools.ReasonInvalidArgument, Message: "tool_search: " + err.Error()})
	}
	words := strings.Fields(strings.ToLower(a.Query))
	var b strings.Builder
	n := 0
	for _, e := range s.g.Published() {
		d := s.entryDef(e)
		first := firstSentence(d.Description)
		hay := strings.ToLower(e.Name + " " + e.Operation + " " + d.Description)
		match := true
		for _, w := range words {
			if !strings.Contains(hay, w) {
				match = false
				break
			}
		}
		if match {
			fmt.Fprintf(&b, "%s (%s, risk %s): %s\n", e.Name, e.Operation, e.Risk, first)
			n++
		}
	}
	if n == 0 {
		b.WriteString("no tool matches; call tool_search with an empty query to list every tool\n")
	}
	return s.g.Record(c, gate.Outcome{Status: gate.Executed, Result: b.String(), Meta: map[string]any{"matches": n}})
}

func (s *Surface) describe(raw json.RawMessage, ignored []string) gate.Outcome {
	c := gate.Call{Surface: string(Verbs), Name: "tool_describe", Args: raw, Ignored: ignored}
	var a describeArgs
	if err := decodeStrict(raw, &a); err != nil {
		return s.g.Record(c, gate.Outcome{Status: gate.Refused, Reason: tools.ReasonInvalidArgument, Message: "tool_describe: " + err.Error()})
	}
	for _, e := range s.g.Published() {
		if e.Name == a.Name {
			d := s.entryDef(e)
			b, _ := json.MarshalIndent(map[string]any{"name": d.Name, "operation": e.Operation, "risk": e.Risk.String(), "description": d.Description, "input_schema": d.InputSchema}, "", "  ")
			return s.g.Record(c, gate.Outcome{Status: gate.Executed, Result: string(b)})
		}
	}
	return s.g.Record(c, gate.Outcome{Status: gate.Refused, Reason: tools.ReasonUnpublished, Message: fmt.Sprintf("tool %q is not published in this run", a.Name)})
}

// firstSentence is the description's first sentence, for listings.
func firstSentence(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if i := strings.Index(s, ". "); i >= 0 {
		return s[:i+1]
	}
	return s
}
