package interop

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/b10x/harness/interop/fakemodel"
)

// TestMeasureResultSizes is not a check but the measurement behind
// mcp.DefaultMaxResult (decision 0078), for when a pinned client changes:
// B10X_INTEROP_MEASURE=1 make interoptest logs, for each client, which of
// a range of file_read sizes its model got whole (the harness's cap raised
// out of the way). Without B10X_INTEROP_MEASURE it does nothing.
func TestMeasureResultSizes(t *testing.T) {
	if os.Getenv("B10X_INTEROP_MEASURE") == "" {
		t.Skip("a measurement: B10X_INTEROP_MEASURE=1 runs it")
	}
	sizes := []int{8 << 10, 16 << 10, 24 << 10, 32 << 10, 36 << 10, 40 << 10, 44 << 10, 48 << 10, 56 << 10, 64 << 10}
	for _, c := range []struct {
		name   string
		format fakemodel.Format
		run    func(t *testing.T, f *fixture, m *fakemodel.Server, log string)
	}{
		{"claude", fakemodel.Anthropic, func(t *testing.T, f *fixture, m *fakemodel.Server, log string) {
			cfg := filepath.Join(f.dir, "mcp.json")
			must(t, os.WriteFile(cfg, []byte(f.docServer(t, docBlock(t, "claude-mcp"), log, "0s", "--max-result", "1MiB")), 0o644))
			runClient(t, 120*time.Second, f.ws, claudeEnv(f, m), clientPath(t, "claude"), "-p", "go", "--mcp-config", cfg, "--strict-mcp-config", "--settings", claudeSettings(t, f))
		}},
		{"codex", fakemodel.OpenAI, func(t *testing.T, f *fixture, m *fakemodel.Server, log string) {
			home := codexConfig(t, f, m, f.docServer(t, docBlock(t, "codex"), log, "0s", "--max-result", "1MiB"))
			runClient(t, 120*time.Second, f.ws, baseEnv(f, "CODEX_HOME="+home, "FAKE_API_KEY=fake"), clientPath(t, "codex"), "exec", "--skip-git-repo-check", "go")
		}},
		{"gemini", fakemodel.Gemini, func(t *testing.T, f *fixture, m *fakemodel.Server, log string) {
			var s map[string]any
			must(t, json.Unmarshal([]byte(f.docServer(t, docBlock(t, "gemini"), log, "0s", "--max-result", "1MiB")), &s))
			s["security"] = map[string]any{"auth": map[string]any{"selectedType": "gemini-api-key"}}
			b, _ := json.Marshal(s)
			must(t, os.MkdirAll(filepath.Join(f.home, ".gemini"), 0o755))
			must(t, os.WriteFile(filepath.Join(f.home, ".gemini", "settings.json"), b, 0o644))
			runClient(t, 120*time.Second, f.ws, baseEnv(f, "GOOGLE_GEMINI_BASE_URL="+m.URL(), "GEMINI_API_KEY=fake", "GEMINI_CLI_TRUST_WORKSPACE=true"),
				clientPath(t, "gemini"), "-m", "gemini-2.5-pro", "-p", "go")
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t)
			var turn fakemodel.Turn
			for _, n := range sizes {
				name := fmt.Sprintf("s%d.txt", n)
				must(t, os.WriteFile(filepath.Join(f.ws, name), []byte(sizedText(n)), 0o644))
				turn.Calls = append(turn.Calls, call("file_read", map[string]any{"path": name}))
			}
			f.give(t)
			m := startModel(t, c.format, []fakemodel.Turn{turn, {Text: "done"}})
			c.run(t, f, m, filepath.Join(f.dir, "wire.jsonl"))
			for _, r := range m.Seen(0) {
				n := sizes[r.Index]
				t.Logf("%s: %6d bytes (%2d KiB): whole %v (the model read %d bytes)", c.name, n, n>>10, strings.Contains(r.Text, sizedText(n)), len(r.Text))
			}
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
