package spawn

import (
	"bufio"
	"context"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/b10x/harness/cgroup"
	"github.com/b10x/harness/internal/reexec"
	"github.com/b10x/harness/internal/testenv"
)

// TestNothingSurvivesTheCall: background children, a setsid'd double fork:
// the call returns as soon as sh exits, and none of them is left.
func TestNothingSurvivesTheCall(t *testing.T) {
	for name, r := range runners(t) {
		ws := workspace(t)
		uniq := uniqueSleep()
		script := `sleep ` + uniq + ` & setsid sh -c "sleep ` + uniq + ` &" & exit 0`
		t0 := time.Now()
		res, out, err := run(t, r, shSpec(t, ws, script))
		took := time.Since(t0)
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("%s: %v %+v\n%s", name, err, res, out)
		}
		if took > 5*time.Second {
			t.Errorf("%s: the call took %v: it waited for the background children", name, took)
		}
		if pids := processesWith(uniq); len(pids) != 0 {
			t.Fatalf("%s: processes of the call survived it: %v", name, pids)
		}
	}
}

// TestTimeoutKillsTree: a foreground sleep with a setsid'd sibling; the
// deadline ends the call with TimedOut and kills every process.
func TestTimeoutKillsTree(t *testing.T) {
	for name, r := range runners(t) {
		ws := workspace(t)
		uniq := uniqueSleep()
		s := shSpec(t, ws, `setsid sleep `+uniq+` & sleep `+uniq)
		// One second here; the emulated CPU of the VM shapes needs more
		// than that just to set the call up.
		s.Timeout = time.Second
		if testenv.InVM() {
			s.Timeout = 5 * time.Second
		}
		t0 := time.Now()
		res, out, err := run(t, r, s)
		took := time.Since(t0)
		if err != nil {
			t.Fatalf("%s: %v\n%s", name, err, out)
		}
		if !res.TimedOut || res.Signal != "SIGKILL" || res.ExitCode != -1 {
			t.Errorf("%s: %+v, want TimedOut and SIGKILL", name, res)
		}
		if took < s.Timeout || took > s.Timeout+10*time.Second {
			t.Errorf("%s: the call took %v with a %v timeout", name, took, s.Timeout)
		}
		if pids := processesWith(uniq); len(pids) != 0 {
			t.Fatalf("%s: processes survived the timeout: %v", name, pids)
		}
	}
}

// TestContextCancelKillsTree: cancelling the context once the program runs
// ends the call the same way, and Run says so.
func TestContextCancelKillsTree(t *testing.T) {
	for name, r := range runners(t) {
		ws := workspace(t)
		uniq := uniqueSleep()
		ctx, cancel := context.WithCancel(context.Background())
		pr, pw, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		started := make(chan struct{})
		go func() {
			line, _ := bufio.NewReader(pr).ReadString('\n')
			if line == "started\n" {
				close(started)
				// Both sleeps exist once started is printed and the
				// foreground one runs.
				for len(processesWith(uniq)) < 2 {
					time.Sleep(5 * time.Millisecond)
				}
				cancel()
			}
			pr.Close()
		}()
		s := shSpec(t, ws, `setsid sleep `+uniq+` & echo started; sleep `+uniq)
		res, err := r.Run(ctx, s, Stdio{Stdout: pw})
		pw.Close()
		cancel()
		select {
		case <-started:
		default:
			t.Fatalf("%s: the program never started: %v %+v", name, err, res)
		}
		if !errors.Is(err, context.Canceled) {
			t.Errorf("%s: err %v, want it to wrap context.Canceled", name, err)
		}
		if res.Signal != "SIGKILL" || res.TimedOut {
			t.Errorf("%s: %+v, want killed by SIGKILL, not TimedOut", name, res)
		}
		if pids := processesWith(uniq); len(pids) != 0 {
			t.Fatalf("%s: processes survived the cancel: %v", name, pids)
		}
	}
}

