package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/b10x/harness/internal/testenv"
)

// Per VM shape: does strict start, and which limit layers are missing (the
// host's list is found by hostStrictMissing).
var strictMissing = map[string][]string{
	testenv.ShapeDebian61:   nil,
	testenv.ShapeDebian612:  nil,
	testenv.ShapeNoLandlock: {"landlock-self", "landlock-child"},
	testenv.ShapeCgroupV1:   {"cgroup-leaf", "pids-limit", "memory-limit", "cpu-limit"},
}

func TestStrictRefusesNamingEachMissingLayer(t *testing.T) {
	ws, _ := sampleWorkspace(t)
	missing, known := strictMissing[testenv.Shape()]
	if testenv.Shape() == testenv.ShapeHost {
		missing, known = hostStrictMissing(t), true
	}
	// Alone in a cgroup of its own, as a CI job's harness is: it can then
	// enable controllers for its leaves where the host delegates them.
	r := harnessIn(t, atkAloneCgroup(t), "", "call", "--workspace", ws, "--confine", "strict", "file_read", `{"path":"hello.txt"}`)
	if !known {
		// no-userns: as an unprivileged user without user namespaces,
		// strict must refuse; which layers exactly is asserted below.
		if r.code != 2 || !strings.Contains(r.stderr, "layer userns missing") {
			t.Fatalf("exit %d stderr %s", r.code, r.stderr)
		}
		return
	}
	if len(missing) == 0 {
		if r.code != 0 {
			t.Fatalf("strict should start in shape %s: exit %d stderr %s", testenv.Shape(), r.code, r.stderr)
		}
		return
	}
	if r.code != 2 || r.stdout != "" {
		t.Fatalf("strict started (exit %d): %s", r.code, r.stdout)
	}
	var named []string
	for _, l := range strings.Split(r.stderr, "\n") {
		if rest, ok := strings.CutPrefix(l, "confine strict: layer "); ok {
			name, _, _ := strings.Cut(rest, " ")
			named = append(named, name)
		}
	}
	if strings.Join(named, ",") != strings.Join(missing, ",") {
		t.Fatalf("strict named %v, want exactly %v\n%s", named, missing, r.stderr)
	}
}

// hostStrictMissing is what strict must name on this machine, found by the
// test itself: the Landlock layers when the kernel answers no Landlock ABI,
// the cgroup leaf without a cgroup2 mount, and each limit whose controller
// a harness alone in a new cgroup beside the test's could not enable
// (testenv.Cgroups.UsableAlone).
func hostStrictMissing(t *testing.T) []string {
	t.Helper()
	missing, err := hostStrictMissingErr()
	must(t, err)
	return missing
}

func hostStrictMissingErr() ([]string, error) {
	var missing []string
	abi, err := testenv.LandlockABI()
	if err != nil {
		return nil, err
	}
	if abi == 0 {
		missing = append(missing, "landlock-self", "landlock-child")
	}
	cg, err := testenv.ProbeCgroups()
	if err != nil {
		return nil, err
	}
	if cg.V2Mount == "" {
		missing = append(missing, "cgroup-leaf")
	}
	for _, ctl := range []string{"pids", "memory", "cpu"} {
		if !cg.UsableAlone(ctl) {
			missing = append(missing, ctl+"-limit")
		}
	}
	return missing, nil
}

func TestAutoPublishesWhatIsConfinedAndRecordsLayers(t *testing.T) {
	ws, _ := sampleWorkspace(t)
	rec := filepath.Join(t.TempDir(), "run.jsonl")
	r := harness(t, "", "call", "--workspace", ws, "--record", rec, "--yes", "file_write", `{"path":"new.txt","content":"x"}`)
	lines := readRecord(t, rec)
	start := lines[0]
	conf := start["confinement"].(map[string]any)
	enforced, _ := json.Marshal(conf["enforced"])
	landlock := testenv.Shape() != testenv.ShapeNoLandlock
	if landlock {
		if r.code != 0 {
			t.Fatalf("write refused with Landlock present: %s %s", r.stdout, r.stderr)
		}
		if !strings.Contains(string(enforced), "landlock-self") || conf["self"] == nil {
			t.Fatalf("record does not show the harness's own domain: %v", conf)
		}
		if b, _ := os.ReadFile(filepath.Join(ws, "new.txt")); string(b) != "x" {
			t.Fatal("not written")
		}
	} else {
		o := outcome(t, r)
		if o["reason"] != "unpublished" || !strings.Contains(r.stderr, "file_write and file_edit are not published") {
			t.Fatalf("without Landlock file_write must be unpublished and the missing layers said: %v %s", o, r.stderr)
		}
	}
	t.Logf("LAYERS: %s", enforced)
}

