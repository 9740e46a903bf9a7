package main

// ATTACKS.md, "Writing": file_write and file_edit through `b10x-harness
// call`, under the default --confine auto (the harness confines its own
// writes; without Landlock the write tools are not published, and every
// case must then be refused as unpublished).

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/b10x/harness/internal/testenv"
)

// writeRefused asserts a write refused at step with reason, or, where
// this shape publishes no write tool, refused as unpublished.
func writeRefused(t *testing.T, at atkAttempt, reason, step string) {
	t.Helper()
	if !atkWrites() {
		at.refusedAt(t, "unpublished", "published")
		return
	}
	at.refusedAt(t, reason, step)
}

// writeExecuted asserts a write executed, or refused as unpublished where
// this shape publishes no write tool. It reports whether it executed.
func writeExecuted(t *testing.T, at atkAttempt) bool {
	t.Helper()
	if !atkWrites() {
		at.refusedAt(t, "unpublished", "published")
		return false
	}
	at.want(t, "executed", "")
	return true
}

func fileIs(t *testing.T, path, want string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if string(b) != want {
		t.Fatalf("%s holds %q, want %q", path, b, want)
	}
}

func TestAttackWritingLinks(t *testing.T) {
	t.Parallel()
	a := newAtkWS(t)
	a.link(t, "../data-archived/created-through-link", "planted")
	a.link(t, "../data-archived/x", "planted-existing")
	a.link(t, filepath.Join(a.base, "outdir", "created-abs"), "abs-dangling")
	a.link(t, "dchain2", "dchain1")
	a.link(t, "sub/dchain3", "dchain2")
	a.link(t, "../../outdir/created-by-chain", "sub/dchain3")
	a.link(t, "../outdir", "dirout")
	a.link(t, "../..", "sub/up")
	a.link(t, "/proc/self/root"+a.base, "procbase")
	a.link(t, "hello.txt", "in-link")
	a.seal(t)

	w := func(path string) string {
		return atkJSON(t, map[string]any{"path": path, "content": "written by an attack\n"})
	}
	e := func(path string) string {
		return atkJSON(t, map[string]any{"path": path, "old_string": "OUTSIDE", "new_string": "edited by an attack"})
	}
	cases := []struct{ name, tool, args string }{
		{"planted dangling link at the target", "file_write", w("planted")},
		{"planted link to an existing outside file", "file_write", w("planted-existing")},
		{"edit through a link to an outside file", "file_edit", e("planted-existing")},
		{"absolute dangling link", "file_write", w("abs-dangling")},
		{"dangling chain out", "file_write", w("dchain1")},
		{"beneath a directory link out", "file_write", w("dirout/new.txt")},
		{"beneath a directory link out, missing parents", "file_write", w("dirout/made/deeper.txt")},
		{"edit beneath a directory link out", "file_edit", e("dirout/x")},
		{"link to a grandparent", "file_write", w("sub/up/data2/x")},
		{"traversal", "file_write", w("../data2/x")},
		{"absolute outside", "file_write", w(filepath.Join(a.base, "data_backup"))},
		{"absolute new file outside", "file_write", w(filepath.Join(a.base, "created-abs"))},
		{"/proc/self/root", "file_write", w("/proc/self/root" + filepath.Join(a.base, "data.bak"))},
		{"link to /proc/self/root", "file_write", w("procbase/data2/x")},
		{"NUL in the path", "file_write", w("ok\x00../../x")},
	}
	for _, c := range atkSample(cases, 3) {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			at := a.call(t, nil, []string{"--yes"}, c.tool, c.args)
			if strings.Contains(c.args, `\u0000`) {
				writeRefused(t, at, "invalid_argument", "arguments")
				return
			}
			writeRefused(t, at, "denied_path", "paths")
		})
	}
	t.Run("link inside is written at its target, never through", func(t *testing.T) {
		t.Parallel()
		at := a.call(t, nil, []string{"--yes"}, "file_write", w("in-link"))
		if writeExecuted(t, at) {
			fileIs(t, filepath.Join(a.ws, "hello.txt"), "written by an attack\n")
			if l, err := os.Readlink(filepath.Join(a.ws, "in-link")); err != nil || l != "hello.txt" {
				t.Fatalf("the link was replaced or changed: %q %v", l, err)
			}
		}
	})
	t.Cleanup(func() { a.checkOutside(t) })
}

