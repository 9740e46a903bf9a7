package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/b10x/harness/agent/providertest"
	"github.com/b10x/harness/gate"
	"github.com/b10x/harness/internal/testenv"
)

const rnKey = "sk-test-rn-KEY-never-in-the-record-42"

// rnHarness runs the CLI as a subprocess with the provider keys of the
// test's own environment removed and env added.
func rnHarness(t *testing.T, env []string, stdin string, args ...string) result {
	t.Helper()
	cmd := harnessCommand(args...)
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "ANTHROPIC_") || strings.HasPrefix(kv, "OPENAI_") {
			continue
		}
		cmd.Env = append(cmd.Env, kv)
	}
	cmd.Env = append(cmd.Env, "B10X_TEST_MAIN=1")
	cmd.Env = append(cmd.Env, env...)
	return runHarnessCmd(t, cmd, stdin)
}

// rnVMShapes is the current shape in a vmtest guest (the ordinary one
// included): guests hold only package directories, not the repository's
// examples/ and scripts/.
var rnVMShapes = testenv.InGuest()

// rnRepo requires the repository checkout around this package (examples/
// and scripts/) and the programs the example scripts use.
func rnRepo(t *testing.T) {
	t.Helper()
	_, err1 := os.Stat("../../examples/attacks.jsonl")
	_, err2 := os.Stat("../../scripts/demo-run.sh")
	testenv.Require(t, err1 == nil && err2 == nil, "the repository's examples/ and scripts/ (vmtest copies only package directories)", rnVMShapes...)
	for _, p := range []string{"bash", "make", "echo", "awk"} {
		_, err := exec.LookPath(p)
		testenv.Require(t, err == nil, p+" on PATH", rnVMShapes...)
	}
}

// rnPrepare builds the demo's fixture with scripts/demo-run.sh --prepare: a
// copy of examples/workspace with planted links and a secret beside it.
func rnPrepare(t *testing.T) (dir, ws string) {
	t.Helper()
	rnRepo(t)
	dir = t.TempDir()
	out, err := exec.Command("bash", "../../scripts/demo-run.sh", "--prepare", dir).CombinedOutput()
	if err != nil {
		t.Fatalf("demo-run.sh --prepare: %v\n%s", err, out)
	}
	return dir, filepath.Join(dir, "workspace")
}

// rnFixture builds a small workspace without the repository: a Go file, a
// README, a link out and a secret beside the workspace.
func rnFixture(t *testing.T) (dir, ws string) {
	t.Helper()
	dir = t.TempDir()
	ws = filepath.Join(dir, "workspace")
	must(t, os.MkdirAll(ws, 0o755))
	must(t, os.MkdirAll(filepath.Join(dir, "outside"), 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "outside", "secret.env"), []byte("TOKEN=do-not-leak\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(ws, "greet.go"), []byte("package greet\n\n// Greet greets.\nfunc Greet() string { return \"Helo\" }\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(ws, "README.md"), []byte("# greet\n\nA tiny module.\n"), 0o644))
	must(t, os.Symlink("../outside/secret.env", filepath.Join(ws, "link-out")))
	return dir, ws
}

// rnCopyTree copies regular files, directories and links from src to dst.
func rnCopyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.Walk(src, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		to := filepath.Join(dst, rel)
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(target, to)
		case fi.IsDir():
			return os.MkdirAll(to, 0o755)
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			return os.WriteFile(to, b, fi.Mode().Perm())
		}
	})
	must(t, err)
}

