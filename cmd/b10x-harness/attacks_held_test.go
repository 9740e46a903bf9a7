package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/b10x/harness/internal/testenv"
)

// Issue 12, findings 1 and 2: the gate's promises bind run too. A run
// child cannot change what file_write refuses to: protected paths (.git,
// hooks and the record in the workspace) and paths a denied or
// partial-only --write-scope rule matches.

// heldWS is a workspace with a hook that blocks file_write, a .git
// directory, and the record file inside.
type heldWS struct {
	ws, hook, rec string
}

const heldHook = "#!/bin/sh\nin=$(cat)\ncase \"$in\" in *'\"entry\":\"file_write\"'*) echo 'file_write is blocked by the guard' >&2; exit 2;; esac\nexit 0\n"

func newHeldWS(t *testing.T, git bool) heldWS {
	t.Helper()
	base, err := filepath.EvalSymlinks(t.TempDir())
	must(t, err)
	h := heldWS{ws: filepath.Join(base, "ws")}
	h.hook = filepath.Join(h.ws, ".hooks", "guard.sh")
	h.rec = filepath.Join(h.ws, "rec.jsonl")
	must(t, os.MkdirAll(filepath.Dir(h.hook), 0o755))
	must(t, os.WriteFile(h.hook, []byte(heldHook), 0o755))
	must(t, os.WriteFile(filepath.Join(h.ws, "hello.txt"), []byte("hello\n"), 0o644))
	if git {
		must(t, os.MkdirAll(filepath.Join(h.ws, ".git", "refs"), 0o755))
		must(t, os.WriteFile(filepath.Join(h.ws, ".git", "config"), []byte("[core]\n\tbare = false\n"), 0o644))
		must(t, os.WriteFile(filepath.Join(h.ws, ".git", "HEAD"), []byte("ref: refs/heads/main\n"), 0o644))
	}
	return h
}

// call makes one call in the workspace with the hook and the in-workspace
// record, and returns its outcome.
func (h heldWS) call(t *testing.T, extra []string, tool, args string) map[string]any {
	t.Helper()
	argv := append([]string{"call", "--workspace", h.ws, "--record", h.rec, "--hook", h.hook, "--yes", "--allow-program", "sh"}, extra...)
	return outcome(t, harness(t, "", append(argv, tool, args)...))
}

func (h heldWS) run(t *testing.T, extra []string, script string) map[string]any {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"argv": []string{"sh", "-c", script}})
	return h.call(t, extra, "run", string(b))
}

// lastCall is the record's last call line.
func (h heldWS) lastCall(t *testing.T) map[string]any {
	t.Helper()
	lines := readRecord(t, h.rec)
	for i := len(lines) - 1; i >= 0; i-- {
		if lines[i]["event"] == "call" {
			return lines[i]
		}
	}
	t.Fatal("no call line in the record")
	return nil
}

// tree snapshots the contents of a directory (relative path -> content,
// "dir" for directories, "-> target" for links).
func tree(t *testing.T, root string) map[string]string {
	t.Helper()
	m := map[string]string{}
	filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			l, _ := os.Readlink(p)
			m[rel] = "-> " + l
		case fi.IsDir():
			m[rel] = "dir " + fi.Mode().Perm().String()
		default:
			b, _ := os.ReadFile(p)
			m[rel] = fi.Mode().Perm().String() + " " + string(b)
		}
		return nil
	})
	return m
}

func sameTree(t *testing.T, what string, before, after map[string]string) {
	t.Helper()
	for k, v := range after {
		if b, ok := before[k]; !ok {
			t.Errorf("%s: %s was created: %q", what, k, v)
		} else if b != v {
			t.Errorf("%s: %s changed: %q -> %q", what, k, b, v)
		}
	}
	for k := range before {
		if _, ok := after[k]; !ok {
			t.Errorf("%s: %s was removed", what, k)
		}
	}
}