// TestAttackWritingScope: rules match the canonical workspace-relative path,
// so a link cannot dodge them, and partial-only admits edits only.
func TestAttackWritingScope(t *testing.T) {
	t.Parallel()
	a := newAtkWS(t)
	a.write(t, "secret.pem", "PEM\n")
	a.write(t, "keys/id.pem", "ID PEM\n")
	a.link(t, "../secret.pem", "ok/x")
	a.link(t, "../keys/id.pem", "ok/y.txt")
	a.link(t, "../keys", "ok/k")
	a.write(t, "config/app.yaml", "a: 1\n")
	a.link(t, "config/app.yaml", "cfg")
	a.seal(t)
	// The read scope's defaults, which deny a .pem's content too, are
	// turned off: these are the write rules' refusals.
	scope := []string{"--yes", "--write-scope", "config/*.yaml=partial-only", "--write-scope", "**/*.pem=denied", "--read-scope", "**=allowed"}
	w := func(path string) string { return atkJSON(t, map[string]any{"path": path, "content": "replaced\n"}) }
	e := func(path, old, new string) string {
		return atkJSON(t, map[string]any{"path": path, "old_string": old, "new_string": new})
	}
	ruleOf := func(at atkAttempt) any {
		steps, _ := at.rec["steps"].([]any)
		for _, s := range steps {
			if m, _ := s.(map[string]any); m["step"] == "scope" {
				return m["rule"]
			}
		}
		return nil
	}
	for _, c := range []struct {
		name, tool, args string
		rule             float64
	}{
		{"a .pem directly", "file_write", w("secret.pem"), 1},
		{"link ok/x -> ../secret.pem", "file_write", w("ok/x"), 1},
		{"edit through ok/x", "file_edit", e("ok/x", "PEM", "pwned"), 1},
		{"link ok/y.txt -> ../keys/id.pem", "file_write", w("ok/y.txt"), 1},
		{"directory link ok/k/id.pem", "file_write", w("ok/k/id.pem"), 1},
		{"new .pem through a directory link", "file_write", w("ok/k/new.pem"), 1},
		{"whole write on partial-only", "file_write", w("config/app.yaml"), 0},
		{"whole write on partial-only through a link", "file_write", w("cfg"), 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			at := a.call(t, nil, scope, c.tool, c.args)
			writeRefused(t, at, "denied_path", "scope")
			if atkWrites() && ruleOf(at) != c.rule {
				t.Fatalf("the record names rule %v, want %v: %v", ruleOf(at), c.rule, at.rec["steps"])
			}
		})
	}
	fileIs(t, filepath.Join(a.ws, "secret.pem"), "PEM\n")
	fileIs(t, filepath.Join(a.ws, "keys/id.pem"), "ID PEM\n")
	_, err := os.Lstat(filepath.Join(a.ws, "keys/new.pem"))
	if err == nil {
		t.Fatal("keys/new.pem was created through a link")
	}
	fileIs(t, filepath.Join(a.ws, "config/app.yaml"), "a: 1\n")
	// partial-only admits an exact edit, also through the link; and the
	// same flags still admit ordinary writes (the refusals above are the
	// rules, not a broken write tool).
	if writeExecuted(t, a.call(t, nil, scope, "file_edit", e("config/app.yaml", "a: 1", "a: 2"))) {
		fileIs(t, filepath.Join(a.ws, "config/app.yaml"), "a: 2\n")
		writeExecuted(t, a.call(t, nil, scope, "file_edit", e("cfg", "a: 2", "a: 3")))
		fileIs(t, filepath.Join(a.ws, "config/app.yaml"), "a: 3\n")
		writeExecuted(t, a.call(t, nil, scope, "file_write", w("notes.txt")))
		fileIs(t, filepath.Join(a.ws, "notes.txt"), "replaced\n")
	}
	a.checkOutside(t)
}