// rnSnapshot maps every path beneath root to its content (or link target).
func rnSnapshot(t *testing.T, root string) map[string]string {
	t.Helper()
	m := map[string]string{}
	err := filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			m[rel] = "-> " + target
		case fi.Mode().IsRegular():
			b, _ := os.ReadFile(p)
			m[rel] = string(b)
		default:
			m[rel] = fi.Mode().Type().String()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

type rnRecord struct {
	published []string
	calls     []map[string]any
	endedBy   []string
}

func rnReadRecord(t *testing.T, path string) rnRecord {
	t.Helper()
	var r rnRecord
	for _, l := range readRecord(t, path) {
		switch l["event"] {
		case "run_start":
			pub, _ := l["published"].([]any)
			for _, p := range pub {
				r.published = append(r.published, p.(map[string]any)["name"].(string))
			}
		case "call":
			r.calls = append(r.calls, l)
		case "run_end":
			r.endedBy = append(r.endedBy, l["ended_by"].(string))
		}
	}
	return r
}

// outcomeOf is "executed" or the reason of a call line.
func outcomeOf(l map[string]any) string {
	if l["status"] == "executed" {
		return "executed"
	}
	r, _ := l["reason"].(string)
	return r
}

// The security evaluation, end to end through the CLI: every attack of
// examples/attacks.jsonl is refused with its reason (or, when its entry is not
// published on this host, refused as unpublished), nothing changes outside
// the workspace, and no outside byte reaches the transcript.
func TestRunAttackScript(t *testing.T) {
	dir, ws := rnPrepare(t)
	rec := filepath.Join(dir, "rec.jsonl")
	outsideBefore := rnSnapshot(t, filepath.Join(dir, "outside"))
	archivedBefore := rnSnapshot(t, filepath.Join(dir, "workspace-archived"))
	pem, _ := os.ReadFile(filepath.Join(ws, "secret.pem"))

	r := rnHarness(t, nil, "", "run", "--provider", "replay:../../examples/attacks.jsonl", "--workspace", ws, "--record", rec,
		"--approve-up-to", "high", "--allow-program", "make", "--allow-program", "echo", "--write-scope", "**/*.pem=denied")
	if r.code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	got := rnReadRecord(t, rec)
	writes, runs := slices.Contains(got.published, "file_write"), slices.Contains(got.published, "run")
	// W: and R: mark entries that need a confined workspace or confined
	// execution: their reason is "unpublished" where the host lacks it.
	want := []string{
		"file_read executed",
		"file_read denied_path", "file_read denied_path", "file_read denied_path", "file_read denied_path",
		"file_read denied_path", "file_read denied_path",
		"file_read denied_path", "file_read denied_path", "dir_list denied_path",
		"dir_list denied_path", "search denied_path",
		"search executed", "find executed",
		"file_read invalid_argument", "file_read invalid_argument", "file_read invalid_argument",
		"file_read oversized_result",
		"file_write W:denied_path", "file_write W:denied_path", "file_write W:denied_path", "file_write W:denied_path",
		"run R:program_not_allowed",
		"run R:program_not_allowed", "run R:program_not_allowed", "run R:program_not_allowed", "run R:program_not_allowed",
		"run R:executed",
		"run R:denied_path", "run R:denied_path",
		"run R:executed",
		"tool_invoke unpublished", "shell unpublished",
	}
	if len(got.calls) != len(want) {
		t.Fatalf("%d call lines, want %d\n%s", len(got.calls), len(want), r.stdout)
	}
	for i, w := range want {
		entry, outcome, _ := strings.Cut(w, " ")
		switch {
		case strings.HasPrefix(outcome, "W:") && !writes, strings.HasPrefix(outcome, "R:") && !runs:
			outcome = "unpublished"
		default:
			outcome = strings.TrimPrefix(strings.TrimPrefix(outcome, "W:"), "R:")
		}
		l := got.calls[i]
		if l["entry"] != entry || outcomeOf(l) != outcome {
			t.Errorf("call %d: %v %v (%v), want %s %s", i+1, l["entry"], outcomeOf(l), l["message"], entry, outcome)
		}
	}
	if !slices.Equal(got.endedBy, []string{"script_ended"}) {
		t.Errorf("ended_by %v", got.endedBy)
	}

	// Nothing outside changed, nothing protected was written.
	if after := rnSnapshot(t, filepath.Join(dir, "outside")); fmt.Sprint(after) != fmt.Sprint(outsideBefore) {
		t.Errorf("outside changed:\nbefore %v\nafter  %v", outsideBefore, after)
	}
	if after := rnSnapshot(t, filepath.Join(dir, "workspace-archived")); fmt.Sprint(after) != fmt.Sprint(archivedBefore) {
		t.Errorf("the prefix sibling changed: %v", after)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "secret.pem")); !bytes.Equal(b, pem) {
		t.Error("secret.pem was written through ok/key")
	}
	if _, err := os.Lstat(filepath.Join(ws, ".git/hooks/pre-commit")); err == nil {
		t.Error("a git hook was planted")
	}
	if fi, err := os.Lstat(filepath.Join(ws, "planted.txt")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the planted link was replaced or removed: %v", err)
	}

	// The transcript shows each outcome and never an outside byte.
	for _, s := range []string{"do-not-leak", "TOKEN=do"} {
		if strings.Contains(r.stdout, s) || strings.Contains(r.stderr, s) {
			t.Errorf("%q reached the terminal", s)
		}
	}
	for _, s := range []string{"REFUSED denied_path", "FAILED oversized_result", "summary: ended by script_ended after 23 turn(s)", "refused or failed:"} {
		if !strings.Contains(r.stdout, s) {
			t.Errorf("transcript lacks %q", s)
		}
	}
	if runs && !strings.Contains(r.stdout, "hi; cat ../outside/secret.env && $(id) `id` > /tmp/x") {
		t.Errorf("the metacharacters did not reach echo as plain bytes:\n%s", r.stdout)
	}
}

