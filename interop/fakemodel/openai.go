package fakemodel

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// openaiWire is the Responses API: the request's input is a list of items;
// the model's calls are function_call items ({call_id, name, arguments} as
// a JSON string) and the client's answers function_call_output items
// ({call_id, output: a string or input_text parts}). Codex declares an MCP
// server's tools in a namespace tool ({"type": "namespace", "name":
// "mcp__SERVER", "tools": [...]}), and a call names the namespace beside
// the tool; a flat function named mcp__SERVER__TOOL is taken too.
type openaiWire struct{ server string }

type openaiRequest struct {
	Stream bool              `json:"stream"`
	Input  []json.RawMessage `json:"input"`
	Tools  []json.RawMessage `json:"tools"`
}

type openaiTool struct {
	Type  string            `json:"type"`
	Name  string            `json:"name"`
	Tools []json.RawMessage `json:"tools"`
}

type openaiItem struct {
	Type   string          `json:"type"`
	CallID string          `json:"call_id"`
	Output json.RawMessage `json:"output"`
}

func (o openaiWire) parse(body []byte) (parsed, error) {
	var req openaiRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return parsed{}, fmt.Errorf("responses request: %w", err)
	}
	p := parsed{tools: map[string]toolDecl{}, stream: req.Stream}
	ns := "mcp__" + o.server
	for _, raw := range req.Tools {
		var t openaiTool
		if json.Unmarshal(raw, &t) != nil {
			continue
		}
		switch {
		case t.Type == "namespace" && t.Name == ns:
			for _, inner := range t.Tools {
				var f openaiTool
				if json.Unmarshal(inner, &f) == nil && f.Name != "" {
					p.tools[f.Name] = toolDecl{name: f.Name, namespace: ns, raw: inner}
				}
			}
		case t.Type == "function" && strings.HasPrefix(t.Name, ns+"__"):
			p.tools[strings.TrimPrefix(t.Name, ns+"__")] = toolDecl{name: t.Name, raw: raw}
		}
	}
	for _, raw := range req.Input {
		var it openaiItem
		if json.Unmarshal(raw, &it) != nil {
			continue
		}
		ref, ok := parseCallID(it.CallID)
		if !ok {
			continue
		}
		switch it.Type {
		case "function_call":
			p.made = append(p.made, ref)
		case "function_call_output":
			p.results = append(p.results, Result{Turn: ref.turn, Index: ref.index, Text: textOf(it.Output), Raw: raw})
		}
	}
	return p, nil
}

func (o openaiWire) reply(w http.ResponseWriter, r *http.Request, p parsed, calls []wireCall, text string) error {
	var items []map[string]any
	if text != "" || len(calls) == 0 {
		items = append(items, map[string]any{"type": "message", "id": "msg_fake", "role": "assistant", "status": "completed",
			"content": []any{map[string]any{"type": "output_text", "text": text, "annotations": []any{}}}})
	}
	for _, c := range calls {
		args, err := json.Marshal(c.args)
		if err != nil {
			return err
		}
		item := map[string]any{"type": "function_call", "id": "fc_" + c.id, "call_id": "call_" + c.id, "name": c.decl.name,
			"arguments": string(args), "status": "completed"}
		if c.decl.namespace != "" {
			item["namespace"] = c.decl.namespace
		}
		items = append(items, item)
	}
	resp := map[string]any{"id": "resp_fake", "object": "response", "status": "completed", "output": items,
		"usage": map[string]any{"input_tokens": 10, "output_tokens": 10, "total_tokens": 20}}
	if !p.stream {
		w.Header().Set("Content-Type", "application/json")
		return json.NewEncoder(w).Encode(resp)
	}
	events := []sse{{"response.created", map[string]any{"type": "response.created", "response": map[string]any{"id": "resp_fake", "object": "response", "status": "in_progress", "output": []any{}}}}}
	for i, it := range items {
		events = append(events,
			sse{"response.output_item.added", map[string]any{"type": "response.output_item.added", "output_index": i, "item": it}},
			sse{"response.output_item.done", map[string]any{"type": "response.output_item.done", "output_index": i, "item": it}})
	}
	events = append(events, sse{"response.completed", map[string]any{"type": "response.completed", "response": resp}})
	return writeEvents(w, events)
}
