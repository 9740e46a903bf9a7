package main

// ATTACKS.md, "Policy": tool_invoke reviewed as its entry, tools never
// published, named agents that can only narrow, hooks that fail closed, and
// the approvers without a terminal.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// invoke wraps a call in the verbs surface's envelope.
func invoke(t *testing.T, name string, args any) string {
	t.Helper()
	return atkJSON(t, map[string]any{"name": name, "arguments": args})
}

var verbs = []string{"--surface", "verbs"}

// TestAttackPolicyInvokeReviewedAsEntry: a hook, the approver, the ceiling
// and the write scope see tool_invoke{name:X} exactly as X.
func TestAttackPolicyInvokeReviewedAsEntry(t *testing.T) {
	t.Parallel()
	a := newAtkWS(t)
	a.seal(t)
	// The hook logs what it is shown and blocks run with exit 2.
	hook := "/bin/sh -c " + shellQuote(`in=$(cat); printf '%s\n' "$in" >> hook.log; case "$in" in *'"entry":"run"'*) echo "run is blocked by policy" >&2; exit 2;; esac; exit 0`)
	runArgv := map[string]any{"argv": []string{"sh", "-c", "echo ran > ran"}}
	runReason, runStep := "hook_blocked", "hooks"
	if !atkExecution() {
		runReason, runStep = "unpublished", "published"
	}
	withHook := append(runFlags("sh"), "--hook", hook)

	flat := a.call(t, nil, withHook, "run", atkJSON(t, runArgv))
	flat.refusedAt(t, runReason, runStep)
	inv := a.call(t, nil, append(withHook, verbs...), "tool_invoke", invoke(t, "run", runArgv))
	inv.refusedAt(t, runReason, runStep)
	if inv.rec["entry"] != "run" || inv.rec["via"] != "tool_invoke" || inv.rec["risk"] != "high" {
		t.Fatalf("tool_invoke of run recorded as %v via %v risk %v", inv.rec["entry"], inv.rec["via"], inv.rec["risk"])
	}
	if atkExecution() && !strings.Contains(inv.out["message"].(string), "run is blocked by policy") {
		t.Fatalf("the hook's reason did not reach the model: %v", inv.out["message"])
	}
	// The same hook lets a read through, under the verbs surface too.
	a.call(t, nil, append(withHook, verbs...), "tool_invoke", invoke(t, "file_read", map[string]any{"path": "hello.txt"})).want(t, "executed", "")
	if atkExecution() {
		b, err := os.ReadFile(filepath.Join(a.ws, "hook.log"))
		must(t, err)
		var entries []string
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			var in struct{ Entry, Risk, Via string }
			must(t, json.Unmarshal([]byte(l), &in))
			entries = append(entries, in.Entry+"/"+in.Risk+"/"+in.Via)
		}
		if got := strings.Join(entries, ","); got != "run/high/,run/high/tool_invoke,file_read/low/tool_invoke" {
			t.Fatalf("the hook was shown %s", got)
		}
	}

	// --approve deny denies run, flat or invoked.
	for _, c := range []struct {
		flags     []string
		tool, arg string
	}{
		{[]string{"--approve", "deny", "--allow-program", "sh"}, "run", atkJSON(t, runArgv)},
		{append([]string{"--approve", "deny", "--allow-program", "sh"}, verbs...), "tool_invoke", invoke(t, "run", runArgv)},
		// The ceiling is compared with run's risk (high), not the verb's.
		{append([]string{"--approve-up-to", "medium", "--allow-program", "sh"}, verbs...), "tool_invoke", invoke(t, "run", runArgv)},
	} {
		at := a.call(t, nil, c.flags, c.tool, c.arg)
		if !atkExecution() {
			at.refusedAt(t, "unpublished", "published")
			continue
		}
		at.refusedAt(t, "approval_rejected", "approval")
		if at.rec["entry"] != "run" || at.rec["approver"] != "deny" || at.rec["approval"] != "rejected" {
			t.Fatalf("record %v/%v/%v", at.rec["entry"], at.rec["approver"], at.rec["approval"])
		}
	}
	// ... while a medium entry invoked under that ceiling runs unattended.
	w := a.call(t, nil, append([]string{"--approve-up-to", "medium"}, verbs...), "tool_invoke", invoke(t, "file_write", map[string]any{"path": "w.txt", "content": "x"}))
	writeExecuted(t, w)
	// The write scope holds for an invoked write.
	pem := a.call(t, nil, append([]string{"--yes", "--write-scope", "**/*.pem=denied"}, verbs...), "tool_invoke", invoke(t, "file_write", map[string]any{"path": "sub/k.pem", "content": "x"}))
	writeRefused(t, pem, "denied_path", "scope")
	if _, err := os.Stat(filepath.Join(a.ws, "ran")); err == nil {
		t.Fatal("run executed although every gate refused it")
	}
	if _, err := os.Stat(filepath.Join(a.ws, "sub/k.pem")); err == nil {
		t.Fatal("a denied .pem was written through tool_invoke")
	}
	a.checkOutside(t)
}

