package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/b10x/harness/agent"
	"github.com/b10x/harness/internal/setting"
)

// anthropicBaseURL is the endpoint used when Options.BaseURL is empty.
const anthropicBaseURL = "https://api.anthropic.com"

// anthropicVersion is the Messages API version requests ask for.
const anthropicVersion = "2023-06-01"

// Anthropic talks to the Messages API with tool use (POST {base}/v1/messages,
// anthropic-version 2023-06-01, the key in x-api-key). Each published
// definition becomes a custom tool; each tool_use block of a response
// becomes a call; each outcome goes back as a tool_result block with
// is_error set for every refused or failed outcome. The model's turns go
// back into the conversation exactly as they came, blocks this package does
// not read (thinking, server tools, kinds newer than it) included. It is
// safe for concurrent use; each Conversation is not.
//
// Nothing is taken from the environment (no ANTHROPIC_BASE_URL, no other
// credentials): the key and endpoint are exactly those in Options.
type Anthropic struct {
	opt Options
	ep  *endpoint
}

// NewAnthropic returns an Anthropic provider. Options.Model is required.
func NewAnthropic(opt Options) (*Anthropic, error) {
	if strings.TrimSpace(opt.Model) == "" {
		return nil, &setting.Error{Key: setting.Model, Err: errors.New("none given; anthropic needs one")}
	}
	base := anthropicBaseURL
	if opt.BaseURL != "" {
		if err := checkBaseURL("anthropic", opt.BaseURL, opt.APIKey); err != nil {
			return nil, err
		}
		base = opt.BaseURL
	}
	if opt.MaxTokens <= 0 {
		opt.MaxTokens = DefaultAnthropicMaxTokens
	}
	u, err := joinURL(base, "v1/messages")
	if err != nil {
		return nil, &setting.Error{In: "anthropic", Key: setting.BaseURL, Value: setting.Quote(redactURL(base)), Err: err}
	}
	h := http.Header{}
	h.Set("anthropic-version", anthropicVersion)
	if opt.APIKey != "" {
		h.Set("x-api-key", opt.APIKey)
	}
	return &Anthropic{opt: opt, ep: newEndpoint("anthropic", "ANTHROPIC_API_KEY", u, h, opt, anthropicAPIMessage)}, nil
}

// Name implements agent.Provider.
func (a *Anthropic) Name() string { return "anthropic" }

// The Messages API's request, as this package sends it.
type anthropicRequest struct {
	Model     string             `json:"model"`
	MaxTokens int                `json:"max_tokens"`
	System    []anthropicText    `json:"system,omitempty"`
	Tools     []anthropicTool    `json:"tools,omitempty"`
	Messages  []anthropicMessage `json:"messages"`
}

type anthropicText struct {
	Type string `json:"type"` // "text"
	Text string `json:"text"`
}

type anthropicTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// anthropicMessage is one message of the conversation. Content holds the
// blocks: ours as values, the model's as the json.RawMessage they came as.
type anthropicMessage struct {
	Role    string `json:"role"` // "user", "assistant"
	Content []any  `json:"content"`
}

type anthropicToolResult struct {
	Type      string          `json:"type"` // "tool_result"
	ToolUseID string          `json:"tool_use_id"`
	Content   []anthropicText `json:"content"`
	IsError   bool            `json:"is_error"`
}

// Begin implements agent.Provider. The task must not be empty.
func (a *Anthropic) Begin(req agent.Request) (agent.Conversation, error) {
	if strings.TrimSpace(req.Task) == "" {
		return nil, errors.New("anthropic: no task: give the task as the argument of run")
	}
	tools := make([]anthropicTool, 0, len(req.Tools))
	for _, d := range req.Tools {
		schema, err := anthropicSchema(d.InputSchema)
		if err != nil {
			return nil, fmt.Errorf("anthropic: tool %s: %w", d.Name, err)
		}
		tools = append(tools, anthropicTool{Name: d.Name, Description: d.Description, InputSchema: schema})
	}
	c := &anthropicConv{p: a, req: anthropicRequest{
		Model:     a.opt.Model,
		MaxTokens: a.opt.MaxTokens,
		Tools:     tools,
		Messages:  []anthropicMessage{{Role: "user", Content: []any{anthropicText{Type: "text", Text: req.Task}}}},
	}}
	if req.System != "" {
		c.req.System = []anthropicText{{Type: "text", Text: req.System}}
	}
	return c, nil
}

