package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/b10x/harness/agent"
	"github.com/b10x/harness/internal/setting"
)

// DefaultOpenAIBaseURL is the endpoint used when Options.BaseURL is empty.
const DefaultOpenAIBaseURL = "https://api.openai.com/v1/"

// OpenAI talks to the Chat Completions API with function calling, through
// the official SDK; with Options.BaseURL it talks to any OpenAI-compatible
// server (vLLM, llama.cpp's server, Ollama). Each published definition
// becomes a function tool; each tool call of the response's first choice
// becomes a call, its arguments passed on exactly as the model wrote them
// (malformed JSON included: the gate refuses it as invalid_argument). Chat
// Completions has no error flag on a tool message, so a refused or failed
// outcome is sent as text beginning with "ERROR (status, reason):" (see
// agent.ResultText). It is safe for concurrent use; each Conversation is not.
//
// The base URL is always passed explicitly (Options.BaseURL or
// DefaultOpenAIBaseURL), so OPENAI_BASE_URL in the environment does not
// redirect requests.
type OpenAI struct {
	opt    Options
	client openai.Client
}

// NewOpenAI returns an OpenAI provider. Options.Model is required.
func NewOpenAI(opt Options) (*OpenAI, error) {
	if strings.TrimSpace(opt.Model) == "" {
		return nil, &setting.Error{Key: setting.Model, Err: errors.New("none given; openai needs one")}
	}
	base := opt.BaseURL
	if base == "" {
		base = DefaultOpenAIBaseURL
	}
	if err := checkBaseURL(base, opt.APIKey); err != nil {
		return nil, fmt.Errorf("openai: %w", err)
	}
	opts := []option.RequestOption{
		option.WithBaseURL(base),
		option.WithAPIKey(opt.APIKey),
		option.WithMaxRetries(opt.retries()),
		option.WithRequestTimeout(opt.timeout()),
	}
	if opt.HTTPClient != nil {
		opts = append(opts, option.WithHTTPClient(opt.HTTPClient))
	}
	return &OpenAI{opt: opt, client: openai.NewClient(opts...)}, nil
}

// Name implements agent.Provider.
func (o *OpenAI) Name() string { return "openai" }

// Begin implements agent.Provider. The task must not be empty.
func (o *OpenAI) Begin(req agent.Request) (agent.Conversation, error) {
	if strings.TrimSpace(req.Task) == "" {
		return nil, errors.New("openai: no task: give the task as the argument of run")
	}
	tools := make([]openai.ChatCompletionToolUnionParam, 0, len(req.Tools))
	for _, d := range req.Tools {
		var params map[string]any
		if err := json.Unmarshal(d.InputSchema, &params); err != nil {
			return nil, fmt.Errorf("openai: tool %s: input schema is not a JSON object: %w", d.Name, err)
		}
		tools = append(tools, openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
			Name:        d.Name,
			Description: openai.String(d.Description),
			Parameters:  shared.FunctionParameters(params),
		}))
	}
	c := &openaiConv{p: o, params: openai.ChatCompletionNewParams{
		Model: shared.ChatModel(o.opt.Model),
		Tools: tools,
	}}
	if req.System != "" {
		c.params.Messages = append(c.params.Messages, openai.SystemMessage(req.System))
	}
	c.params.Messages = append(c.params.Messages, openai.UserMessage(req.Task))
	if o.opt.MaxTokens > 0 {
		c.params.MaxCompletionTokens = openai.Int(int64(o.opt.MaxTokens))
	}
	return c, nil
}

type openaiConv struct {
	p       *OpenAI
	params  openai.ChatCompletionNewParams
	pending []string
}

// Next implements agent.Conversation.
func (c *openaiConv) Next(ctx context.Context, results []agent.ToolResult) (agent.Turn, error) {
	if len(results) != len(c.pending) {
		return agent.Turn{}, fmt.Errorf("openai: bug: %d results for %d tool calls", len(results), len(c.pending))
	}
	// One tool message per id: a model that gave two calls one id gets
	// their results (the second is the agent's refusal) in one message,
	// in order, rather than two answers to one call.
	var order []string
	content := map[string]string{}
	for i, r := range results {
		if r.CallID != c.pending[i] {
			return agent.Turn{}, fmt.Errorf("openai: bug: result %d answers %q, want %q", i, r.CallID, c.pending[i])
		}
		if prev, ok := content[r.CallID]; ok {
			content[r.CallID] = prev + "\n\n" + r.Content
			continue
		}
		order = append(order, r.CallID)
		content[r.CallID] = r.Content
	}
	for _, id := range order {
		c.params.Messages = append(c.params.Messages, openai.ToolMessage(content[id], id))
	}
	c.pending = nil

	res, err := c.p.client.Chat.Completions.New(ctx, c.params)
	if err != nil {
		status, apiMsg := 0, ""
		var ae *openai.Error
		if errors.As(err, &ae) {
			status, apiMsg = ae.StatusCode, ae.Message
		}
		return agent.Turn{}, describe("openai", err, status, apiMsg, c.p.opt, "OPENAI_API_KEY")
	}
	if len(res.Choices) == 0 {
		return agent.Turn{}, &Error{Provider: "openai", Msg: "the response has no choices"}
	}
	ch := res.Choices[0]
	c.params.Messages = append(c.params.Messages, ch.Message.ToParam())

	t := agent.Turn{Text: ch.Message.Content, Stop: ch.FinishReason}
	if t.Text == "" && ch.Message.Refusal != "" {
		t.Text = "(refusal) " + ch.Message.Refusal
	}
	for i, tc := range ch.Message.ToolCalls {
		id := tc.ID
		if id == "" {
			// Some compatible servers omit ids; the tool message still
			// needs one that matches the model's message.
			return agent.Turn{}, &Error{Provider: "openai", Msg: fmt.Sprintf("tool call %d has no id", i+1)}
		}
		name, args := tc.Function.Name, tc.Function.Arguments
		if tc.Type == "custom" {
			name, args = tc.Custom.Name, tc.Custom.Input
		}
		t.Calls = append(t.Calls, agent.ToolCall{ID: id, Name: name, Args: json.RawMessage(args)})
		c.pending = append(c.pending, id)
	}
	return t, nil
}