// TestAttackPolicyNeverPublished: a call of a tool that was not published,
// under either surface, is refused as unpublished, whatever its name looks
// like; and what `tools` shows is exactly what a call can reach.
func TestAttackPolicyNeverPublished(t *testing.T) {
	t.Parallel()
	a := newAtkWS(t)
	a.seal(t)
	args := map[string]any{
		"file_read": map[string]any{"path": "hello.txt"}, "dir_list": map[string]any{}, "search": map[string]any{"pattern": "x"},
		"find": map[string]any{"pattern": "*"}, "file_write": map[string]any{"path": "w.txt", "content": "x"},
		"file_edit": map[string]any{"path": "hello.txt", "old_string": "hello", "new_string": "hello"},
		"run":       map[string]any{"argv": []string{"sh", "-c", "echo ran > ran"}},
	}
	fakes := []string{"shell", "file.read", "File_Read", "file_read ", "bash", "exec", "computer", "str_replace_editor", "tool_invoke", "tool_search"}
	for _, mode := range atkSample([]string{"off", "auto"}, 2) {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			flags := []string{"--confine", mode}
			r := atkHarness(t, nil, "", append([]string{"tools", "--json", "--workspace", a.ws}, flags...)...)
			var defs []struct{ Name string }
			if err := json.Unmarshal([]byte(r.stdout), &defs); err != nil {
				t.Fatalf("tools --json: %v\n%s", err, r.stdout)
			}
			published := map[string]bool{}
			for _, d := range defs {
				published[d.Name] = true
			}
			want := "file_read,dir_list,search,find"
			if mode == "auto" && atkWrites() {
				want += ",file_write,file_edit"
			}
			var names []string
			for _, d := range defs {
				names = append(names, d.Name)
			}
			if strings.Join(names, ",") != want {
				t.Fatalf("tools publishes %v, want %s (no --allow-program: no run)", names, want)
			}
			var unpublished []string
			for _, e := range []string{"file_read", "dir_list", "search", "find", "file_write", "file_edit", "run"} {
				if !published[e] {
					unpublished = append(unpublished, e)
				}
			}
			names = append(unpublished, fakes...)
			if mode == "auto" {
				// Each call probes the host: a sample of the names.
				names = append(unpublished, "shell", "file.read", "File_Read", "tool_invoke")
			}
			for _, name := range names {
				arg := args[name]
				if arg == nil {
					arg = map[string]any{"command": "cat " + filepath.Join(a.base, "data-archived", "x")}
				}
				f := a.call(t, nil, append([]string{"--yes"}, flags...), name, atkJSON(t, arg))
				f.refusedAt(t, "unpublished", "published")
				v := a.call(t, nil, append([]string{"--yes"}, append(flags, verbs...)...), "tool_invoke", invoke(t, name, arg))
				v.refusedAt(t, "unpublished", "published")
			}
			// Under verbs, catalogue entries are not tools of their own,
			// and the verbs do not show what is unpublished.
			a.call(t, nil, append(flags, verbs...), "file_read", atkJSON(t, args["file_read"])).refusedAt(t, "unpublished", "published")
			s := a.call(t, nil, append(flags, verbs...), "tool_search", `{}`)
			s.want(t, "executed", "")
			for _, u := range unpublished {
				if strings.Contains(s.result(), u+" (") {
					t.Fatalf("tool_search lists unpublished %s:\n%s", u, s.result())
				}
				d := a.call(t, nil, append(flags, verbs...), "tool_describe", atkJSON(t, map[string]any{"name": u}))
				d.want(t, "refused", "unpublished")
			}
		})
	}
	if _, err := os.Stat(filepath.Join(a.ws, "ran")); err == nil {
		t.Fatal("an unpublished run executed")
	}
	if _, err := os.Stat(filepath.Join(a.ws, "w.txt")); err == nil {
		t.Fatal("an unpublished file_write executed")
	}
	a.checkOutside(t)
}

