package main

import (
	"encoding/json"
	"strings"
	"testing"
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
