package gate

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/b10x/harness/tools"
)

func sh(script string) Hook { return Hook{Argv: []string{"/bin/sh", "-c", script}} }

func TestHooks(t *testing.T) {
	cases := []struct {
		name    string
		hook    Hook
		status  Status
		message string // substring of the model's message
		detail  string // substring of the recorded step detail
	}{
		{"exit 0 continues", sh("cat >/dev/null; exit 0"), Executed, "", "exit 0"},
		{"exit 2 blocks with stderr", sh("cat >/dev/null; echo 'writes to docs are frozen' >&2; exit 2"), Refused, "writes to docs are frozen", "exit 2"},
		{"exit 1 blocks", sh("exit 1"), Refused, "failed", "failed"},
		{"crash blocks", sh("kill -SEGV $$"), Refused, "failed", "failed"},
		{"missing program blocks", Hook{Argv: []string{"/nonexistent/hook"}}, Refused, "failed", "failed"},
		{"timeout blocks", Hook{Argv: []string{"/bin/sh", "-c", "sleep 30"}, Timeout: 200 * time.Millisecond}, Refused, "timed out", "timed out"},
		{"garbage stdout blocks", sh("echo 'sure, go ahead'"), Refused, "not a decision", "not a decision"},
		{"deny decision blocks", sh(`echo '{"decision":"deny","reason":"policy 7"}'`), Refused, "policy 7", "deny"},
		{"unknown decision blocks", sh(`echo '{"decision":"maybe"}'`), Refused, "unknown decision", "unknown"},
		{"allow skips approval", sh(`echo '{"decision":"allow","reason":"ok"}'`), Executed, "", "allow"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// Ceiling low, deny-all approver: only a hook's allow lets the
			// medium-risk write through.
			g, dir, rec := newTestGate(t, Config{Hooks: []Hook{c.hook}})
			o := call(g, "file_write", `{"path":"a.txt","content":"x"}`)
			wantStatus := c.status
			if c.name == "exit 0 continues" {
				wantStatus = Refused // continues to the deny-all approver
			}
			if o.Status != wantStatus {
				t.Fatalf("outcome %+v", o)
			}
			if c.status == Refused && (o.Reason != tools.ReasonHookBlocked || !strings.Contains(o.Message, c.message)) {
				t.Fatalf("outcome %+v, want hook_blocked with %q", o, c.message)
			}
			r := records(t, rec)[0]
			var detail string
			for _, s := range r.Steps {
				if s.Step == "hooks" {
					detail = s.Detail
				}
			}
			if !strings.Contains(detail, c.detail) {
				t.Fatalf("recorded hook step %q, want %q", detail, c.detail)
			}
			_, err := os.Stat(filepath.Join(dir, "a.txt"))
			if (o.Status == Executed) != (err == nil) {
				t.Fatalf("file exists=%v with status %s", err == nil, o.Status)
			}
		})
	}
}

func TestHookSeesResolvedCall(t *testing.T) {
	out := filepath.Join(t.TempDir(), "in.json")
	g, dir, _ := newTestGate(t, Config{ApproveUpTo: High, Hooks: []Hook{{Argv: []string{"/bin/sh", "-c", "cat > " + out}}}})
	must(t, os.MkdirAll(filepath.Join(dir, "real"), 0o755))
	must(t, os.Symlink("real", filepath.Join(dir, "alias")))
	call(g, "file_write", `{"path":"alias/f.txt","content":"x"}`)
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var in hookInput
	must(t, json.Unmarshal(b, &in))
	if in.Entry != "file_write" || in.Operation != "file.write" || in.Risk != "medium" || in.Workspace != dir ||
		len(in.Writes) != 1 || in.Writes[0].Path != "real/f.txt" || !in.Writes[0].Whole {
		t.Fatalf("hook input %s", b)
	}
}

func TestHookAllowNeverOverridesScopeOrPublication(t *testing.T) {
	deny, _ := ParseScopeRule("**/*.pem=denied")
	allow := sh(`echo '{"decision":"allow"}'`)
	g, _, _ := newTestGate(t, Config{Hooks: []Hook{allow}, WriteScope: []ScopeRule{deny}})
	if o := call(g, "file_write", `{"path":"k.pem","content":"x"}`); o.Status != Refused || o.Reason != tools.ReasonDeniedPath {
		t.Fatalf("allow overrode the write scope: %+v", o)
	}
	if o := call(g, "run", `{"argv":["sh"]}`); o.Status != Refused || o.Reason != tools.ReasonUnpublished {
		t.Fatalf("allow published run: %+v", o)
	}
}