// TestAttackPolicyNamedAgent: a named agent's tools: are intersected with
// what the parent run admitted; naming a tool the parent was not admitted
// gives nothing, under both surfaces.
func TestAttackPolicyNamedAgent(t *testing.T) {
	t.Parallel()
	a := newAtkWS(t)
	agents := filepath.Join(a.base, "agents")
	must(t, os.MkdirAll(agents, 0o755))
	must(t, os.WriteFile(filepath.Join(agents, "grabby.md"), []byte("---\nname: grabby\ndescription: asks for more than it may have\ntools: [file_read, file_write, file_edit, run]\n---\nDo everything.\n"), 0o644))
	a.seal(t)
	type call struct {
		Name      string         `json:"name"`
		Arguments map[string]any `json:"arguments"`
	}
	calls := []call{
		{"file_read", map[string]any{"path": "hello.txt"}},
		{"dir_list", map[string]any{}},
		{"file_write", map[string]any{"path": "w.txt", "content": "x"}},
		{"run", map[string]any{"argv": []string{"sh", "-c", "echo ran > ran"}}},
	}
	for _, c := range []struct {
		name  string
		flags []string
		// want maps each called entry to executed or the refusal reason.
		want map[string]string
	}{
		// The parent admits only the read tools: the agent's file_write,
		// file_edit and run give nothing.
		{"parent off", []string{"--confine", "off", "--yes"},
			map[string]string{"file_read": "executed", "dir_list": "unpublished", "file_write": "unpublished", "run": "unpublished"}},
		// The parent admits writes but no program: run gives nothing.
		{"parent auto without programs", []string{"--yes"},
			map[string]string{"file_read": "executed", "dir_list": "unpublished", "file_write": map[bool]string{true: "executed", false: "unpublished"}[atkWrites()], "run": "unpublished"}},
	} {
		for _, surface := range []string{"flat", "verbs"} {
			t.Run(c.name+" "+surface, func(t *testing.T) {
				t.Parallel()
				var turn []call
				for _, cl := range calls {
					if surface == "verbs" {
						cl = call{"tool_invoke", map[string]any{"name": cl.Name, "arguments": cl.Arguments}}
					}
					turn = append(turn, cl)
				}
				script := filepath.Join(t.TempDir(), "script.jsonl")
				must(t, os.WriteFile(script, []byte(atkJSON(t, map[string]any{"tool_calls": turn})+"\n"+`{"text":"done"}`+"\n"), 0o644))
				rec := filepath.Join(t.TempDir(), "rec.jsonl")
				r := atkHarness(t, nil, "", append([]string{"run", "--workspace", a.ws, "--record", rec, "--surface", surface,
					"--provider", "replay:" + script, "--agents-dir", agents, "--agent", "grabby", "--quiet"}, c.flags...)...)
				if r.code != 0 {
					t.Fatalf("run: exit %d\n%s%s", r.code, r.stdout, r.stderr)
				}
				got := map[string]string{}
				for _, l := range readRecord(t, rec) {
					if l["event"] != "call" {
						continue
					}
					e, _ := l["entry"].(string)
					if l["status"] == "executed" {
						got[e] = "executed"
					} else {
						got[e], _ = l["reason"].(string)
					}
				}
				for e, w := range c.want {
					if got[e] != w {
						t.Errorf("%s: %q, want %q (all: %v)", e, got[e], w, got)
					}
				}
			})
		}
	}
	t.Cleanup(func() {
		if _, err := os.Stat(filepath.Join(a.ws, "ran")); err == nil {
			t.Error("run executed for an agent whose parent never admitted it")
		}
		a.checkOutside(t)
	})
}

