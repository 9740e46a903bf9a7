package main

// ATTACKS.md, "Executing": the run tool through `b10x-harness call` and the
// exec subcommand. In the shapes expected to offer every layer
// (debian-6.1: Landlock, the namespaces, a cgroup v2 leaf with the pids,
// memory and cpu controllers) every case runs under --confine strict, with
// the harness started alone in a cgroup of its own as a CI job's is, and a
// strict refusal there fails the test; each outcome must list the limits
// among the layers that confined the child. Elsewhere the cases run under
// the default --confine auto, and TestAttackExecStrictWhereAvailable asserts
// that strict refuses to start, naming exactly the layers missing. Where
// this shape cannot confine execution at all, run must be unpublished and
// exec must refuse: each test asserts that instead.
//
// Child-side attacks are /bin/sh scripts (busybox in the VM shapes) or the
// test binary itself started as the program (atkProbeMain) when they need
// raw system calls.

import (
	"github.com/b10x/harness/session"

	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/b10x/harness/internal/testenv"
)

// atkStrict reports whether this shape runs the executing section under
// --confine strict: the shapes expected to offer every layer, and a host
// on which the test finds nothing strict needs missing (hostStrictMissing).
func atkStrict() bool {
	switch testenv.Shape() {
	case testenv.ShapeDebian61, testenv.ShapeDebian612:
		return true
	case testenv.ShapeHost:
		return atkHostStrict()
	}
	return false
}

var atkHostStrict = sync.OnceValue(func() bool {
	missing, err := hostStrictMissingErr()
	return err == nil && len(missing) == 0
})

// atkStrictFlags select strict; atkLimitFlags add a cpu limit to the pids
// and memory limits that are always set (--pids-max and --memory-max have
// defaults), so that strict applies and reports every limit layer.
var (
	atkStrictFlags = []string{"--confine", "strict"}
	atkLimitFlags  = []string{"--cpu-max", "1"}
)

// modeFlags are the confinement flags of the executing section in this
// shape: strict with every limit where atkStrict, else none (auto).
func modeFlags() []string {
	if !atkStrict() {
		return nil
	}
	return slices.Concat(atkStrictFlags, atkLimitFlags)
}

// progFlags approve every call and declare the given programs.
func progFlags(programs ...string) []string {
	f := []string{"--yes"}
	for _, p := range programs {
		f = append(f, "--allow-program", p)
	}
	return f
}

// runFlags are modeFlags and progFlags.
func runFlags(programs ...string) []string {
	return append(modeFlags(), progFlags(programs...)...)
}

// atkExecCall is one prepared `b10x-harness exec`: strict with every limit
// and alone in a cgroup where atkStrict, and always with --report.
type atkExecCall struct {
	cmd    *exec.Cmd
	flags  []string // the exec flags before "--"
	report string
}

// execPrepare prepares `exec --workspace WS [modeFlags] --report FILE
// args...`; args hold further flags, "--" and the command.
func (a *atkWS) execPrepare(t *testing.T, env []string, args ...string) *atkExecCall {
	t.Helper()
	e := &atkExecCall{report: filepath.Join(a.base, fmt.Sprintf("exec-report-%d.json", a.n.Add(1)))}
	t.Cleanup(func() { os.Remove(e.report) })
	e.flags = modeFlags()
	if i := slices.Index(args, "--"); i >= 0 {
		e.flags = append(e.flags, args[:i]...)
	}
	argv := slices.Concat([]string{"exec", "--workspace", a.ws}, modeFlags(), []string{"--report", e.report}, args)
	e.cmd = atkCmd(env, "", argv...)
	if atkIsStrict(e.flags) {
		if fd := atkAloneCgroup(t); fd >= 0 {
			e.cmd.SysProcAttr.UseCgroupFD = true
			e.cmd.SysProcAttr.CgroupFD = fd
		}
	}
	return e
}

// check reads the report of a finished exec that ran its command and
// asserts what confined it: the baseline layers, and under strict the
// cgroup leaf and every limit, with nothing missing.
func (e *atkExecCall) check(t *testing.T, r atkRun) {
	t.Helper()
	if atkIsStrict(e.flags) && r.code == exitSetupError && r.stdout == "" {
		t.Fatalf("exec --confine strict refused to start in shape %s:\n%s", testenv.Shape(), r.stderr)
	}
	b, err := os.ReadFile(e.report)
	if err != nil {
		t.Fatalf("exec (exit %d) wrote no report: %v\nstderr %s", r.code, err, r.stderr)
	}
	var rep session.ExecReport
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatalf("exec report: %v\n%s", err, b)
	}
	if rep.SetupError != "" {
		t.Fatalf("exec: a confinement step failed: %s", rep.SetupError)
	}
	if missing := atkMissingLayers(rep.Layers, e.flags, atkIsStrict(e.flags)); len(missing) > 0 {
		t.Fatalf("exec's command was confined by %v: %v missing", rep.Layers, missing)
	}
	if atkIsStrict(e.flags) && len(rep.Missing) > 0 {
		t.Fatalf("exec --confine strict ran without %v", rep.Missing)
	}
	t.Logf("exec layers (exit %d): %v", rep.Status, rep.Layers)
}

// exec runs execPrepare's command to its end, and checks its report where
// this shape confines execution.
func (a *atkWS) exec(t *testing.T, env []string, args ...string) atkRun {
	t.Helper()
	e := a.execPrepare(t, env, args...)
	r := e.run(t)
	if strings.Contains(r.stderr, "goroutine ") || strings.Contains(r.stderr, "panic:") {
		t.Fatalf("a stack trace reached the user:\n%s", r.stderr)
	}
	if atkExecution() {
		e.check(t, r)
	}
	return r
}

// run runs the prepared command to its end and returns what it printed
// and how it ended.
func (e *atkExecCall) run(t *testing.T) atkRun {
	t.Helper()
	var so, se bytes.Buffer
	e.cmd.Stdout, e.cmd.Stderr = &so, &se
	err := e.cmd.Run()
	r := atkRun{stdout: so.String(), stderr: se.String(), state: e.cmd.ProcessState}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		t.Fatalf("running the harness: %v", err)
	}
	return r
}

// ranOrUnpublished reports whether run is published here; where it is not,
// it asserts the call was refused as unpublished.
func ranOrUnpublished(t *testing.T, at atkAttempt) bool {
	t.Helper()
	if !atkExecution() {
		at.refusedAt(t, "unpublished", "published")
		return false
	}
	return true
}

// runArgs encodes run's arguments.
func runArgs(t *testing.T, argv []string, extra map[string]any) string {
	t.Helper()
	m := map[string]any{"argv": argv}
	for k, v := range extra {
		m[k] = v
	}
	return atkJSON(t, m)
}

// stdoutOf is the program's stdout as the run result reports it.
func stdoutOf(res string) string {
	_, after, ok := strings.Cut(res, " bytes) ---\n")
	if !ok {
		return ""
	}
	out, _, _ := strings.Cut(after, "--- stderr (")
	return out
}

// execRefused asserts that exec refused to run its command unconfined:
// exit 2 (refused to start) or 125 (a confinement step failed before the
// program), the program's output absent.
func execRefused(t *testing.T, r atkRun) {
	t.Helper()
	if (r.code != exitUsage && r.code != exitSetupError) || r.stdout != "" {
		t.Fatalf("exec without confined execution: exit %d\nstdout %q\nstderr %s", r.code, r.stdout, r.stderr)
	}
}

