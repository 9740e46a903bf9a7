package interop

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/b10x/harness/interop/fakemodel"
)

// claudeEnv is Claude Code's environment against the fake model: a dummy
// key, no traffic but the model API, the MCP tools offered at once (its
// default loads them through its own ToolSearch tool).
func claudeEnv(f *fixture, m *fakemodel.Server) []string {
	return baseEnv(f, "ANTHROPIC_BASE_URL="+m.URL(), "ANTHROPIC_API_KEY=sk-fake", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "ENABLE_TOOL_SEARCH=false")
}

// claudeSeen: Claude Code gives its model the content's text as it is, and
// marks errors (is_error).
func claudeSeen(t *testing.T, r fakemodel.Result) (string, *bool) {
	return r.Text, &r.IsError
}

// claudeSettings writes the documented settings with an Elicitation hook
// that accepts every question and keeps it (hook-N.json) for the test.
func claudeSettings(t *testing.T, f *fixture) string {
	t.Helper()
	hook := filepath.Join(f.dir, "approve-hook")
	script := "#!/bin/sh\nn=$(ls " + f.dir + "/hook-*.json 2>/dev/null | wc -l)\ncat > " + f.dir + "/hook-$n.json\n" +
		`printf '%s\n' '{"hookSpecificOutput":{"hookEventName":"Elicitation","action":"accept"}}'` + "\n"
	if err := os.WriteFile(hook, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	settings := replace(t, docBlock(t, "claude-settings"), "/path/to/b10x-approve", hook)
	p := filepath.Join(f.dir, "settings.json")
	if err := os.WriteFile(p, []byte(settings), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestClaudeCode drives Claude Code (claude -p) through the whole scenario
// over stdio, with the documented configuration and settings; the writes
// and run are above the default ceiling and approved by its Elicitation
// hook.
func TestClaudeCode(t *testing.T) {
	bin := clientPath(t, "claude")
	f := newFixture(t)
	f.writeSized(t)
	f.give(t)
	sc := fullScenario(f, scenarioOptions{client: "claude", runApproved: true})
	m := startModel(t, fakemodel.Anthropic, sc.script())
	log := filepath.Join(f.dir, "wire.jsonl")
	cfg := filepath.Join(f.dir, "mcp.json")
	if err := os.WriteFile(cfg, []byte(f.docServer(t, docBlock(t, "claude-mcp"), log, "0s", "--allow-program", "echo")), 0o644); err != nil {
		t.Fatal(err)
	}
	settings := claudeSettings(t, f)
	runClient(t, 120*time.Second, f.ws, claudeEnv(f, m), bin, "-p", "Work in this project.", "--mcp-config", cfg, "--strict-mcp-config",
		"--settings", settings, "--output-format", "json")

	check(t, f, m, sc, claudeSeen)
	checkWorkspace(t, f, "claude")
	checkEnd(t, f, "client_closed")
	evs := wire(t, log)
	checkWireResults(t, evs)
	checkEnding(t, evs, "SIGINT")
	h := readHandshake(t, evs)
	if !h.discover || !h.discoverRefused || h.version != "2025-11-25" || !h.elicitation {
		t.Errorf("handshake: %+v; want server/discover refused, then initialize at 2025-11-25 with elicitation", h)
	}
	checkDiscover(t, h)
	// The hook was asked for the three calls above the ceiling, each shown
	// as the harness words it.
	hooks, _ := filepath.Glob(filepath.Join(f.dir, "hook-*.json"))
	var asked []string
	for _, h := range hooks {
		b, _ := os.ReadFile(h)
		asked = append(asked, string(b))
	}
	all := strings.Join(asked, "\n")
	if len(hooks) != 3 || !strings.Contains(all, "file_write (file.write, risk medium)") || !strings.Contains(all, "run (shell, risk high)") {
		t.Errorf("the Elicitation hook was asked %d times:\n%s", len(hooks), all)
	}
}

// TestClaudeCodeHTTP drives Claude Code over streamable HTTP (mcp --listen
// on a loopback port, the bearer token in the documented header): several
// calls in one turn, an attack, a write approved by its Elicitation hook;
// SIGTERM then stops the server normally.
func TestClaudeCodeHTTP(t *testing.T) {
	bin := clientPath(t, "claude")
	f := newFixture(t)
	f.give(t)
	sc := scenario{turns: [][]planned{
		{
			{call: call("file_read", map[string]any{"path": "hello.txt"}), want: executed(helloText)},
			{call: call("dir_list", nil), want: executedLike(`(?m)^dir sub/$`)},
		},
		{
			{call: call("file_read", map[string]any{"path": "../secret.txt"}), want: refused("denied_path", `leaves the workspace`)},
			{call: call("file_write", map[string]any{"path": "new.txt", "content": "written through claude\n"}), want: executedLike(`new\.txt`)},
			{call: call("file_edit", map[string]any{"path": "notes.md", "old_string": "TODO: edit me", "new_string": "edited through claude"}), want: executedLike(`edited through claude`)},
		},
	}}
	m := startModel(t, fakemodel.Anthropic, sc.script())
	h := startHTTP(t, f)
	tee := startHTTPTee(t, h.url)
	cfg := replace(t, replace(t, docBlock(t, "claude-mcp-http"), "http://127.0.0.1:7400/", tee.url), "Bearer TOKEN", "Bearer "+h.token)
	p := filepath.Join(f.dir, "mcp.json")
	if err := os.WriteFile(p, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	runClient(t, 120*time.Second, f.ws, claudeEnv(f, m), bin, "-p", "Work in this project.", "--mcp-config", p, "--strict-mcp-config",
		"--settings", claudeSettings(t, f), "--output-format", "json")
	h.stop(t)

	check(t, f, m, sc, claudeSeen)
	checkWorkspace(t, f, "claude")
	checkEnd(t, f, "stopped")
	evs := tee.events()
	checkWireResults(t, evs)
	hs := readHandshake(t, evs)
	if hs.version != "2025-11-25" || !hs.elicitation {
		t.Errorf("handshake: %+v; want initialize at 2025-11-25 with elicitation", hs)
	}
	// Over HTTP too it asks server/discover first, answered HTTP 400
	// with the JSON-RPC error, and it leaves without a DELETE.
	checkDiscover(t, hs)
	if r := tee.requests(); len(r) == 0 || r[0] != "POST 400" || slices.Contains(r, "DELETE 204") {
		t.Errorf("the requests and their statuses: %v; want POST 400 first (server/discover) and no DELETE", r)
	}
}