func TestHookAskForcesApproval(t *testing.T) {
	a := &countingApprover{}
	g, dir, _ := newTestGate(t, Config{Approver: a, Hooks: []Hook{sh(`echo '{"decision":"ask"}'`)}})
	write(t, filepath.Join(dir, "f"), "x")
	if o := call(g, "file_read", `{"path":"f"}`); o.Status != Refused || o.Reason != tools.ReasonApprovalRejected || a.n != 1 {
		t.Fatalf("ask on a low-risk read: %+v, approver asked %d", o, a.n)
	}
}

func TestParseHook(t *testing.T) {
	cases := map[string][]string{
		`check --strict`:              {"check", "--strict"},
		`'/opt/my hooks/check' a`:     {"/opt/my hooks/check", "a"},
		`check "a b" c\ d`:            {"check", "a b", "c d"},
		`check "say \"hi\"" '$(x)' ;`: {"check", `say "hi"`, "$(x)", ";"},
		`check ""`:                    {"check", ""},
	}
	for in, want := range cases {
		h, err := ParseHook(in)
		if err != nil {
			t.Errorf("%q: %v", in, err)
			continue
		}
		if strings.Join(h.Argv, "|") != strings.Join(want, "|") || len(h.Argv) != len(want) {
			t.Errorf("%q: %q, want %q", in, h.Argv, want)
		}
	}
	for _, bad := range []string{"", "   ", `'open`, `"open`, "a\x00b"} {
		if _, err := ParseHook(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func FuzzParseHook(f *testing.F) {
	for _, s := range []string{`a b`, `'a b' "c\"d"`, `\`, `"`, "a\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		h, err := ParseHook(s)
		if err == nil && len(h.Argv) == 0 {
			t.Fatal("accepted with an empty argv")
		}
	})
}

// TestRefusedReadReleasesItsFile: file_read's Prepare opens the file it
// resolved, so the read acts on the very file the gate reviewed; a call
// refused after that (here by the approver a hook asked for) must close it.
func TestRefusedReadReleasesItsFile(t *testing.T) {
	a := &countingApprover{}
	g, dir, _ := newTestGate(t, Config{Approver: a, Hooks: []Hook{sh(`echo '{"decision":"ask"}'`)}})
	write(t, filepath.Join(dir, "f"), "x")
	fds := func() int {
		ents, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Fatal(err)
		}
		return len(ents)
	}
	call(g, "file_read", `{"path":"f"}`) // warm up lazily opened descriptors
	before := fds()
	for range 20 {
		if o := call(g, "file_read", `{"path":"f"}`); o.Status != Refused || o.Reason != tools.ReasonApprovalRejected {
			t.Fatalf("ask on a read: %+v", o)
		}
	}
	if after := fds(); after > before {
		t.Fatalf("20 refused reads left %d descriptors open", after-before)
	}
	if a.n != 21 {
		t.Fatalf("approver asked %d times, want 21", a.n)
	}
}

// TestHooksMixedVerdicts: several hooks combine to the most cautious of
// their answers, whatever their order. A later hook's allow never
// overrides an earlier one's ask (the approver is still asked), any deny
// blocks, and allow skips the approver only when no hook asked.
func TestHooksMixedVerdicts(t *testing.T) {
	hooks := map[string]Hook{
		"allow":    sh(`echo '{"decision":"allow","reason":"fine by me"}'`),
		"ask":      sh(`echo '{"decision":"ask","reason":"a human should look"}'`),
		"deny":     sh(`echo '{"decision":"deny","reason":"policy 9"}'`),
		"continue": sh(`cat >/dev/null`),
	}
	cases := []struct {
		order  []string
		status Status // with an approver that rejects everything
		asked  bool
		reason tools.Reason
	}{
		{[]string{"ask", "allow"}, Refused, true, tools.ReasonApprovalRejected},
		{[]string{"allow", "ask"}, Refused, true, tools.ReasonApprovalRejected},
		{[]string{"ask", "allow", "allow"}, Refused, true, tools.ReasonApprovalRejected},
		{[]string{"allow", "continue", "ask", "continue", "allow"}, Refused, true, tools.ReasonApprovalRejected},
		{[]string{"allow", "continue"}, Executed, false, ""},
		{[]string{"continue", "allow"}, Executed, false, ""},
		{[]string{"allow", "deny"}, Refused, false, tools.ReasonHookBlocked},
		{[]string{"ask", "deny"}, Refused, false, tools.ReasonHookBlocked},
		{[]string{"deny", "allow"}, Refused, false, tools.ReasonHookBlocked},
		{[]string{"continue", "continue"}, Refused, true, tools.ReasonApprovalRejected},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.order, ","), func(t *testing.T) {
			var hs []Hook
			for _, name := range c.order {
				hs = append(hs, hooks[name])
			}
			// A medium-risk write above the ceiling: without an allow the
			// rejecting approver decides.
			a := &countingApprover{}
			g, dir, rec := newTestGate(t, Config{Approver: a, Hooks: hs})
			o := call(g, "file_write", `{"path":"a.txt","content":"x"}`)
			if o.Status != c.status || o.Reason != c.reason || (a.n == 1) != c.asked || a.n > 1 {
				t.Fatalf("outcome %+v, approver asked %d times; want %s %q, asked=%v", o, a.n, c.status, c.reason, c.asked)
			}
			_, err := os.Stat(filepath.Join(dir, "a.txt"))
			if (err == nil) != (c.status == Executed) {
				t.Fatalf("the file exists=%v after a %s call", err == nil, o.Status)
			}
			r := records(t, rec)[0]
			approval := ""
			for _, s := range r.Steps {
				if s.Step == "approval" {
					approval = s.Verdict
				}
			}
			if c.asked && approval != "refuse" {
				t.Errorf("recorded approval step %q, want refuse: %+v", approval, r.Steps)
			}
		})
	}
}