// TestAttackExecProgramNames: argv[0] spellings that are not a declared
// name, and malformed argv, are refused before anything runs.
func TestAttackExecProgramNames(t *testing.T) {
	t.Parallel()
	a := newAtkWS(t)
	a.seal(t)
	sh, err := exec.LookPath("sh")
	must(t, err)
	canon, err := filepath.EvalSymlinks(sh)
	must(t, err)
	for _, argv0 := range atkSample([]string{
		canon,            // the file sh resolved to is not a declared name
		"/bin/sh",        // nor is another spelling of it
		"sh ",            // trailing space
		"\u0455h",        // Cyrillic dze: looks like "sh"
		"Sh",             // case
		"sub/../sh",      // traversal that lands on the name
		"/proc/self/exe", // the harness itself
	}, 3) {
		t.Run(fmt.Sprintf("%q", argv0), func(t *testing.T) {
			t.Parallel()
			at := a.call(t, nil, runFlags("sh"), "run", runArgs(t, []string{argv0, "-c", "echo ran > ran"}, nil))
			if ranOrUnpublished(t, at) {
				at.refusedAt(t, "program_not_allowed", "arguments")
			}
		})
	}
	for _, c := range atkSample([]struct{ name, args string }{
		{"NUL in argv[0]", `{"argv":["sh\u0000","-c","echo ran > ran"]}`},
		{"NUL in an argument", `{"argv":["sh","-c","echo ran > ran\u0000"]}`},
		{"empty argv[0]", `{"argv":[""]}`},
		{"argv of numbers", `{"argv":[1,2]}`},
	}, 2) {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			at := a.call(t, nil, runFlags("sh"), "run", c.args)
			if !ranOrUnpublished(t, at) {
				return
			}
			at.want(t, "refused", "")
			if r := at.out["reason"]; r != "invalid_argument" && r != "program_not_allowed" {
				t.Fatalf("reason %v", r)
			}
		})
	}
	t.Cleanup(func() {
		if _, err := os.Lstat(filepath.Join(a.ws, "ran")); err == nil {
			t.Error("a refused program ran")
		}
		a.checkOutside(t)
	})
}

// TestAttackExecPlantedAfterStart: a hook (which runs after the harness
// started and before the program) plants an "sh" first on the harness's
// PATH and in the workspace. The run still executes the file resolved at
// start.
func TestAttackExecPlantedAfterStart(t *testing.T) {
	t.Parallel()
	a := newAtkWS(t)
	a.seal(t)
	plant := `mkdir -p pathbin && printf '#!/bin/sh\necho PLANTED\n' > pathbin/sh && cp pathbin/sh sh && chmod 755 pathbin/sh sh`
	hook := "/bin/sh -c " + shellQuote(plant)
	env := []string{"PATH=" + filepath.Join(a.ws, "pathbin") + ":" + a.ws + ":" + os.Getenv("PATH")}
	at := a.call(t, env, append(runFlags("sh"), "--hook", hook), "run", runArgs(t, []string{"sh", "-c", "echo REAL-$0"}, nil))
	if !ranOrUnpublished(t, at) {
		return
	}
	at.want(t, "executed", "")
	if strings.Contains(at.result(), "PLANTED") || !strings.Contains(stdoutOf(at.result()), "REAL-sh") {
		t.Fatalf("the planted sh ran, or nothing did:\n%s", at.result())
	}
	for _, p := range []string{"pathbin/sh", "sh"} {
		if _, err := os.Stat(filepath.Join(a.ws, p)); err != nil {
			t.Fatalf("the hook did not plant %s before the program ran: %v", p, err)
		}
	}
	a.checkOutside(t)
}

// shellQuote quotes s for a POSIX shell (and for --hook's argv parser).
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// TestAttackExecArgvBytes: metacharacters in arguments reach execve as
// bytes, checked byte for byte by the program itself.
func TestAttackExecArgvBytes(t *testing.T) {
	t.Parallel()
	a := newAtkWS(t)
	a.seal(t)
	self := atkSelf(t)
	args := []string{";", "&&", "$(id)", "`id`", "> f", "| tee g", "a b", "", "*", "\n", `'"`, "é", "$HOME", "--", "-c", "\\", "${IFS}", "a\tb"}
	at := a.call(t, nil, runFlags(self), "run", runArgs(t, append([]string{self, atkProbeArg, "argv"}, args...), nil))
	if !ranOrUnpublished(t, at) {
		return
	}
	at.want(t, "executed", "")
	var hx []string
	for _, s := range args {
		hx = append(hx, hex.EncodeToString([]byte(s)))
	}
	want := "argv=[" + strings.Join(hx, ",") + "]"
	if got := strings.TrimSpace(stdoutOf(at.result())); got != want {
		t.Fatalf("argv changed on the way:\n got %s\nwant %s", got, want)
	}
	for _, f := range []string{"f", "g"} {
		if _, err := os.Lstat(filepath.Join(a.ws, f)); err == nil {
			t.Fatalf("a redirection in an argument was interpreted: %s exists", f)
		}
	}
	a.checkOutside(t)
}

// TestAttackExecCwd: cwd outside the workspace or through a link out of it
// (the cases runtool_test.go does not already try).
func TestAttackExecCwd(t *testing.T) {
	t.Parallel()
	a := newAtkWS(t)
	a.link(t, "c2", "c1")
	a.link(t, "../outdir", "c2")
	a.link(t, "../..", "sub/up")
	a.link(t, filepath.Join(a.base, "outdir"), "absdir")
	a.seal(t)
	script := []string{"sh", "-c", "echo ran > ran-here; pwd"}
	for _, c := range atkSample([]struct{ cwd, reason, step string }{
		{"sub/../..", "denied_path", "paths"},
		{filepath.Join(a.base, "outdir"), "denied_path", "paths"},
		{"/proc/self/cwd", "denied_path", "paths"},
		{"c1", "denied_path", "paths"},
		{"sub/up/outdir", "denied_path", "paths"},
		{"absdir", "denied_path", "paths"},
		{"hello.txt", "invalid_argument", "arguments"},
		{"sub\x00/../..", "invalid_argument", "arguments"},
	}, 3) {
		t.Run(fmt.Sprintf("%q", c.cwd), func(t *testing.T) {
			t.Parallel()
			at := a.call(t, nil, runFlags("sh"), "run", runArgs(t, script, map[string]any{"cwd": c.cwd}))
			if ranOrUnpublished(t, at) {
				at.refusedAt(t, c.reason, c.step)
			}
		})
	}
	t.Cleanup(func() {
		if _, err := os.Lstat(filepath.Join(a.ws, "ran-here")); err == nil {
			t.Error("a refused call ran")
		}
		a.checkOutside(t)
	})
}

