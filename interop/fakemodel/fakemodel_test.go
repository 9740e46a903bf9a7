package fakemodel

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

var script = []Turn{
	{Calls: []Call{{Tool: "file_read", Args: map[string]any{"path": "a.txt"}}, {Tool: "dir_list", Args: map[string]any{}}}},
	{Text: "done"},
}

func start(t *testing.T, f Format) *Server {
	t.Helper()
	s, err := Start(Options{Format: f, Server: "b10x", Script: script})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func post(t *testing.T, url, body string) string {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: %s: %s", url, resp.Status, b)
	}
	return string(b)
}

// events reads an SSE stream's data payloads.
func events(t *testing.T, stream string) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(stream))
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			var m map[string]any
			if err := json.Unmarshal([]byte(d), &m); err != nil {
				t.Fatalf("event %q: %v", d, err)
			}
			out = append(out, m)
		}
	}
	return out
}

func compact(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// checkSeen: turn 0's two results, as the second request carried them.
func checkSeen(t *testing.T, s *Server) {
	t.Helper()
	seen := s.Seen(0)
	if len(seen) != 2 || seen[0].Tool != "file_read" || seen[0].Text != "hello\n" || seen[1].Tool != "dir_list" || seen[1].Index != 1 {
		t.Fatalf("%+v", seen)
	}
	if main := s.Main(); len(main) != 2 || main[0].Turn != 0 || main[1].Turn != 1 || len(main[0].Tools) != 2 {
		t.Fatalf("%+v", main)
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
}

func TestAnthropic(t *testing.T) {
	s := start(t, Anthropic)
	tools := `"tools":[{"name":"Read","input_schema":{}},{"name":"mcp__b10x__file_read","input_schema":{}},{"name":"mcp__b10x__dir_list","input_schema":{}}]`
	out := post(t, s.URL()+"/v1/messages?beta=true", `{"stream":true,"messages":[{"role":"user","content":"go"}],`+tools+`}`)
	evs := events(t, out)
	var uses []string
	for _, e := range evs {
		if cb, ok := e["content_block"].(map[string]any); ok && cb["type"] == "tool_use" {
			uses = append(uses, cb["id"].(string)+" "+cb["name"].(string))
		}
	}
	if strings.Join(uses, ",") != "toolu_b10x_0_0 mcp__b10x__file_read,toolu_b10x_0_1 mcp__b10x__dir_list" || !strings.Contains(out, `"stop_reason":"tool_use"`) ||
		!strings.Contains(out, `"partial_json":"{\"path\":\"a.txt\"}"`) {
		t.Fatalf("%s", out)
	}
	second := `{"stream":true,"messages":[{"role":"user","content":"go"},` +
		`{"role":"assistant","content":[{"type":"tool_use","id":"toolu_b10x_0_0","name":"mcp__b10x__file_read","input":{}},{"type":"tool_use","id":"toolu_b10x_0_1","name":"mcp__b10x__dir_list","input":{}}]},` +
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_b10x_0_0","content":[{"type":"text","text":"hello\n"}]},{"type":"tool_result","tool_use_id":"toolu_b10x_0_1","content":"x","is_error":true}]}],` + tools + `}`
	if out := post(t, s.URL()+"/v1/messages", second); !strings.Contains(out, `"text":"done"`) || !strings.Contains(out, `"end_turn"`) {
		t.Fatalf("%s", out)
	}
	checkSeen(t, s)
	if !s.Seen(0)[1].IsError {
		t.Error("is_error lost")
	}
	if out := post(t, s.URL()+"/v1/messages/count_tokens", `{}`); !strings.Contains(out, "input_tokens") {
		t.Fatal(out)
	}
}

func TestOpenAI(t *testing.T) {
	s := start(t, OpenAI)
	tools := `"tools":[{"type":"function","name":"exec_command"},{"type":"namespace","name":"mcp__b10x","tools":[{"type":"function","name":"file_read"},{"type":"function","name":"dir_list"}]}]`
	out := post(t, s.URL()+"/v1/responses", `{"stream":true,"input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"go"}]}],`+tools+`}`)
	var calls []string
	for _, e := range events(t, out) {
		if e["type"] == "response.output_item.done" {
			it := e["item"].(map[string]any)
			calls = append(calls, compact(t, []any{it["call_id"], it["namespace"], it["name"], it["arguments"]}))
		}
	}
	if strings.Join(calls, ",") != `["call_b10x_0_0","mcp__b10x","file_read","{\"path\":\"a.txt\"}"],["call_b10x_0_1","mcp__b10x","dir_list","{}"]` {
		t.Fatalf("%s", out)
	}
	second := `{"stream":true,"input":[{"type":"function_call","call_id":"call_b10x_0_0","name":"file_read"},{"type":"function_call","call_id":"call_b10x_0_1","name":"dir_list"},` +
		`{"type":"function_call_output","call_id":"call_b10x_0_0","output":"hello\n"},{"type":"function_call_output","call_id":"call_b10x_0_1","output":[{"type":"input_text","text":"x"}]}],` + tools + `}`
	if out := post(t, s.URL()+"/v1/responses", second); !strings.Contains(out, `"text":"done","type":"output_text"`) || !strings.Contains(out, "response.completed") {
		t.Fatalf("%s", out)
	}
	checkSeen(t, s)
}

func TestGemini(t *testing.T) {
	s := start(t, Gemini)
	tools := `"tools":[{"functionDeclarations":[{"name":"read_file"},{"name":"mcp_b10x_file_read"},{"name":"mcp_b10x_dir_list"}]}]`
	out := post(t, s.URL()+"/v1beta/models/m:streamGenerateContent?alt=sse", `{"contents":[{"role":"user","parts":[{"text":"go"}]}],`+tools+`}`)
	evs := events(t, out)
	if len(evs) != 1 || !strings.Contains(compact(t, evs[0]), `{"functionCall":{"args":{"path":"a.txt"},"id":"b10x_0_0","name":"mcp_b10x_file_read"}}`) {
		t.Fatalf("%s", out)
	}
	// A client that drops the ids: places come from the order.
	second := `{"contents":[{"role":"user","parts":[{"text":"go"}]},{"role":"model","parts":[{"functionCall":{"name":"mcp_b10x_file_read"}},{"functionCall":{"name":"mcp_b10x_dir_list"}}]},` +
		`{"role":"user","parts":[{"functionResponse":{"name":"mcp_b10x_file_read","response":{"output":"hello\n"}}},{"functionResponse":{"name":"mcp_b10x_dir_list","response":{"error":"x"}}}]}],` + tools + `}`
	if out := post(t, s.URL()+"/v1beta/models/m:generateContent", second); !strings.Contains(out, `"text":"done"`) {
		t.Fatalf("%s", out)
	}
	checkSeen(t, s)
	if r := s.Seen(0)[1]; !r.IsError || r.Text != "x" {
		t.Errorf("%+v", r)
	}
}

// TestUnofferedTool: a script calling a tool the client did not offer is
// the server's error, and a side request (no MCP tools) is answered
// without a turn.
func TestUnofferedTool(t *testing.T) {
	s := start(t, Anthropic)
	post(t, s.URL()+"/v1/messages", `{"messages":[{"role":"user","content":"title?"}]}`)
	if len(s.Main()) != 0 || len(s.Requests()) != 1 || s.Err() != nil {
		t.Fatalf("%+v %v", s.Requests(), s.Err())
	}
	post(t, s.URL()+"/v1/messages", `{"messages":[{"role":"user","content":"go"}],"tools":[{"name":"mcp__b10x__file_read"}]}`)
	if err := s.Err(); err == nil || !strings.Contains(err.Error(), "dir_list, which the client did not offer") {
		t.Fatalf("%v", err)
	}
}
