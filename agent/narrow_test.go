package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/b10x/harness/agent"
	"github.com/b10x/harness/gate"
	"github.com/b10x/harness/surface"
	"github.com/b10x/harness/tools"
)

// harmlessArgs are arguments each catalogue entry accepts without acting
// outside a temporary workspace (run names a program that is never allowed,
// so it can only be refused).
var harmlessArgs = map[string]string{
	"file_read":  `{"path":"a.txt"}`,
	"dir_list":   `{}`,
	"search":     `{"pattern":"inside"}`,
	"find":       `{"pattern":"*.txt"}`,
	"file_write": `{"path":"new.txt","content":"x"}`,
	"file_edit":  `{"path":"a.txt","old_string":"inside","new_string":"edited"}`,
	"run":        `{"argv":["not-an-allowed-program"]}`,
}

// parent is a parent run's admitted set, as the gate decides it from the
// implementations it has and what the host holds.
type parent struct {
	name  string
	tools func() []tools.Tool
	host  gate.Host
	set   []string // what it admits, in catalogue order
}

var parents = []parent{
	{"reads only (confine off)", tools.ReadTools, gate.Host{},
		[]string{"file_read", "dir_list", "search", "find"}},
	{"reads and writes", func() []tools.Tool { return append(tools.ReadTools(), tools.WriteTools()...) }, gate.Host{ConfinedWorkspace: true},
		[]string{"file_read", "dir_list", "search", "find", "file_write", "file_edit"}},
	{"everything", func() []tools.Tool {
		return append(append(tools.ReadTools(), tools.WriteTools()...), tools.RunTool(tools.RunConfig{}))
	}, gate.Host{ConfinedWorkspace: true, ConfinedExecution: true, Programs: 1},
		[]string{"file_read", "dir_list", "search", "find", "file_write", "file_edit", "run"}},
}

// declarations of a named agent's tools: nil means "tools:" absent.
var declarations = []struct {
	name string
	src  string // the tools: line of the definition, "" for none
}{
	{"absent", ""},
	{"empty", "tools: []"},
	{"reads", "tools: [file_read, find]"},
	{"write and run", "tools: [file_read, file_write, run]"},
	{"everything", "tools: [file_read, dir_list, search, find, file_write, file_edit, run]"},
	{"only run", "tools:\n  - run"},
}

// invokeAll calls every catalogue entry the way the surface expects, after a
// listing (verbs) call.
func invokeAll(kind surface.Kind) []agent.Turn {
	var calls []agent.ToolCall
	if kind == surface.Verbs {
		calls = append(calls, agent.ToolCall{ID: "listing", Name: "tool_search", Args: json.RawMessage(`{}`)})
	}
	for _, e := range gate.Catalogue {
		args := harmlessArgs[e.Name]
		if kind == surface.Verbs {
			calls = append(calls,
				agent.ToolCall{ID: "describe-" + e.Name, Name: "tool_describe", Args: json.RawMessage(fmt.Sprintf(`{"name":%q}`, e.Name))},
				agent.ToolCall{ID: e.Name, Name: "tool_invoke", Args: json.RawMessage(fmt.Sprintf(`{"name":%q,"arguments":%s}`, e.Name, args))})
		} else {
			calls = append(calls, agent.ToolCall{ID: e.Name, Name: e.Name, Args: json.RawMessage(args)})
		}
	}
	return []agent.Turn{{Calls: calls, Stop: "tool_use"}, {Text: "done", Stop: "end_turn"}}
}

// TestNarrowing runs a named agent over every (parent admitted set,
// declaration, surface) and checks that the model sees exactly parent ∩
// declared, and that every other entry is refused as unpublished, by name
// (flat) and through tool_describe and tool_invoke (verbs).
func TestNarrowing(t *testing.T) {
	for _, p := range parents {
		for _, d := range declarations {
			for _, kind := range []surface.Kind{surface.Flat, surface.Verbs} {
				t.Run(p.name+"/"+d.name+"/"+string(kind), func(t *testing.T) {
					src := "---\nname: n\ndescription: d\n" + d.src + "\n---\nbody\n"
					def, err := agent.ParseDef("n.md", []byte(src))
					if err != nil {
						t.Fatal(err)
					}
					e := newEnv(t, gate.Config{Tools: p.tools(), Host: p.host, Allow: def.Allow(), ApproveUpTo: gate.High})
					var want []string
					for _, n := range p.set {
						if !def.HasTools || slices.Contains(def.Tools, n) {
							want = append(want, n)
						}
					}

					prov := &scripted{turns: invokeAll(kind)}
					sum := agent.Run(context.Background(), agent.Config{Provider: prov, Surface: e.surface(t, kind), Task: "t", System: def.Instructions})
					if sum.EndedBy != agent.EndModelStopped {
						t.Fatalf("ended by %s: %v", sum.EndedBy, sum.Err)
					}

					// What the model was shown.
					var shown []string
					for _, td := range prov.req.Tools {
						shown = append(shown, td.Name)
					}
					if kind == surface.Flat {
						if !slices.Equal(shown, want) {
							t.Errorf("flat definitions %v, want %v", shown, want)
						}
					} else {
						if strings.Join(shown, ",") != "tool_search,tool_describe,tool_invoke" {
							t.Errorf("verbs definitions %v", shown)
						}
						listing := prov.results[1][0].Content
						var listed []string
						for _, line := range strings.Split(strings.TrimSpace(listing), "\n") {
							if name, _, ok := strings.Cut(line, " ("); ok {
								listed = append(listed, name)
							}
						}
						if !slices.Equal(listed, want) {
							t.Errorf("tool_search lists %v, want %v\n%s", listed, want, listing)
						}
					}

					// What the gate did with a call to every entry.
					byID := map[string]agent.ToolResult{}
					for _, r := range prov.results[1] {
						byID[r.CallID] = r
					}
					for _, en := range gate.Catalogue {
						r := byID[en.Name]
						allowed := slices.Contains(want, en.Name)
						unpub := strings.HasPrefix(r.Content, "ERROR (refused, unpublished)")
						if allowed && unpub {
							t.Errorf("%s is in parent ∩ declared but was refused as unpublished: %s", en.Name, r.Content)
						}
						if !allowed && (!unpub || !r.IsError) {
							t.Errorf("%s was narrowed away but the call got: %+v", en.Name, r)
						}
						if kind == surface.Verbs {
							dr := byID["describe-"+en.Name]
							if allowed == dr.IsError {
								t.Errorf("tool_describe %s: %+v (allowed %v)", en.Name, dr, allowed)
							}
						}
					}
					// And the record agrees: each entry outside the set has a
					// refused/unpublished line; nothing outside it executed.
					for _, rc := range e.records(t) {
						if rc.Entry == "tool_search" || rc.Entry == "tool_describe" {
							continue
						}
						if !slices.Contains(want, rc.Entry) && (rc.Status != gate.Refused || rc.Reason != string(tools.ReasonUnpublished)) {
							t.Errorf("record: %s %s %s", rc.Entry, rc.Status, rc.Reason)
						}
					}
				})
			}
		}
	}
}
