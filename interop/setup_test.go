package interop

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/b10x/harness/interop/fakemodel"

	"github.com/b10x/harness/internal/testenv"
)

// The clients, pinned: what `make interoptest` installs (scripts/interop.sh)
// and what these tests refuse to run without once B10X_INTEROP is set.
var pinned = map[string]struct{ pkg, version, bin string }{
	"claude": {"@anthropic-ai/claude-code", "2.1.332", "node_modules/.bin/claude"},
	"codex":  {"@openai/codex", "0.171.0", "node_modules/.bin/codex"},
	"gemini": {"@google/gemini-cli", "0.61.0", "node_modules/.bin/gemini"},
	"sdk":    {"@modelcontextprotocol/sdk", "1.32.2", "node_modules/@modelcontextprotocol/sdk/package.json"},
}

// interopCache is the npm cache directory the clients are installed in:
// $B10X_INTEROP (`make interoptest` sets it, after installing them), or,
// when that is unset, the default cache ($XDG_CACHE_HOME or ~/.cache, then
// b10x-harness/npm, as scripts/interop.sh installs) if every pinned client
// is installed there. "": the clients are not installed, and the tests
// that need them are skipped (the plain `go test ./...`).
func interopCache() string {
	if c := os.Getenv("B10X_INTEROP"); c != "" {
		return c
	}
	base := os.Getenv("XDG_CACHE_HOME")
	if base == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return ""
		}
		base = filepath.Join(home, ".cache")
	}
	cache := filepath.Join(base, "b10x-harness", "npm")
	for _, p := range pinned {
		if installedVersion(cache, p.pkg, p.version) != p.version {
			return ""
		}
	}
	return cache
}

// installedVersion is the version of pkg installed under cache for want
// ("" when none is).
func installedVersion(cache, pkg, want string) string {
	b, err := os.ReadFile(filepath.Join(cache, pkg+"@"+want, "node_modules", pkg, "package.json"))
	if err != nil {
		return ""
	}
	var j struct{ Version string }
	if json.Unmarshal(b, &j) != nil {
		return ""
	}
	return j.Version
}

// clientPath returns the installed file of client name (see pinned). When
// the clients are not installed (interopCache) the test is skipped; once
// they are, or under `make interoptest`, a client that is missing or of
// another version fails the test: nothing is skipped there.
func clientPath(t *testing.T, name string) string {
	t.Helper()
	cache := interopCache()
	// Declared through testenv as every absence is: this host may lack
	// them (make interoptest installs them and sets B10X_INTEROP, and
	// then a missing client fails below); no VM shape runs this package.
	testenv.Require(t, cache != "", "the real MCP clients (make interoptest installs and runs them)", testenv.HostLacks(cache == "")...)
	p, ok := pinned[name]
	if !ok {
		t.Fatalf("no pinned client %q", name)
	}
	if v := installedVersion(cache, p.pkg, p.version); v != p.version {
		t.Fatalf("%s@%s is not installed under %s (got version %q; make interoptest installs it)", p.pkg, p.version, cache, v)
	}
	bin := filepath.Join(cache, p.pkg+"@"+p.version, p.bin)
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%s: %v", p.pkg, err)
	}
	return bin
}

// clientPrefix is the npm prefix client name is installed under.
func clientPrefix(t *testing.T, name string) string {
	t.Helper()
	clientPath(t, name)
	p := pinned[name]
	return filepath.Join(interopCache(), p.pkg+"@"+p.version)
}