// A narrowed agent on the verbs surface, end to end: the removed entries are
// neither listed nor described nor invocable; the envelope is checked as its
// entry.
func TestRunVerbsAgentScript(t *testing.T) {
	dir, ws := rnPrepare(t)
	rec := filepath.Join(dir, "rec.jsonl")
	r := rnHarness(t, nil, "", "run", "--provider", "replay:../../examples/attacks-verbs.jsonl", "--surface", "verbs", "--workspace", ws,
		"--record", rec, "--agents-dir", "../../examples/agents", "--agent", "reader", "--approve-up-to", "high", "--allow-program", "make")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	got := rnReadRecord(t, rec)
	if !slices.Equal(got.published, []string{"file_read", "dir_list"}) {
		t.Errorf("published %v, want the reader's two tools", got.published)
	}
	want := []string{
		"tool_search executed", "tool_describe unpublished", "search unpublished", "run unpublished",
		"file_read unpublished", "file_read denied_path", "tool_invoke invalid_argument", "file_read executed",
	}
	if len(got.calls) != len(want) {
		t.Fatalf("%d calls, want %d", len(got.calls), len(want))
	}
	for i, w := range want {
		entry, outcome, _ := strings.Cut(w, " ")
		if l := got.calls[i]; l["entry"] != entry || outcomeOf(l) != outcome {
			t.Errorf("call %d: %v %v, want %s", i+1, l["entry"], outcomeOf(l), w)
		}
	}
	if v := got.calls[3]["via"]; v != "tool_invoke" {
		t.Errorf("run through the envelope recorded via %v", v)
	}
	if !strings.Contains(r.stdout, "agent: reader (") || !strings.Contains(r.stdout, "not published: run (not among the named agent's tools)") {
		t.Errorf("transcript header:\n%s", r.stdout)
	}
	listing := r.stdout[strings.Index(r.stdout, "tool_search"):]
	listing = listing[:strings.Index(listing, "[2]")]
	if strings.Contains(listing, "search (") || strings.Contains(listing, "run (") || !strings.Contains(listing, "file_read (") {
		t.Errorf("tool_search listing:\n%s", listing)
	}
}

// The benign replay: reads, an exact edit, and a run of make (a quick
// Makefile here, so the test does not compile Go's standard library).
func TestRunBenignScript(t *testing.T) {
	dir, ws := rnPrepare(t)
	must(t, os.WriteFile(filepath.Join(ws, "Makefile"), []byte("test:\n\t@echo all tests passed\n"), 0o644))
	rec := filepath.Join(dir, "rec.jsonl")
	r := rnHarness(t, nil, "", "run", "--provider", "replay:../../examples/benign.jsonl", "--workspace", ws, "--record", rec,
		"--approve-up-to", "high", "--allow-program", "make")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	got := rnReadRecord(t, rec)
	writes, runs := slices.Contains(got.published, "file_edit"), slices.Contains(got.published, "run")
	want := []string{"dir_list executed", "file_read executed", "file_read executed", "file_edit executed", "run executed"}
	if !writes {
		want[3] = "file_edit unpublished"
	}
	if !runs {
		want[4] = "run unpublished"
	}
	for i, w := range want {
		entry, outcome, _ := strings.Cut(w, " ")
		if l := got.calls[i]; l["entry"] != entry || outcomeOf(l) != outcome {
			t.Errorf("call %d: %v %v (%v), want %s", i+1, l["entry"], outcomeOf(l), l["message"], w)
		}
	}
	src, _ := os.ReadFile(filepath.Join(ws, "greet.go"))
	if writes != strings.Contains(string(src), `"Hello, "`) {
		t.Errorf("file_edit published %v, greet.go:\n%s", writes, src)
	}
	if runs && !strings.Contains(r.stdout, "all tests passed") {
		t.Errorf("make's output is not in the transcript:\n%s", r.stdout)
	}
}

func TestRunScriptErrors(t *testing.T) {
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	must(t, os.MkdirAll(ws, 0o755))
	script := filepath.Join(dir, "bad.jsonl")
	must(t, os.WriteFile(script, []byte("{\"tool_calls\": [{\"name\": \"find\"}]}\n\n{\"text\": \"x\", \"tool_calls\": [{\"name\": 7}]}\n"), 0o644))
	rec := filepath.Join(dir, "rec.jsonl")
	r := rnHarness(t, nil, "", "run", "--provider", "replay:"+script, "--workspace", ws, "--record", rec)
	if r.code != exitUsage || !strings.Contains(r.stderr, script+":3:") || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
		t.Errorf("exit %d, stderr %q; want 2 and one line naming %s:3", r.code, r.stderr, script)
	}
	if _, err := os.Stat(rec); err == nil {
		t.Error("a record was written for a run that never started")
	}
}

// rnAgents writes agent definitions into a new directory.
func rnAgents(t *testing.T, defs map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range defs {
		must(t, os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644))
	}
	return dir
}

func rnDef(name, extra string) string {
	return "---\nname: " + name + "\ndescription: test agent\n" + extra + "---\nInstructions of " + name + ".\n"
}

