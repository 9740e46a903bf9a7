package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/b10x/harness/internal/testenv"
)

// What a CI job reads of exec (issue 29): its exit statuses, one by one,
// and the signals it passes on to its command.

// TestExecExitStatuses: the command's own status, or 124, 125, 126, 127
// for what kept it from running (or ended it) — never a 2 of the harness's
// that a job would take for make's.
func TestExecExitStatuses(t *testing.T) {
	testenv.Require(t, execution(), "confined execution", testenv.ShapeNoLandlock, testenv.ShapeNoUserns)
	ws, _ := sampleWorkspace(t)
	must(t, os.WriteFile(filepath.Join(ws, "noexec.sh"), []byte("#!/bin/sh\necho ran\n"), 0o644))
	limit := execLimit(t, ws, "1s")
	for _, c := range []struct {
		what   string
		args   []string
		status int
		stderr string
	}{
		{"the command's own 2", []string{"--", "sh", "-c", "exit 2"}, 2, ""},
		{"the command's own 0", []string{"--", "true"}, 0, ""},
		{"killed by a signal of its own", []string{"--", "sh", "-c", "kill -USR1 $$"}, 128 + int(syscall.SIGUSR1), ""},
		{"killed at the time limit", []string{"--timeout", limit, "--", "sleep", "120"}, exitTimeout, "killed at its time limit"},
		{"a flag exec does not have", []string{"--no-such-flag", "--", "true"}, exitSetupError, "--no-such-flag is not a flag of exec"},
		{"a bad value", []string{"--grace=-1s", "--", "true"}, exitSetupError, "--grace -1s: must not be negative"},
		{"a bad flag value", []string{"--grace", "soon", "--", "true"}, exitSetupError, "--grace"},
		{"no command", []string{}, exitSetupError, ""},
		{"not executable", []string{"--", "./noexec.sh"}, exitCannotRun, "not an executable file"},
		{"not found in PATH", []string{"--", "no-such-program-9b2"}, exitNotFound, `"no-such-program-9b2": not found in PATH`},
		{"no such path", []string{"--", "./missing.sh"}, exitNotFound, "no such file or directory"},
	} {
		cmd := harnessCommand(append([]string{"exec", "--workspace", ws}, c.args...)...)
		cmd.Dir = ws
		cmd.Env = append(os.Environ(), "B10X_TEST_MAIN=1")
		r := runHarnessCmd(t, cmd, "")
		if r.code != c.status || !strings.Contains(r.stderr, c.stderr) {
			t.Errorf("%s: exit %d, want %d; stderr %q, want it to hold %q", c.what, r.code, c.status, r.stderr, c.stderr)
		}
		// ("exec::" was a message's prefix doubled; a note may quote
		// /proc/self/cgroup's "0::" line.)
		if strings.Contains(r.stderr, "--allow-program") || strings.Contains(r.stderr, "exec::") {
			t.Errorf("%s: the message names what the user never gave: %q", c.what, r.stderr)
		}
	}
}

// execLimit is a --timeout for exec in ws that falls while its program
// runs: onHost on this host, where a sandbox starts in tens of
// milliseconds; under emulation (the VM shapes), where it takes seconds
// and longer under load, four times what a call of true took there and
// then, plus two seconds.
func execLimit(t *testing.T, ws, onHost string) string {
	t.Helper()
	if !testenv.InVM() {
		return onHost
	}
	cmd := harnessCommand("exec", "--workspace", ws, "--", "true")
	cmd.Dir = ws
	cmd.Env = append(os.Environ(), "B10X_TEST_MAIN=1")
	t0 := time.Now()
	if r := runHarnessCmd(t, cmd, ""); r.code != 0 {
		t.Fatalf("exec true: exit %d: %s", r.code, r.stderr)
	}
	return (4*time.Since(t0) + 2*time.Second).Round(time.Second).String()
}

