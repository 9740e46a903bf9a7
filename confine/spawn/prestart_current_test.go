package spawn

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/b10x/harness/confine/spawn/internal/helper"
)

// TestPrestartedPinnedReplaced: a pinned path (an extra read or write
// path, or the workspace) replaced on the host while a pre-started
// sandbox waits with the old file bound. The next call must not run in
// that sandbox, which would hand the program the file that is no longer
// at the path: it starts cold and fails at its "bind <path>" step, as any
// call does whose pinned path is no longer the file pinned, and the
// program never runs.
func TestPrestartedPinnedReplaced(t *testing.T) {
	for _, c := range []struct {
		what string
		// victim returns the pinned path the host replaces, and sets it
		// in s.
		victim func(t *testing.T, ws string, s *Spec) string
		// replace puts another file (or directory) where path was.
		replace func(t *testing.T, path string)
	}{
		{"extra read path replaced by rename", func(t *testing.T, ws string, s *Spec) string {
			f := filepath.Join(t.TempDir(), "ref.txt")
			if err := os.WriteFile(f, []byte("OLD-READ-PATH\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			s.ReadPaths = []Pinned{pin(t, f)}
			s.Argv = []string{"sh", "-c", "cat " + f + "; echo ran"}
			return f
		}, func(t *testing.T, path string) {
			tmp := path + ".new"
			if err := os.WriteFile(tmp, []byte("NEW-READ-PATH\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(tmp, path); err != nil {
				t.Fatal(err)
			}
		}},
		{"extra write path renamed away and made again", func(t *testing.T, ws string, s *Spec) string {
			dir := filepath.Join(workspace(t), "out")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			own(t, dir)
			if err := os.WriteFile(filepath.Join(dir, "mark"), []byte("OLD-WRITE-PATH\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			s.WritePaths = []Pinned{pin(t, dir)}
			s.Argv = []string{"sh", "-c", "cat " + filepath.Join(dir, "mark") + "; echo ran"}
			return dir
		}, renameAndRemake},
		// The workspace is checked when the call is planned already,
		// before a sandbox is looked at; the extra paths only when it is.
		{"workspace renamed away and made again", func(t *testing.T, ws string, s *Spec) string {
			if err := os.WriteFile(filepath.Join(ws, "mark"), []byte("OLD-WORKSPACE\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			s.Argv = []string{"sh", "-c", "cat " + filepath.Join(ws, "mark") + "; echo ran"}
			return ws
		}, renameAndRemake},
	} {
		t.Run(c.what, func(t *testing.T) {
			d := prestarting(t)
			ws := filepath.Join(workspace(t), "ws")
			if err := os.Mkdir(ws, 0o755); err != nil {
				t.Fatal(err)
			}
			own(t, ws)
			s := shSpec(t, ws, "")
			victim := c.victim(t, ws, &s)
			res, out, err := run(t, d, s)
			if err != nil || res.ExitCode != 0 || !strings.Contains(string(out.stdout.Bytes()), "ran") {
				t.Fatalf("first call (cold): %v %+v\n%s", err, res, out)
			}
			w := waitWarm(t, d)
			if !w.said {
				t.Fatal("the sandbox pre-started behind the first call failed a step: the test would prove nothing")
			}
			c.replace(t, victim)
			if _, err := pinOf(t, s, victim).stat(); err == nil {
				t.Fatal("the replacement left the pinned file at its path: the test would prove nothing")
			}
			res, out, err = run(t, d, s)
			var se *SetupError
			if !errors.As(err, &se) || se.Step != "bind "+victim {
				t.Errorf("call after %s was replaced: %v (%+v), want a *SetupError at step %q\n%s", victim, err, res, "bind "+victim, out)
			}
			if res.Prestarted || d.pre.taken.Load() != 0 {
				t.Errorf("the call ran in the sandbox pre-started with the replaced file bound (Prestarted %v, taken %d)", res.Prestarted, d.pre.taken.Load())
			}
			if got := string(out.stdout.Bytes()) + string(out.stderr.Bytes()); strings.Contains(got, "OLD-") || strings.Contains(got, "ran") {
				t.Errorf("the program ran and saw the file that is no longer at %s: %q", victim, got)
			}
		})
	}
}

// renameAndRemake renames the directory path away and makes an empty
// one in its place, owned as the first was.
func renameAndRemake(t *testing.T, path string) {
	if err := os.Rename(path, path+".old"); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(path, 0o755); err != nil {
		t.Fatal(err)
	}
	own(t, path)
}

// pinOf is the Pinned of s that is path.
func pinOf(t *testing.T, s Spec, path string) Pinned {
	t.Helper()
	for _, p := range append(append([]Pinned{s.Workspace}, s.ReadPaths...), s.WritePaths...) {
		if p.Path == path {
			return p
		}
	}
	t.Fatalf("%s is not pinned in the Spec", path)
	return Pinned{}
}

// TestPrestartedSandboxDied: the pre-started sandbox's processes are
// killed while it waits (its namespace's init, or only its waiting
// stage), found through /proc as a reader of the host would find them.
// The next call must run correctly, cold: a dead sandbox handed the call
// would end it with the stage's SIGKILL and no output.
func TestPrestartedSandboxDied(t *testing.T) {
	for name, victim := range map[string]string{"init": helper.Argv0, "stage": stageLabel} {
		t.Run(name, func(t *testing.T) {
			d := prestarting(t)
			s := shSpec(t, workspace(t), "echo ran")
			w, initPid, stage := waitingStage(t, d, s)
			pid := map[string]int{helper.Argv0: initPid, stageLabel: stage}[victim]
			if err := unix.Kill(pid, unix.SIGKILL); err != nil {
				t.Fatal(err)
			}
			// The sandbox is dead once its init has been waited for:
			// what a call that comes later finds.
			select {
			case <-w.l.exited:
			case <-time.After(30 * time.Second):
				t.Fatalf("the sandbox's init did not end within 30s of SIGKILL to %s %d", victim, pid)
			}
			res, out, err := run(t, d, s)
			if err != nil || res.ExitCode != 0 || res.Signal != "" || string(out.stdout.Bytes()) != "ran\n" {
				t.Fatalf("the call after the sandbox died: %v %+v\n%s", err, res, out)
			}
			if res.Prestarted || d.pre.taken.Load() != 0 {
				t.Errorf("the call was handed the dead sandbox (Prestarted %v, taken %d)", res.Prestarted, d.pre.taken.Load())
			}
			if z := zombies(t); len(z) != 0 {
				t.Errorf("zombies left: %v", z)
			}
		})
	}
}

// waitingStage runs s cold on d, waits for the sandbox d pre-starts behind
// it and returns it with its init's and its waiting stage's pids, found
// through /proc as a reader of the host would find them.
func waitingStage(t *testing.T, d *direct, s Spec) (w *warm, initPid, stage int) {
	t.Helper()
	if res, out, err := run(t, d, s); err != nil || res.ExitCode != 0 {
		t.Fatalf("first call (cold): %v %+v\n%s", err, res, out)
	}
	w = waitWarm(t, d)
	if !w.said {
		t.Fatal("the sandbox pre-started behind the first call failed a step: the test would prove nothing")
	}
	procs := sandboxProcesses(os.Getpid())
	initPid, stage, ok := oneSandbox(procs)
	if !ok || initPid != w.l.cmd.Process.Pid {
		t.Fatalf("the pre-started sandbox's processes under this one: %v, want its init %d and its waiting stage", procs, w.l.cmd.Process.Pid)
	}
	return w, initPid, stage
}

// stageLabel is sandboxProcesses' key for the program stages: forked from
// their init without executing anything, they show its argv[0] until they
// execute the program, and are told apart by their parent, an init.
const stageLabel = "program stage"

// sandboxProcesses finds, through /proc, the helpers descending from pid:
// the namespace inits under helper.Argv0, and under stageLabel the
// program stages not yet executed (a helper whose parent is a helper).
func sandboxProcesses(pid int) map[string][]int {
	out := map[string][]int{}
	for _, p := range processesWhere(func(p int, argv []string) bool {
		return argv[0] == helper.Argv0 && ancestor(p, pid)
	}) {
		label := helper.Argv0
		if ancestor(p, pid) && procArgv0(ppidOf(p)) == helper.Argv0 {
			label = stageLabel
		}
		out[label] = append(out[label], p)
	}
	return out
}

// ppidOf returns pid's parent, 0 when pid is gone.
func ppidOf(pid int) int {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(f) < 2 {
		return 0
	}
	n, _ := strconv.Atoi(f[1])
	return n
}

// oneSandbox returns the init and the stage of the one sandbox procs
// shows, or false when it shows anything else.
func oneSandbox(procs map[string][]int) (initPid, stage int, ok bool) {
	if len(procs) != 2 || len(procs[helper.Argv0]) != 1 || len(procs[stageLabel]) != 1 {
		return 0, 0, false
	}
	return procs[helper.Argv0][0], procs[stageLabel][0], true
}

func procArgv0(pid int) string {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	a, _, _ := strings.Cut(string(b), "\x00")
	return a
}

// procState is what /proc/PID/stat says of a process: its state letter
// and its start time (clock ticks after boot), which tells a pid reused
// by another process from the one first seen.
type procState struct {
	state string
	start uint64
}

// readProcState reads /proc/PID/stat; ok is false when there is no such
// process (not even a zombie).
func readProcState(pid int) (procState, bool, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, unix.ESRCH) {
		return procState{}, false, nil
	}
	if err != nil {
		return procState{}, false, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return procState{}, false, fmt.Errorf("/proc/%d/stat: %q", pid, s)
	}
	f := strings.Fields(s[i+1:])
	// Field 3 is the state, field 22 the start time; f[0] is field 3.
	if len(f) < 20 {
		return procState{}, false, fmt.Errorf("/proc/%d/stat: %q", pid, s)
	}
	start, err := strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return procState{}, false, fmt.Errorf("/proc/%d/stat: start time %q", pid, f[19])
	}
	return procState{f[0], start}, true, nil
}

// requireGone fails t for each process of before that still exists, the
// same process (same start time), alive or a zombie.
func requireGone(t *testing.T, what string, before map[int]procState) {
	t.Helper()
	pids := make([]int, 0, len(before))
	for pid := range before {
		pids = append(pids, pid)
	}
	slices.Sort(pids)
	for _, pid := range pids {
		now, ok, err := readProcState(pid)
		if err != nil {
			t.Errorf("%s: process %d: %v", what, pid, err)
			continue
		}
		if !ok || now.start != before[pid].start {
			continue // gone (the pid may be another process's by now)
		}
		if now.state == "Z" {
			t.Errorf("%s: process %d is a zombie (state Z): nobody reaped it", what, pid)
		} else {
			t.Errorf("%s: process %d is alive (state %s)", what, pid, now.state)
		}
	}
}