// TestAttackWritingProtected: .git (hooks, config), .b10x, the record file
// and a hook program inside the workspace cannot be written unless a rule
// names them explicitly.
func TestAttackWritingProtected(t *testing.T) {
	t.Parallel()
	a := newAtkWS(t)
	a.write(t, ".git/config", "[core]\n")
	a.write(t, ".git/hooks/pre-commit.sample", "#!/bin/sh\n")
	a.link(t, ".git", "g")
	a.link(t, ".git/hooks", "hooks")
	a.write(t, "hook.sh", "#!/bin/sh\nexit 0\n")
	must(t, os.Chmod(filepath.Join(a.ws, "hook.sh"), 0o755))
	a.seal(t)
	w := func(path string) string {
		return atkJSON(t, map[string]any{"path": path, "content": "#!/bin/sh\necho pwned\n"})
	}
	for _, c := range atkSample([]struct {
		name, tool, args string
		flags            []string
	}{
		{"new git hook", "file_write", w(".git/hooks/pre-commit"), nil},
		{"git hook through a link to .git", "file_write", w("g/hooks/post-checkout"), nil},
		{"git hook through a link to .git/hooks", "file_write", w("hooks/pre-push"), nil},
		{"edit .git/config", "file_edit", atkJSON(t, map[string]any{"path": ".git/config", "old_string": "[core]", "new_string": "[core]\n\tfsmonitor = sh -c pwned"}), nil},
		{"the harness's own configuration", "file_write", w(".b10x/agents/evil.md"), nil},
		{"a wildcard rule does not name .git", "file_write", w(".git/hooks/pre-commit"), []string{"--write-scope", "**=allowed"}},
		{"a hook program in the workspace", "file_write", w("hook.sh"), []string{"--hook", filepath.Join(a.ws, "hook.sh")}},
	}, 2) {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			at := a.call(t, nil, append([]string{"--yes"}, c.flags...), c.tool, c.args)
			writeRefused(t, at, "denied_path", "scope")
		})
	}
	t.Run("the record file", func(t *testing.T) {
		t.Parallel()
		rec := filepath.Join(a.ws, "run.jsonl")
		a.link(t, "run.jsonl", "rec-link")
		for _, c := range []struct{ tool, args string }{
			{"file_write", w("run.jsonl")},
			{"file_write", w("rec-link")},
			{"file_edit", atkJSON(t, map[string]any{"path": "run.jsonl", "old_string": "refused", "new_string": "executed", "replace_all": true})},
		} {
			r := atkHarness(t, nil, "", "call", "--workspace", a.ws, "--record", rec, "--yes", c.tool, c.args)
			want := "denied_path"
			if !atkWrites() {
				want = "unpublished"
			}
			if r.code != exitRefused || !strings.Contains(r.stdout, `"reason":"`+want+`"`) {
				t.Fatalf("%s %s: exit %d %s %s", c.tool, c.args, r.code, r.stdout, r.stderr)
			}
		}
		b, err := os.ReadFile(rec)
		must(t, err)
		lines := bytes.Split(bytes.TrimSpace(b), []byte("\n"))
		if len(lines) != 9 || bytes.Count(b, []byte(`"status":"refused"`)) != 3 || bytes.Contains(b, []byte(`"status":"executed"`)) {
			t.Fatalf("the record was changed through a write tool:\n%s", atkClip(string(b)))
		}
	})
	t.Run("an explicit rule admits a git hook", func(t *testing.T) {
		t.Parallel()
		at := a.call(t, nil, []string{"--yes", "--write-scope", ".git/hooks/**=allowed"}, "file_write", w(".git/hooks/post-merge"))
		if writeExecuted(t, at) {
			fileIs(t, filepath.Join(a.ws, ".git/hooks/post-merge"), "#!/bin/sh\necho pwned\n")
		}
	})
	t.Cleanup(func() {
		for _, p := range []string{".git/hooks/pre-commit", ".git/hooks/post-checkout", ".git/hooks/pre-push", ".b10x"} {
			if _, err := os.Lstat(filepath.Join(a.ws, p)); err == nil {
				t.Errorf("%s was created through a write tool", p)
			}
		}
		fileIs(t, filepath.Join(a.ws, ".git/config"), "[core]\n")
		fileIs(t, filepath.Join(a.ws, "hook.sh"), "#!/bin/sh\nexit 0\n")
		a.checkOutside(t)
	})
}