// Configuration errors are exit 2 with one line that names what is wrong
// (the file and line for agent definitions), before anything runs.
func TestRunConfigErrors(t *testing.T) {
	ws := t.TempDir()
	script := filepath.Join(t.TempDir(), "s.jsonl")
	must(t, os.WriteFile(script, []byte(`{"text": "hi"}`+"\n"), 0o644))
	good := rnAgents(t, map[string]string{"a.md": rnDef("alpha", "tools: [file_read]\napprove-up-to: medium\n")})
	unknown := rnAgents(t, map[string]string{"u.md": rnDef("u", "tools:\n  - file_read\n  - bash\n")})
	dup := rnAgents(t, map[string]string{"one.md": rnDef("same", ""), "two.md": rnDef("same", "")})
	badFM := rnAgents(t, map[string]string{"b.md": "---\nname: b\ndescription: d\nmodel: x\n---\nbody\n"})
	plugin := t.TempDir()
	replay := []string{"run", "--workspace", ws, "--provider", "replay:" + script}
	for _, tc := range []struct {
		name string
		env  []string
		args []string
		want []string
	}{
		{"unknown tool", nil, append(replay, "--agents-dir", unknown), []string{filepath.Join(unknown, "u.md") + ":6", `unknown tool "bash"`}},
		{"duplicate agent", nil, append(replay, "--agents-dir", dup), []string{filepath.Join(dup, "two.md") + ":2", "already defined at " + filepath.Join(dup, "one.md") + ":2"}},
		{"bad front matter", nil, append(replay, "--agents-dir", badFM), []string{filepath.Join(badFM, "b.md") + ":4", `unknown key "model"`}},
		{"ceiling above the parent", nil, append(replay, "--agents-dir", good, "--agent", "alpha"), []string{"--approve-up-to: agent \"alpha\"", "approve-up-to medium is above the parent's ceiling low"}},
		{"no such agent", nil, append(replay, "--agents-dir", good, "--agent", "beta"), []string{"--agent beta: no such agent", "defined: alpha"}},
		{"agent without definitions", nil, append(replay, "--agent", "alpha"), []string{"no agent definitions were given"}},
		{"plugin without agents/", nil, append(replay, "--plugin", plugin), []string{"--plugin " + plugin + ": no agents/ directory"}},
		{"bad provider", nil, []string{"run", "--workspace", ws, "--provider", "gemini"}, []string{`--provider "gemini": want anthropic, openai or replay:FILE`}},
		{"missing script", nil, []string{"run", "--workspace", ws, "--provider", "replay:/nonexistent/s.jsonl"}, []string{"/nonexistent/s.jsonl"}},
		{"anthropic without key", nil, []string{"run", "--workspace", ws, "--provider", "anthropic", "--model", "m", "task"}, []string{"needs an API key in ANTHROPIC_API_KEY"}},
		{"anthropic without model", []string{"ANTHROPIC_API_KEY=" + rnKey}, []string{"run", "--workspace", ws, "--provider", "anthropic", "task"}, []string{"--model: none given; anthropic needs one"}},
		{"openai without task", []string{"OPENAI_API_KEY=" + rnKey}, []string{"run", "--workspace", ws, "--provider", "openai", "--model", "m"}, []string{"needs a task"}},
		{"openai remote http with key", []string{"OPENAI_API_KEY=" + rnKey}, []string{"run", "--workspace", ws, "--provider", "openai", "--model", "m", "--base-url", "http://example.com/v1", "t"}, []string{"in clear"}},
		{"model with replay", nil, append(replay, "--model", "x"), []string{`--model "x": a replay script has no model`}},
		{"negative max turns", nil, append(replay, "--max-turns=-1"), []string{"--max-turns -1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := rnHarness(t, tc.env, "", tc.args...)
			if r.code != exitUsage {
				t.Errorf("exit %d, want %d; stderr %q", r.code, exitUsage, r.stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("stderr %q lacks %q", r.stderr, w)
				}
			}
			if n := strings.Count(strings.TrimSpace(r.stderr), "\n"); n != 0 {
				t.Errorf("stderr has %d lines: %q", n+1, r.stderr)
			}
			if strings.Contains(r.stderr+r.stdout, rnKey) {
				t.Error("the key was printed")
			}
		})
	}
}