// TestAttackExecReadsSecrets: the child tries /etc/shadow, the user's SSH
// keys and the harness's environment (a fake API key put there by the
// test), through run and through exec.
func TestAttackExecReadsSecrets(t *testing.T) {
	t.Parallel()
	a := newAtkWS(t)
	home := filepath.Join(a.base, "home")
	must(t, os.MkdirAll(filepath.Join(home, ".ssh"), 0o700))
	must(t, os.WriteFile(filepath.Join(home, ".ssh", "id_ed25519"), []byte("-----BEGIN OPENSSH PRIVATE KEY-----\n"+atkSecret+" ssh key\n"), 0o600))
	a.seal(t)
	env := []string{"HOME=" + home, "B10X_FAKE_KEY=" + atkSecret + "-api-key", "ANTHROPIC_API_KEY=" + atkSecret + "-anthropic"}
	script := strings.Join([]string{
		"cat /etc/shadow /etc/gshadow",
		"cat ~/.ssh/id_* \"$HOME\"/.ssh/id_* " + home + "/.ssh/id_ed25519 /root/.ssh/id_*",
		"cat /proc/$PPID/environ /proc/1/environ",
		"for f in /proc/[0-9]*/environ; do cat $f; done",
		"cat " + filepath.Join(a.base, "data-archived", "x"),
		"ls -a / /proc " + a.base,
		"echo end-of-attack",
	}, "; ")
	// What a leak of the real /etc/shadow would show: its password hashes.
	var hashes []string
	if b, err := os.ReadFile("/etc/shadow"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Split(l, ":"); len(f) > 1 && len(f[1]) > 12 {
				hashes = append(hashes, f[1])
			}
		}
	}
	check := func(t *testing.T, out string) {
		t.Helper()
		if !strings.Contains(out, "end-of-attack") {
			t.Fatalf("the attack did not run to its end:\n%s", out)
		}
		for _, h := range hashes {
			if strings.Contains(out, h) {
				t.Fatal("a password hash of the real /etc/shadow reached the child")
			}
		}
		if strings.Contains(out, "PRIVATE KEY") || strings.Contains(out, atkSecret) {
			t.Fatalf("a secret reached the child:\n%s", out)
		}
	}
	t.Run("run", func(t *testing.T) {
		t.Parallel()
		at := a.call(t, env, runFlags("sh"), "run", runArgs(t, []string{"sh", "-c", script}, nil))
		if ranOrUnpublished(t, at) {
			at.want(t, "executed", "")
			check(t, at.result())
		}
	})
	t.Run("exec", func(t *testing.T) {
		t.Parallel()
		r := a.exec(t, env, "--", "sh", "-c", script)
		if !atkExecution() {
			execRefused(t, r)
			return
		}
		check(t, r.stdout+r.stderr)
	})
	t.Cleanup(func() { a.checkOutside(t) })
}

// TestAttackExecEnvScrubbed: the child's environment is exactly PATH, HOME,
// TMPDIR, LANG, TERM and what --pass-env names, read by the program from
// /proc/self/environ (the kernel's copy).
func TestAttackExecEnvScrubbed(t *testing.T) {
	t.Parallel()
	a := newAtkWS(t)
	self := atkSelf(t)
	env := []string{"B10X_FAKE_KEY=" + atkSecret, "OPENAI_API_KEY=" + atkSecret, "AWS_SECRET_ACCESS_KEY=" + atkSecret,
		"SSH_AUTH_SOCK=/tmp/agent.sock", "GIT_ASKPASS=/tmp/x", "KEEP_ME=kept", "PATH=" + a.ws + ":" + os.Getenv("PATH")}
	check := func(t *testing.T, out string) {
		t.Helper()
		line := ""
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, "environ=[") {
				line = strings.TrimSuffix(strings.TrimPrefix(l, "environ=["), "]")
			}
		}
		if line == "" {
			t.Fatalf("the probe printed no environment:\n%s", out)
		}
		var names []string
		for _, h := range strings.Split(line, ",") {
			b, err := hex.DecodeString(h)
			must(t, err)
			name, value, _ := strings.Cut(string(b), "=")
			names = append(names, name)
			switch name {
			case "PATH":
				if strings.Contains(value, a.ws) {
					t.Errorf("the child's PATH names the workspace: %s", value)
				}
			case "KEEP_ME":
				if value != "kept" {
					t.Errorf("KEEP_ME=%s", value)
				}
			}
		}
		if got := strings.Join(names, ","); got != "PATH,HOME,TMPDIR,LANG,TERM,KEEP_ME" {
			t.Fatalf("the child's environment holds %s", got)
		}
	}
	t.Run("run", func(t *testing.T) {
		t.Parallel()
		at := a.call(t, env, append(runFlags(self), "--pass-env", "KEEP_ME"), "run", runArgs(t, []string{self, atkProbeArg, "environ"}, nil))
		if ranOrUnpublished(t, at) {
			at.want(t, "executed", "")
			check(t, stdoutOf(at.result()))
		}
	})
	t.Run("exec", func(t *testing.T) {
		t.Parallel()
		r := a.exec(t, env, "--pass-env", "KEEP_ME", "--", self, atkProbeArg, "environ")
		if !atkExecution() {
			execRefused(t, r)
			return
		}
		if r.code != 0 || strings.Contains(r.stdout+r.stderr, atkSecret) {
			t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		check(t, r.stdout)
	})
}

// TestAttackExecNothingSurvives: setsid and a double fork leave nothing
// behind after the call, nor after its timeout.
func TestAttackExecNothingSurvives(t *testing.T) {
	t.Parallel()
	a := newAtkWS(t)
	// The detector must see a live sleep, or its "nothing" means nothing.
	u0 := atkUnique(t)
	own := exec.Command("sleep", "1000."+u0)
	must(t, own.Start())
	// Right after fork the child may not have exec'd sleep yet (seconds,
	// under emulation): wait for it.
	for deadline := time.Now().Add(10 * time.Second); len(atkProcs("1000."+u0)) != 1; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the process detector does not see a live sleep")
		}
	}
	own.Process.Kill()
	own.Wait()

	escape := func(u string) string {
		return fmt.Sprintf(`(setsid sh -c "sleep 1000.%[1]s & sleep 1000.%[1]s" &); (sleep 1000.%[1]s &) ; setsid sleep 1000.%[1]s & echo started`, u)
	}
	t.Run("after the call", func(t *testing.T) {
		t.Parallel()
		u := atkUnique(t)
		at := a.call(t, nil, runFlags("sh"), "run", runArgs(t, []string{"sh", "-c", escape(u)}, nil))
		if !ranOrUnpublished(t, at) {
			return
		}
		at.want(t, "executed", "")
		if left := atkProcs("1000." + u); len(left) > 0 {
			atkReap("1000." + u)
			t.Fatalf("survived the end of the call: %v", left)
		}
	})
	t.Run("after the timeout", func(t *testing.T) {
		t.Parallel()
		u := atkUnique(t)
		// The program must start before the deadline: under emulation a
		// call's setup alone has taken more than a second.
		deadline := 1
		if testenv.InVM() {
			deadline = 6
		}
		at := a.call(t, nil, runFlags("sh"), "run", runArgs(t, []string{"sh", "-c", escape(u) + "; sleep 1000." + u}, map[string]any{"timeout_s": deadline}))
		if !ranOrUnpublished(t, at) {
			return
		}
		at.want(t, "failed", "timeout")
		if at.meta()["timed_out"] != true {
			t.Fatalf("meta %v", at.meta())
		}
		if left := atkProcs("1000." + u); len(left) > 0 {
			atkReap("1000." + u)
			t.Fatalf("survived the timeout: %v", left)
		}
	})
}

