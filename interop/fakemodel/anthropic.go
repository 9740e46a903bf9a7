package fakemodel

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// anthropicWire is the Messages API: tools are {name, description,
// input_schema}; an MCP tool is named mcp__SERVER__TOOL by Claude Code; the
// assistant's tool_use blocks and the user's tool_result blocks
// ({tool_use_id, content: a string or text blocks, is_error}) carry the
// history.
type anthropicWire struct{ server string }

type anthropicRequest struct {
	Model    string `json:"model"`
	Stream   bool   `json:"stream"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Tools []json.RawMessage `json:"tools"`
}

type anthropicBlock struct {
	Type      string          `json:"type"`
	ID        string          `json:"id"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
}

func (a anthropicWire) parse(body []byte) (parsed, error) {
	var req anthropicRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return parsed{}, fmt.Errorf("messages request: %w", err)
	}
	p := parsed{tools: map[string]toolDecl{}, stream: req.Stream}
	prefix := "mcp__" + a.server + "__"
	for _, raw := range req.Tools {
		var t struct {
			Name string `json:"name"`
		}
		if json.Unmarshal(raw, &t) == nil && strings.HasPrefix(t.Name, prefix) {
			p.tools[strings.TrimPrefix(t.Name, prefix)] = toolDecl{name: t.Name, raw: raw}
		}
	}
	for _, m := range req.Messages {
		var blocks []json.RawMessage
		if json.Unmarshal(m.Content, &blocks) != nil {
			continue // a plain string
		}
		for _, raw := range blocks {
			var b anthropicBlock
			if json.Unmarshal(raw, &b) != nil {
				continue
			}
			switch {
			case m.Role == "assistant" && b.Type == "tool_use":
				if ref, ok := parseCallID(b.ID); ok {
					p.made = append(p.made, ref)
				}
			case m.Role == "user" && b.Type == "tool_result":
				if ref, ok := parseCallID(b.ToolUseID); ok {
					p.results = append(p.results, Result{Turn: ref.turn, Index: ref.index, Text: textOf(b.Content), IsError: b.IsError, Raw: raw})
				}
			}
		}
	}
	return p, nil
}

func (a anthropicWire) reply(w http.ResponseWriter, r *http.Request, p parsed, calls []wireCall, text string) error {
	var blocks []map[string]any
	if text != "" || len(calls) == 0 {
		blocks = append(blocks, map[string]any{"type": "text", "text": text})
	}
	for _, c := range calls {
		blocks = append(blocks, map[string]any{"type": "tool_use", "id": "toolu_" + c.id, "name": c.decl.name, "input": c.args})
	}
	stop := "end_turn"
	if len(calls) > 0 {
		stop = "tool_use"
	}
	usage := map[string]any{"input_tokens": 10, "output_tokens": 10}
	if !p.stream {
		w.Header().Set("Content-Type", "application/json")
		return json.NewEncoder(w).Encode(map[string]any{"id": "msg_fake", "type": "message", "role": "assistant", "model": "fake",
			"content": blocks, "stop_reason": stop, "stop_sequence": nil, "usage": usage})
	}
	events := []sse{{"message_start", map[string]any{"type": "message_start", "message": map[string]any{"id": "msg_fake", "type": "message", "role": "assistant",
		"model": "fake", "content": []any{}, "stop_reason": nil, "stop_sequence": nil, "usage": map[string]any{"input_tokens": 10, "output_tokens": 1}}}}}
	for i, b := range blocks {
		var start, delta map[string]any
		switch b["type"] {
		case "text":
			start = map[string]any{"type": "text", "text": ""}
			delta = map[string]any{"type": "text_delta", "text": b["text"]}
		case "tool_use":
			args, err := json.Marshal(b["input"])
			if err != nil {
				return err
			}
			start = map[string]any{"type": "tool_use", "id": b["id"], "name": b["name"], "input": map[string]any{}}
			delta = map[string]any{"type": "input_json_delta", "partial_json": string(args)}
		}
		events = append(events,
			sse{"content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": start}},
			sse{"content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": delta}},
			sse{"content_block_stop", map[string]any{"type": "content_block_stop", "index": i}})
	}
	events = append(events,
		sse{"message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]any{"output_tokens": 10}}},
		sse{"message_stop", map[string]any{"type": "message_stop"}})
	return writeEvents(w, events)
}
