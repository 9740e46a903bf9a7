package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/b10x/harness/internal/testenv"
)

// Finding 6 of issue 29: a secret in the workspace was readable through
// file_read, search and `cat` in run. The read scope's defaults now deny
// .env and private keys to every read tool and to run children (the view
// masks them); each refusal names its rule.
func TestAttackReadScopeDefaults(t *testing.T) {
	t.Parallel()
	a := newAtkWS(t)
	const secret = "API_KEY=sk-live-123"
	a.write(t, ".env", secret+"\n")
	a.write(t, "deploy/id_ed25519", "-----BEGIN OPENSSH PRIVATE KEY----- "+secret+"\n")
	for _, c := range []struct{ tool, args string }{
		{"file_read", `{"path":".env"}`},
		{"file_read", `{"path":"deploy/id_ed25519"}`},
		{"file_edit", `{"path":".env","old_string":"sk","new_string":"x"}`},
	} {
		at := a.call(t, nil, nil, c.tool, c.args)
		if c.tool == "file_edit" && !atkWrites() {
			// Without a confined workspace (no Landlock) file_edit is
			// not published: refused before any rule is read.
			if at.out["reason"] != "unpublished" || strings.Contains(at.run.stdout, "sk-live") {
				t.Errorf("%s %s: %s", c.tool, c.args, at.run.stdout)
			}
			continue
		}
		if at.out["status"] != "refused" || at.out["reason"] != "denied_path" || !strings.Contains(at.run.stdout, "read_scope rule") || strings.Contains(at.run.stdout, "sk-live") {
			t.Errorf("%s %s: %s", c.tool, c.args, at.run.stdout)
		}
	}
	at := a.call(t, nil, nil, "search", `{"pattern":"sk-live"}`)
	if at.out["status"] != "executed" || strings.Contains(at.run.stdout, "sk-live-123") || !strings.Contains(at.run.stdout, "content denied by read_scope **/.env=denied") {
		t.Errorf("search: %s", at.run.stdout)
	}
	if !atkExecution() {
		return
	}
	script := `cat .env; cat deploy/id_ed25519; grep -r sk-live . ; tar cf - .env 2>/dev/null | strings; echo ran`
	argv, _ := json.Marshal(map[string]any{"argv": []string{"sh", "-c", script}})
	at = a.call(t, nil, runFlags("sh"), "run", string(argv))
	if at.out["status"] != "executed" || !strings.Contains(at.run.stdout, "ran") || strings.Contains(at.run.stdout, "sk-live") {
		t.Errorf("run: a child read the masked secret: %s", at.run.stdout)
	}
	// An allow rule first turns a default off for what it names.
	at = a.call(t, nil, []string{"--read-scope", ".env=allowed"}, "file_read", `{"path":".env"}`)
	if at.out["status"] != "executed" || !strings.Contains(at.run.stdout, "sk-live") {
		t.Errorf("with --read-scope .env=allowed: %s", at.run.stdout)
	}
}

// The gate keeps what the masks' walk found in each directory from one run
// call to the next (decision 0096): a secret that appears between two
// calls of one session, written by the user or renamed in with its
// directory, or written by a child that then sets its directory's mtime
// back, must be masked in the next call's view all the same.
func TestAttackReadScopeAcrossCalls(t *testing.T) {
	t.Parallel()
	testenv.Require(t, atkExecution(), "confined execution", testenv.ShapeNoLandlock, testenv.ShapeNoUserns)
	a := newAtkWS(t)
	a.write(t, "keys/README", "keys go here\n")
	a.write(t, "a/b/code.go", "package b\n")
	// Older than the margin within which a directory's listing is not kept.
	time.Sleep(2200 * time.Millisecond)
	s := mcpMustConnect(t, nil, "--workspace", a.ws, "--allow-program", "sh", "--approve", "all")
	run := func(script string) string {
		t.Helper()
		argv, _ := json.Marshal(map[string]any{"argv": []string{"sh", "-c", script}})
		_, o := s.call(t, "run", argv)
		res, _ := o["result"].(string)
		if mcpReason(o) != "executed" || !strings.Contains(res, "ran") {
			t.Fatalf("run %q: %v", script, o)
		}
		return res
	}
	for i := 0; i < 2; i++ {
		run("ls keys a/b; echo ran")
	}
	a.write(t, "keys/new.pem", "-----BEGIN PRIVATE KEY----- sk-live-1\n")
	outside := filepath.Join(a.base, "outdir", "moved")
	must(t, os.MkdirAll(outside, 0o755))
	must(t, os.WriteFile(filepath.Join(outside, ".env"), []byte("API_KEY=sk-live-2\n"), 0o644))
	must(t, os.Rename(outside, filepath.Join(a.ws, "a/b/moved")))
	res := run(`cat keys/new.pem a/b/moved/.env; printf 'sk-live-3' > a/b/own.key; touch -d 2001-01-01 a/b; echo ran`)
	if strings.Contains(res, "sk-live") {
		t.Fatalf("a secret that appeared between two calls was read: %s", res)
	}
	if res = run("cat a/b/own.key; echo ran"); strings.Contains(res, "sk-live") {
		t.Fatalf("a secret a child wrote, its directory's mtime set back, was read in the next call: %s", res)
	}
}

// A child moves a directory of secrets deeper than the masks' walk goes
// (it may rename the parent of a masked file): the next run call is
// refused, naming the directory, and its program never reads the key.
func TestAttackReadScopeTooDeep(t *testing.T) {
	t.Parallel()
	testenv.Require(t, atkExecution(), "confined execution", testenv.ShapeNoLandlock, testenv.ShapeNoUserns)
	a := newAtkWS(t)
	a.write(t, "keys/prod.pem", "-----BEGIN PRIVATE KEY----- sk-live-DEEP\n")
	s := mcpMustConnect(t, nil, "--workspace", a.ws, "--allow-program", "sh", "--approve", "all")
	run := func(script string) (string, map[string]any) {
		t.Helper()
		argv, _ := json.Marshal(map[string]any{"argv": []string{"sh", "-c", script}})
		_, o := s.call(t, "run", argv)
		res, _ := o["result"].(string)
		msg, _ := o["message"].(string)
		return res + msg, o
	}
	const deep = `d=x; for i in $(seq 1 300); do d="$d/x"; done`
	if res, o := run(deep + `; mkdir -p "$d" && mv keys "$d/keys" && echo moved`); mcpReason(o) != "executed" || !strings.Contains(res, "moved") {
		t.Fatalf("moving keys deep: %v", o)
	}
	res, o := run(deep + `; cat "$d/keys/prod.pem"; echo ran`)
	if strings.Contains(res, "sk-live") || strings.Contains(res, "ran") || mcpReason(o) != "denied_path" || !strings.Contains(res, "read_scope could not be checked beneath x/x/") {
		t.Fatalf("a secret moved deeper than the walk: %v", o)
	}
}
