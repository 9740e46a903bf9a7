package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/b10x/harness/agent"
	"github.com/b10x/harness/internal/setting"
)

// Anthropic talks to the Messages API with tool use, through the official
// SDK. Each published definition becomes a custom tool; each tool_use block of
// a response becomes a call; each outcome goes back as a tool_result block
// with is_error set for every refused or failed outcome. It is safe for
// concurrent use; each Conversation is not.
//
// The SDK's environment defaults (ANTHROPIC_BASE_URL, profiles, federation,
// other credentials) and its OpenTelemetry spans are switched off: the key
// and endpoint are exactly those in Options.
type Anthropic struct {
	opt    Options
	client anthropic.Client
}

// NewAnthropic returns an Anthropic provider. Options.Model is required.
func NewAnthropic(opt Options) (*Anthropic, error) {
	if strings.TrimSpace(opt.Model) == "" {
		return nil, &setting.Error{Key: setting.Model, Err: errors.New("none given; anthropic needs one")}
	}
	opts := []option.RequestOption{
		option.WithoutEnvironmentDefaults(),
		option.WithoutOpenTelemetry(),
		option.WithMaxRetries(opt.retries()),
		option.WithRequestTimeout(opt.timeout()),
	}
	if opt.APIKey != "" {
		opts = append(opts, option.WithAPIKey(opt.APIKey))
	}
	if opt.BaseURL != "" {
		if err := checkBaseURL(opt.BaseURL, opt.APIKey); err != nil {
			return nil, fmt.Errorf("anthropic: %w", err)
		}
		opts = append(opts, option.WithBaseURL(opt.BaseURL))
	}
	if opt.HTTPClient != nil {
		opts = append(opts, option.WithHTTPClient(opt.HTTPClient))
	}
	if opt.MaxTokens <= 0 {
		opt.MaxTokens = DefaultAnthropicMaxTokens
	}
	return &Anthropic{opt: opt, client: anthropic.NewClient(opts...)}, nil
}

// Name implements agent.Provider.
func (a *Anthropic) Name() string { return "anthropic" }

// Begin implements agent.Provider. The task must not be empty.
func (a *Anthropic) Begin(req agent.Request) (agent.Conversation, error) {
	if strings.TrimSpace(req.Task) == "" {
		return nil, errors.New("anthropic: no task: give the task as the argument of run")
	}
	tools := make([]anthropic.ToolUnionParam, 0, len(req.Tools))
	for _, d := range req.Tools {
		schema, err := anthropicSchema(d.InputSchema)
		if err != nil {
			return nil, fmt.Errorf("anthropic: tool %s: %w", d.Name, err)
		}
		tools = append(tools, anthropic.ToolUnionParam{OfTool: &anthropic.ToolParam{
			Name:        d.Name,
			Description: anthropic.String(d.Description),
			InputSchema: schema,
		}})
	}
	c := &anthropicConv{p: a, params: anthropic.MessageNewParams{
		Model:     anthropic.Model(a.opt.Model),
		MaxTokens: int64(a.opt.MaxTokens),
		Tools:     tools,
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(req.Task))},
	}}
	if req.System != "" {
		c.params.System = []anthropic.TextBlockParam{{Text: req.System}}
	}
	return c, nil
}

// anthropicSchema splits a JSON Schema object into the SDK's input schema:
// properties and required, with every other keyword kept as an extra field.
func anthropicSchema(raw json.RawMessage) (anthropic.ToolInputSchemaParam, error) {
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return anthropic.ToolInputSchemaParam{}, fmt.Errorf("input schema is not a JSON object: %w", err)
	}
	if t, ok := m["type"]; ok && t != "object" {
		return anthropic.ToolInputSchemaParam{}, fmt.Errorf("input schema type %v: want object", t)
	}
	s := anthropic.ToolInputSchemaParam{Properties: m["properties"], ExtraFields: map[string]any{}}
	if req, ok := m["required"].([]any); ok {
		for _, r := range req {
			name, ok := r.(string)
			if !ok {
				return anthropic.ToolInputSchemaParam{}, errors.New("input schema: required holds a non-string")
			}
			s.Required = append(s.Required, name)
		}
	}
	for k, v := range m {
		switch k {
		case "type", "properties", "required":
		default:
			s.ExtraFields[k] = v
		}
	}
	return s, nil
}

type anthropicConv struct {
	p       *Anthropic
	params  anthropic.MessageNewParams
	pending []string // tool_use ids awaiting results
}

// Next implements agent.Conversation.
func (c *anthropicConv) Next(ctx context.Context, results []agent.ToolResult) (agent.Turn, error) {
	if len(results) != len(c.pending) {
		return agent.Turn{}, fmt.Errorf("anthropic: bug: %d results for %d tool calls", len(results), len(c.pending))
	}
	if len(results) > 0 {
		blocks := make([]anthropic.ContentBlockParamUnion, 0, len(results))
		for i, r := range results {
			if r.CallID != c.pending[i] {
				return agent.Turn{}, fmt.Errorf("anthropic: bug: result %d answers %q, want %q", i, r.CallID, c.pending[i])
			}
			blocks = append(blocks, anthropic.NewToolResultBlock(r.CallID, r.Content, r.IsError))
		}
		c.params.Messages = append(c.params.Messages, anthropic.NewUserMessage(blocks...))
	}
	c.pending = nil

	msg, err := c.p.client.Messages.New(ctx, c.params)
	if err != nil {
		status, apiMsg := 0, ""
		var ae *anthropic.Error
		if errors.As(err, &ae) {
			status, apiMsg = ae.StatusCode, ae.Message
			if apiMsg == "" {
				apiMsg = string(ae.Type())
			}
		}
		return agent.Turn{}, describe("anthropic", err, status, apiMsg, c.p.opt, "ANTHROPIC_API_KEY")
	}
	c.params.Messages = append(c.params.Messages, msg.ToParam())

	t := agent.Turn{Stop: string(msg.StopReason)}
	var text []string
	for _, b := range msg.Content {
		switch b.Type {
		case "text":
			if b.Text != "" {
				text = append(text, b.Text)
			}
		case "tool_use":
			args := b.Input
			if len(args) == 0 {
				args = json.RawMessage("{}")
			}
			t.Calls = append(t.Calls, agent.ToolCall{ID: b.ID, Name: b.Name, Args: append(json.RawMessage(nil), args...)})
			c.pending = append(c.pending, b.ID)
		}
	}
	t.Text = strings.Join(text, "\n")
	return t, nil
}
