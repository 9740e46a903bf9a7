package main

import (
	"github.com/b10x/harness/session"

	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Finding C of issue 19: --allow-read and --allow-write were resolved again
// at every call, so a child that could rename a parent of one made the next
// call bind a link it left there (to /tmp/outside: the next call wrote on
// the host; to /etc: the next call read /etc/shadow, since no mask applies
// beneath a path the caller named). The paths are now pinned at start.

// atkShadowHashes are the password hashes of the host's /etc/shadow, what
// a leak of it would show (none where the harness cannot read it).
func atkShadowHashes() []string {
	var hashes []string
	if b, err := os.ReadFile("/etc/shadow"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Split(l, ":"); len(f) > 1 && len(f[1]) > 12 {
				hashes = append(hashes, f[1])
			}
		}
	}
	return hashes
}

// execOnce runs `exec` and returns its result and report (nil when none).
func (a *atkWS) execOnce(t *testing.T, args ...string) (atkRun, *session.ExecReport) {
	t.Helper()
	e := a.execPrepare(t, nil, args...)
	r := e.run(t)
	b, err := os.ReadFile(e.report)
	if err != nil {
		return r, nil
	}
	var rep session.ExecReport
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatalf("exec report: %v\n%s", err, b)
	}
	return r, &rep
}

// atkHarnessFlags runs the harness with args, alone in a fresh cgroup when
// flags select strict (as call does), so a refusal at start is the one the
// test provokes, not strict's.
func atkHarnessFlags(t *testing.T, flags []string, args ...string) atkRun {
	t.Helper()
	if !atkIsStrict(flags) {
		return atkHarness(t, nil, "", args...)
	}
	r, err := atkStartIn(atkAloneCgroup(t), nil, "", args...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestAttackExecPinnedInsideWorkspace: the exact commands name a
// path inside the workspace; exec and call refuse them at start, naming the
// flag and the path, and nothing runs.
func TestAttackExecPinnedInsideWorkspace(t *testing.T) {
	t.Parallel()
	a := newAtkWS(t)
	outside := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(a.ws, "a", "out"), 0o755))
	must(t, os.MkdirAll(filepath.Join(a.ws, "a", "ref"), 0o755))
	swap := "mv a a.old; mkdir a; ln -s " + outside + " a/out; ln -s /etc a/ref; echo swapped"
	for _, c := range []struct{ flag, path string }{
		{"--allow-write", filepath.Join(a.ws, "a", "out")},
		{"--allow-read", filepath.Join(a.ws, "a", "ref")},
		{"--allow-read", a.ws},
	} {
		r, _ := a.execOnce(t, c.flag, c.path, "--", "sh", "-c", swap)
		if r.code != exitSetupError || strings.Contains(r.stdout, "swapped") || !strings.Contains(r.stderr, c.flag+" "+c.path+": inside the workspace") {
			t.Errorf("exec %s %s: exit %d, stdout %q, stderr %q; want exit %d naming the flag and the path", c.flag, c.path, r.code, r.stdout, r.stderr, exitSetupError)
		}
		r = atkHarnessFlags(t, runFlags("sh"), slices.Concat([]string{"call", "--workspace", a.ws}, runFlags("sh"), []string{c.flag, c.path, "run", runArgs(t, []string{"sh", "-c", swap}, nil)})...)
		if r.code != exitUsage || strings.Contains(r.stdout, "swapped") || !strings.Contains(r.stderr, c.flag+" "+c.path+": inside the workspace") {
			t.Errorf("call %s %s: exit %d, stdout %q, stderr %q; want exit %d naming the flag and the path", c.flag, c.path, r.code, r.stdout, r.stderr, exitUsage)
		}
	}
	if _, err := os.Stat(filepath.Join(a.ws, "a.old")); err == nil {
		t.Error("the swap ran")
	}
	for _, bad := range [][]string{
		{"--allow-read", filepath.Join(a.base, "missing"), "does not exist"},
		{"--allow-write", filepath.Join(a.base, "outdir"), "--allow-read", filepath.Join(a.base, "outdir") + "/", "named twice"},
	} {
		want := bad[len(bad)-1]
		r, _ := a.execOnce(t, append(bad[:len(bad)-1:len(bad)-1], "--", "true")...)
		if r.code != exitSetupError || !strings.Contains(r.stderr, want) || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
			t.Errorf("exec %v: exit %d, stderr %q; want one line saying %q", bad, r.code, r.stderr, want)
		}
	}
}

