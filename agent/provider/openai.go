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

// DefaultOpenAIBaseURL is the endpoint used when Options.BaseURL is empty.
const DefaultOpenAIBaseURL = "https://api.openai.com/v1/"

// OpenAI talks to the Chat Completions API with function calling (POST
// {base}/chat/completions, the key as Authorization: Bearer when one is
// set); with Options.BaseURL it talks to any OpenAI-compatible server (vLLM,
// llama.cpp's server, Ollama). Each published definition becomes a function
// tool; each tool call of the response's first choice becomes a call, its
// arguments passed on exactly as the model wrote them (malformed JSON
// included: the gate refuses it as invalid_argument). Chat Completions has
// no error flag on a tool message, so a refused or failed outcome is sent as
// text beginning with "ERROR (status, reason):" (see agent.ResultText). It
// is safe for concurrent use; each Conversation is not.
//
// Nothing is taken from the environment: the base URL is Options.BaseURL
// or DefaultOpenAIBaseURL, so OPENAI_BASE_URL does not redirect requests.
type OpenAI struct {
	opt Options
	ep  *endpoint
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
	if err := checkBaseURL("openai", base, opt.APIKey); err != nil {
		return nil, err
	}
	u, err := joinURL(base, "chat/completions")
	if err != nil {
		return nil, &setting.Error{In: "openai", Key: setting.BaseURL, Value: setting.Quote(redactURL(base)), Err: err}
	}
	h := http.Header{}
	if opt.APIKey != "" {
		h.Set("authorization", "Bearer "+opt.APIKey)
	}
	return &OpenAI{opt: opt, ep: newEndpoint("openai", "OPENAI_API_KEY", u, h, opt, openaiAPIMessage)}, nil
}

// Name implements agent.Provider.
func (o *OpenAI) Name() string { return "openai" }

// The Chat Completions request, as this package sends it.
type openaiRequest struct {
	Model               string          `json:"model"`
	Messages            []openaiMessage `json:"messages"`
	Tools               []openaiTool    `json:"tools,omitempty"`
	MaxCompletionTokens int             `json:"max_completion_tokens,omitempty"`
}

type openaiTool struct {
	Type     string         `json:"type"` // "function"
	Function openaiFunction `json:"function"`
}

type openaiFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters,omitempty"` // absent for a null schema
}

// openaiMessage is one message of the conversation: system, user, tool, or
// the model's own (content, refusal, tool calls, an audio reference, the
// older function_call), rebuilt from its response as the request format has
// it.
type openaiMessage struct {
	Role         string           `json:"role"`
	Content      string           `json:"content,omitempty"`
	Refusal      string           `json:"refusal,omitempty"`
	ToolCalls    []openaiToolCall `json:"tool_calls,omitempty"`
	ToolCallID   string           `json:"tool_call_id,omitempty"`
	Audio        *openaiAudio     `json:"audio,omitempty"`
	FunctionCall *openaiCall      `json:"function_call,omitempty"`
}

type openaiToolCall struct {
	ID       string        `json:"id"`
	Type     string        `json:"type"` // "function", "custom"
	Function *openaiCall   `json:"function,omitempty"`
	Custom   *openaiCustom `json:"custom,omitempty"`
}

type openaiCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type openaiCustom struct {
	Name  string `json:"name"`
	Input string `json:"input"`
}

type openaiAudio struct {
	ID string `json:"id"`
}

// Begin implements agent.Provider. The task must not be empty.
func (o *OpenAI) Begin(req agent.Request) (agent.Conversation, error) {
	if strings.TrimSpace(req.Task) == "" {
		return nil, errors.New("openai: no task: give the task as the argument of run")
	}
	tools := make([]openaiTool, 0, len(req.Tools))
	for _, d := range req.Tools {
		var params map[string]json.RawMessage
		if err := json.Unmarshal(d.InputSchema, &params); err != nil {
			return nil, fmt.Errorf("openai: tool %s: input schema is not a JSON object: %w", d.Name, err)
		}
		f := openaiFunction{Name: d.Name, Description: d.Description}
		if params != nil {
			f.Parameters = d.InputSchema
		}
		tools = append(tools, openaiTool{Type: "function", Function: f})
	}
	c := &openaiConv{p: o, req: openaiRequest{Model: o.opt.Model, Tools: tools}}
	if req.System != "" {
		c.req.Messages = append(c.req.Messages, openaiMessage{Role: "system", Content: req.System})
	}
	c.req.Messages = append(c.req.Messages, openaiMessage{Role: "user", Content: req.Task})
	if o.opt.MaxTokens > 0 {
		c.req.MaxCompletionTokens = o.opt.MaxTokens
	}
	return c, nil
}