func TestAttackRunHeldProtected(t *testing.T) {
	testenv.Require(t, execution(), "confined execution", testenv.ShapeNoLandlock, testenv.ShapeNoUserns)
	h := newHeldWS(t, true)
	giveWorkspace([]string{"--workspace", h.ws})
	must(t, os.WriteFile(h.rec, nil, 0o600))
	giveWorkspace([]string{"--workspace", h.ws})
	hooks, git := tree(t, filepath.Join(h.ws, ".hooks")), tree(t, filepath.Join(h.ws, ".git"))

	for _, c := range []struct{ what, script string }{
		{"rewrite the hook", `printf '#!/bin/sh\nexit 0\n' > .hooks/guard.sh`},
		{"truncate, chmod and remove the hook", `: > .hooks/guard.sh; chmod 777 .hooks/guard.sh; rm -f .hooks/guard.sh`},
		{"replace the hook's directory", `mv .hooks .hooks2 && mkdir .hooks && printf '#!/bin/sh\nexit 0\n' > .hooks/guard.sh && chmod +x .hooks/guard.sh`},
		{"rename the hook and put another in its place", `mv .hooks/guard.sh .hooks/old.sh; printf '#!/bin/sh\nexit 0\n' > /tmp/g.sh && mv /tmp/g.sh .hooks/guard.sh`},
		{"forge record lines", `echo '{"event":"call","seq":99,"status":"executed","forged":true}' >> rec.jsonl`},
		{"rename over the record", `echo '{"forged":true}' > rec.new; mv rec.new rec.jsonl; rm -f rec.new`},
		{"replace the record", `echo '{"forged":true}' > /tmp/rec.new && mv /tmp/rec.new rec.jsonl`},
		{"write a git hook", `mkdir -p .git/hooks && printf '#!/bin/sh\necho pwned\n' > .git/hooks/post-checkout && chmod +x .git/hooks/post-checkout`},
		{"change the git config", `printf '[core]\n\thooksPath = /tmp\n' >> .git/config`},
		{"swap .git", `mv .git .git2; mkdir .git; echo pwned > .git/config`},
		{"remove .git", `rm -rf .git`},
	} {
		o := h.run(t, nil, c.script+"; echo done")
		if o["status"] != "executed" {
			t.Errorf("%s: %v, want executed (every write refused by the kernel, nothing changed)", c.what, o)
		}
		sameTree(t, c.what+": .hooks", hooks, tree(t, filepath.Join(h.ws, ".hooks")))
		sameTree(t, c.what+": .git", git, tree(t, filepath.Join(h.ws, ".git")))
		for _, rel := range []string{".git2", ".hooks2", ".hooks/old.sh"} {
			if _, err := os.Lstat(filepath.Join(h.ws, rel)); err == nil {
				t.Errorf("%s: %s exists", c.what, rel)
			}
		}
		for _, l := range readRecord(t, h.rec) { // every line parses
			if l["forged"] != nil || l["event"] == nil {
				t.Errorf("%s: the record holds a forged line: %v", c.what, l)
			}
		}
	}
	// The hook still blocks the next file_write.
	o := h.call(t, nil, "file_write", `{"path":"hello.txt","content":"pwned\n"}`)
	if o["status"] != "refused" || o["reason"] != "hook_blocked" {
		t.Fatalf("file_write after the attacks: %v, want refused by the hook", o)
	}
	if b, _ := os.ReadFile(filepath.Join(h.ws, "hello.txt")); string(b) != "hello\n" {
		t.Fatalf("hello.txt: %q", b)
	}
}

// TestAttackRunHeldProtectedCreated: a protected path that does not exist
// cannot be bound; what the child creates there is removed after the call,
// which fails with protected_path naming it, in the outcome and the record.
func TestAttackRunHeldProtectedCreated(t *testing.T) {
	testenv.Require(t, execution(), "confined execution", testenv.ShapeNoLandlock, testenv.ShapeNoUserns)
	h := newHeldWS(t, false)
	must(t, os.WriteFile(h.rec, nil, 0o600))
	for _, c := range []struct{ what, script, path string }{
		{"create a git hook", `mkdir -p .git/hooks && printf '#!/bin/sh\necho pwned\n' > .git/hooks/post-checkout && chmod +x .git/hooks/post-checkout`, ".git"},
		{"create .git as a link", `ln -s /tmp .git`, ".git"},
		{"create an unwritable .b10x", `mkdir -p .b10x/agents && echo x > .b10x/agents/a.md && chmod 0 .b10x/agents .b10x`, ".b10x"},
	} {
		o := h.run(t, nil, c.script+"; echo done")
		msg, _ := o["message"].(string)
		if o["status"] != "failed" || o["reason"] != "protected_path" || !strings.Contains(msg, c.path+" (protected ("+c.path+")): created, removed again") {
			t.Errorf("%s: %v, want failed protected_path naming %s", c.what, o, c.path)
		}
		if _, err := os.Lstat(filepath.Join(h.ws, c.path)); err == nil {
			t.Errorf("%s: %s is still there", c.what, c.path)
		}
		rec := h.lastCall(t)
		if rec["reason"] != "protected_path" || !strings.Contains(atkJSON(t, rec), c.path+" (protected ("+c.path+")): created") {
			t.Errorf("%s: the record does not show it: %v", c.what, rec)
		}
	}
}