// TestHarnessKilledMidCall: a re-run child of this test plays the harness
// (direct and with a broker), starts a long call and is SIGKILLed: within
// a second no process of the call is left.
func TestHarnessKilledMidCall(t *testing.T) {
	requireSpawn(t)
	for _, mode := range []string{"direct", "broker"} {
		ws := workspace(t)
		uniq := uniqueSleep()
		cmd := reexec.Command(harnessEntry, mode, ws, lookPath(t, "sh"), uniq)
		cmd.Path = selfExe(t)
		cmd.Env = os.Environ()
		cmd.Stderr = os.Stderr
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		line, err := bufio.NewReader(stdout).ReadString('\n')
		if err != nil || line != "started\n" {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("%s: the call did not start: %q %v", mode, line, err)
		}
		// "started" comes right after the two background forks; wait
		// until both have become sleep.
		for wait := time.Now().Add(10 * time.Second); len(processesWith(uniq)) < 2; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(wait) {
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatalf("%s: the call's two sleeps are not running: %v", mode, processesWith(uniq))
			}
		}
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		cmd.Wait()
		deadline := time.Now().Add(time.Second)
		for {
			pids := processesWith(uniq)
			if len(pids) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: 1s after the harness was killed, processes of its call are alive: %v", mode, pids)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// TestSequentialRunsLeaveNothing: 300 calls in a row leave no zombie, no
// extra descriptor and (with a cgroup) no leaf. It runs in a re-run child:
// the cgroup manager may move the process it runs in.
func TestSequentialRunsLeaveNothing(t *testing.T) {
	requireSpawn(t)
	if !inChildCgroup(t, true) {
		return
	}
	opts := testOptions()
	var parent string
	m, err := cgroup.Open(cgroup.Options{Name: "b10x-spawn-test"})
	switch {
	case err == nil:
		defer m.Close()
		opts.Cgroup = m
		parent = m.Parent()
	case errors.Is(err, cgroup.ErrNotSupported) && testenv.Shape() == testenv.ShapeCgroupV1:
		// Declared absent there: the calls still must leave no zombie
		// and no descriptor.
		t.Logf("no cgroup v2 (%v): calls run without a leaf", err)
	case errors.Is(err, cgroup.ErrNotSupported):
		testenv.Require(t, false, "cgroup v2 ("+err.Error()+")", testenv.ShapeCgroupV1)
	default:
		t.Fatalf("cgroup.Open: %v", err)
	}
	b, err := StartBroker(BrokerOptions{Cgroup: opts.Cgroup, Require: opts.Require})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	runners := map[string]Runner{"direct": NewDirect(opts), "broker": b}
	ws := workspace(t)
	s := Spec{Program: pin(t, lookPath(t, "true")), Argv: []string{"true"}, Dir: ws, Workspace: pin(t, ws)}
	// 300 calls per runner here; the VM shapes emulate the CPU (TCG, about
	// 20 times slower), where 30 calls per runner keep the suite within
	// its deadline and still show a leak (it grows with every call).
	calls := 300
	if testenv.InVM() {
		calls = 30
	}
	for name, r := range runners {
		// One call first: lazily opened descriptors (the /etc watch) count
		// as the baseline.
		if res, err := r.Run(context.Background(), s, Stdio{}); err != nil || res.ExitCode != 0 {
			t.Fatalf("%s: %v %+v", name, err, res)
		}
		// A call holds none of its descriptors once Run returns: each
		// call is checked as it returns, not only the last.
		fds := childFDs(t)
		for i := 0; i < calls; i++ {
			res, err := r.Run(context.Background(), s, Stdio{})
			if err != nil || res.ExitCode != 0 {
				t.Fatalf("%s: call %d: %v %+v", name, i, err, res)
			}
			if i == 0 {
				t.Logf("LAYERS: %v", res.Layers)
			}
			if after := childFDs(t); !maps.Equal(after, fds) {
				t.Fatalf("%s: descriptors as call %d returned differ from those before: %s", name, i, fdChanges(fds, after))
			}
		}
		if z := zombies(t); len(z) != 0 {
			t.Errorf("%s: zombies after %d calls: %v", name, calls, z)
		}
		if parent == "" {
			continue
		}
		// The broker answers a call once nothing of it runs, and removes
		// its leaf right after (direct.answerEarly): a leaf may still be
		// there for a moment, never for seconds.
		for wait := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			left := callLeaves(t, parent)
			if len(left) == 0 {
				break
			}
			if time.Now().After(wait) {
				t.Errorf("%s: leaves left behind 5s after the last call: %v", name, left)
				break
			}
		}
	}
}

// callLeaves lists the call leaves under a cgroup parent.
func callLeaves(t *testing.T, parent string) []string {
	ents, err := os.ReadDir(parent)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if e.IsDir() && strings.HasPrefix(e.Name(), "call-") {
			out = append(out, filepath.Join(parent, e.Name()))
		}
	}
	return out
}

// TestAnsweredEarlyOnlyWhenAlone: a runner that answers a call once its
// init reports that nothing else of it is left (the broker's) does so for
// a program that leaves nothing (when it reads the status before the
// init's exit), with its exit code or signal; a program that leaves
// background processes (a hundred, so that their end takes the kernel a
// while) is answered only once its init has exited, with none of them
// left.
func TestAnsweredEarlyOnlyWhenAlone(t *testing.T) {
	requireSpawn(t)
	d := newDirect(testOptions())
	d.answerEarly = true
	defer d.teardowns.Wait()
	ws := workspace(t)
	for _, c := range []struct {
		script string
		code   int
		signal string
	}{
		{"exit 0", 0, ""},
		{"exit 7", 7, ""},
		{"kill -KILL $$", -1, "SIGKILL"},
	} {
		// The runner answers at the status only when it reads it before
		// it has waited for the init, which exits right after: on a busy
		// host the init's exit can win that race now and then, and that
		// call is answered after it. Ten tries, of which one must be
		// answered early.
		early := false
		for try := 0; try < 10 && !early; try++ {
			before := d.answeredEarly.Load()
			res, out, err := run(t, d, shSpec(t, ws, c.script))
			if err != nil || res.ExitCode != c.code || res.Signal != c.signal {
				t.Fatalf("%q: %v %+v\n%s", c.script, err, res, out)
			}
			early = d.answeredEarly.Load() > before
		}
		if !early {
			t.Errorf("%q: not answered early in ten calls, though it left nothing", c.script)
		}
	}
	uniq := uniqueSleep()
	before := d.answeredEarly.Load()
	res, out, err := run(t, d, shSpec(t, ws, `i=0; while [ $i -lt 100 ]; do sleep `+uniq+` & i=$((i+1)); done; exit 3`))
	if err != nil || res.ExitCode != 3 {
		t.Fatalf("background sleeps: %v %+v\n%s", err, res, out)
	}
	if pids := processesWith(uniq); len(pids) != 0 {
		t.Errorf("background sleeps: %d of them alive when the call was answered", len(pids))
	}
	if d.answeredEarly.Load() != before {
		t.Error("background sleeps: answered early, though they ran")
	}
}