// anthropicSchema makes a JSON Schema object the input schema of a tool:
// type object (the only type the API takes), properties, required, and
// every other keyword as it is. A required that is not a list is dropped;
// one that holds a non-string is an error.
func anthropicSchema(raw json.RawMessage) (json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("input schema is not a JSON object: %w", err)
	}
	if t, ok := m["type"]; ok {
		var v any
		if err := json.Unmarshal(t, &v); err != nil || v != "object" {
			return nil, fmt.Errorf("input schema type %v: want object", v)
		}
	}
	out := make(map[string]json.RawMessage, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	out["type"] = json.RawMessage(`"object"`)
	if p, ok := m["properties"]; ok && string(p) == "null" {
		delete(out, "properties")
	}
	if r, ok := m["required"]; ok {
		var list []any
		if err := json.Unmarshal(r, &list); err != nil || len(list) == 0 {
			delete(out, "required")
		}
		for _, v := range list {
			if _, ok := v.(string); !ok {
				return nil, errors.New("input schema: required holds a non-string")
			}
		}
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("input schema: %w", err)
	}
	return b, nil
}

type anthropicConv struct {
	p       *Anthropic
	req     anthropicRequest
	pending []string // tool_use ids awaiting results
}

// Next implements agent.Conversation.
func (c *anthropicConv) Next(ctx context.Context, results []agent.ToolResult) (agent.Turn, error) {
	if len(results) != len(c.pending) {
		return agent.Turn{}, fmt.Errorf("anthropic: bug: %d results for %d tool calls", len(results), len(c.pending))
	}
	if len(results) > 0 {
		blocks := make([]any, 0, len(results))
		for i, r := range results {
			if r.CallID != c.pending[i] {
				return agent.Turn{}, fmt.Errorf("anthropic: bug: result %d answers %q, want %q", i, r.CallID, c.pending[i])
			}
			blocks = append(blocks, anthropicToolResult{
				Type:      "tool_result",
				ToolUseID: r.CallID,
				Content:   []anthropicText{{Type: "text", Text: r.Content}},
				IsError:   r.IsError,
			})
		}
		c.req.Messages = append(c.req.Messages, anthropicMessage{Role: "user", Content: blocks})
	}
	c.pending = nil

	body, err := c.p.ep.post(ctx, &c.req)
	if err != nil {
		return agent.Turn{}, err
	}
	blocks, t, err := decodeAnthropic(body)
	if err != nil {
		return agent.Turn{}, &Error{Provider: "anthropic", Msg: "the answer is not a Messages API response: " + oneLine(cleanText(err.Error()))}
	}
	content := make([]any, len(blocks))
	for i, b := range blocks {
		content[i] = b
	}
	c.req.Messages = append(c.req.Messages, anthropicMessage{Role: "assistant", Content: content})
	for _, call := range t.Calls {
		c.pending = append(c.pending, call.ID)
	}
	return t, nil
}

// decodeAnthropic reads a Messages API response: its content blocks as they
// came (to go back into the conversation), and the turn they make: the
// text blocks' text, one call per tool_use block (input exactly as sent;
// {} when absent), the stop_reason as it is. A block of another type is
// kept and otherwise ignored.
func decodeAnthropic(body []byte) ([]json.RawMessage, agent.Turn, error) {
	var r struct {
		Content    []json.RawMessage `json:"content"`
		StopReason string            `json:"stop_reason"`
	}
	if err := decodeObject(body, &r); err != nil {
		return nil, agent.Turn{}, err
	}
	t := agent.Turn{Stop: r.StopReason}
	var text []string
	for i, raw := range r.Content {
		var head struct {
			Type string `json:"type"`
		}
		if err := decodeObject(raw, &head); err != nil {
			return nil, agent.Turn{}, fmt.Errorf("content block %d: %w", i+1, err)
		}
		switch head.Type {
		case "text":
			var b struct {
				Text string `json:"text"`
			}
			if err := json.Unmarshal(raw, &b); err != nil {
				return nil, agent.Turn{}, fmt.Errorf("content block %d: %w", i+1, err)
			}
			if b.Text != "" {
				text = append(text, b.Text)
			}
		case "tool_use":
			var b struct {
				ID    string          `json:"id"`
				Name  string          `json:"name"`
				Input json.RawMessage `json:"input"`
			}
			if err := json.Unmarshal(raw, &b); err != nil {
				return nil, agent.Turn{}, fmt.Errorf("content block %d: %w", i+1, err)
			}
			args := b.Input
			if len(args) == 0 {
				args = json.RawMessage("{}")
			}
			t.Calls = append(t.Calls, agent.ToolCall{ID: b.ID, Name: b.Name, Args: args})
		}
	}
	t.Text = strings.Join(text, "\n")
	return r.Content, t, nil
}

// anthropicAPIMessage is the message of a Messages API error body
// ({"type":"error","error":{"type":...,"message":...}}): its message, else
// its type, else the body's text.
func anthropicAPIMessage(body []byte) string {
	var r struct {
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &r) == nil {
		if r.Error.Message != "" {
			return cleanText(r.Error.Message)
		}
		if r.Error.Type != "" {
			return cleanText(r.Error.Type)
		}
	}
	return cleanText(string(body))
}