// The Anthropic provider through the CLI: the key comes from the
// environment, reaches only the provider's header, and never the record or
// the terminal; parallel calls are executed in order, recorded, and their
// refusals flagged is_error.
func TestRunAnthropicThroughCLI(t *testing.T) {
	dir, ws := rnFixture(t)
	fake := providertest.NewAnthropic(t,
		providertest.AnthropicMessage("Looking.", "tool_use",
			providertest.Call{ID: "toolu_a", Name: "file_read", Input: map[string]any{"path": "greet.go"}},
			providertest.Call{ID: "toolu_b", Name: "file_read", Input: map[string]any{"path": "link-out"}}),
		providertest.AnthropicMessage("Finished.", "end_turn"),
	)
	rec := filepath.Join(dir, "rec.jsonl")
	r := rnHarness(t, []string{"ANTHROPIC_API_KEY=" + rnKey}, "fix the greeting\n", "run", "--provider", "anthropic", "--model", "claude-test",
		"--base-url", fake.URL(), "--workspace", ws, "--record", rec, "-")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	reqs := fake.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	if reqs[0].Header.Get("x-api-key") != rnKey {
		t.Errorf("x-api-key header %q", reqs[0].Header.Get("x-api-key"))
	}
	if !strings.Contains(string(reqs[0].Body), "fix the greeting") || !strings.Contains(string(reqs[0].Body), "ERROR (") {
		t.Errorf("first request lacks the task or the system prompt: %s", reqs[0].Body)
	}
	var msg struct {
		Messages []struct {
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	must(t, json.Unmarshal(reqs[1].Body, &msg))
	var blocks []struct {
		ToolUseID string `json:"tool_use_id"`
		IsError   bool   `json:"is_error"`
	}
	must(t, json.Unmarshal(msg.Messages[2].Content, &blocks))
	if len(blocks) != 2 || blocks[0].ToolUseID != "toolu_a" || blocks[0].IsError || blocks[1].ToolUseID != "toolu_b" || !blocks[1].IsError {
		t.Errorf("tool_result blocks %+v", blocks)
	}
	got := rnReadRecord(t, rec)
	if len(got.calls) != 2 || outcomeOf(got.calls[0]) != "executed" || outcomeOf(got.calls[1]) != "denied_path" {
		t.Errorf("record calls %v", got.calls)
	}
	if !slices.Equal(got.endedBy, []string{"model_stopped"}) {
		t.Errorf("ended_by %v", got.endedBy)
	}
	recBytes, _ := os.ReadFile(rec)
	for name, s := range map[string]string{"record": string(recBytes), "stdout": r.stdout, "stderr": r.stderr} {
		if strings.Contains(s, rnKey) {
			t.Errorf("the API key reached the %s", name)
		}
	}
}

// The OpenAI provider through the CLI with --json: one JSON event per line,
// and an ERROR text for a malformed-arguments call.
func TestRunOpenAIJSONThroughCLI(t *testing.T) {
	dir, ws := rnFixture(t)
	fake := providertest.NewOpenAI(t,
		providertest.OpenAIMessage("", "tool_calls",
			providertest.Call{ID: "c1", Name: "dir_list", Input: map[string]any{}},
			providertest.Call{ID: "c2", Name: "file_read", Raw: `{"path": "greet.go"`}),
		providertest.OpenAIMessage("done", "stop"),
	)
	rec := filepath.Join(dir, "rec.jsonl")
	r := rnHarness(t, []string{"OPENAI_API_KEY=" + rnKey}, "", "run", "--provider", "openai", "--model", "gpt-test",
		"--base-url", fake.URL()+"/v1", "--workspace", ws, "--record", rec, "--json", "list things")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	var events []map[string]any
	for i, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("stdout line %d is not JSON: %q", i+1, l)
		}
		events = append(events, m)
	}
	var kinds []string
	for _, e := range events {
		kinds = append(kinds, e["event"].(string))
	}
	if strings.Join(kinds, ",") != "start,turn,call,call,turn,end" {
		t.Fatalf("events %v", kinds)
	}
	if events[3]["reason"] != "invalid_argument" || events[3]["args_raw"] != `{"path": "greet.go"` || events[2]["status"] != "executed" {
		t.Errorf("call events: %v / %v", events[2], events[3])
	}
	end := events[5]
	if end["ended_by"] != "model_stopped" || end["executed"] != float64(1) || end["refused"] != float64(1) {
		t.Errorf("end event %v", end)
	}
	tool := fake.Requests()[1].JSON["messages"].([]any)[4].(map[string]any)
	if c, _ := tool["content"].(string); !strings.HasPrefix(c, "ERROR (refused, invalid_argument): ") || tool["tool_call_id"] != "c2" {
		t.Errorf("tool message for the malformed call: %v", tool)
	}
}

// Budgets and failures end the run cleanly, and run_end says which.
func TestRunEndings(t *testing.T) {
	dir, ws := rnFixture(t)
	loop := filepath.Join(dir, "loop.jsonl")
	var b strings.Builder
	for range 5 {
		b.WriteString(`{"tool_calls": [{"name": "dir_list"}, {"name": "find", "arguments": {"pattern": "*.go"}}]}` + "\n")
	}
	must(t, os.WriteFile(loop, []byte(b.String()), 0o644))
	slow := providertest.NewAnthropic(t, providertest.Reply{Delay: 20 * time.Second, Body: providertest.AnthropicMessage("late", "end_turn").Body})
	denied := providertest.NewAnthropic(t, providertest.AnthropicError(401, "authentication_error", "invalid x-api-key", nil))
	key := []string{"ANTHROPIC_API_KEY=" + rnKey}
	for _, tc := range []struct {
		name    string
		env     []string
		args    []string
		code    int
		endedBy string
		calls   int
		stderr  string
	}{
		{"script", nil, []string{"--provider", "replay:" + loop}, 0, "script_ended", 10, ""},
		{"max turns", nil, []string{"--provider", "replay:" + loop, "--max-turns", "2"}, exitBudget, "max_turns", 4, ""},
		{"max calls", nil, []string{"--provider", "replay:" + loop, "--max-calls", "3"}, exitBudget, "max_calls", 4, ""},
		{"run timeout", key, []string{"--provider", "anthropic", "--model", "m", "--base-url", slow.URL(), "--run-timeout", "1s", "task"}, exitBudget, "timeout", 0, ""},
		{"provider error", key, []string{"--provider", "anthropic", "--model", "m", "--base-url", denied.URL(), "task"}, exitFailed, "error", 0, "anthropic: authentication failed (401)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := filepath.Join(t.TempDir(), "rec.jsonl")
			start := time.Now()
			r := rnHarness(t, tc.env, "", append([]string{"run", "--workspace", ws, "--record", rec, "--quiet"}, tc.args...)...)
			if r.code != tc.code {
				t.Errorf("exit %d, want %d\n%s%s", r.code, tc.code, r.stdout, r.stderr)
			}
			got := rnReadRecord(t, rec)
			if !slices.Equal(got.endedBy, []string{tc.endedBy}) || len(got.calls) != tc.calls {
				t.Errorf("ended_by %v with %d calls, want %s with %d", got.endedBy, len(got.calls), tc.endedBy, tc.calls)
			}
			if !strings.Contains(r.stdout, "summary: ended by "+tc.endedBy) {
				t.Errorf("no summary in:\n%s", r.stdout)
			}
			if tc.stderr != "" && (!strings.Contains(r.stderr, tc.stderr) || strings.Contains(r.stderr, rnKey)) {
				t.Errorf("stderr %q, want %q without the key", r.stderr, tc.stderr)
			}
			if tc.endedBy == "timeout" && time.Since(start) > 15*time.Second {
				t.Errorf("the 1s run timeout took %s", time.Since(start))
			}
			if tc.endedBy == "max_calls" {
				if reason := got.calls[3]["reason"]; reason != "budget_exhausted" {
					t.Errorf("the fourth call: %v", reason)
				}
			}
		})
	}
}