// TestHookDaemonsDieWithTheirHook: a hook that leaves a setsid daemon (and
// a double-forked one) behind, exits 0 or times out: the daemons are
// killed before the verdict, so the files they would write a second later
// never appear. Both bounds are exercised where the host allows: the PID
// namespace (root) and the subreaper.
func TestHookDaemonsDieWithTheirHook(t *testing.T) {
	modes := []bool{false}
	if os.Geteuid() == 0 {
		modes = append(modes, true)
	}
	for _, pidns := range modes {
		for _, c := range []struct {
			name    string
			script  string
			timeout time.Duration
		}{
			{"exits", `cat >/dev/null; setsid sh -c 'sleep 1; echo x > late' & (setsid sh -c 'sleep 1; echo y > late2' &); exit 0`, 0},
			{"times out", `cat >/dev/null; setsid sh -c 'sleep 1; echo x > late' & (setsid sh -c 'sleep 1; echo y > late2' &); sleep 30`, 300 * time.Millisecond},
		} {
			t.Run(fmt.Sprintf("%s/pidns=%v", c.name, pidns), func(t *testing.T) {
				old := hookPIDNamespace
				hookPIDNamespace = func() bool { return pidns }
				t.Cleanup(func() { hookPIDNamespace = old })
				g, dir, _ := newTestGate(t, Config{Hooks: []Hook{{Argv: []string{"/bin/sh", "-c", c.script}, Timeout: c.timeout}}})
				t0 := time.Now()
				o := call(g, "file_write", `{"path":"a.txt","content":"x"}`)
				if c.timeout > 0 && (o.Reason != tools.ReasonHookBlocked || !strings.Contains(o.Message, "timed out")) {
					t.Fatalf("outcome %+v, want the hook's timeout", o)
				}
				if took := time.Since(t0); took > 5*time.Second {
					t.Fatalf("the verdict took %s", took)
				}
				time.Sleep(2 * time.Second)
				for _, f := range []string{"late", "late2"} {
					if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
						t.Errorf("%s appeared after the verdict: a daemon of the hook outlived it", f)
					}
				}
			})
		}
	}
}

// TestHookExitStatusThroughInit: the hook's own exit status reaches the
// gate through the init (2 blocks with stderr; a crash is a failure).
func TestHookExitStatusThroughInit(t *testing.T) {
	g, _, _ := newTestGate(t, Config{Hooks: []Hook{sh(`cat >/dev/null; echo "no: frozen" >&2; exit 2`)}})
	if o := call(g, "file_write", `{"path":"a.txt","content":"x"}`); o.Reason != tools.ReasonHookBlocked || !strings.Contains(o.Message, "no: frozen") {
		t.Fatalf("exit 2: %+v", o)
	}
	g, _, rec := newTestGate(t, Config{Hooks: []Hook{sh(`kill -KILL $$`)}})
	if o := call(g, "file_write", `{"path":"a.txt","content":"x"}`); o.Reason != tools.ReasonHookBlocked || !strings.Contains(o.Message, "failed") {
		t.Fatalf("killed hook: %+v", o)
	}
	var d string
	for _, st := range records(t, rec)[0].Steps {
		if st.Step == "hooks" {
			d = st.Detail
		}
	}
	if !strings.Contains(d, "exit status 137") {
		t.Fatalf("recorded %q, want the signal's status", d)
	}
}

// TestHookCancelled: a cancel while a hook runs stops the hook and refuses
// the call as cancelled, not as the hook's timeout.
func TestHookCancelled(t *testing.T) {
	g, _, _ := newTestGate(t, Config{Hooks: []Hook{sh("cat >/dev/null; sleep 30")}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	time.AfterFunc(200*time.Millisecond, cancel)
	t0 := time.Now()
	o := g.Call(ctx, Call{Surface: "test", Name: "file_write", Args: json.RawMessage(`{"path":"a.txt","content":"x"}`)})
	if o.Status != Refused || o.Reason != tools.ReasonCancelled || time.Since(t0) > 5*time.Second {
		t.Fatalf("outcome %+v after %s", o, time.Since(t0))
	}
}