// harnessBin is the b10x-harness binary under test: $B10X_HARNESS (make
// interoptest passes bin/b10x-harness, just built), or the one TestMain
// built from this tree.
func harnessBin(t *testing.T) string {
	t.Helper()
	p := os.Getenv("B10X_HARNESS")
	if p == "" {
		p = built
	}
	if p == "" {
		t.Fatal("no harness binary (B10X_HARNESS unset and none built)")
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(abs); err != nil {
		t.Fatalf("the harness binary: %v", err)
	}
	return abs
}

// runOwner owns the workspace when the test runs as root: a root-owned
// workspace is given to run children through an idmapped mount, which a
// temporary directory may not support (as cmd/b10x-harness's tests do).
const runOwner = 1000

// fixture is one client run's directories: the workspace the harness
// serves, a file outside it (the attacks' target), the record, and a
// fresh home for the client.
type fixture struct {
	dir, ws, home, record, outside string
	harness                        string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	dir := t.TempDir()
	f := &fixture{dir: dir, ws: filepath.Join(dir, "ws"), home: filepath.Join(dir, "home"),
		record: filepath.Join(dir, "record.jsonl"), outside: filepath.Join(dir, "secret.txt"), harness: harnessBin(t)}
	for _, d := range []string{f.ws, f.home, filepath.Join(f.ws, "sub")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string]string{
		"hello.txt":     helloText,
		"notes.md":      "# Notes\n\nTODO: edit me\n",
		"sub/deep.txt":  "deep file\n",
		"../secret.txt": "the secret outside the workspace\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(f.ws, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// helloText has what JSON escapes (quotes, a backslash, a tab, non-ASCII)
// so that a result shown as JSON instead of text cannot pass for it.
const helloText = "hello from the workspace\n\"quoted\" and a back\\slash\tand a tab\nnon-ASCII: é ü 日本\n"

// give chowns the workspace to runOwner when the test runs as root.
func (f *fixture) give(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		return
	}
	_ = filepath.WalkDir(f.ws, func(p string, _ fs.DirEntry, err error) error {
		if err == nil {
			_ = os.Lchown(p, runOwner, runOwner)
		}
		return nil
	})
}

// mcpArgs is the harness's command line for this fixture.
func (f *fixture) mcpArgs(extra ...string) []string {
	return append([]string{"mcp", "--workspace", f.ws, "--record", f.record}, extra...)
}

// recordLines parses the record: every line a JSON object.
func (f *fixture) recordLines(t *testing.T) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(f.record)
	if err != nil {
		t.Fatalf("the record: %v", err)
	}
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("record line %q: %v", sc.Text(), err)
		}
		out = append(out, m)
	}
	return out
}

// calls returns the record's call lines, by seq.
func (f *fixture) calls(t *testing.T) map[int]map[string]any {
	t.Helper()
	out := map[int]map[string]any{}
	for _, l := range f.recordLines(t) {
		if l["event"] == "call" {
			out[int(l["seq"].(float64))] = l
		}
	}
	return out
}

// syncBuf is a bytes.Buffer safe for a process's writes and the test's reads.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// runClient runs a client to its end within limit, in dir, with env, and
// returns its stdout and stderr; a client that fails or does not end fails
// the test with both.
func runClient(t *testing.T, limit time.Duration, dir string, env []string, bin string, args ...string) (string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	cmd.Env = env
	cmd.Stdin = nil
	var stdout, stderr syncBuf
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	start := time.Now()
	err := cmd.Run()
	t.Logf("%s ran %v", filepath.Base(bin), time.Since(start).Round(time.Millisecond))
	if err != nil {
		t.Fatalf("%s %s: %v (after %v)\nstdout:\n%s\nstderr:\n%s", bin, strings.Join(args, " "), err, time.Since(start).Round(time.Millisecond), stdout.String(), stderr.String())
	}
	return stdout.String(), stderr.String()
}

// baseEnv is a client's environment: nothing of the test's but PATH, and
// the fresh home.
func baseEnv(f *fixture, extra ...string) []string {
	return append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + f.home, "LANG=C.UTF-8", "TERM=dumb", "NO_COLOR=1"}, extra...)
}

// startModel starts a fake model for format with script, closed at the
// end of the test, whose errors fail it.
func startModel(t *testing.T, format fakemodel.Format, script []fakemodel.Turn) *fakemodel.Server {
	t.Helper()
	m, err := fakemodel.Start(fakemodel.Options{Format: format, Server: "b10x", Script: script})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = m.Close()
		if err := m.Err(); err != nil {
			t.Errorf("the fake model: %v", err)
		}
	})
	return m
}

func dump(v any) string {
	b, _ := json.MarshalIndent(v, "", "  ")
	return string(b)
}

var _ = fmt.Sprintf