// rnParentSet is what a parent run with these flags admits, asked of the
// tools command (no agent involved).
func rnParentSet(t *testing.T, ws string, flags []string) []string {
	t.Helper()
	r := rnHarness(t, nil, "", append([]string{"tools", "--json", "--workspace", ws}, flags...)...)
	if r.code != 0 {
		t.Fatalf("tools: exit %d: %s", r.code, r.stderr)
	}
	var defs []struct{ Name string }
	must(t, json.Unmarshal([]byte(r.stdout), &defs))
	var names []string
	for _, d := range defs {
		names = append(names, d.Name)
	}
	return names
}

// TestRunNarrowingThroughCLI: over (parent flags, agent declaration,
// surface), what the model is sent is exactly parent ∩ declared (the flat
// definitions, or the tool_search listing under verbs), and every other
// catalogue entry is refused as unpublished, by name or through tool_invoke.
func TestRunNarrowingThroughCLI(t *testing.T) {
	_, ws := rnFixture(t)
	agents := rnAgents(t, map[string]string{
		"reads.md":   rnDef("reads", "tools: [file_read, find]\n"),
		"writer.md":  rnDef("writer", "tools: [file_read, file_write, run]\napprove-up-to: low\n"),
		"nothing.md": rnDef("nothing", "tools: []\n"),
		"all.md":     rnDef("all", ""),
	})
	callArgs := map[string]any{
		"file_read": map[string]any{"path": "greet.go"}, "dir_list": map[string]any{}, "search": map[string]any{"pattern": "Greet"},
		"find": map[string]any{"pattern": "*.go"}, "file_write": map[string]any{"path": "new.txt", "content": "x"},
		"file_edit": map[string]any{"path": "README.md", "old_string": "tiny", "new_string": "small"},
		"run":       map[string]any{"argv": []string{"never-allowed"}},
	}
	for _, tc := range []struct {
		parent []string
		agent  string
	}{
		{[]string{"--confine", "off"}, "writer"},
		{[]string{"--confine", "off"}, "all"},
		{[]string{"--allow-program", "echo", "--approve-up-to", "high"}, "reads"},
		{[]string{"--allow-program", "echo", "--approve-up-to", "high"}, "writer"},
		{[]string{"--allow-program", "echo"}, "nothing"},
		{[]string{"--approve-up-to", "medium"}, "all"},
	} {
		parentSet := rnParentSet(t, ws, tc.parent)
		for i, kind := range []string{"flat", "verbs"} {
			prov := []string{"anthropic", "openai"}[i]
			t.Run(strings.Join(tc.parent, " ")+"/"+tc.agent+"/"+kind, func(t *testing.T) {
				def, _ := filepath.Glob(filepath.Join(agents, tc.agent+".md"))
				raw, _ := os.ReadFile(def[0])
				var declared []string
				hasTools := false
				for _, l := range strings.Split(string(raw), "\n") {
					if v, ok := strings.CutPrefix(l, "tools: ["); ok {
						hasTools = true
						for _, n := range strings.Split(strings.TrimSuffix(v, "]"), ",") {
							if n = strings.TrimSpace(n); n != "" {
								declared = append(declared, n)
							}
						}
					}
				}
				var want []string
				for _, n := range parentSet {
					if !hasTools || slices.Contains(declared, n) {
						want = append(want, n)
					}
				}

				var calls []providertest.Call
				if kind == "verbs" {
					calls = append(calls, providertest.Call{ID: "listing", Name: "tool_search", Input: map[string]any{}})
				}
				for _, e := range gate.Catalogue {
					if kind == "verbs" {
						calls = append(calls, providertest.Call{ID: e.Name, Name: "tool_invoke", Input: map[string]any{"name": e.Name, "arguments": callArgs[e.Name]}})
					} else {
						calls = append(calls, providertest.Call{ID: e.Name, Name: e.Name, Input: callArgs[e.Name]})
					}
				}
				var fake *providertest.Fake
				var base string
				if prov == "anthropic" {
					fake = providertest.NewAnthropic(t, providertest.AnthropicMessage("", "tool_use", calls...), providertest.AnthropicMessage("ok", "end_turn"))
					base = fake.URL()
				} else {
					fake = providertest.NewOpenAI(t, providertest.OpenAIMessage("", "tool_calls", calls...), providertest.OpenAIMessage("ok", "stop"))
					base = fake.URL() + "/v1"
				}
				wsCopy := filepath.Join(t.TempDir(), "ws")
				rnCopyTree(t, ws, wsCopy)
				rec := filepath.Join(t.TempDir(), "rec.jsonl")
				env := []string{"ANTHROPIC_API_KEY=" + rnKey, "OPENAI_API_KEY=" + rnKey}
				args := append([]string{"run", "--provider", prov, "--model", "m", "--base-url", base, "--surface", kind, "--workspace", wsCopy,
					"--record", rec, "--agents-dir", agents, "--agent", tc.agent, "--quiet", "task"}, tc.parent...)
				r := rnHarness(t, env, "", args...)
				if r.code != 0 {
					t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
				}

				// What the model saw.
				reqs := fake.Requests()
				var shown []string
				tools, _ := reqs[0].JSON["tools"].([]any)
				for _, tl := range tools {
					m := tl.(map[string]any)
					if f, ok := m["function"].(map[string]any); ok {
						m = f
					}
					shown = append(shown, m["name"].(string))
				}
				results := rnResults(t, prov, reqs[1])
				if kind == "flat" {
					if !slices.Equal(shown, want) {
						t.Errorf("definitions sent %v, want parent %v ∩ declared = %v", shown, parentSet, want)
					}
				} else {
					if strings.Join(shown, ",") != "tool_search,tool_describe,tool_invoke" {
						t.Errorf("verbs sent %v", shown)
					}
					var listed []string
					for _, l := range strings.Split(strings.TrimSpace(results["listing"].text), "\n") {
						if n, _, ok := strings.Cut(l, " ("); ok {
							listed = append(listed, n)
						}
					}
					if !slices.Equal(listed, want) {
						t.Errorf("tool_search listed %v, want %v", listed, want)
					}
				}
				// What the gate did, as the model heard it and as recorded.
				got := rnReadRecord(t, rec)
				if !slices.Equal(got.published, want) {
					t.Errorf("run_start published %v, want %v", got.published, want)
				}
				for _, e := range gate.Catalogue {
					res := results[e.Name]
					unpub := strings.HasPrefix(res.text, "ERROR (refused, unpublished)")
					if slices.Contains(want, e.Name) == unpub {
						t.Errorf("%s (allowed %v): %q", e.Name, slices.Contains(want, e.Name), res.text)
					}
					if unpub && prov == "anthropic" && !res.isError {
						t.Errorf("%s refused without is_error", e.Name)
					}
				}
				for _, l := range got.calls {
					if e := l["entry"].(string); e != "tool_search" && !slices.Contains(want, e) && outcomeOf(l) != "unpublished" {
						t.Errorf("record: %s %s", e, outcomeOf(l))
					}
				}
			})
		}
	}
}

