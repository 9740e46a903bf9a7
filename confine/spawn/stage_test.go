package spawn

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/b10x/harness/confine/spawn/internal/helper"
)

// TestProgramStageRunsNoGo: the program's stage is a fork of the sandbox's
// init that runs no Go runtime of its own (docs/decisions/0094): caught
// while it waits for its call in a pre-started sandbox, it is one thread
// (a Go program has several from its start: the monitor, the collector's
// workers), the init's child, the init's executable, and already confined
// (no_new_privs, its seccomp filter, no capability). Then it runs the call.
func TestProgramStageRunsNoGo(t *testing.T) {
	d := prestarting(t)
	s := shSpec(t, workspace(t), "echo ran")
	_, initPid, stage := waitingStage(t, d, s)
	status := procStatus(t, stage)
	for key, want := range map[string]string{"Threads": "1", "NoNewPrivs": "1", "Seccomp": "2", "CapEff": "0000000000000000", "CapBnd": "0000000000000000"} {
		if got := status[key]; got != want {
			t.Errorf("the waiting stage %d: %s %q, want %q", stage, key, got, want)
		}
	}
	if ppidOf(stage) != initPid {
		t.Errorf("the waiting stage %d has parent %d, want the init %d", stage, ppidOf(stage), initPid)
	}
	initExe, err1 := os.Readlink(filepath.Join("/proc", strconv.Itoa(initPid), "exe"))
	stageExe, err2 := os.Readlink(filepath.Join("/proc", strconv.Itoa(stage), "exe"))
	if err1 != nil || err2 != nil || initExe != stageExe {
		t.Errorf("the stage's executable %q (%v), the init's %q (%v): want the same, nothing executed since the fork", stageExe, err2, initExe, err1)
	}
	if a := procArgv0(stage); a != helper.Argv0 {
		t.Errorf("the waiting stage's argv[0] %q, want the init's %q", a, helper.Argv0)
	}
	res, out, err := run(t, d, s)
	if err != nil || res.ExitCode != 0 || !res.Prestarted || string(out.stdout.Bytes()) != "ran\n" {
		t.Fatalf("the call in the pre-started sandbox: %v %+v\n%s", err, res, out)
	}
}

// procStatus reads /proc/PID/status into its keys and values.
func procStatus(t *testing.T, pid int) map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok {
			out[k] = strings.TrimSpace(v)
		}
	}
	return out
}

// TestProgramStartsFresh: whether its stage was forked for the call or
// waited for it pre-started, the program starts as a freshly executed
// process would: no signal blocked (the fork blocked them all in the
// stage, which restores the mask), and no descriptor but its standard
// streams (ls's own, 3, is the directory it lists).
func TestProgramStartsFresh(t *testing.T) {
	ws := workspace(t)
	// The program itself reads its status, not a shell's child: a shell
	// may clear its mask at its start (dash does).
	sigs := Spec{Program: pin(t, lookPath(t, "grep")), Argv: []string{"grep", "-E", "^SigBlk:", "/proc/self/status"}, Env: []string{"PATH=/usr/bin:/bin"}, Dir: ws, Workspace: pin(t, ws)}
	fds := Spec{Program: pin(t, lookPath(t, "ls")), Argv: []string{"ls", "/proc/self/fd"}, Env: []string{"PATH=/usr/bin:/bin"}, Dir: ws, Workspace: pin(t, ws)}
	for _, c := range []struct {
		s    Spec
		want string
	}{{sigs, "SigBlk: 0000000000000000"}, {fds, "0 1 2 3"}} {
		d := prestarting(t) // the first call runs cold, the second in the sandbox started behind it
		for _, warm := range []bool{false, true} {
			if warm {
				waitWarm(t, d)
			}
			res, out, err := run(t, d, c.s)
			if err != nil || res.ExitCode != 0 || res.Prestarted != warm {
				t.Fatalf("%s (pre-started %v): %v %+v\n%s", c.s.Argv[0], warm, err, res, out)
			}
			if got := strings.Join(strings.Fields(string(out.stdout.Bytes())), " "); got != c.want {
				t.Errorf("%s (pre-started %v): %q, want %q: no signal blocked, no descriptor but the standard streams (and ls's own 3)", c.s.Argv[0], warm, got, c.want)
			}
		}
	}
}