// TestAttackExecForkBomb: where pids.max exists (debian-6.1) a real fork
// bomb is bounded by --pids-max 64, the harness answers and the outcome
// says so. Where it does not (this host), strict refuses to start, and
// auto still kills a large tree whole at its timeout.
func TestAttackExecForkBomb(t *testing.T) {
	t.Parallel()
	a := newAtkWS(t)
	pids := atkLayer(t, "pids-limit")
	bomb := func(u string) []string {
		return []string{"sh", "-c", "echo started > started; f(){ f | f & }; while :; do f; done", "bomb-" + u}
	}
	if !atkExecution() {
		ranOrUnpublished(t, a.call(t, nil, runFlags("sh"), "run", runArgs(t, bomb(atkUnique(t)), nil)))
		return
	}
	t.Run("strict without pids.max refuses to start", func(t *testing.T) {
		t.Parallel()
		testenv.Require(t, !pids, "a shape without pids.max", atkHasController(t, "pids")...)
		u := atkUnique(t)
		r := atkHarness(t, nil, "", append([]string{"call", "--workspace", a.ws, "--confine", "strict", "--pids-max", "64"},
			append(progFlags("sh"), "run", runArgs(t, bomb(u), map[string]any{"timeout_s": 3}))...)...)
		if r.code != exitUsage || r.stdout != "" || !strings.Contains(r.stderr, "layer pids-limit missing") {
			t.Fatalf("exit %d stdout %q stderr %s", r.code, r.stdout, r.stderr)
		}
		if _, err := os.Stat(filepath.Join(a.ws, "started")); err == nil {
			t.Fatal("the bomb ran although strict refused")
		}
	})
	t.Run("an asked limit the host cannot enforce refuses to start", func(t *testing.T) {
		t.Parallel()
		testenv.Require(t, !pids, "a shape without pids.max", atkHasController(t, "pids")...)
		u := atkUnique(t)
		for _, args := range [][]string{
			append([]string{"call", "--workspace", a.ws, "--pids-max", "64"}, append(progFlags("sh"), "run", runArgs(t, bomb(u), map[string]any{"timeout_s": 3}))...),
			{"exec", "--workspace", a.ws, "--pids-max=64", "--", "/bin/sh", "-c", "echo started > started"},
		} {
			r := atkHarness(t, nil, "", args...)
			if r.code != usageStatus(args) || r.stdout != "" || !strings.Contains(r.stderr, "--pids-max was given but cannot be enforced") || !strings.Contains(r.stderr, "pids") {
				t.Fatalf("%s: exit %d stdout %q stderr %s", args[0], r.code, r.stdout, r.stderr)
			}
			if _, err := os.Stat(filepath.Join(a.ws, "started")); err == nil {
				t.Fatalf("%s: the program ran although the asked limit cannot hold", args[0])
			}
		}
	})
	t.Run("bounded by pids.max", func(t *testing.T) {
		t.Parallel()
		testenv.Require(t, pids, "pids.max for run calls", atkNoController(t, "pids")...)
		u := atkUnique(t)
		at := a.callAlone(t, slices.Concat(atkStrictFlags, atkLimitFlags, []string{"--pids-max", "64"}, progFlags("sh")), "run",
			runArgs(t, bomb(u), map[string]any{"timeout_s": 3}))
		// The bomb ends at the timeout, or earlier when the shell gives up
		// on a failed fork; either way the harness answered.
		if at.out["status"] != "executed" {
			at.want(t, "failed", "timeout")
		}
		t.Logf("fork bomb outcome %v/%v, meta %v", at.out["status"], at.out["reason"], at.meta())
		peak, ok := at.meta()["pids_peak"].(float64)
		if !ok || peak > 64 || peak < 32 {
			t.Fatalf("pids_peak %v: the bomb was not bounded at 64 (or never reached it)", at.meta()["pids_peak"])
		}
		if left := atkProcs("bomb-" + u); len(left) > 0 {
			atkReap("bomb-" + u)
			t.Fatalf("the bomb survived: %d processes", len(left))
		}
		if err := exec.Command("sh", "-c", "true").Run(); err != nil {
			t.Fatalf("the host cannot start a process after the bomb: %v", err)
		}
	})
	t.Run("a large tree is killed whole at the timeout", func(t *testing.T) {
		t.Parallel()
		// 63 shells, each with a sleeping child: a bomb with a bound, safe
		// on a host without pids.max.
		u := atkUnique(t)
		tree := fmt.Sprintf(`t(){ echo x >> nodes; if [ $1 -gt 0 ]; then t $(($1-1)) & t $(($1-1)) & fi; sleep 1000.%s; }; t 5`, u)
		flags := runFlags("sh")
		if pids {
			// An asked limit must hold: it is asked only where it can.
			flags = append([]string{"--pids-max", "512"}, flags...)
		}
		at := a.call(t, nil, flags, "run",
			runArgs(t, []string{"sh", "-c", tree}, map[string]any{"timeout_s": 10, "cwd": "sub"}))
		at.want(t, "failed", "timeout")
		if left := atkProcs("1000." + u); len(left) > 0 {
			atkReap("1000." + u)
			t.Fatalf("%d processes of the tree survived the timeout", len(left))
		}
		b, err := os.ReadFile(filepath.Join(a.ws, "sub", "nodes"))
		must(t, err)
		if n := bytes.Count(b, []byte("x")); n != 63 {
			t.Fatalf("the tree had %d nodes, want 63: the test did not build it", n)
		}
	})
}

// TestAttackExecMemoryBomb: where memory.max exists (debian-6.1) a program
// allocating 256 MiB under --memory-max 64MiB is killed and the outcome
// says oom_killed. Where it does not, strict refuses to start (the bomb is
// not run unbounded on a shared host).
func TestAttackExecMemoryBomb(t *testing.T) {
	t.Parallel()
	a := newAtkWS(t)
	self := atkSelf(t)
	mem := atkLayer(t, "memory-limit")
	argv := []string{self, atkProbeArg, "alloc", "256"}
	if !atkExecution() {
		ranOrUnpublished(t, a.call(t, nil, runFlags(self), "run", runArgs(t, argv, nil)))
		return
	}
	flags := slices.Concat(atkStrictFlags, atkLimitFlags, []string{"--memory-max", "64MiB"}, progFlags(self))
	if !mem {
		r := atkHarness(t, nil, "", append([]string{"call", "--workspace", a.ws}, append(flags, "run", runArgs(t, argv, nil))...)...)
		if r.code != exitUsage || r.stdout != "" || !strings.Contains(r.stderr, "layer memory-limit missing") {
			t.Fatalf("exit %d stdout %q stderr %s", r.code, r.stdout, r.stderr)
		}
	}
	testenv.Require(t, mem, "memory.max for run calls", atkNoController(t, "memory")...)
	at := a.callAlone(t, flags, "run", runArgs(t, argv, map[string]any{"timeout_s": 60}))
	at.want(t, "failed", "tool_error")
	t.Logf("memory bomb outcome: %v", at.meta())
	if at.meta()["oom_killed"] != true || strings.Contains(at.result()+fmt.Sprint(at.out["message"]), "alloc=done") {
		t.Fatalf("the memory bomb was not stopped by memory.max: %v\n%v", at.meta(), at.out["message"])
	}
	if peak, ok := at.meta()["memory_peak_bytes"].(float64); !ok || peak > 80<<20 {
		t.Fatalf("memory_peak_bytes %v with memory.max 64 MiB", at.meta()["memory_peak_bytes"])
	}
}

