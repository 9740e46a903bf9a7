package interop

import (
	"encoding/json"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/b10x/harness/interop/fakemodel"
)

var geminiToolError = regexp.MustCompile(`(?s)^MCP tool '([a-z_]+)' reported tool error for function call: .* with response: (\[.*\])$`)

// geminiSeen: Gemini CLI shows its model the content's text between
// untrusted_context lines, and an error as its own message holding the
// whole result as JSON; the text the model reads is the content's text
// within.
func geminiSeen(t *testing.T, r fakemodel.Result) (string, *bool) {
	t.Helper()
	if !r.IsError {
		const open, end = "<untrusted_context>\n", "\n</untrusted_context>"
		if !strings.HasPrefix(r.Text, open) || !strings.HasSuffix(r.Text, end) {
			t.Errorf("a Gemini CLI result not within untrusted_context: %q", r.Text)
			return r.Text, &r.IsError
		}
		return strings.TrimSuffix(strings.TrimPrefix(r.Text, open), end), &r.IsError
	}
	m := geminiToolError.FindStringSubmatch(r.Text)
	if m == nil {
		t.Errorf("a Gemini CLI error of another shape: %q", r.Text)
		return r.Text, &r.IsError
	}
	var parts []struct {
		FunctionResponse struct {
			Response struct {
				Content []struct{ Text string } `json:"content"`
			} `json:"response"`
		} `json:"functionResponse"`
	}
	if err := json.Unmarshal([]byte(m[2]), &parts); err != nil || len(parts) != 1 || len(parts[0].FunctionResponse.Response.Content) != 1 {
		t.Errorf("a Gemini CLI error's response %s: %v", m[2], err)
		return r.Text, &r.IsError
	}
	return parts[0].FunctionResponse.Response.Content[0].Text, &r.IsError
}

// TestGemini drives Gemini CLI (gemini -p) through the whole scenario over
// stdio with the documented settings; its model sends wait_for_previous as
// its schema offers, the harness ignores it and says so in the record; it
// has no elicitation, so the run call is refused saying why.
func TestGemini(t *testing.T) {
	bin := clientPath(t, "gemini")
	f := newFixture(t)
	f.writeSized(t)
	f.give(t)
	sc := fullScenario(f, scenarioOptions{client: "gemini", runRefused: `no elicitation capability`, waitForPrevious: true})
	m := startModel(t, fakemodel.Gemini, sc.script())
	log := filepath.Join(f.dir, "wire.jsonl")
	geminiSettings(t, f, f.docServer(t, docBlock(t, "gemini"), log, "0s", "--allow-program", "echo", "--approve-up-to", "medium"))
	out, _ := runClient(t, 120*time.Second, f.ws, baseEnv(f, "GOOGLE_GEMINI_BASE_URL="+m.URL(), "GEMINI_API_KEY=fake", "GEMINI_CLI_TRUST_WORKSPACE=true"),
		bin, "-m", "gemini-2.5-pro", "-p", "Work in this project.")
	if !strings.Contains(out, "done") {
		t.Errorf("gemini printed %q", out)
	}

	check(t, f, m, sc, geminiSeen)
	checkWorkspace(t, f, "gemini")
	checkEnd(t, f, "client_closed")
	evs := wire(t, log)
	checkWireResults(t, evs)
	checkEnding(t, evs, "SIGTERM", "eof") // as codex: either may come first
	if h := readHandshake(t, evs); h.discover || h.version != "2025-06-18" || h.elicitation {
		t.Errorf("handshake: %+v; want initialize at 2025-06-18 without elicitation", h)
	}
	// Its model is offered wait_for_previous on every tool.
	main := m.Main()
	if len(main) == 0 {
		t.Fatal("no request")
	}
	for name, decl := range main[0].Tools {
		if !strings.Contains(string(decl), `"wait_for_previous"`) {
			t.Errorf("Gemini CLI's declaration of %s has no wait_for_previous: %s", name, decl)
		}
	}
}

// TestGeminiHTTP drives Gemini CLI over streamable HTTP (mcp --listen on a
// loopback port) with the documented settings, the token in a header:
// several calls in one turn (one with wait_for_previous), an attack,
// writes, and a run call above the ceiling, refused since Gemini CLI has
// no elicitation; SIGTERM then stops the server normally. The test's
// proxy logs the protocol.
func TestGeminiHTTP(t *testing.T) {
	bin := clientPath(t, "gemini")
	f := newFixture(t)
	f.give(t)
	sc := httpScenario(scenarioOptions{client: "gemini", runRefused: `no elicitation capability`, waitForPrevious: true})
	m := startModel(t, fakemodel.Gemini, sc.script())
	h := startHTTP(t, f, "--allow-program", "echo", "--approve-up-to", "medium")
	tee := startHTTPTee(t, h.url)
	geminiSettings(t, f, replace(t, replace(t, docBlock(t, "gemini-http"), "http://127.0.0.1:7400/", tee.url), "Bearer TOKEN", "Bearer "+h.token))
	out, _ := runClient(t, 120*time.Second, f.ws, baseEnv(f, "GOOGLE_GEMINI_BASE_URL="+m.URL(), "GEMINI_API_KEY=fake", "GEMINI_CLI_TRUST_WORKSPACE=true"),
		bin, "-m", "gemini-2.5-pro", "-p", "Work in this project.")
	if !strings.Contains(out, "done") {
		t.Errorf("gemini printed %q", out)
	}
	h.stop(t)

	check(t, f, m, sc, geminiSeen)
	checkWorkspace(t, f, "gemini")
	checkEnd(t, f, "stopped")
	evs := tee.events()
	checkWireResults(t, evs)
	if hs := readHandshake(t, evs); hs.discover || hs.version != "2025-06-18" || hs.elicitation {
		t.Errorf("handshake: %+v; want initialize at 2025-06-18 without elicitation", hs)
	}
	// It exits without ending its session: the server's --session-idle
	// or its stop closes it.
	if r := tee.requests(); slices.Contains(r, "DELETE 204") {
		t.Errorf("the requests and their statuses: %v; want no DELETE", r)
	}
}
