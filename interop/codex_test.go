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

// codexSeen: Codex puts a line of its own before the content's text, and
// the Responses API has no error mark.
func codexSeen(t *testing.T, r fakemodel.Result) (string, *bool) {
	t.Helper()
	loc := wallTime.FindStringIndex(r.Text)
	if loc == nil {
		t.Errorf("a Codex result without its Wall time line: %q", r.Text)
		return r.Text, nil
	}
	return r.Text[loc[1]:], nil
}

// codexConfig is the documented configuration (the server's block),
// behind the keys that point Codex at the fake model.
func codexConfig(t *testing.T, f *fixture, m *fakemodel.Server, server string) string {
	t.Helper()
	home := filepath.Join(f.dir, "codex")
	if err := os.MkdirAll(home, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := `model = "fake-model"
model_provider = "fake"
approval_policy = "never"
sandbox_mode = "read-only"
` + server + `
[model_providers.fake]
name = "fake"
base_url = "` + m.URL() + `/v1"
wire_api = "responses"
env_key = "FAKE_API_KEY"
`
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return home
}

// TestCodex drives Codex CLI (codex exec) through the whole scenario over
// stdio with the documented configuration: its own approval passes every
// tool to the gate, it waits for a harness slow to answer initialize
// (held back 1.5 s), and it declines the elicitation the run call asks.
func TestCodex(t *testing.T) {
	bin := clientPath(t, "codex")
	f := newFixture(t)
	f.writeSized(t)
	f.give(t)
	sc := fullScenario(f, scenarioOptions{client: "codex", runRefused: "declined by the MCP client's user"})
	m := startModel(t, fakemodel.OpenAI, sc.script())
	log := filepath.Join(f.dir, "wire.jsonl")
	home := codexConfig(t, f, m, f.docServer(t, docBlock(t, "codex"), log, "1500ms", "--allow-program", "echo", "--approve-up-to", "medium"))
	out, _ := runClient(t, 120*time.Second, f.ws, baseEnv(f, "CODEX_HOME="+home, "FAKE_API_KEY=fake"),
		bin, "exec", "--skip-git-repo-check", "Work in this project.")
	if !strings.Contains(out, "done") {
		t.Errorf("codex exec printed %q", out)
	}

	check(t, f, m, sc, codexSeen)
	checkWorkspace(t, f, "codex")
	checkEnd(t, f, "client_closed")
	evs := wire(t, log)
	checkWireResults(t, evs)
	// codex exec sends SIGTERM and closes stdin at about the same
	// moment: either may reach the harness first (seen both ways), and
	// both are a normal end (checkEnd above).
	checkEnding(t, evs, "SIGTERM", "eof")
	if h := readHandshake(t, evs); h.discover || h.version != "2025-06-18" || !h.elicitation {
		t.Errorf("handshake: %+v; want initialize at 2025-06-18 with elicitation", h)
	}
}

// TestCodexHTTP drives Codex CLI over streamable HTTP (mcp --listen on a
// loopback port) with the documented configuration, the token in the
// environment variable it names: several calls in one turn, an attack,
// writes, and a run call above the ceiling, which Codex is asked about by
// elicitation on its HTTP session and declines; SIGTERM then stops the
// server normally. The test's proxy logs the protocol.
func TestCodexHTTP(t *testing.T) {
	bin := clientPath(t, "codex")
	f := newFixture(t)
	f.give(t)
	sc := httpScenario(scenarioOptions{client: "codex", runRefused: "declined by the MCP client's user"})
	m := startModel(t, fakemodel.OpenAI, sc.script())
	h := startHTTP(t, f, "--allow-program", "echo", "--approve-up-to", "medium")
	tee := startHTTPTee(t, h.url)
	server := replace(t, docBlock(t, "codex-http"), `"http://127.0.0.1:7400/"`, `"`+tee.url+`"`)
	const tokenVar = "B10X_MCP_TOKEN"
	replace(t, server, `bearer_token_env_var = "`+tokenVar+`"`, "")
	home := codexConfig(t, f, m, server)
	out, _ := runClient(t, 120*time.Second, f.ws, baseEnv(f, "CODEX_HOME="+home, "FAKE_API_KEY=fake", tokenVar+"="+h.token),
		bin, "exec", "--skip-git-repo-check", "Work in this project.")
	if !strings.Contains(out, "done") {
		t.Errorf("codex exec printed %q", out)
	}
	h.stop(t)

	check(t, f, m, sc, codexSeen)
	checkWorkspace(t, f, "codex")
	checkEnd(t, f, "stopped")
	evs := tee.events()
	checkWireResults(t, evs)
	if hs := readHandshake(t, evs); hs.discover || hs.version != "2025-06-18" || !hs.elicitation {
		t.Errorf("handshake: %+v; want initialize at 2025-06-18 with elicitation", hs)
	}
	// It ends its session itself, before exiting. The tee logs a request
	// when it is answered, and the GET of the session's event stream is
	// answered when the DELETE ends the session: it may come after it.
	r := tee.requests()
	posts := slices.DeleteFunc(slices.Clone(r), func(s string) bool { return strings.HasPrefix(s, "GET ") })
	if len(posts) == 0 || posts[len(posts)-1] != "DELETE 204" {
		t.Errorf("the requests and their statuses: %v; want a DELETE after every POST", r)
	}
}