// TestAttackExecStrictWhereAvailable: --confine strict, for run and for
// exec, with the harness alone in a cgroup of its own as a CI job's is. In
// the shapes expected to offer every layer it starts, and the child is
// confined by every layer with its limits; elsewhere it refuses to start
// (exit 2, nothing on stdout, the program never run), naming exactly the
// layers this shape lacks.
func TestAttackExecStrictWhereAvailable(t *testing.T) {
	t.Parallel()
	a := newAtkWS(t)
	flags := slices.Concat(atkStrictFlags, atkLimitFlags)
	argv := []string{"sh", "-c", "echo ran >> ran; echo strict-ran"}
	ran := func() bool {
		_, err := os.Stat(filepath.Join(a.ws, "ran"))
		return err == nil
	}
	if atkStrict() {
		at := a.call(t, nil, append(flags, progFlags("sh")...), "run", runArgs(t, argv, nil))
		at.want(t, "executed", "")
		t.Logf("LAYERS: %v", at.meta()["layers"])
		r := a.exec(t, nil, append([]string{"--"}, argv...)...)
		if r.code != 0 || !strings.Contains(r.stdout, "strict-ran") {
			t.Fatalf("exec --confine strict: exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
		}
		if !ran() {
			t.Fatal("the program did not run")
		}
		return
	}
	missing, known := strictMissing[testenv.Shape()]
	if testenv.Shape() == testenv.ShapeHost {
		missing, known = hostStrictMissing(t), true
	}
	refused := func(t *testing.T, r atkRun, want int) {
		t.Helper()
		if r.code != want || r.stdout != "" {
			t.Fatalf("strict started in shape %s (exit %d)\nstdout %s\nstderr %s", testenv.Shape(), r.code, r.stdout, r.stderr)
		}
		var named []string
		for _, l := range strings.Split(r.stderr, "\n") {
			if rest, ok := strings.CutPrefix(l, "confine strict: layer "); ok {
				name, _, _ := strings.Cut(rest, " ")
				named = append(named, name)
			}
		}
		switch {
		case known && !slices.Equal(named, missing):
			t.Fatalf("strict named %v, want exactly %v\n%s", named, missing, r.stderr)
		case !known && !slices.Contains(named, "userns"):
			// no-userns: unprivileged, without user namespaces.
			t.Fatalf("strict named %v, want userns among them\n%s", named, r.stderr)
		}
		for _, l := range named {
			if atkLayer(t, l) {
				t.Errorf("strict named %s missing, but doctor reports it available", l)
			}
		}
		if ran() {
			t.Fatal("the program ran although strict refused")
		}
	}
	t.Run("run", func(t *testing.T) {
		t.Parallel()
		argvCall := slices.Concat([]string{"call", "--workspace", a.ws}, flags, progFlags("sh"), []string{"run", runArgs(t, argv, nil)})
		r, err := atkStartIn(atkAloneCgroup(t), nil, "", argvCall...)
		must(t, err)
		refused(t, r, exitUsage)
	})
	t.Run("exec", func(t *testing.T) {
		t.Parallel()
		r, err := atkStartIn(atkAloneCgroup(t), nil, "", slices.Concat([]string{"exec", "--workspace", a.ws}, flags, []string{"--"}, argv)...)
		must(t, err)
		refused(t, r, exitSetupError)
	})
}

// TestAttackExecCPULimit: a program that spins on two threads under
// --cpu-max 0.2 gets no more CPU time than the quota allows (what it
// measured of itself), so the cpu-limit layer the outcome reports is a
// limit really set: unlimited, the same spin uses up to twice its wall
// time. (A smaller quota makes the start of the helper and the program,
// which run in the leaf too, take tens of seconds under emulation.)
func TestAttackExecCPULimit(t *testing.T) {
	t.Parallel()
	a := newAtkWS(t)
	self := atkSelf(t)
	argv := []string{self, atkProbeArg, "spin", "1500ms"}
	if !atkExecution() {
		ranOrUnpublished(t, a.call(t, nil, runFlags(self), "run", runArgs(t, argv, nil)))
		return
	}
	testenv.Require(t, atkLayer(t, "cpu-limit"), "cpu.max for run calls", atkNoController(t, "cpu")...)
	at := a.callAlone(t, slices.Concat(atkStrictFlags, []string{"--cpu-max", "0.2"}, progFlags(self)), "run", runArgs(t, argv, nil))
	at.want(t, "executed", "")
	line := strings.TrimSpace(stdoutOf(at.result()))
	var wall, cpu time.Duration
	if _, err := fmt.Sscanf(line, "spin=%d,%d", &wall, &cpu); err != nil || wall < 1500*time.Millisecond {
		t.Fatalf("the spinner printed %q: %v", line, err)
	}
	t.Logf("spun %v of wall time on two threads under --cpu-max 0.2, using %v of CPU; layers %v", wall, cpu, at.meta()["layers"])
	// 20% of the wall time spun, plus one period and slack.
	if limit := wall/5 + 200*time.Millisecond; cpu > limit || cpu <= 0 {
		t.Fatalf("spinning %v under a 20%% quota used %v of CPU, want (0, %v]", wall, cpu, limit)
	}
}

// maxRSS is a finished process's peak resident set in bytes.
func maxRSS(t *testing.T, ps *os.ProcessState) int64 {
	t.Helper()
	ru, ok := ps.SysUsage().(*syscall.Rusage)
	if !ok {
		t.Fatal("no rusage")
	}
	return ru.Maxrss << 10
}

// TestAttackExecOutputFlood: `yes` until the timeout through run, and
// through exec, which streams: the output is capped or passed through, and
// the harness's own memory stays bounded (its peak RSS, from wait4).
func TestAttackExecOutputFlood(t *testing.T) {
	t.Parallel()
	a := newAtkWS(t)
	if !atkExecution() {
		ranOrUnpublished(t, a.call(t, nil, runFlags("yes"), "run", runArgs(t, []string{"yes"}, nil)))
		return
	}
	const bound = 96 << 20
	t.Run("run", func(t *testing.T) {
		t.Parallel()
		// The baseline call must get its program started before its
		// timeout: in the VM shapes (emulated CPUs, tests in parallel) a
		// call's setup alone has taken more than a second.
		baseFor := 3
		if testenv.InVM() {
			baseFor = 10 // the cgroup-v1 shape's setup took over 3 s beside other shapes
		}
		base := a.call(t, nil, runFlags("yes"), "run", runArgs(t, []string{"yes", "short"}, map[string]any{"timeout_s": baseFor}))
		// Two seconds of flood here; ten under emulation, where the
		// sandbox's setup can take most of two (the cgroup-v1 shape's
		// yes wrote 388 KiB in what was left).
		floodFor := 2
		if testenv.InVM() {
			floodFor = 10
		}
		at := a.call(t, nil, append(runFlags("yes"), "--max-output", "16KiB"), "run", runArgs(t, []string{"yes"}, map[string]any{"timeout_s": floodFor}))
		at.want(t, "failed", "timeout")
		produced, _ := at.meta()["stdout_bytes"].(float64)
		rss, baseRSS := maxRSS(t, at.run.state), maxRSS(t, base.run.state)
		t.Logf("yes produced %.0f bytes; harness peak RSS %d KiB (a short call: %d KiB); outcome %d bytes", produced, rss>>10, baseRSS>>10, len(at.run.stdout))
		// 32 times the cap at least (the emulated CPU of the VM shapes
		// manages about 1 MB in the two seconds; this host hundreds).
		if produced < 32*16<<10 {
			t.Fatalf("yes produced only %.0f bytes: the flood did not happen", produced)
		}
		if len(at.run.stdout) > 256<<10 {
			t.Fatalf("the outcome is %d bytes: the output was not capped", len(at.run.stdout))
		}
		if rss > bound || rss > baseRSS+32<<20 {
			t.Fatalf("harness peak RSS %d KiB under a flood (a short call: %d KiB)", rss>>10, baseRSS>>10)
		}
	})
	t.Run("exec", func(t *testing.T) {
		t.Parallel()
		// As for run: under emulation the sandbox's setup alone can take
		// two seconds, and a limit that falls before yes starts is 125.
		limit := "2s"
		if testenv.InVM() {
			limit = "10s"
		}
		e := a.execPrepare(t, nil, "--timeout", limit, "--", "yes")
		cmd := e.cmd
		var n countingWriter
		var stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &n, &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != exitTimeout {
			t.Fatalf("exec of yes: %v %s", err, stderr.String())
		}
		e.check(t, atkRun{code: ee.ExitCode(), stderr: stderr.String()})
		rss := maxRSS(t, cmd.ProcessState)
		t.Logf("exec streamed %d bytes; harness peak RSS %d KiB", n.n.Load(), rss>>10)
		if n.n.Load() < 32*16<<10 || rss > bound {
			t.Fatalf("streamed %d bytes with peak RSS %d KiB", n.n.Load(), rss>>10)
		}
	})
}

type countingWriter struct{ n atomic.Int64 }

func (c *countingWriter) Write(p []byte) (int, error) { c.n.Add(int64(len(p))); return len(p), nil }

// tcpListener listens on 127.0.0.1 with plain TCP (not MPTCP) and counts
// what arrives.
type tcpListener struct {
	l     net.Listener
	conns atomic.Int64
}

func listenTCP(t *testing.T) *tcpListener {
	t.Helper()
	var lc net.ListenConfig
	lc.SetMultipathTCP(false)
	l, err := lc.Listen(t.Context(), "tcp4", "127.0.0.1:0")
	must(t, err)
	tl := &tcpListener{l: l}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			tl.conns.Add(1)
			c.Close()
		}
	}()
	t.Cleanup(func() { l.Close() })
	return tl
}

