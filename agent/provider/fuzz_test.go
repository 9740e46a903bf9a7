package provider

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode"

	"github.com/b10x/harness/agent/providertest"
)

// encodes reports whether v encodes as the request body would, to valid
// JSON.
func encodes(v any) bool {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	return enc.Encode(v) == nil && json.Valid(buf.Bytes())
}

// noControl reports whether s is valid UTF-8 without control characters.
func noControl(s string) bool {
	return strings.ToValidUTF8(s, "") == s && strings.IndexFunc(s, unicode.IsControl) < 0
}

func seed(f *testing.F, replies ...providertest.Reply) {
	for _, r := range replies {
		b, err := json.Marshal(r.Body)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
}

// FuzzAnthropicResponse: no answer makes the decoder panic; one it accepts
// goes back into the conversation as valid JSON, and each of its calls has
// arguments.
func FuzzAnthropicResponse(f *testing.F) {
	seed(f,
		providertest.AnthropicMessage("hi", "end_turn"),
		providertest.AnthropicMessage("", "tool_use", providertest.Call{ID: "a", Name: "file_read", Input: map[string]any{"path": "x"}}, providertest.Call{ID: "b", Name: "run", Input: "str"}),
		providertest.AnthropicError(529, "overloaded_error", "Overloaded", nil),
	)
	f.Add([]byte(`{"content":[{"type":"thinking","thinking":"t","signature":"s"},{"type":"x","z":[1e999]},{"type":"tool_use","id":"i","name":"n","input":null}],"stop_reason":null}`))
	f.Add([]byte(`{"content":[{"type":"text","text":"\ud800"}]}`))
	f.Add([]byte(`{"content":null}`))
	f.Add([]byte(` [] `))
	f.Fuzz(func(t *testing.T, body []byte) {
		blocks, turn, err := decodeAnthropic(body)
		if msg := anthropicAPIMessage(body); !noControl(msg) {
			t.Errorf("API message %q has control characters", msg)
		}
		if err != nil {
			return
		}
		content := make([]any, len(blocks))
		for i, b := range blocks {
			content[i] = b
		}
		if !encodes(anthropicMessage{Role: "assistant", Content: content}) {
			t.Errorf("the accepted answer %q does not encode back", body)
		}
		for _, c := range turn.Calls {
			if len(c.Args) == 0 {
				t.Errorf("call %+v has no arguments", c)
			}
		}
	})
}

// FuzzOpenAIResponse: no answer makes the decoder panic; one it accepts
// gives one history tool call per call, each with an id, and encodes back.
func FuzzOpenAIResponse(f *testing.F) {
	seed(f,
		providertest.OpenAIMessage("hi", "stop"),
		providertest.OpenAIMessage("", "tool_calls", providertest.Call{ID: "a", Name: "file_read", Raw: `{"path": "x"`}, providertest.Call{ID: "b", Name: "dir_list", Input: map[string]any{}}),
		providertest.OpenAIError(401, "invalid_request_error", "invalid_api_key", "Incorrect API key provided", nil),
	)
	f.Add([]byte(`{"choices":[{"message":{"content":null,"refusal":"no","tool_calls":[{"id":"c","type":"custom","custom":{"name":"g","input":"x"}},{"id":"d","function":{"name":"f","arguments":{"a":1}}}],"audio":{"id":"au"}},"finish_reason":"tool_calls"}]}`))
	f.Add([]byte(`{"choices":[]}`))
	f.Add([]byte(`{"object":"error","message":"bad"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		msg, turn, err := decodeOpenAI(body)
		if m := openaiAPIMessage(body); !noControl(m) {
			t.Errorf("API message %q has control characters", m)
		}
		if err != nil {
			return
		}
		if len(msg.ToolCalls) != len(turn.Calls) {
			t.Errorf("%d history calls for %d calls", len(msg.ToolCalls), len(turn.Calls))
		}
		for _, c := range turn.Calls {
			if c.ID == "" {
				t.Errorf("call %+v has no id", c)
			}
		}
		if !encodes(msg) {
			t.Errorf("the accepted answer %q does not encode back", body)
		}
	})
}