type rnResult struct {
	text    string
	isError bool
}

// rnResults extracts the tool results of a provider request by call id.
func rnResults(t *testing.T, prov string, req providertest.Request) map[string]rnResult {
	t.Helper()
	out := map[string]rnResult{}
	msgs := req.JSON["messages"].([]any)
	if prov == "openai" {
		for _, m := range msgs {
			mm := m.(map[string]any)
			if mm["role"] == "tool" {
				c, _ := mm["content"].(string)
				out[mm["tool_call_id"].(string)] = rnResult{text: c, isError: strings.HasPrefix(c, "ERROR (")}
			}
		}
		return out
	}
	last := msgs[len(msgs)-1].(map[string]any)
	for _, b := range last["content"].([]any) {
		bb := b.(map[string]any)
		var text strings.Builder
		for _, c := range bb["content"].([]any) {
			text.WriteString(c.(map[string]any)["text"].(string))
		}
		isErr, _ := bb["is_error"].(bool)
		out[bb["tool_use_id"].(string)] = rnResult{text: text.String(), isError: isErr}
	}
	return out
}

// The provider keys are removed from the harness's environment once read:
// a hook (which inherits that environment) never sees them.
func TestRunKeysNeverReachHooks(t *testing.T) {
	dir, ws := rnFixture(t)
	// The harness confines its own writes (and its hooks') to the
	// workspace, so the hook writes its dump there.
	dump := filepath.Join(ws, "hook-env.txt")
	hook := filepath.Join(dir, "hook.sh")
	must(t, os.WriteFile(hook, []byte("#!/bin/sh\nenv >> "+dump+"\nexit 0\n"), 0o755))
	script := filepath.Join(dir, "s.jsonl")
	must(t, os.WriteFile(script, []byte(`{"tool_calls": [{"name": "dir_list"}]}`+"\n"), 0o644))
	fake := providertest.NewAnthropic(t,
		providertest.AnthropicMessage("", "tool_use", providertest.Call{ID: "t1", Name: "dir_list"}),
		providertest.AnthropicMessage("ok", "end_turn"))
	env := []string{"ANTHROPIC_API_KEY=" + rnKey, "OPENAI_API_KEY=" + rnKey + "-openai", "B10X_HOOK_MARK=seen"}
	for _, args := range [][]string{
		{"--provider", "replay:" + script},
		{"--provider", "anthropic", "--model", "m", "--base-url", fake.URL(), "task"},
	} {
		must(t, os.WriteFile(dump, nil, 0o644))
		r := rnHarness(t, env, "", append([]string{"run", "--workspace", ws, "--hook", hook, "--quiet"}, args...)...)
		if r.code != 0 {
			t.Fatalf("%v: exit %d\n%s%s", args, r.code, r.stdout, r.stderr)
		}
		b, _ := os.ReadFile(dump)
		if !strings.Contains(string(b), "B10X_HOOK_MARK=seen") {
			t.Fatalf("%v: the hook did not run (or got no environment): %q", args, b)
		}
		if strings.Contains(string(b), rnKey) || strings.Contains(string(b), "ANTHROPIC_API_KEY") || strings.Contains(string(b), "OPENAI_API_KEY") {
			t.Errorf("%v: a provider key reached the hook's environment", args)
		}
	}
	if len(fake.Requests()) != 2 || fake.Requests()[0].Header.Get("x-api-key") != rnKey {
		t.Errorf("the provider did not get the key: %d requests", len(fake.Requests()))
	}
}