// TestAttackPolicyHooksFailClosed: a hook that crashes, times out, prints
// garbage or exits with anything but 0 blocks the call; exit 2 blocks with
// its stderr as the reason; an allow never overrides what comes before.
func TestAttackPolicyHooksFailClosed(t *testing.T) {
	t.Parallel()
	a := newAtkWS(t)
	must(t, os.MkdirAll(filepath.Join(a.base, "hooks"), 0o755))
	n := 0
	// sh writes script to a file of its own and returns its path: a hook
	// command line without commas or quotes (see TestAttackPolicyCommas).
	sh := func(script string) string {
		n++
		p := filepath.Join(a.base, "hooks", fmt.Sprintf("hook%d.sh", n))
		must(t, os.WriteFile(p, []byte("#!/bin/sh\n"+script+"\n"), 0o755))
		return p
	}
	read := `{"path":"hello.txt"}`
	cases := []struct {
		name, hook string
		extra      []string
		reasonHas  string
	}{
		{"crash", sh("cat >/dev/null; kill -SEGV $$"), nil, ""},
		{"timeout", sh("sleep 30"), []string{"--hook-timeout", "300ms"}, "timed out"},
		{"garbage", sh("echo this is not a decision"), nil, ""},
		{"garbage JSON", sh(`echo '{"decision":"maybe"}'`), nil, ""},
		{"unknown field", sh(`echo '{"decision":"allow","override":true}'`), nil, ""},
		{"two decisions", sh(`echo '{"decision":"allow"}{"decision":"allow"}'`), nil, ""},
		{"flood", sh("yes | head -c 1048576"), nil, ""},
		{"exit 1", sh("exit 1"), nil, ""},
		{"exit 2", sh("echo 'no reading today' >&2; exit 2"), nil, "no reading today"},
		{"deny", sh(`echo '{"decision":"deny","reason":"not this file"}'`), nil, "not this file"},
		{"second hook fails after a first allows", sh(`echo '{"decision":"allow"}'`), []string{"--hook", sh("exit 3")}, ""},
	}
	allow := sh(`echo '{"decision":"allow","reason":"hook says yes"}'`)
	u := atkUnique(t)
	lingering := sh(fmt.Sprintf("sleep 30.%[1]s & sleep 30.%[1]s", u))
	a.seal(t)
	for _, c := range atkSample(cases, 3) {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			at := a.call(t, nil, append([]string{"--confine", "off", "--hook", c.hook}, c.extra...), "file_read", read)
			at.refusedAt(t, "hook_blocked", "hooks")
			if !strings.Contains(at.out["message"].(string), c.reasonHas) {
				t.Fatalf("message %q lacks %q", at.out["message"], c.reasonHas)
			}
			if at.result() != "" || strings.Contains(at.run.stdout, "hello") {
				t.Fatalf("the read ran: %s", at.run.stdout)
			}
			if c.name == "timeout" && time.Since(start) > 20*time.Second {
				t.Fatalf("a 300ms hook timeout took %s", time.Since(start))
			}
		})
	}
	t.Run("a missing hook program is refused at start", func(t *testing.T) {
		t.Parallel()
		missing := filepath.Join(a.base, "no-such-hook")
		r := harness(t, "", "call", "--workspace", a.ws, "--confine", "off", "--hook", missing, "file_read", read)
		if r.code != exitUsage || r.stdout != "" || !strings.Contains(r.stderr, "--hook "+missing) {
			t.Fatalf("exit %d, stdout %q, stderr %q; want a usage error naming the hook before any call", r.code, r.stdout, r.stderr)
		}
		// A name that carries a terminal escape is named escaped, once.
		r = harness(t, "", "call", "--workspace", a.ws, "--confine", "off", "--hook", missing+"\x1b[2J", "file_read", read)
		if r.code != exitUsage || strings.Contains(r.stderr, "\x1b") || !strings.Contains(r.stderr, "--hook "+missing+`\x1b[2J:`) {
			t.Fatalf("exit %d, stderr %q; want the hook named with its escape shown as \\x1b", r.code, r.stderr)
		}
	})
	t.Run("a relative hook path is found from the working directory", func(t *testing.T) {
		t.Parallel()
		cmd := harnessCommand("call", "--workspace", a.ws, "--confine", "off", "--hook", "./hooks/"+filepath.Base(allow), "file_read", read)
		cmd.Dir = a.base
		cmd.Env = append(os.Environ(), "B10X_TEST_MAIN=1")
		r := runHarnessCmd(t, cmd, "")
		if r.code != 0 || !strings.Contains(r.stdout, "hello") {
			t.Fatalf("exit %d, stdout %q, stderr %q; want the call through the hook", r.code, r.stdout, r.stderr)
		}
	})
	t.Run("a timed-out hook leaves nothing running", func(t *testing.T) {
		t.Parallel()
		t.Cleanup(func() { atkReap("30." + u) })
		at := a.call(t, nil, []string{"--confine", "off", "--hook", lingering, "--hook-timeout", "300ms"}, "file_read", read)
		at.refusedAt(t, "hook_blocked", "hooks")
		deadline := time.Now().Add(time.Second)
		for len(atkProcs("30."+u)) > 0 {
			if time.Now().After(deadline) {
				t.Fatalf("1 s after the call, the timed-out hook's processes still run: %v", atkProcs("30."+u))
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
	t.Run("allow cannot publish or admit", func(t *testing.T) {
		t.Parallel()
		a.call(t, nil, []string{"--hook", allow}, "run", `{"argv":["sh"]}`).refusedAt(t, "unpublished", "published")
		pem := a.call(t, nil, []string{"--hook", allow, "--write-scope", "**/*.pem=denied"}, "file_write", `{"path":"k.pem","content":"x"}`)
		writeRefused(t, pem, "denied_path", "scope")
		// And allow does stand in for the approver where that is all it
		// does: the hook works (a control for the two refusals above).
		w := a.call(t, nil, []string{"--hook", allow}, "file_write", `{"path":"allowed.txt","content":"x"}`)
		if writeExecuted(t, w) && w.rec["approval"] != "hook-allowed" {
			t.Fatalf("approval %v", w.rec["approval"])
		}
	})
	t.Cleanup(func() { a.checkOutside(t) })
}

// TestAttackPolicyNoTerminal: --approve auto without a terminal denies and
// says so once, at start; --approve prompt without one refuses to start
// before doing anything (no record, no hook, no call).
func TestAttackPolicyNoTerminal(t *testing.T) {
	t.Parallel()
	a := newAtkWS(t)
	a.seal(t)
	at := a.call(t, nil, append([]string{"--allow-program", "sh"}, verbs...), "tool_invoke", invoke(t, "run", map[string]any{"argv": []string{"sh", "-c", "echo ran > ran"}}))
	if atkExecution() {
		at.refusedAt(t, "approval_rejected", "approval")
	} else {
		at.refusedAt(t, "unpublished", "published")
	}
	// Said once when something above the ceiling is published; nothing
	// to say where only the read tools are (no Landlock).
	want := 0
	if atkWrites() || atkExecution() {
		want = 1
	}
	if n := strings.Count(at.run.stderr, "no terminal"); n != want {
		t.Fatalf("the fallback was said %d times, want %d:\n%s", n, want, at.run.stderr)
	}
	if start := at.all[0]; start["policy"].(map[string]any)["approver"] != "deny" {
		t.Fatalf("run_start names approver %v", start["policy"])
	}

	marker := filepath.Join(a.ws, "hook-ran")
	rec := filepath.Join(a.base, "prompt-record.jsonl")
	for _, args := range [][]string{
		{"call", "--workspace", a.ws, "--record", rec, "--approve", "prompt", "--hook", "/bin/sh -c 'touch " + marker + "'", "--allow-program", "sh", "run", `{"argv":["sh","-c","echo ran > ran"]}`},
		{"call", "--workspace", a.ws, "--record", rec, "--approve", "prompt", "--surface", "verbs", "tool_invoke", invoke(t, "file_write", map[string]any{"path": "p.txt", "content": "x"})},
		{"call", "--workspace", a.ws, "--record", rec, "--approve", "prompt", "file_read", `{"path":"hello.txt"}`},
		{"tools", "--workspace", a.ws, "--record", rec, "--approve", "prompt"},
	} {
		r := atkHarness(t, nil, "", args...)
		if r.code != exitUsage || r.stdout != "" || !strings.Contains(r.stderr, "terminal") || strings.Count(r.stderr, "\n") != 1 {
			t.Fatalf("%v: exit %d stdout %q stderr %q", args[:1], r.code, r.stdout, r.stderr)
		}
	}
	for _, p := range []string{rec, marker, filepath.Join(a.ws, "ran"), filepath.Join(a.ws, "p.txt")} {
		if _, err := os.Stat(p); err == nil {
			t.Fatalf("%s exists: --approve prompt without a terminal did something before refusing", p)
		}
	}
	a.checkOutside(t)
}

// TestAttackPolicyCommas: repeatable policy flags take each value whole. A
// doublestar alternative ({pem,key}) in a write-scope rule and a comma in a
// hook's command line are part of the value, not two values.
func TestAttackPolicyCommas(t *testing.T) {
	t.Parallel()
	a := newAtkWS(t)
	a.seal(t)
	t.Run("write scope with an alternative", func(t *testing.T) {
		t.Parallel()
		key := a.call(t, nil, []string{"--yes", "--write-scope", "**/*.{pem,key}=denied"}, "file_write", `{"path":"id.key","content":"x"}`)
		writeRefused(t, key, "denied_path", "scope")
	})
	t.Run("hook with a comma", func(t *testing.T) {
		t.Parallel()
		hook := a.call(t, nil, []string{"--confine", "off", "--hook", "/bin/sh -c 'echo blocked,by,policy >&2; exit 2'"}, "file_read", `{"path":"hello.txt"}`)
		hook.refusedAt(t, "hook_blocked", "hooks")
		if !strings.Contains(hook.out["message"].(string), "blocked,by,policy") {
			t.Fatalf("message %v", hook.out["message"])
		}
	})
	t.Cleanup(func() { a.checkOutside(t) })
}
