package mcp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/b10x/harness/gate"
	"github.com/b10x/harness/tools"
)

// What a tools/call result holds, and why (decision 0078). The clients
// put a result before their model in three ways, measured with Claude Code
// 2.1.332, Codex CLI 0.171.0 and Gemini CLI 0.61.0 (make interoptest):
//
//   - Claude Code and Codex give the model the result's structuredContent,
//     serialized, whenever it is present (Claude Code its content when the
//     result is an error), and its content otherwise;
//   - Gemini CLI gives the model the content's text, and for an error the
//     whole result as JSON inside its own message.
//
// So a result carries no structuredContent: the tool's text is the one
// content block, and every client shows the model a file's text as text,
// not JSON-escaped inside an object. A refused or failed call's text says
// its status and reason code first ("refused (denied_path): ..."), since
// the Responses API (Codex) has no error mark of its own. A program that
// wants the outcome as data reads it from _meta (OutcomeMeta), which no
// tested client shows its model.

// OutcomeMeta is the _meta key of every tools/call result: the gate's
// outcome as data (Outcome), for programs. The tested clients do not show
// _meta to their model, except Gemini CLI inside its message for an
// error result, which is why it repeats neither the text nor the message.
const OutcomeMeta = "b10x-harness/outcome"

// Outcome is a result's _meta[OutcomeMeta]: the gate's outcome without
// what the content's text already says (the tool's text; an error's
// message, which follows "STATUS (REASON): " there).
type Outcome struct {
	Status gate.Status    `json:"status"`
	Entry  string         `json:"entry"`
	Reason tools.Reason   `json:"reason,omitempty"`
	Meta   map[string]any `json:"meta,omitempty"`
	Seq    int64          `json:"seq"`
}

// DefaultMaxResult is the result cap `b10x-harness mcp` applies when
// neither --max-result nor the policy file's max_result gives one: the
// largest result each tested client passes to its model whole (decision
// 0078). Above it a read is refused with the hint to read a part, and a
// write's or run's result is shortened with a note, as under any cap.
// Claude Code keeps a result of about 40 KiB whole and puts a longer one
// in a file of its own, showing its model a 2 KiB preview; Codex cuts the
// middle out of a result above about 10,000 tokens (its default
// tool_output_token_limit) — 32 KiB passes both, and Gemini CLI too.
const DefaultMaxResult = 32 << 10

// Result renders a gate outcome as a tools/call result: one text content
// block (the tool's text when executed; "STATUS (REASON): MESSAGE"
// otherwise), isError for every outcome but executed, no
// structuredContent, and the outcome as data in _meta[OutcomeMeta].
func Result(o gate.Outcome) *sdk.CallToolResult {
	text := o.Result
	if o.IsError() {
		text = fmt.Sprintf("%s (%s): %s", o.Status, o.Reason, o.Message)
	}
	meta := Outcome{Status: o.Status, Entry: o.Entry, Reason: o.Reason, Meta: o.Meta, Seq: o.Seq}
	return &sdk.CallToolResult{Meta: sdk.Meta{OutcomeMeta: meta}, Content: []sdk.Content{&sdk.TextContent{Text: text}}, IsError: o.IsError()}
}

// WaitForPrevious is the argument Gemini CLI adds to every tool's schema
// and sends with its calls: its own scheduler's "run after the calls
// before this one", already honoured by the client when the call reaches
// the server. No tool takes it.
const WaitForPrevious = "wait_for_previous"

// clientArgs removes from a call's arguments what a client adds to every
// tool and no tool takes: a boolean wait_for_previous (Gemini CLI), unless
// the tool's own schema declares such a property (takes reports it). It returns the
// arguments to pass on, and "NAME=VALUE" of each argument removed, for the
// record. Arguments it cannot read as one object without repeated keys
// pass unchanged: the gate refuses them, saying why.
func clientArgs(raw json.RawMessage, takes func() bool) (json.RawMessage, []string) {
	if !bytes.Contains(raw, []byte(`"`+WaitForPrevious+`"`)) || takes() {
		return raw, nil
	}
	type field struct {
		key string
		val json.RawMessage
	}
	var fields []field
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return raw, nil
	}
	seen := map[string]bool{}
	drop := -1
	for dec.More() {
		tok, err := dec.Token()
		key, ok := tok.(string)
		if err != nil || !ok || seen[key] {
			return raw, nil
		}
		seen[key] = true
		var val json.RawMessage
		if dec.Decode(&val) != nil {
			return raw, nil
		}
		if key == WaitForPrevious {
			if s := string(val); s != "true" && s != "false" {
				return raw, nil // not the client's boolean: the gate says so
			}
			drop = len(fields)
		}
		fields = append(fields, field{key, val})
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return raw, nil
	}
	if _, err := dec.Token(); err != io.EOF || drop < 0 {
		return raw, nil
	}
	var b bytes.Buffer
	b.WriteByte('{')
	for i, f := range fields {
		if i == drop {
			continue
		}
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(f.key)
		b.Write(k)
		b.WriteByte(':')
		b.Write(f.val)
	}
	b.WriteByte('}')
	return b.Bytes(), []string{WaitForPrevious + "=" + string(fields[drop].val)}
}

// declares reports whether the listed tool name's input schema has the
// property prop.
func (s *Server) declares(name, prop string) bool {
	for _, d := range s.cfg.Surface.Definitions() {
		if d.Name != name {
			continue
		}
		var schema struct {
			Properties map[string]json.RawMessage `json:"properties"`
		}
		if json.Unmarshal(d.InputSchema, &schema) != nil {
			return true // cannot tell: take nothing away
		}
		_, ok := schema.Properties[prop]
		return ok
	}
	return false
}