// --plugin DIR loads DIR/agents/, like --agents-dir.
func TestRunPluginAgents(t *testing.T) {
	dir, ws := rnFixture(t)
	plugin := filepath.Join(dir, "plugin")
	must(t, os.MkdirAll(filepath.Join(plugin, "agents"), 0o755))
	must(t, os.WriteFile(filepath.Join(plugin, "agents", "reader.md"), []byte(rnDef("reader", "tools: [file_read, dir_list]\n")), 0o644))
	script := filepath.Join(dir, "s.jsonl")
	must(t, os.WriteFile(script, []byte(`{"tool_calls": [{"name": "search", "arguments": {"pattern": "x"}}, {"name": "file_read", "arguments": {"path": "greet.go"}}]}`+"\n"), 0o644))
	rec := filepath.Join(dir, "rec.jsonl")
	r := rnHarness(t, nil, "", "run", "--provider", "replay:"+script, "--workspace", ws, "--record", rec, "--plugin", plugin, "--agent", "reader", "--quiet")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	got := rnReadRecord(t, rec)
	if len(got.calls) != 2 || outcomeOf(got.calls[0]) != "unpublished" || outcomeOf(got.calls[1]) != "executed" {
		t.Errorf("calls %v", got.calls)
	}
}

// TestRunPrestartsTheNextCall: in a model's session every run call runs
// in a sandbox started before it came (the first behind the probe the
// session makes at start, the others behind the call before; the record
// says so), each with its own /tmp, and nothing of the
// session's sandboxes is left when run ends.
func TestRunPrestartsTheNextCall(t *testing.T) {
	testenv.Require(t, atkExecution(), "run published", testenv.ShapeNoLandlock, testenv.ShapeNoUserns)
	dir, ws := t.TempDir(), t.TempDir()
	script := filepath.Join(dir, "s.jsonl")
	call := `{"text": "call %d", "tool_calls": [{"name": "run", "arguments": {"argv": ["sh", "-c", "ls /tmp | sed s/^/tmp:/; touch /tmp/$(echo m)ark"]}}]}` + "\n"
	var b strings.Builder
	for i := 1; i <= 3; i++ {
		fmt.Fprintf(&b, call, i)
	}
	must(t, os.WriteFile(script, []byte(b.String()), 0o644))
	rec := filepath.Join(dir, "rec.jsonl")
	r := rnHarness(t, nil, "", "run", "--provider", "replay:"+script, "--workspace", ws, "--record", rec,
		"--approve-up-to", "high", "--allow-program", "sh")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	got := rnReadRecord(t, rec)
	if len(got.calls) != 3 {
		t.Fatalf("%d calls recorded, want 3", len(got.calls))
	}
	for i, l := range got.calls {
		meta, _ := l["meta"].(map[string]any)
		if outcomeOf(l) != "executed" || meta["exit_code"] != float64(0) {
			t.Fatalf("call %d: %v", i+1, l)
		}
		if meta["prestarted"] != true {
			t.Errorf("call %d did not run in a pre-started sandbox: %v", i+1, meta)
		}
	}
	// Each call's private /tmp is its own: no sandbox served twice.
	// (Namespace inode numbers prove nothing: a freed one is reused.)
	if strings.Contains(r.stdout, "tmp:mark") {
		t.Errorf("a call saw an earlier call's /tmp:\n%s", r.stdout)
	}
	if n := strings.Count(r.stdout, "exit status 0"); n != 3 {
		t.Errorf("%d calls exited 0 in the transcript, want 3:\n%s", n, r.stdout)
	}
	for _, pid := range helperProcesses(ws) {
		t.Errorf("helper process %d (of this workspace) left after run ended", pid)
	}
}

// helperProcesses lists the run helpers (the namespace's init, and the
// program's stage until it executes, which shows the init's argv) whose
// view binds the workspace ws: this test's, not those of other tests
// running beside it.
func helperProcesses(ws string) []int {
	var pids []int
	for _, p := range atkProcs("b10x-reexec:spawn-") {
		f := strings.Fields(p)
		pid, _ := strconv.Atoi(f[0])
		if len(f) < 2 || f[1] != "b10x-reexec:spawn-helper" {
			continue
		}
		mounts, _ := os.ReadFile(filepath.Join("/proc", f[0], "mountinfo"))
		if strings.Contains(string(mounts), " "+ws+" ") {
			pids = append(pids, pid)
		}
	}
	return pids
}
