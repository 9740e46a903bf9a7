package interop

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/b10x/harness/interop/fakemodel"
)

// TestClaudeCodeNoHook drives Claude Code (claude -p) over stdio with the
// documented configuration and settings, its Elicitation hook left out:
// it cancels every elicitation at once, so a write and a run call above
// the default ceiling are refused saying the client's user dismissed the
// request, and the wire shows each question and its cancel.
func TestClaudeCodeNoHook(t *testing.T) {
	bin := clientPath(t, "claude")
	f := newFixture(t)
	f.give(t)
	dismissed := "the MCP client's user dismissed the request"
	sc := scenario{turns: [][]planned{{
		{call: call("file_write", map[string]any{"path": "new.txt", "content": "not written\n"}), want: refused("approval_rejected", dismissed)},
		{call: call("run", map[string]any{"argv": []string{"echo", "hi"}}), want: refused("approval_rejected", dismissed)},
	}}}
	m := startModel(t, fakemodel.Anthropic, sc.script())
	log := filepath.Join(f.dir, "wire.jsonl")
	cfg := filepath.Join(f.dir, "mcp.json")
	if err := os.WriteFile(cfg, []byte(f.docServer(t, docBlock(t, "claude-mcp"), log, "0s", "--allow-program", "echo")), 0o644); err != nil {
		t.Fatal(err)
	}
	var settings map[string]any
	if err := json.Unmarshal([]byte(docBlock(t, "claude-settings")), &settings); err != nil {
		t.Fatalf("the documented settings: %v", err)
	}
	if _, ok := settings["hooks"]; !ok {
		t.Fatalf("the documented settings have no hooks: %v", settings)
	}
	delete(settings, "hooks")
	b, _ := json.Marshal(settings)
	p := filepath.Join(f.dir, "settings.json")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	runClient(t, 120*time.Second, f.ws, claudeEnv(f, m), bin, "-p", "Work in this project.", "--mcp-config", cfg, "--strict-mcp-config",
		"--settings", p, "--output-format", "json")

	check(t, f, m, sc, claudeSeen)
	if _, err := os.Lstat(filepath.Join(f.ws, "new.txt")); err == nil {
		t.Errorf("new.txt was written though its approval was dismissed")
	}
	checkEnd(t, f, "client_closed")
	evs := wire(t, log)
	checkWireResults(t, evs)
	if got := elicitAnswers(t, evs); len(got) != 2 || got[0] != "cancel" || got[1] != "cancel" {
		t.Errorf("Claude Code answered the harness's elicitations %v; want cancel, cancel", got)
	}
}

// elicitAnswers is the action the client answered each elicitation/create
// the server sent with, in the order they were sent ("" for one not
// answered, or answered with an error).
func elicitAnswers(t *testing.T, evs []wireEvent) []string {
	t.Helper()
	in := messages(evs, "in")
	var out []string
	for _, q := range messages(evs, "out") {
		if q.Method != "elicitation/create" {
			continue
		}
		action := ""
		for _, a := range in {
			if a.Method == "" && string(a.ID) == string(q.ID) && a.Error == nil {
				var r struct{ Action string }
				_ = json.Unmarshal(a.Result, &r)
				action = r.Action
			}
		}
		out = append(out, action)
	}
	return out
}

// TestGeminiApprovePrompt runs Gemini CLI with the documented settings and
// the harness under --approve prompt: the harness refuses its initialize
// (it declared no elicitation, so no call above the ceiling could be
// asked about), Gemini CLI drops the server saying only "MCP issues
// detected" on stderr, and its model is offered none of the tools.
func TestGeminiApprovePrompt(t *testing.T) {
	bin := clientPath(t, "gemini")
	f := newFixture(t)
	f.give(t)
	m := startModel(t, fakemodel.Gemini, []fakemodel.Turn{{Text: "done"}})
	log := filepath.Join(f.dir, "wire.jsonl")
	geminiSettings(t, f, f.docServer(t, docBlock(t, "gemini"), log, "0s", "--approve", "prompt"))
	_, stderr := runClient(t, 120*time.Second, f.ws, baseEnv(f, "GOOGLE_GEMINI_BASE_URL="+m.URL(), "GEMINI_API_KEY=fake", "GEMINI_CLI_TRUST_WORKSPACE=true"),
		bin, "-m", "gemini-2.5-pro", "-p", "Work in this project.")
	if !strings.Contains(stderr, "MCP issues detected") {
		t.Errorf("gemini's stderr does not say MCP issues detected:\n%s", stderr)
	}
	if len(m.Requests()) == 0 {
		t.Fatal("gemini sent its model no request")
	}
	if main := m.Main(); len(main) != 0 {
		t.Errorf("gemini offered its model the harness's tools (%d requests with them): %v", len(main), slices.Sorted(maps.Keys(main[0].Tools)))
	}
	evs := wire(t, log)
	var init *message
	for _, q := range messages(evs, "in") {
		if q.Method == "initialize" {
			init = &q
			break
		}
	}
	if init == nil {
		t.Fatal("no initialize on the wire")
	}
	a, ok := answer(evs, init.ID)
	if !ok || a.Error == nil || a.Error.Code != -32600 || !strings.Contains(a.Error.Message, "approve: prompt") {
		t.Errorf("initialize was answered (answered %v) with result %s, error %+v; want error -32600 naming approve: prompt", ok, a.Result, a.Error)
	}
	for _, q := range messages(evs, "in") {
		if q.Method == "tools/list" || q.Method == "tools/call" {
			t.Errorf("gemini sent %s after its initialize was refused", q.Method)
		}
	}
	if calls := f.calls(t); len(calls) != 0 {
		t.Errorf("the record has calls: %s", dump(calls))
	}
	checkEnd(t, f, "client_closed")
}

// geminiSettings writes Gemini CLI's settings.json in the fixture's home:
// doc, a documented block as docServer rewrote it, with the fake model's
// key as its authentication.
func geminiSettings(t *testing.T, f *fixture, doc string) {
	t.Helper()
	var settings map[string]any
	if err := json.Unmarshal([]byte(doc), &settings); err != nil {
		t.Fatalf("the documented settings: %v\n%s", err, doc)
	}
	settings["security"] = map[string]any{"auth": map[string]any{"selectedType": "gemini-api-key"}}
	b, _ := json.Marshal(settings)
	if err := os.MkdirAll(filepath.Join(f.home, ".gemini"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.home, ".gemini", "settings.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}