// TestAttackExecPinnedSwap: the attack with the paths outside the
// workspace, beneath a directory the child may write (--allow-write of
// their parent). The first call swaps the parent and leaves a link (to an
// outside directory for the write path, to /etc for the read path) where
// the named path was. A later process (exec, call) refuses to start, naming
// the flag and the link, because it would resolve through a link a child
// could have planted; a later call of the same process (run with a replay
// provider, two calls) fails at "bind <path>", naming it, and the record
// says failed with a reason. Nothing is ever written outside, and no byte
// of /etc/shadow appears anywhere.
func TestAttackExecPinnedSwap(t *testing.T) {
	t.Parallel()
	hashes := atkShadowHashes()
	for _, v := range []struct {
		name, flag, rel, target, use string
	}{
		{"write", "--allow-write", "a/out", "", "echo pwned > %s/pwned.txt; echo ran"},
		{"read", "--allow-read", "a/ref", "/etc", "cat %s/shadow %s/gshadow; echo ran"},
	} {
		for _, via := range []string{"exec", "call", "one-process"} {
			t.Run(v.name+"/"+via, func(t *testing.T) {
				t.Parallel()
				a := newAtkWS(t)
				shared := filepath.Join(a.base, "shared")
				victim := filepath.Join(shared, v.rel)
				must(t, os.MkdirAll(victim, 0o755))
				outside := t.TempDir()
				target := v.target
				if target == "" {
					target = outside
				}
				flags := []string{"--allow-write", shared, v.flag, victim}
				swap := "cd " + shared + " && mv a a.old && mkdir a && ln -s " + target + " " + v.rel + " && echo swapped"
				use := strings.ReplaceAll(v.use, "%s", victim)
				check := func(out string) {
					t.Helper()
					for _, h := range hashes {
						if strings.Contains(out, h) {
							t.Fatal("a password hash of the real /etc/shadow reached the output")
						}
					}
					if strings.Contains(out, "\nran") || strings.Contains(out, "\\nran") || strings.HasPrefix(out, "ran") {
						t.Fatalf("the second call's program ran:\n%s", out)
					}
					if ents, _ := os.ReadDir(outside); len(ents) != 0 {
						t.Fatalf("the outside directory holds %d entries", len(ents))
					}
				}
				// A later process refuses to start, naming the flag and the
				// planted link.
				refusedAtStart := func(r atkRun) {
					t.Helper()
					want := exitUsage
					if via == "exec" {
						want = exitSetupError
					}
					if r.code != want || !strings.Contains(r.stderr, v.flag+" "+victim+": resolves through the symbolic link "+victim) {
						t.Fatalf("second process: exit %d, stderr %q; want exit %d naming %s %s and the link", r.code, r.stderr, want, v.flag, victim)
					}
					check(r.stdout + r.stderr)
					t.Logf("second process refused: %s", strings.TrimSpace(r.stderr))
				}
				switch via {
				case "exec":
					r, _ := a.execOnce(t, append(flags, "--", "sh", "-c", swap)...)
					if !atkExecution() {
						execRefused(t, r)
						return
					}
					if r.code != 0 || !strings.Contains(r.stdout, "swapped") {
						t.Fatalf("first exec: the child could not swap (exit %d): %s%s", r.code, r.stdout, r.stderr)
					}
					r, _ = a.execOnce(t, append(flags, "--", "sh", "-c", use)...)
					refusedAtStart(r)
				case "call":
					at := a.call(t, nil, append(runFlags("sh"), flags...), "run", runArgs(t, []string{"sh", "-c", swap}, nil))
					if !ranOrUnpublished(t, at) {
						return
					}
					at.want(t, "executed", "")
					if !strings.Contains(stdoutOf(at.result()), "swapped") {
						t.Fatalf("first run: the child could not swap: %s", at.result())
					}
					r := atkHarnessFlags(t, runFlags("sh"), slices.Concat([]string{"call", "--workspace", a.ws}, runFlags("sh"), flags, []string{"run", runArgs(t, []string{"sh", "-c", use}, nil)})...)
					refusedAtStart(r)
				case "one-process":
					call := func(script string) map[string]any {
						return map[string]any{"tool_calls": []map[string]any{{"name": "run", "arguments": map[string]any{"argv": []string{"sh", "-c", script}}}}}
					}
					replay := filepath.Join(a.base, "script.jsonl")
					must(t, os.WriteFile(replay, []byte(atkJSON(t, call(swap))+"\n"+atkJSON(t, call(use))+"\n{\"text\":\"done\"}\n"), 0o644))
					rec := filepath.Join(t.TempDir(), "rec.jsonl")
					r := atkHarness(t, nil, "", slices.Concat([]string{"run", "--workspace", a.ws, "--record", rec, "--provider", "replay:" + replay, "--quiet"}, progFlags("sh"), flags)...)
					var calls []map[string]any
					for _, l := range readRecord(t, rec) {
						if l["event"] == "call" {
							calls = append(calls, l)
						}
					}
					if len(calls) != 2 {
						t.Fatalf("run: exit %d, %d calls recorded, want 2\n%s%s", r.code, len(calls), r.stdout, r.stderr)
					}
					if !atkExecution() {
						for _, c := range calls {
							if c["status"] != "refused" || c["reason"] != "unpublished" {
								t.Fatalf("run unpublished here, but a call was %v/%v", c["status"], c["reason"])
							}
						}
						return
					}
					if calls[0]["status"] != "executed" {
						t.Fatalf("first call: %v/%v %v, want executed", calls[0]["status"], calls[0]["reason"], calls[0]["message"])
					}
					msg := fmt.Sprint(calls[1]["message"])
					if calls[1]["status"] != "failed" || calls[1]["reason"] != "tool_error" || !strings.Contains(msg, "bind "+victim) {
						t.Fatalf("second call: %v/%v %q, want failed/tool_error naming bind %s", calls[1]["status"], calls[1]["reason"], msg, victim)
					}
					b, _ := os.ReadFile(rec)
					check(r.stdout + r.stderr + string(b))
					t.Logf("second call failed: %s; cause: %v", msg, calls[1]["cause"])
				}
			})
		}
	}
}