func TestWritesNeedApprovalByDefault(t *testing.T) {
	ws, _ := sampleWorkspace(t)
	r := harness(t, "", "call", "--workspace", ws, "file_write", `{"path":"new.txt","content":"x"}`)
	o := outcome(t, r)
	if testenv.Shape() == testenv.ShapeNoLandlock {
		if o["reason"] != "unpublished" {
			t.Fatalf("%v", o)
		}
		return
	}
	// No terminal in tests: auto says so once and denies.
	if r.code != 3 || o["reason"] != "approval_rejected" || strings.Count(r.stderr, "no terminal") != 1 {
		t.Fatalf("exit %d %v stderr %q", r.code, o, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(ws, "new.txt")); err == nil {
		t.Fatal("written without approval")
	}
	// prompt without a terminal refuses to start.
	r = harness(t, "", "call", "--workspace", ws, "--approve", "prompt", "file_read", `{"path":"hello.txt"}`)
	if r.code != 2 || !strings.Contains(r.stderr, "terminal") || r.stdout != "" {
		t.Fatalf("prompt without tty: exit %d %s", r.code, r.stderr)
	}
}

func TestDoctor(t *testing.T) {
	r := harnessIn(t, atkAloneCgroup(t), "", "doctor", "--json")
	var d struct {
		Layers []struct {
			Layer     string `json:"layer"`
			Available bool   `json:"available"`
		} `json:"layers"`
		Modes []struct {
			Mode   string `json:"mode"`
			Starts bool   `json:"starts"`
		} `json:"modes"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &d); err != nil {
		t.Fatalf("doctor --json: %v\n%s", err, r.stdout)
	}
	strict := d.Modes[0]
	if strict.Mode != "strict" || (r.code == 0) != strict.Starts {
		t.Fatalf("exit %d but strict starts=%v", r.code, strict.Starts)
	}
	if missing, ok := strictMissing[testenv.Shape()]; ok && strict.Starts != (len(missing) == 0) {
		t.Fatalf("shape %s: strict starts=%v", testenv.Shape(), strict.Starts)
	}
	h := harness(t, "", "doctor")
	for _, want := range []string{"LAYER", "landlock-self", "--confine auto: publishes"} {
		if !strings.Contains(h.stdout, want) {
			t.Errorf("doctor output lacks %q", want)
		}
	}
}

// TestExecHasNoMaxOutput: exec passes its program the harness's own
// stdout and stderr, so it takes no --max-output; the flag is refused with
// a reason instead of being accepted and ignored (issue 18).
func TestExecHasNoMaxOutput(t *testing.T) {
	ws := t.TempDir()
	r := harness(t, "", "exec", "--workspace", ws, "--max-output", "1KiB", "--", "/bin/echo", "ran")
	if r.code != exitSetupError || strings.Contains(r.stdout, "ran") || !strings.Contains(r.stderr, "no --max-output") {
		t.Fatalf("exec --max-output: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}

// TestNoTerminalNoteOnlyWhenAsked: without a terminal, the note that calls
// above the ceiling will be denied is said only when the call's entry is
// above it: not for a plain file_read (issue 18).
func TestNoTerminalNoteOnlyWhenAsked(t *testing.T) {
	ws, _ := sampleWorkspace(t)
	for _, c := range []struct {
		tool, args string
		note       bool
	}{
		{"file_read", `{"path":"hello.txt"}`, false},
		{"file_write", `{"path":"new.txt","content":"x"}`, atkWrites()},
	} {
		cmd := harnessCommand("call", "--workspace", ws, c.tool, c.args)
		cmd.Env = append(os.Environ(), "B10X_TEST_MAIN=1")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // no controlling terminal
		r := runHarnessCmd(t, cmd, "")
		if got := strings.Contains(r.stderr, "no terminal: calls above"); got != c.note {
			t.Errorf("%s: note said %v, want %v\nstderr: %s", c.tool, got, c.note, r.stderr)
		}
	}
}

// TestExecRelativeScript: `exec -- ./script.sh` runs a script of the
// workspace named from the working directory, as a CI step would; a
// relative path that resolves outside the workspace (.., or a link out) is
// refused, naming where it leads (issue 18).
func TestExecRelativeScript(t *testing.T) {
	ws, outside := sampleWorkspace(t)
	must(t, os.WriteFile(filepath.Join(ws, "sub", "step.sh"), []byte("#!/bin/sh\necho step-ran \"$@\"\n"), 0o755))
	must(t, os.WriteFile(filepath.Join(outside, "evil.sh"), []byte("#!/bin/sh\necho evil-ran\n"), 0o755))
	must(t, os.Symlink(filepath.Join(outside, "evil.sh"), filepath.Join(ws, "sub", "out.sh")))
	run := func(prog string) result {
		cmd := harnessCommand("exec", "--workspace", ws, "--", prog, "x")
		cmd.Dir = filepath.Join(ws, "sub")
		cmd.Env = append(os.Environ(), "B10X_TEST_MAIN=1")
		return runHarnessCmd(t, cmd, "")
	}
	r := run("./step.sh")
	if atkExecution() && (r.code != 0 || !strings.Contains(r.stdout, "step-ran x")) {
		t.Fatalf("./step.sh: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, prog := range []string{"../../data-archived/evil.sh", "./out.sh"} {
		r := run(prog)
		if r.code != exitSetupError || strings.Contains(r.stdout, "evil-ran") || !strings.Contains(r.stderr, "outside the workspace") {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want a refusal naming where it leads", prog, r.code, r.stdout, r.stderr)
		}
	}
}

// TestDoctorSaysWhoTheChildIs: doctor --workspace says who a run child of
// that workspace is on the host, and why none can run in a root-owned
// workspace holding a set-user-ID file (decision 0037).
func TestDoctorSaysWhoTheChildIs(t *testing.T) {
	ws := t.TempDir()
	want := fmt.Sprintf("host uid %d", os.Geteuid())
	if os.Geteuid() == 0 {
		must(t, os.Chown(ws, runOwner, runOwner))
		want = fmt.Sprintf("host uid %d gid %d (the workspace owner's)", runOwner, runOwner)
	}
	var d struct {
		RunAs      string `json:"run_as"`
		RunAsError string `json:"run_as_error"`
	}
	r := harness(t, "", "doctor", "--json", "--workspace", ws)
	must(t, json.Unmarshal([]byte(r.stdout), &d))
	switch {
	case !atkExecution():
		// No run call can be confined in this shape: doctor says so
		// instead of naming an identity no call will have.
		if d.RunAs != "" || !strings.Contains(d.RunAsError, "cannot confine run calls") {
			t.Errorf("shape %s: doctor run_as %q (error %q), want no identity and the reason", testenv.Shape(), d.RunAs, d.RunAsError)
		}
	case !strings.Contains(d.RunAs, want) || !strings.Contains(d.RunAs, "no capabilities"):
		t.Errorf("doctor run_as %q (error %q), want it to say %q", d.RunAs, d.RunAsError, want)
	}
	if os.Geteuid() != 0 {
		return
	}
	root := t.TempDir()
	suid := filepath.Join(root, "tool\x1b[2J")
	must(t, os.WriteFile(suid, []byte("#!/bin/sh\n"), 0o755))
	must(t, os.Chmod(suid, 0o755|os.ModeSetuid))
	// Not through harnessCommand, which would give this workspace away.
	cmd := exec.Command(os.Args[0], "doctor", "--workspace", root)
	cmd.Env = append(os.Environ(), "B10X_TEST_MAIN=1")
	r = runHarnessCmd(t, cmd, "")
	shown := filepath.Join(root, `tool\x1b[2J`) // the name is escaped, never raw
	if !strings.Contains(r.stdout, "run children of "+root+": cannot run:") || !strings.Contains(r.stdout, shown) || strings.Contains(r.stdout, "\x1b") {
		t.Errorf("doctor on a root-owned workspace with a setuid file:\n%s", r.stdout)
	}
}