func TestAttackRunHeldScope(t *testing.T) {
	testenv.Require(t, execution(), "confined execution", testenv.ShapeNoLandlock, testenv.ShapeNoUserns)
	h := newHeldWS(t, false)
	must(t, os.MkdirAll(filepath.Join(h.ws, "keys"), 0o755))
	must(t, os.WriteFile(filepath.Join(h.ws, "keys", "k.pem"), []byte("KEY\n"), 0o600))
	must(t, os.WriteFile(filepath.Join(h.ws, "keys", "readme"), []byte("keys\n"), 0o644))
	must(t, os.MkdirAll(filepath.Join(h.ws, "tests", "unit"), 0o755))
	must(t, os.WriteFile(filepath.Join(h.ws, "tests", "unit", "a_test.go"), []byte("package a\n"), 0o644))
	must(t, os.MkdirAll(filepath.Join(h.ws, "src"), 0o755))
	must(t, os.WriteFile(filepath.Join(h.ws, "src", "a.go"), []byte("package a\n"), 0o644))
	scope := []string{"--write-scope", "keys/*.pem=denied", "--write-scope", "tests/**=denied", "--write-scope", "src/*.go=partial-only"}
	keys, tests, src := tree(t, filepath.Join(h.ws, "keys")), tree(t, filepath.Join(h.ws, "tests")), tree(t, filepath.Join(h.ws, "src"))
	check := func(what string) {
		t.Helper()
		sameTree(t, what+": keys", keys, tree(t, filepath.Join(h.ws, "keys")))
		sameTree(t, what+": tests", tests, tree(t, filepath.Join(h.ws, "tests")))
		sameTree(t, what+": src", src, tree(t, filepath.Join(h.ws, "src")))
	}

	// The reproduction: both must not land; the outcome and the
	// record name both paths and the rule.
	o := h.run(t, scope, `echo X > keys/k.pem; echo X > keys/new.pem; echo done`)
	msg, _ := o["message"].(string)
	if o["status"] != "failed" || o["reason"] != "denied_path" || !strings.Contains(msg, "keys/new.pem (keys/*.pem=denied): created, removed again") ||
		!strings.Contains(msg, "keys/k.pem (keys/*.pem=denied)") {
		t.Errorf("denied keys: %v", o)
	}
	rec := atkJSON(t, h.lastCall(t))
	for _, want := range []string{"keys/new.pem (keys/*.pem=denied): created", "keys/k.pem (keys/*.pem=denied)", `"reason":"denied_path"`} {
		if !strings.Contains(rec, want) {
			t.Errorf("the record does not say %q: %s", want, rec)
		}
	}
	check("denied keys")

	// tests/**=denied: a child edits and deletes a test file, and adds one.
	o = h.run(t, scope, `echo '// pwned' >> tests/unit/a_test.go; rm -f tests/unit/a_test.go; mv tests tests.old; echo done`)
	if res, _ := o["result"].(string); o["status"] != "executed" || !strings.Contains(res, "tests (tests/**=denied)") {
		t.Errorf("editing tests: %v, want executed with the held note", o)
	}
	check("editing tests")
	o = h.run(t, scope, `echo 'package a' > tests/unit/b_test.go; echo done`)
	if o["status"] != "executed" {
		t.Errorf("adding a test: %v", o) // the whole directory is read-only: nothing lands
	}
	check("adding a test")

	// partial-only is read-only for run; a path no rule restricts is not.
	o = h.run(t, scope, `echo pwned > src/a.go; echo 'package b' > src/b.go; echo notes > src/notes.txt; echo done`)
	msg, _ = o["message"].(string)
	if o["status"] != "failed" || o["reason"] != "denied_path" || !strings.Contains(msg, "src/b.go (src/*.go=partial-only): created, removed again") {
		t.Errorf("partial-only: %v", o)
	}
	if b, err := os.ReadFile(filepath.Join(h.ws, "src", "notes.txt")); err != nil || string(b) != "notes\n" {
		t.Errorf("src/notes.txt, which no rule restricts: %q %v", b, err)
	}
	must(t, os.Remove(filepath.Join(h.ws, "src", "notes.txt")))
	check("partial-only")
}