// TestAttackWritingKilled: the harness is SIGKILLed at varying moments of a
// 6 MiB file_write; every time, the target holds the old content or the
// new one, whole.
func TestAttackWritingKilled(t *testing.T) {
	t.Parallel()
	if !atkWrites() {
		a := newAtkWS(t)
		writeRefused(t, a.call(t, nil, []string{"--yes"}, "file_write", `{"path":"big.txt","content":"x"}`), "", "")
		return
	}
	a := newAtkWS(t)
	target := filepath.Join(a.ws, "big.txt")
	old := strings.Repeat("old line\n", 1<<16)
	must(t, os.WriteFile(target, []byte(old), 0o644))
	fresh := strings.Repeat("new line, longer than the old one\n", (2<<20)/34)
	args := atkJSON(t, map[string]any{"path": "big.txt", "content": fresh})
	// One uninterrupted write, to learn how long a whole call takes here.
	start := time.Now()
	full := atkCmd(nil, args, "call", "--workspace", a.ws, "--yes", "file_write", "-")
	if out, err := full.CombinedOutput(); err != nil {
		t.Fatalf("uninterrupted write: %v\n%s", err, atkClip(string(out)))
	}
	whole := time.Since(start)
	fileIs(t, target, fresh)
	must(t, os.WriteFile(target, []byte(old), 0o644))
	counts := map[string]int{}
	rounds := 4
	if testenv.InVM() {
		rounds = 2
	}
	for i := 0; i < rounds; i++ {
		// Kill points spread over 50%..110% of a whole call.
		cmd := atkCmd(nil, args, "call", "--workspace", a.ws, "--yes", "file_write", "-")
		must(t, cmd.Start())
		time.Sleep(whole * time.Duration(50+i*20) / 100)
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
		b, err := os.ReadFile(target)
		must(t, err)
		switch string(b) {
		case old:
			counts["old"]++
		case fresh:
			counts["new"]++
			must(t, os.WriteFile(target, []byte(old), 0o644))
		default:
			t.Fatalf("round %d: the target holds %d bytes, neither version", i, len(b))
		}
	}
	ents, err := os.ReadDir(a.ws)
	must(t, err)
	var strays []string
	for _, e := range ents {
		if e.Name() != "big.txt" && e.Name() != "hello.txt" && e.Name() != "sub" && e.Name() != "a" {
			strays = append(strays, e.Name())
		}
	}
	t.Logf("a whole call took %s; after SIGKILL: old %d, new %d; stray temporary files: %v", whole, counts["old"], counts["new"], strays)
}

// TestAttackWritingHarnessConfig: named-agent definitions the harness reads
// (--agents-dir, --plugin DIR/agents) that live in the workspace cannot be
// created or changed through a write tool: a model that rewrites an agent's
// tools: would widen what the next run of that agent is given.
func TestAttackWritingHarnessConfig(t *testing.T) {
	t.Parallel()
	a := newAtkWS(t)
	def := "---\nname: helper\ndescription: reads\ntools: [file_read]\n---\nRead only.\n"
	a.write(t, "agents/helper.md", def)
	a.write(t, "plugin/agents/plug.md", strings.Replace(def, "helper", "plug", 1))
	widened := strings.Replace(def, "[file_read]", "[file_read, file_write, run]", 1)
	calls := []map[string]any{
		{"name": "file_write", "arguments": map[string]any{"path": "agents/helper.md", "content": widened}},
		{"name": "file_edit", "arguments": map[string]any{"path": "agents/helper.md", "old_string": "[file_read]", "new_string": "[file_read, run]"}},
		{"name": "file_write", "arguments": map[string]any{"path": "agents/extra.md", "content": strings.Replace(widened, "helper", "extra", 1)}},
		{"name": "file_write", "arguments": map[string]any{"path": "plugin/agents/plug.md", "content": widened}},
	}
	script := filepath.Join(a.base, "script.jsonl")
	must(t, os.WriteFile(script, []byte(atkJSON(t, map[string]any{"tool_calls": calls})+"\n{\"text\":\"done\"}\n"), 0o644))
	rec := filepath.Join(t.TempDir(), "rec.jsonl")
	a.seal(t)
	r := atkHarness(t, nil, "", "run", "--workspace", a.ws, "--record", rec, "--yes", "--provider", "replay:"+script,
		"--agents-dir", filepath.Join(a.ws, "agents"), "--plugin", filepath.Join(a.ws, "plugin"), "--quiet")
	if r.code != 0 {
		t.Fatalf("run: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	want := "denied_path"
	if !atkWrites() {
		want = "unpublished"
	}
	n := 0
	for _, l := range readRecord(t, rec) {
		if l["event"] != "call" {
			continue
		}
		n++
		if l["status"] != "refused" || l["reason"] != want {
			t.Errorf("%v %v: %v/%v, want refused/%s", l["entry"], l["args"], l["status"], l["reason"], want)
		}
	}
	if n != len(calls) {
		t.Fatalf("the record holds %d calls, want %d", n, len(calls))
	}
	fileIs(t, filepath.Join(a.ws, "agents/helper.md"), def)
	fileIs(t, filepath.Join(a.ws, "plugin/agents/plug.md"), strings.Replace(def, "helper", "plug", 1))
	if _, err := os.Lstat(filepath.Join(a.ws, "agents/extra.md")); err == nil {
		t.Error("a new agent definition was created through a write tool")
	}
	a.checkOutside(t)
}
