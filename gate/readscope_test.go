package gate

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/b10x/harness/tools"
)

// TestReadScope: the default read scope and a rule of the caller's hold
// for every read tool: file_read and file_edit of a denied path are refused
// naming the rule, dir_list and find name it marked and without its size,
// search skips it saying so; an allow rule before the defaults admits what
// it names, and **=allowed turns them off.
func TestReadScope(t *testing.T) {
	rules, err := ReadScopeRules([]string{"secrets/**=denied", "config/.env.shared=allowed"})
	if err != nil {
		t.Fatal(err)
	}
	g, dir, rec := newTestGate(t, Config{ReadScope: rules, ApproveUpTo: High})
	const secret = "API_KEY=sk-live-6f1e"
	for name, body := range map[string]string{
		".env": secret, ".env.example": "API_KEY=\n", "sub/.ENV": secret, "keys/id_rsa": secret, "keys/id_rsa.pub": "ssh-rsa AAAA\n",
		"secrets/a/token.txt": secret, "config/.env.shared": "SHARED=1\n", "ok.txt": "fine\n", "cert/server.pem": secret,
	} {
		write(t, filepath.Join(dir, name), body)
	}
	must(t, os.Symlink(".env", filepath.Join(dir, "link-to-env")))
	for _, c := range []struct{ tool, args, rule string }{
		{"file_read", `{"path":".env"}`, "**/.env=denied"},
		{"file_read", `{"path":"sub/.ENV"}`, "**/.env=denied"}, // every spelling (fold.go)
		{"file_read", `{"path":"link-to-env"}`, "**/.env=denied"},
		{"file_read", `{"path":"keys/id_rsa"}`, "**/id_rsa*=denied"},
		{"file_read", `{"path":"cert/server.pem"}`, "**/*.pem=denied"},
		{"file_read", `{"path":"secrets/a/token.txt"}`, "secrets/**=denied"},
		{"file_edit", `{"path":".env","old_string":"sk-live","new_string":"x"}`, "**/.env=denied"},
		{"dir_list", `{"path":"secrets"}`, "secrets/**=denied"},
	} {
		o := call(g, c.tool, c.args)
		if o.Status != Refused || o.Reason != tools.ReasonDeniedPath || !strings.Contains(o.Message, c.rule) || strings.Contains(o.Message, secret) {
			t.Errorf("%s %s: %+v, want refused denied_path naming %s", c.tool, c.args, o, c.rule)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(dir, ".env")); string(b) != secret {
		t.Errorf("the refused edit changed .env: %q", b)
	}
	for _, c := range []struct{ args, want string }{
		{`{"path":".env.example"}`, "API_KEY="},
		{`{"path":"keys/id_rsa.pub"}`, "ssh-rsa"},
		{`{"path":"config/.env.shared"}`, "SHARED=1"},
		{`{"path":"ok.txt"}`, "fine"},
	} {
		if o := call(g, "file_read", c.args); o.Status != Executed || !strings.Contains(o.Result, c.want) {
			t.Errorf("file_read %s: %+v, want executed", c.args, o)
		}
	}
	for _, c := range []struct{ tool, args string }{
		{"dir_list", `{}`}, {"find", `{"pattern":"**"}`}, {"search", `{"pattern":"API_KEY|sk-live|SHARED|fine"}`},
	} {
		o := call(g, c.tool, c.args)
		if o.Status != Executed || strings.Contains(o.Result, secret) || strings.Contains(o.Result, "sk-live") {
			t.Errorf("%s: %+v: a denied file's content was shown", c.tool, o)
		}
		if !strings.Contains(o.Result, "content denied by read_scope **/.env=denied") {
			t.Errorf("%s: %q does not say what it withheld and by which rule", c.tool, o.Result)
		}
		t.Logf("%s:\n%s", c.tool, o.Result)
	}
	if o := call(g, "dir_list", `{}`); !strings.Contains(o.Result, "file .env (content denied") || strings.Contains(o.Result, "file .env (") && strings.Contains(o.Result, "bytes) (content") {
		t.Errorf("dir_list: %q, want .env listed, marked, without its size", o.Result)
	}
	if o := call(g, "search", `{"pattern":"SHARED"}`); !strings.Contains(o.Result, "SHARED=1") {
		t.Errorf("search of an allowed file: %q", o.Result)
	}
	var refusals int
	for _, r := range records(t, rec) {
		if r.Reason == string(tools.ReasonDeniedPath) {
			refusals++
			if !strings.Contains(stepsText(r), "read scope") {
				t.Errorf("a read-scope refusal without its step: %+v", r)
			}
		}
	}
	if refusals != 8 {
		t.Errorf("%d refusals recorded, want 8", refusals)
	}

	// **=allowed first turns the defaults off.
	open, _ := ReadScopeRules([]string{"**=allowed"})
	g2, dir2, _ := newTestGate(t, Config{ReadScope: open})
	write(t, filepath.Join(dir2, ".env"), secret)
	if o := call(g2, "file_read", `{"path":".env"}`); o.Status != Executed || !strings.Contains(o.Result, secret) {
		t.Errorf("with **=allowed: %+v, want .env read", o)
	}
}

// stepsText is a call record's steps, for a test's search.
func stepsText(r CallRecord) string {
	var b strings.Builder
	for _, s := range r.Steps {
		b.WriteString(s.Step + "=" + s.Verdict + ";")
	}
	return b.String()
}

// TestReadScopeMasksForRun: a run call's child is handed, to see as empty,
// every file of the workspace the read scope denies (and nothing else).
func TestReadScopeMasksForRun(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, ".env"), "x")
	write(t, filepath.Join(dir, "a/b/.env.local"), "x")
	write(t, filepath.Join(dir, "a/b/code.go"), "x")
	write(t, filepath.Join(dir, ".env.example"), "x")
	g, got := runGate(t, dir, nil, nil, func(string) {})
	rules, _ := ReadScopeRules(nil)
	g.reads = readScope{newScope(rules)}
	if o := call(g, "run", `{}`); o.Status != Executed {
		t.Fatalf("run: %+v", o)
	}
	if strings.Join(got.Masked, ",") != ".env,a/b/.env.local" && strings.Join(got.Masked, ",") != "a/b/.env.local,.env" {
		t.Errorf("masked %v, want .env and a/b/.env.local", got.Masked)
	}
}

func TestParseReadRule(t *testing.T) {
	for _, bad := range []string{"x=partial-only", "x=maybe", "=denied", "/abs=denied", "a/../b=denied", "x"} {
		if _, err := ParseReadRule(bad); err == nil || !strings.Contains(err.Error(), "read-scope rule") {
			t.Errorf("%q: %v, want a read-scope error", bad, err)
		}
	}
}