// startExec starts `exec` with args in ws, its output in buffers, and
// waits until the command has written ws/ready.
func startExec(t *testing.T, ws string, args ...string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	cmd := harnessCommand(append([]string{"exec", "--workspace", ws}, args...)...)
	cmd.Dir = ws
	cmd.Env = append(os.Environ(), "B10X_TEST_MAIN=1")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	must(t, cmd.Start())
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(ws, "ready")); err == nil {
			return cmd, &out
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("the command never became ready:\n%s", out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestExecForwardsSignals: without a terminal, as a CI runner sends them,
// the signals exec gets reach its command, which cleans up and ends with a
// status of its own; one that ignores them is killed --grace later, whole
// tree; --grace 0 kills at once.
func TestExecForwardsSignals(t *testing.T) {
	testenv.Require(t, execution(), "confined execution", testenv.ShapeNoLandlock, testenv.ShapeNoUserns)
	t.Parallel()
	trap := `trap 'echo got-$1 > got; exit 5' TERM INT HUP QUIT USR1; touch ready; sleep 60 & wait`
	for _, c := range []struct {
		what   string
		args   []string
		sig    syscall.Signal
		status int
		got    string // what the command's trap wrote, "" for nothing
	}{
		{"SIGTERM trapped", []string{"--", "sh", "-c", strings.ReplaceAll(trap, "$1", "TERM"), "sh"}, syscall.SIGTERM, 5, "got-TERM"},
		{"SIGINT trapped", []string{"--", "sh", "-c", strings.ReplaceAll(trap, "$1", "INT"), "sh"}, syscall.SIGINT, 5, "got-INT"},
		{"SIGUSR1 trapped", []string{"--", "sh", "-c", strings.ReplaceAll(trap, "$1", "USR1"), "sh"}, syscall.SIGUSR1, 5, "got-USR1"},
		// A shell waiting for its foreground command: SIGINT reaches the
		// whole job, as a terminal's Ctrl-C does, and the shell ends with
		// it at once, not at the grace.
		{"SIGINT untrapped", []string{"--", "sh", "-c", "touch ready; sleep 60"}, syscall.SIGINT, 128 + int(syscall.SIGINT), ""},
		{"SIGTERM ignored past the grace", []string{"--grace", "500ms", "--", "sh", "-c", "trap '' TERM; touch ready; while :; do sleep 0.1; done"}, syscall.SIGTERM, 128 + int(syscall.SIGTERM), ""},
		{"no grace", []string{"--grace", "0", "--", "sh", "-c", strings.ReplaceAll(trap, "$1", "TERM"), "sh"}, syscall.SIGTERM, 128 + int(syscall.SIGTERM), ""},
	} {
		ws, _ := sampleWorkspace(t)
		cmd, out := startExec(t, ws, c.args...)
		sent := time.Now()
		must(t, cmd.Process.Signal(c.sig))
		status := waitExit(t, cmd)
		took := time.Since(sent)
		got, _ := os.ReadFile(filepath.Join(ws, "got"))
		if status != c.status || strings.TrimSpace(string(got)) != c.got {
			t.Errorf("%s: exit %d, trap wrote %q; want %d and %q\n%s", c.what, status, got, c.status, c.got, out)
		}
		if c.what == "SIGINT untrapped" && took > 5*time.Second {
			t.Errorf("%s: ended %v after the signal: the job did not get it, the grace killed it", c.what, took)
		}
		if strings.Contains(c.what, "past the grace") {
			if took < 500*time.Millisecond || !strings.Contains(out.String(), "did not end within its grace (500ms) after SIGTERM") {
				t.Errorf("%s: ended %v after the signal, output %q; want the grace waited and said", c.what, took, out)
			}
		}
		t.Logf("%s: exit %d after %v", c.what, status, took.Round(time.Millisecond))
	}
}

// TestLimitsBestEffort: a limit given that this host cannot enforce
// refuses to start by default (limits required), naming it, and runs with
// limits best-effort, saying what it ran without; where the host enforces
// it, both run.
func TestLimitsBestEffort(t *testing.T) {
	testenv.Require(t, execution(), "confined execution", testenv.ShapeNoLandlock, testenv.ShapeNoUserns)
	ws, _ := sampleWorkspace(t)
	req := harness(t, "", "exec", "--workspace", ws, "--pids-max", "64", "--", "true")
	be := harness(t, "", "exec", "--workspace", ws, "--pids-max", "64", "--limits", "best-effort", "--", "true")
	if be.code != 0 {
		t.Fatalf("best-effort: exit %d, stderr %q", be.code, be.stderr)
	}
	switch req.code {
	case 0: // this host enforces pids.max
		t.Logf("this host enforces pids.max: both ran")
	case exitSetupError:
		if !strings.Contains(req.stderr, "--pids-max was given but cannot be enforced") || !regexp.MustCompile(`ran without [a-z, -]*pids-limit`).MatchString(be.stderr) {
			t.Errorf("required: %q; best-effort: %q; want the refusal named, then the limit it ran without", req.stderr, be.stderr)
		}
		if n := strings.Count(be.stderr, "confine auto"); n != 1 {
			t.Errorf("best-effort said %d notes of what it ran without, want one naming all: %q", n, be.stderr)
		}
	default:
		t.Errorf("required: exit %d, stderr %q", req.code, req.stderr)
	}
	if r := harness(t, "", "exec", "--workspace", ws, "--limits", "sometimes", "--", "true"); r.code != exitSetupError || !strings.Contains(r.stderr, "--limits") {
		t.Errorf("a bad --limits: exit %d, %q", r.code, r.stderr)
	}
}

// TestExecEnvironment: --pass-env takes globs of names (GITHUB_* passed
// nothing before), --setenv NAME=VALUE sets a variable and wins over what
// --pass-env passed, and a bad item is refused naming the flag.
func TestExecEnvironment(t *testing.T) {
	testenv.Require(t, execution(), "confined execution", testenv.ShapeNoLandlock, testenv.ShapeNoUserns)
	ws, _ := sampleWorkspace(t)
	cmd := harnessCommand("exec", "--workspace", ws, "--pass-env", "GITHUB_*", "--pass-env", "CI", "--setenv", "CI=overridden", "--setenv", "EXTRA=a=b", "--", "env")
	cmd.Env = append(os.Environ(), "B10X_TEST_MAIN=1", "GITHUB_SHA=abc123", "GITHUB_REF=refs/heads/main", "CI=true", "SECRET_TOKEN=nope")
	r := runHarnessCmd(t, cmd, "")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	for _, want := range []string{"GITHUB_SHA=abc123\n", "GITHUB_REF=refs/heads/main\n", "CI=overridden\n", "EXTRA=a=b\n"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("the command's environment lacks %q:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "SECRET_TOKEN") || strings.Contains(r.stdout, "CI=true") {
		t.Errorf("the command saw what was not passed, or --setenv did not win:\n%s", r.stdout)
	}
	for _, bad := range [][]string{{"--setenv", "NOVALUE"}, {"--setenv", "A*=1"}, {"--pass-env", "GITHUB_[x"}} {
		r := harness(t, "", append(append([]string{"exec", "--workspace", ws}, bad...), "--", "true")...)
		if r.code != exitSetupError || !strings.Contains(r.stderr, bad[0]) {
			t.Errorf("%v: exit %d, %q; want 125 naming %s", bad, r.code, r.stderr, bad[0])
		}
	}
}

// TestExecRecord: exec's record is run_start (with exec's own effective
// policy: no key exec does not take) and run_end saying how it ended.
func TestExecRecord(t *testing.T) {
	testenv.Require(t, execution(), "confined execution", testenv.ShapeNoLandlock, testenv.ShapeNoUserns)
	ws, _ := sampleWorkspace(t)
	rec := filepath.Join(t.TempDir(), "exec.rec")
	r := harness(t, "", "exec", "--quiet", "--workspace", ws, "--record", rec, "--", "sh", "-c", "exit 3")
	if r.code != 3 {
		t.Fatalf("exit %d, want the command's 3: %s", r.code, r.stderr)
	}
	lines := readRecord(t, rec)
	if len(lines) != 2 || lines[0]["event"] != "run_start" || lines[1]["event"] != "run_end" || lines[1]["ended_by"] != "exit_3" {
		t.Fatalf("record %v, want run_start and run_end ended_by exit_3", lines)
	}
	checkHostFacts(t, lines[0])
	pol, _ := lines[0]["policy"].(map[string]any)
	eff, _ := pol["effective"].([]any)
	keys := map[string]bool{}
	for _, kv := range eff {
		if m, ok := kv.(map[string]any); ok {
			keys[fmt.Sprint(m["key"])] = true
		}
	}
	if !keys["confine"] || !keys["workspace"] || keys["approve"] || keys["approve_up_to"] || keys["surface"] {
		t.Errorf("run_start's effective policy has keys %v: want exec's (confine, workspace) and none of the gate's", keys)
	}
}

// TestPassEnvStrict: a pass_env name or glob that matches nothing passes
// nothing, unless pass_env_strict refuses it at start, naming it (exec
// 125; a session's command 2, at the policy file's position).
func TestPassEnvStrict(t *testing.T) {
	testenv.Require(t, execution(), "confined execution", testenv.ShapeNoLandlock, testenv.ShapeNoUserns)
	ws, _ := sampleWorkspace(t)
	r := harness(t, "", "exec", "--quiet", "--workspace", ws, "--pass-env", "B10X_NOPE_*", "--", "true")
	if r.code != 0 {
		t.Fatalf("a glob matching nothing, not strict: exit %d, %s", r.code, r.stderr)
	}
	r = harness(t, "", "exec", "--quiet", "--workspace", ws, "--pass-env", "B10X_NOPE_*", "--pass-env-strict", "--", "true")
	if r.code != exitSetupError || !strings.Contains(r.stderr, "--pass-env B10X_NOPE_*: matches no variable") {
		t.Fatalf("strict, matching nothing: exit %d, %q; want 125 naming the glob", r.code, r.stderr)
	}
	t.Setenv("B10X_YES_A", "seen")
	r = harness(t, "", "exec", "--quiet", "--workspace", ws, "--pass-env", "B10X_YES_*", "--pass-env-strict", "--", "sh", "-c", "echo $B10X_YES_A")
	if r.code != 0 || strings.TrimSpace(r.stdout) != "seen" {
		t.Fatalf("strict, matching: exit %d, stdout %q, %s", r.code, r.stdout, r.stderr)
	}
	pol := filepath.Join(t.TempDir(), "p.toml")
	if err := os.WriteFile(pol, []byte("allow_program = [\"true\"]\npass_env = [\"B10X_MISSING\"]\npass_env_strict = true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r = harness(t, "", "call", "--policy", pol, "--workspace", ws, "run", `{"argv":["true"]}`)
	if r.code != exitUsage || !strings.Contains(r.stderr, pol+":2:1: pass_env B10X_MISSING: matches no variable") {
		t.Fatalf("a session's policy file: exit %d, %q; want 2 at the key's position", r.code, r.stderr)
	}
}

// checkHostFacts wants run_start's runs_on read as the harness started:
// after its own Landlock domain, /proc/self is out of its reach, and the
// facts would read as unknown.
func checkHostFacts(t *testing.T, start map[string]any) {
	t.Helper()
	h, _ := start["runs_on"].(map[string]any)
	name, _ := os.Hostname()
	if h == nil || h["host"] != name || h["seccomp"] == "unknown" || h["seccomp"] == nil || h["uid_map"] == "" || h["uid_map"] == nil {
		t.Errorf("run_start's runs_on %v: want this host's name, seccomp mode and uid_map", h)
	}
}