func (tl *tcpListener) port() int { return tl.l.Addr().(*net.TCPAddr).Port }

// TestAttackExecNetwork: under the default --net none nothing reaches the
// test's listeners or the outside, whatever the tool; --net host is the
// control that shows the same probe does connect when allowed.
func TestAttackExecNetwork(t *testing.T) {
	t.Parallel()
	a := newAtkWS(t)
	self := atkSelf(t)
	tcp := listenTCP(t)
	udp, err := net.ListenPacket("udp4", "127.0.0.1:0")
	must(t, err)
	t.Cleanup(func() { udp.Close() })
	var datagrams atomic.Int64
	go func() {
		buf := make([]byte, 2048)
		for {
			if _, _, err := udp.ReadFrom(buf); err != nil {
				return
			}
			datagrams.Add(1)
		}
	}()
	tp, upt := tcp.port(), udp.LocalAddr().(*net.UDPAddr).Port
	probes := []string{
		fmt.Sprintf("tcp:127.0.0.1:%d", tp),
		fmt.Sprintf("udp:127.0.0.1:%d", upt),
		"tcp:1.1.1.1:443", "udp:1.1.1.1:53", "udp:8.8.8.8:53", "icmp:1.1.1.1", "vsock", "iouring",
	}
	at := a.call(t, nil, runFlags(self), "run", runArgs(t, append([]string{self, atkProbeArg}, probes...), nil))
	if !ranOrUnpublished(t, at) {
		return
	}
	at.want(t, "executed", "")
	got := atkProbes(stdoutOf(at.result()))
	for _, p := range probes {
		r, ok := got[p]
		switch {
		case !ok:
			t.Errorf("probe %s printed nothing:\n%s", p, at.result())
		case r == "ok" && !strings.HasPrefix(p, "udp:127.0.0.1"):
			// A datagram to 127.0.0.1 is sent on the call's own loopback;
			// that it never arrives is checked below.
			t.Errorf("%s succeeded under --net none", p)
		}
	}
	t.Logf("probes under --net none: %v", got)

	script := fmt.Sprintf(`echo x > /dev/tcp/127.0.0.1/%[1]d; echo devtcp=$?
if command -v nc >/dev/null; then echo hello | nc -w 2 127.0.0.1 %[1]d; echo nc=$?; else echo nc=absent; fi
if command -v wget >/dev/null; then wget -T 2 -q -O - http://127.0.0.1:%[1]d/; echo wget=$?; else echo wget=absent; fi
if command -v curl >/dev/null; then curl -m 2 -s http://127.0.0.1:%[1]d/; echo curl=$?; else echo curl=absent; fi
echo done`, tp)
	sh := a.call(t, nil, runFlags("sh"), "run", runArgs(t, []string{"sh", "-c", script}, nil))
	sh.want(t, "executed", "")
	t.Logf("tools under --net none: %q", stdoutOf(sh.result()))
	time.Sleep(300 * time.Millisecond)
	if n, d := tcp.conns.Load(), datagrams.Load(); n != 0 || d != 0 {
		t.Fatalf("the test's listeners were reached under --net none: %d connections, %d datagrams", n, d)
	}

	// The control: with --net host the very same probe connects.
	ctl := a.call(t, nil, append(runFlags(self), "--net", "host"), "run", runArgs(t, []string{self, atkProbeArg, probes[0]}, nil))
	ctl.want(t, "executed", "")
	if r := atkProbes(stdoutOf(ctl.result()))[probes[0]]; r != "ok" {
		t.Fatalf("with --net host the probe could not connect (%s): the probe is broken", r)
	}
	deadline := time.Now().Add(2 * time.Second)
	for tcp.conns.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if tcp.conns.Load() != 1 {
		t.Fatalf("with --net host the listener saw %d connections, want 1", tcp.conns.Load())
	}
}

