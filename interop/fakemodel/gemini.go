package fakemodel

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// geminiWire is generateContent: contents are {role: user|model, parts};
// the model's calls are functionCall parts ({id, name, args}) and the
// client's answers functionResponse parts ({id, name, response: an
// object}). Tools are functionDeclarations; Gemini CLI names an MCP tool
// mcp_SERVER_TOOL. A call whose id the client did not keep is placed by
// order: the k-th model content with calls is turn k.
//
// What the model reads of a result is the functionResponse's response
// object; Result.Text is its "error" when it has one (IsError; Gemini CLI
// puts its own message there), else its "output" when that is a string
// (Gemini CLI puts the tool's text there), the text of its "content"
// parts, else the object as JSON.
type geminiWire struct {
	server string
	stream bool
}

type geminiRequest struct {
	Contents []struct {
		Role  string            `json:"role"`
		Parts []json.RawMessage `json:"parts"`
	} `json:"contents"`
	Tools []struct {
		FunctionDeclarations []json.RawMessage `json:"functionDeclarations"`
	} `json:"tools"`
}

type geminiPart struct {
	FunctionCall *struct {
		ID   string `json:"id"`
		Name string `json:"name"`
	} `json:"functionCall"`
	FunctionResponse *struct {
		ID       string          `json:"id"`
		Name     string          `json:"name"`
		Response json.RawMessage `json:"response"`
	} `json:"functionResponse"`
}

func (g geminiWire) parse(body []byte) (parsed, error) {
	var req geminiRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return parsed{}, fmt.Errorf("generateContent request: %w", err)
	}
	p := parsed{tools: map[string]toolDecl{}, stream: g.stream}
	prefix := "mcp_" + g.server + "_"
	for _, t := range req.Tools {
		for _, raw := range t.FunctionDeclarations {
			var d struct {
				Name string `json:"name"`
			}
			if json.Unmarshal(raw, &d) == nil && strings.HasPrefix(d.Name, prefix) {
				p.tools[strings.TrimPrefix(d.Name, prefix)] = toolDecl{name: d.Name, raw: raw}
			}
		}
	}
	modelTurns := 0
	var last []callRef // the calls of the latest model content, in order
	for _, c := range req.Contents {
		var calls []callRef
		answered := 0
		for _, raw := range c.Parts {
			var part geminiPart
			if json.Unmarshal(raw, &part) != nil {
				continue
			}
			switch {
			case c.Role == "model" && part.FunctionCall != nil && strings.HasPrefix(part.FunctionCall.Name, prefix):
				ref, ok := parseCallID(part.FunctionCall.ID)
				if !ok {
					ref = callRef{modelTurns, len(calls)}
				}
				calls = append(calls, ref)
			case part.FunctionResponse != nil && strings.HasPrefix(part.FunctionResponse.Name, prefix):
				ref, ok := parseCallID(part.FunctionResponse.ID)
				if !ok && answered < len(last) {
					ref, ok = last[answered], true
				}
				answered++
				if ok {
					text, isErr := geminiResponseText(part.FunctionResponse.Response)
					p.results = append(p.results, Result{Turn: ref.turn, Index: ref.index, Text: text, IsError: isErr, Raw: raw})
				}
			}
		}
		if len(calls) > 0 {
			p.made = append(p.made, calls...)
			last = calls
			modelTurns++
		}
	}
	return p, nil
}

// geminiResponseText is what the model reads of a functionResponse's
// response object (see geminiWire).
func geminiResponseText(raw json.RawMessage) (string, bool) {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return string(raw), false
	}
	var s string
	if e, isErr := m["error"]; isErr {
		if json.Unmarshal(e, &s) == nil {
			return s, true
		}
		return string(e), true
	}
	if out, ok := m["output"]; ok && json.Unmarshal(out, &s) == nil {
		return s, false
	}
	if c, ok := m["content"]; ok {
		return textOf(c), false
	}
	return string(raw), false
}

func (g geminiWire) reply(w http.ResponseWriter, r *http.Request, p parsed, calls []wireCall, text string) error {
	var parts []map[string]any
	if text != "" || len(calls) == 0 {
		parts = append(parts, map[string]any{"text": text})
	}
	for _, c := range calls {
		parts = append(parts, map[string]any{"functionCall": map[string]any{"id": c.id, "name": c.decl.name, "args": c.args}})
	}
	resp := map[string]any{
		"candidates":    []any{map[string]any{"content": map[string]any{"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}},
		"usageMetadata": map[string]any{"promptTokenCount": 10, "candidatesTokenCount": 10, "totalTokenCount": 20},
		"modelVersion":  "fake",
	}
	if !p.stream {
		w.Header().Set("Content-Type", "application/json")
		return json.NewEncoder(w).Encode(resp)
	}
	return writeEvents(w, []sse{{"", resp}})
}