type openaiConv struct {
	p       *OpenAI
	req     openaiRequest
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
		c.req.Messages = append(c.req.Messages, openaiMessage{Role: "tool", Content: content[id], ToolCallID: id})
	}
	c.pending = nil

	body, err := c.p.ep.post(ctx, &c.req)
	if err != nil {
		return agent.Turn{}, err
	}
	msg, t, err := decodeOpenAI(body)
	if err != nil {
		var pe *Error
		if errors.As(err, &pe) {
			return agent.Turn{}, err
		}
		return agent.Turn{}, &Error{Provider: "openai", Msg: "the answer is not a Chat Completions response: " + oneLine(cleanText(err.Error()))}
	}
	c.req.Messages = append(c.req.Messages, msg)
	for _, call := range t.Calls {
		c.pending = append(c.pending, call.ID)
	}
	return t, nil
}

// decodeOpenAI reads a Chat Completions response: its first choice's
// message, rebuilt for the conversation, and the turn it makes: its content
// (or "(refusal) " and the refusal when there is no content), one call per
// tool call (arguments as the model wrote them), the finish_reason as it
// is. A response without choices, or a tool call without an id (the tool
// message could not answer it), is an *Error.
func decodeOpenAI(body []byte) (openaiMessage, agent.Turn, error) {
	var r struct {
		Choices []struct {
			Message struct {
				Content   string `json:"content"`
				Refusal   string `json:"refusal"`
				ToolCalls []struct {
					ID       string `json:"id"`
					Type     string `json:"type"`
					Function struct {
						Name      string          `json:"name"`
						Arguments json.RawMessage `json:"arguments"`
					} `json:"function"`
					Custom struct {
						Name  string `json:"name"`
						Input string `json:"input"`
					} `json:"custom"`
				} `json:"tool_calls"`
				Audio *struct {
					ID string `json:"id"`
				} `json:"audio"`
				FunctionCall *struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function_call"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
	}
	if err := decodeObject(body, &r); err != nil {
		return openaiMessage{}, agent.Turn{}, err
	}
	if len(r.Choices) == 0 {
		return openaiMessage{}, agent.Turn{}, &Error{Provider: "openai", Msg: "the response has no choices"}
	}
	ch := r.Choices[0]
	m := ch.Message
	msg := openaiMessage{Role: "assistant", Content: m.Content, Refusal: m.Refusal}
	if m.Audio != nil && m.Audio.ID != "" {
		msg.Audio = &openaiAudio{ID: m.Audio.ID}
	}
	if m.FunctionCall != nil && m.FunctionCall.Name != "" {
		msg.FunctionCall = &openaiCall{Name: m.FunctionCall.Name, Arguments: m.FunctionCall.Arguments}
	}
	t := agent.Turn{Text: m.Content, Stop: ch.FinishReason}
	if t.Text == "" && m.Refusal != "" {
		t.Text = "(refusal) " + m.Refusal
	}
	for i, tc := range m.ToolCalls {
		if tc.ID == "" {
			// Some compatible servers omit ids; the tool message still
			// needs one that matches the model's message.
			return openaiMessage{}, agent.Turn{}, &Error{Provider: "openai", Msg: fmt.Sprintf("tool call %d has no id", i+1)}
		}
		if tc.Type == "custom" {
			msg.ToolCalls = append(msg.ToolCalls, openaiToolCall{ID: tc.ID, Type: "custom", Custom: &openaiCustom{Name: tc.Custom.Name, Input: tc.Custom.Input}})
			t.Calls = append(t.Calls, agent.ToolCall{ID: tc.ID, Name: tc.Custom.Name, Args: json.RawMessage(tc.Custom.Input)})
			continue
		}
		args := openaiArguments(tc.Function.Arguments)
		msg.ToolCalls = append(msg.ToolCalls, openaiToolCall{ID: tc.ID, Type: "function", Function: &openaiCall{Name: tc.Function.Name, Arguments: args}})
		t.Calls = append(t.Calls, agent.ToolCall{ID: tc.ID, Name: tc.Function.Name, Args: json.RawMessage(args)})
	}
	return msg, t, nil
}

// openaiArguments is a function call's arguments as the model wrote them:
// the text of the JSON string the format has, or, from a server that sends
// the arguments as an object instead, that object's JSON; "" for null or
// none.
func openaiArguments(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

// openaiAPIMessage is the message of a Chat Completions error body
// ({"error":{"message":...,"type":...,"code":...}}); from a compatible
// server also an "error" that is a string or a top-level "message";
// else the body's text.
func openaiAPIMessage(body []byte) string {
	var r struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
	}
	if json.Unmarshal(body, &r) == nil {
		var e struct {
			Message string `json:"message"`
		}
		var s string
		switch {
		case json.Unmarshal(r.Error, &e) == nil && e.Message != "":
			return cleanText(e.Message)
		case json.Unmarshal(r.Error, &s) == nil && s != "":
			return cleanText(s)
		case r.Message != "":
			return cleanText(r.Message)
		}
	}
	return cleanText(string(body))
}