// TestAttackExecSignals: the child cannot signal or ptrace the test or a
// process the test started; it can signal itself (the control).
func TestAttackExecSignals(t *testing.T) {
	t.Parallel()
	a := newAtkWS(t)
	self := atkSelf(t)
	u := atkUnique(t)
	victim := exec.Command("sleep", "1000."+u)
	must(t, victim.Start())
	t.Cleanup(func() { victim.Process.Kill(); victim.Wait() })
	me, vp := os.Getpid(), victim.Process.Pid
	probes := []string{"killself", fmt.Sprintf("kill0:%d", me), fmt.Sprintf("kill0:%d", vp), fmt.Sprintf("sigkill:%d", vp),
		fmt.Sprintf("ptrace:%d", vp), fmt.Sprintf("ptrace:%d", me)}
	at := a.call(t, nil, runFlags(self), "run", runArgs(t, append([]string{self, atkProbeArg}, probes...), nil))
	if !ranOrUnpublished(t, at) {
		return
	}
	at.want(t, "executed", "")
	got := atkProbes(stdoutOf(at.result()))
	t.Logf("probes: %v", got)
	if got["killself"] != "ok" {
		t.Fatalf("the control failed: kill(self, 0) = %s", got["killself"])
	}
	for _, p := range probes[1:] {
		if got[p] == "ok" || got[p] == "" {
			t.Errorf("%s: %q", p, got[p])
		}
	}
	sh := a.call(t, nil, runFlags("sh"), "run", runArgs(t, []string{"sh", "-c",
		fmt.Sprintf("kill -0 %d; echo kill0=$?; kill -9 %d; echo kill9=$?; kill -9 -1; echo killall=$?", me, vp)}, nil))
	sh.want(t, "executed", "")
	out := stdoutOf(sh.result())
	if !strings.Contains(out, "kill0=1") || !strings.Contains(out, "kill9=1") {
		t.Fatalf("kill from sh succeeded:\n%s", out)
	}
	if err := victim.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("the victim is gone: %v", err)
	}
	if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", vp)); err != nil || bytes.Contains(st, []byte(") Z ")) {
		t.Fatalf("the victim was killed: %s %v", st, err)
	}
}

// TestAttackExecUnixSockets: abstract and pathname unix sockets the test
// listens on outside the workspace are unreachable from the child. Under
// --net host the abstract socket is shared with the host's network
// namespace and only Landlock's scoping (ABI 6) keeps the child out.
func TestAttackExecUnixSockets(t *testing.T) {
	t.Parallel()
	a := newAtkWS(t)
	self := atkSelf(t)
	u := atkUnique(t)
	accepted := map[string]*atomic.Int64{}
	listen := func(probe, addr string) {
		l, err := net.Listen("unix", addr)
		must(t, err)
		t.Cleanup(func() { l.Close() })
		n := new(atomic.Int64)
		accepted[probe] = n
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				n.Add(1)
				io.Copy(io.Discard, c)
				c.Close()
			}
		}()
	}
	abstract := "b10x-attack-" + u
	hostTmp := filepath.Join(os.TempDir(), "b10x-attack-"+u+".sock")
	t.Cleanup(func() { os.Remove(hostTmp) })
	listen("abstract:"+abstract, "@"+abstract)
	listen("unix:"+filepath.Join(a.base, "outdir", "agent.sock"), filepath.Join(a.base, "outdir", "agent.sock"))
	listen("unix:"+hostTmp, hostTmp)
	var probes []string
	for p := range accepted {
		probes = append(probes, p)
	}
	for _, mode := range []string{"none", "host"} {
		t.Run("net "+mode, func(t *testing.T) {
			at := a.call(t, nil, append(runFlags(self), "--net", mode), "run", runArgs(t, append([]string{self, atkProbeArg}, probes...), nil))
			if !ranOrUnpublished(t, at) {
				return
			}
			at.want(t, "executed", "")
			got := atkProbes(stdoutOf(at.result()))
			t.Logf("probes: %v", got)
			time.Sleep(200 * time.Millisecond)
			for _, p := range probes {
				if mode == "host" && strings.HasPrefix(p, "abstract:") && atkLandlockABI(t) < 6 {
					t.Logf("%s under --net host on Landlock ABI %d (no scoping): %s", p, atkLandlockABI(t), got[p])
					accepted[p].Store(0)
					continue
				}
				if got[p] == "ok" || got[p] == "" || accepted[p].Load() != 0 {
					t.Errorf("%s: %q, %d accepted", p, got[p], accepted[p].Load())
				}
			}
		})
	}
}

// TestAttackExecUnixSocketInWorkspace: a listener outside the sandbox whose
// pathname socket lies in the workspace. From Landlock ABI 9 the child's
// domain handles resolve_unix and grants it nowhere, so the connection is
// refused; below it nothing but the socket's own permissions governs
// connect(2), and the harness declares the limitation instead, in doctor
// (text and --json) and in the run tool's description
// (docs/decisions/0047-unix-sockets.md). Whether protection is due comes
// from the kernel's ABI asked with the raw system call; the test fails
// where doctor claims protection the kernel cannot give, where the kernel
// could give it and doctor does not claim it, and where protection is
// claimed but the child connects.
func TestAttackExecUnixSocketInWorkspace(t *testing.T) {
	t.Parallel()
	a := newAtkWS(t)
	self := atkSelf(t)
	sock := filepath.Join(a.ws, "daemon.sock")
	l, err := net.Listen("unix", sock)
	must(t, err)
	t.Cleanup(func() { l.Close() })
	var accepted atomic.Int64
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	at := a.call(t, nil, runFlags(self), "run", runArgs(t, []string{self, atkProbeArg, "unix:" + sock}, nil))
	if !ranOrUnpublished(t, at) {
		return
	}
	at.want(t, "executed", "")
	got := atkProbes(stdoutOf(at.result()))["unix:"+sock]

	abi, err := testenv.LandlockABI()
	must(t, err)
	due := abi >= 9 && atkLayer(t, "landlock-child")
	r, err := atkStartIn(-1, nil, "", "doctor", "--json", "--workspace", a.ws)
	must(t, err)
	var d struct {
		Scoped *bool  `json:"run_unix_sockets_scoped"`
		Words  string `json:"run_unix_sockets"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &d); err != nil || d.Scoped == nil || d.Words == "" {
		t.Fatalf("doctor --json says nothing of unix sockets (%v):\n%s", err, r.stdout)
	}
	text, err := atkStartIn(-1, nil, "", "doctor", "--workspace", a.ws)
	must(t, err)
	fd := -1
	if atkIsStrict(runFlags(self)) {
		fd = atkAloneCgroup(t)
	}
	tl, err := atkStartIn(fd, nil, "", append([]string{"tools", "--surface", "flat", "--workspace", a.ws, "--json"}, runFlags(self)...)...)
	must(t, err)
	var defs []struct {
		Name        string `json:"name"`
		Description string `json:"description"`
	}
	if err := json.Unmarshal([]byte(tl.stdout), &defs); err != nil {
		t.Fatalf("tools --json: %v\n%s%s", err, tl.stdout, tl.stderr)
	}
	desc := ""
	for _, def := range defs {
		if def.Name == "run" {
			desc = def.Description
		}
	}
	t.Logf("connect to a host listener's socket in the workspace: %s (%d accepted); kernel Landlock ABI %d; doctor: scoped %v, %q", got, accepted.Load(), abi, *d.Scoped, d.Words)
	switch {
	case *d.Scoped != due:
		t.Fatalf("doctor --json says run_unix_sockets_scoped %v, but the kernel's Landlock ABI is %d (scoping needs 9 and a Landlock domain for the child)", *d.Scoped, abi)
	case due:
		if got != "EACCES" || accepted.Load() != 0 {
			t.Fatalf("protection claimed, but the child reached a listener outside the sandbox through a socket in the workspace: %s, %d accepted", got, accepted.Load())
		}
	default:
		// Declared: every place the limitation must be said says it.
		const mark = "Unix sockets are NOT confined"
		if !strings.Contains(d.Words, mark) || !strings.Contains(text.stdout, mark) || !strings.Contains(desc, mark) {
			t.Fatalf("the limitation is not declared everywhere: doctor --json %q; doctor text has it: %v; run description %q", d.Words, strings.Contains(text.stdout, mark), desc)
		}
		t.Logf("declared limitation, observed: the child's connect gave %s", got)
	}
}

// TestAttackExecLeavesNoCgroup: a harness started alone in a cgroup makes
// its cgroups beneath it for a run call; once the call has returned and
// the harness has exited, nothing of them is left (nothing to sweep).
func TestAttackExecLeavesNoCgroup(t *testing.T) {
	t.Parallel()
	a := newAtkWS(t)
	fd := atkAloneCgroup(t)
	at := a.callIn(t, fd, runFlags("sh"), "run", runArgs(t, []string{"sh", "-c", "echo hi"}, nil))
	if !ranOrUnpublished(t, at) {
		return
	}
	at.want(t, "executed", "")
	if fd < 0 || !atkLayer(t, "cgroup-leaf") {
		t.Logf("no cgroup2 leaves here: run calls end with their PID namespace")
		return
	}
	if left := atkSubCgroups(atkAloneDir(t, fd)); len(left) > 0 {
		t.Fatalf("the harness exited and left its cgroups behind: %v", left)
	}
}

// TestAttackExecHarnessKilled: the harness is SIGKILLed while a call's tree
// (with setsid'd and double-forked members) runs: within a second nothing
// of the tree is left.
//
// Under strict (where the shape has it) the harness runs alone in a cgroup
// of its own, as a CI job's does; once killed, that cgroup must hold no
// process at all. A next harness cannot start in that cgroup (the killed
// one enabled controllers for its children there, and cgroup v2 then admits
// no process), so the sweep of the stale leaf at the next start is shown
// under auto, with the harness in the test's own cgroup.
func TestAttackExecHarnessKilled(t *testing.T) {
	t.Parallel()
	a := newAtkWS(t)
	if atkStrict() {
		t.Run("strict", func(t *testing.T) {
			t.Parallel()
			fd := atkAloneCgroup(t)
			if fd < 0 {
				t.Fatal("no cgroup of its own for a strict harness")
			}
			killMidCall(t, a, fd, runFlags("sh"))
			events := filepath.Join(atkAloneDir(t, fd), "cgroup.events")
			for deadline := time.Now().Add(time.Second); ; time.Sleep(10 * time.Millisecond) {
				b, err := os.ReadFile(events)
				must(t, err)
				if bytes.Contains(b, []byte("populated 0")) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("1 s after the tree was gone, the killed harness's cgroup still holds processes: %s\n%v",
						b, atkSubCgroups(atkAloneDir(t, fd)))
				}
			}
			// For the record: what a next harness started there meets.
			_, err := atkStartIn(fd, nil, "", "call", "--workspace", a.ws, "file_read", `{"path":"hello.txt"}`)
			t.Logf("a next harness started in the killed one's cgroup: %v; left there: %v", err, atkSubCgroups(atkAloneDir(t, fd)))
		})
	}
	t.Run("auto, then the next start sweeps", func(t *testing.T) {
		t.Parallel()
		pid := killMidCall(t, a, -1, progFlags("sh"))
		if pid == 0 {
			return
		}
		// The killed harness could not remove its cgroup; the next harness
		// that opens one sweeps it.
		mount, self := atkCgroup2(t)
		if mount == "" {
			t.Logf("no cgroup2 here: the tree died with its PID namespace; no cgroup to sweep")
			return
		}
		stale, _ := filepath.Glob(filepath.Join(mount, self, fmt.Sprintf("b10x-%d-*", pid)))
		t.Logf("cgroup left by the killed harness: %v", stale)
		next := a.call(t, nil, progFlags("sh"), "run", runArgs(t, []string{"sh", "-c", "true"}, nil))
		next.want(t, "executed", "")
		for _, d := range stale {
			if _, err := os.Stat(d); err == nil {
				t.Fatalf("the next harness did not sweep %s", d)
			}
		}
	})
}

// killMidCall starts `call run` with flags (in the cgroup cgroupFD, -1: the
// test's own) whose tree holds setsid'd and double-forked sleeps, SIGKILLs
// the harness once they run, and asserts that within a second nothing of
// the tree is left. It returns the killed harness's pid, or 0 where run is
// unpublished (asserted).
func killMidCall(t *testing.T, a *atkWS, cgroupFD int, flags []string) int {
	t.Helper()
	u := atkUnique(t)
	script := fmt.Sprintf(`setsid sleep 1000.%[1]s & sleep 1000.%[1]s & (setsid sh -c "sleep 1000.%[1]s &" &); echo started; wait`, u)
	cmd := atkCmd(nil, "", slices.Concat([]string{"call", "--workspace", a.ws}, flags, []string{"run", runArgs(t, []string{"sh", "-c", script}, nil)})...)
	if cgroupFD >= 0 {
		cmd.SysProcAttr.UseCgroupFD = true
		cmd.SysProcAttr.CgroupFD = cgroupFD
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	must(t, cmd.Start())
	if !atkExecution() {
		cmd.Wait()
		if !strings.Contains(out.String(), `"reason":"unpublished"`) {
			t.Fatalf("run should be unpublished here: %s", out.String())
		}
		return 0
	}
	t.Cleanup(func() { atkReap("1000." + u) })
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	deadline := time.NewTimer(60 * time.Second)
	defer deadline.Stop()
	for len(atkProcs("1000."+u)) < 3 {
		select {
		case <-exited:
			t.Fatalf("the harness ended before the tree started: %s", out.String())
		case <-deadline.C:
			cmd.Process.Kill()
			<-exited
			t.Fatalf("the tree never started: %s", out.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	must(t, cmd.Process.Signal(syscall.SIGKILL))
	killed := time.Now()
	<-exited
	for {
		left := atkProcs("1000." + u)
		if len(left) == 0 {
			t.Logf("the tree was gone %s after the SIGKILL", time.Since(killed).Round(time.Millisecond))
			break
		}
		if time.Since(killed) > time.Second {
			t.Fatalf("1 s after the harness was killed, %d processes of its call remain: %v", len(left), left)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return cmd.Process.Pid
}

// atkHasController is where a shape without controller ctl is missing:
// debian-6.1, and a host whose own cgroup files show that a harness alone
// in a new cgroup beside the test's could enable it.
func atkHasController(t *testing.T, ctl string) []string {
	t.Helper()
	has := []string{testenv.ShapeDebian61, testenv.ShapeDebian612}
	if testenv.Shape() == testenv.ShapeHost {
		cg, err := testenv.ProbeCgroups()
		must(t, err)
		has = append(has, testenv.HostLacks(cg.UsableAlone(ctl))...)
	}
	return has
}

// atkNoController is where a limit's controller may be missing: the
// cgroup-v1 shape, and a host whose own cgroup files (read by the test, not
// through the harness) show that a harness started alone in a new cgroup
// beside the test's could not enable ctl for its leaves.
func atkNoController(t *testing.T, ctl string) []string {
	t.Helper()
	lacking := []string{testenv.ShapeCgroupV1}
	if testenv.Shape() == testenv.ShapeHost {
		cg, err := testenv.ProbeCgroups()
		must(t, err)
		lacking = append(lacking, testenv.HostLacks(!cg.UsableAlone(ctl))...)
	}
	return lacking
}
