package spawn

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/b10x/harness/cgroup"
	"github.com/b10x/harness/confine/spawn/internal/helper"
	"github.com/b10x/harness/internal/testenv"
)

// waitWarm waits until d holds a pre-started sandbox whose stage is ready.
func waitWarm(t testing.TB, d *direct) *warm {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		var w *warm
		d.pre.mu.Lock()
		if len(d.pre.ready) > 0 {
			w = d.pre.ready[0]
		}
		d.pre.mu.Unlock()
		if w != nil {
			select {
			case <-w.ready:
				return w
			case <-time.After(30 * time.Second):
			}
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Fatal("no pre-started sandbox within 30s")
	return nil
}

func prestarting(t *testing.T) *direct {
	t.Helper()
	requireSpawn(t)
	d := newDirect(testOptions())
	d.pre = &prestarter{}
	t.Cleanup(d.closePrestart)
	return d
}

// TestPrestartedCall runs a call cold, then one in the sandbox started
// behind it, with another program, argv, environment and directory: the
// second gets its own, not the first's, and the same layers.
func TestPrestartedCall(t *testing.T) {
	d := prestarting(t)
	ws := workspace(t)
	if err := os.Mkdir(filepath.Join(ws, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	first := shSpec(t, ws, `echo "one $X $(pwd)"; readlink /proc/self/ns/pid; echo mark > /tmp/mark`)
	first.Env = []string{"X=first"}
	res1, out1, err := run(t, d, first)
	if err != nil || res1.ExitCode != 0 {
		t.Fatalf("first call: %v %+v %s", err, res1, out1)
	}
	if d.pre.taken.Load() != 0 {
		t.Fatal("the first call took a pre-started sandbox that did not exist")
	}
	waitWarm(t, d)
	second := Spec{Program: pin(t, lookPath(t, "sh")), Argv: []string{"sh", "-c", `echo "two $X $(pwd)"; readlink /proc/self/ns/pid; cat /tmp/mark 2>/dev/null || echo no-mark; echo err >&2`},
		Env: []string{"X=second"}, Dir: filepath.Join(ws, "sub"), Workspace: first.Workspace}
	res2, out2, err := run(t, d, second)
	if err != nil || res2.ExitCode != 0 {
		t.Fatalf("second call: %v %+v %s", err, res2, out2)
	}
	if d.pre.taken.Load() != 1 || !res2.Prestarted || res1.Prestarted {
		t.Fatalf("the second call did not take the pre-started sandbox (or the first says it did): %+v, %+v", res1, res2)
	}
	l1 := strings.Split(strings.TrimSpace(string(out1.stdout.Bytes())), "\n")
	l2 := strings.Split(strings.TrimSpace(string(out2.stdout.Bytes())), "\n")
	if len(l1) != 2 || len(l2) != 3 {
		t.Fatalf("outputs: %q, %q", l1, l2)
	}
	if l1[0] != "one first "+ws || l2[0] != "two second "+filepath.Join(ws, "sub") {
		t.Errorf("argv, env or directory not the call's own: %q, %q", l1[0], l2[0])
	}
	// The first call's private /tmp is not the second's: a sandbox was
	// not reused. (Namespace inode numbers are no proof: the kernel
	// reuses a freed one, and the first sandbox is gone by then.)
	if !strings.Contains(l2[2], "no-mark") {
		t.Errorf("the second call saw the first's /tmp: %q", l2[2])
	}
	if got := strings.TrimSpace(string(out2.stderr.Bytes())); got != "err" {
		t.Errorf("stderr of the second call: %q", got)
	}
	if strings.Join(res1.Layers, ",") != strings.Join(res2.Layers, ",") || res1.HostUID != res2.HostUID || res1.LockedView != res2.LockedView {
		t.Errorf("layers differ: cold %v (uid %d, locked %v), pre-started %v (uid %d, locked %v)",
			res1.Layers, res1.HostUID, res1.LockedView, res2.Layers, res2.HostUID, res2.LockedView)
	}
}

// TestPrestartedDeadlineCountsFromCall: a sandbox that waited longer
// than the call's timeout still gives the call its whole timeout, and the
// timeout still kills the call's tree.
//
// No margin here is a guess at how fast this machine is: the sandbox's
// wait is measured from its own start until it exceeds the timeout, and
// the program within the timeout only echoes a line, which takes a few
// milliseconds on a loaded 2-core host and under a second in a TCG guest,
// against a timeout of 2 s (6 s in a guest). Counted from the sandbox's
// start instead, the deadline has passed before the call begins.
func TestPrestartedDeadlineCountsFromCall(t *testing.T) {
	d := prestarting(t)
	ws := workspace(t)
	s := shSpec(t, ws, "true")
	if _, _, err := run(t, d, s); err != nil {
		t.Fatal(err)
	}
	timeout := 2 * time.Second
	if testenv.InVM() {
		timeout = 6 * time.Second
	}
	w := waitWarm(t, d)
	for waited := time.Since(w.l.started); waited <= timeout; waited = time.Since(w.l.started) {
		time.Sleep(timeout - waited + 10*time.Millisecond)
	}
	s = shSpec(t, ws, "echo done")
	s.Timeout = timeout
	res, out, err := run(t, d, s)
	if err != nil || res.TimedOut || string(out.stdout.Bytes()) != "done\n" {
		t.Fatalf("a call whose sandbox waited %v was cut short of its %v timeout: %v %+v %q", time.Since(w.l.started), timeout, err, res, out)
	}
	if !res.Prestarted || res.Duration >= timeout {
		t.Fatalf("the call did not run in the sandbox that waited, or its duration counts the wait: %+v", res)
	}
	waitWarm(t, d)
	sleep := uniqueSleep()
	s = shSpec(t, ws, "(setsid sh -c 'sleep "+sleep+"' &) ; sleep "+sleep)
	s.Timeout = 300 * time.Millisecond
	res, _, err = run(t, d, s)
	if err != nil || !res.TimedOut {
		t.Fatalf("timeout not enforced in a pre-started sandbox: %v %+v", err, res)
	}
	if d.pre.taken.Load() != 2 {
		t.Fatalf("%d calls took a pre-started sandbox, want 2", d.pre.taken.Load())
	}
	if left := processesWith(sleep); len(left) > 0 {
		t.Errorf("processes left after the deadline: %v", left)
	}
}

// TestPrestartedStaleView: a path held read-only that was replaced after
// the sandbox was started, or a view that changed, makes the call start
// cold, so it sees the file as it is now.
func TestPrestartedStaleView(t *testing.T) {
	d := prestarting(t)
	ws := workspace(t)
	f := filepath.Join(ws, "held.txt")
	if err := os.WriteFile(f, []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := shSpec(t, ws, "cat held.txt")
	s.ReadOnly = []string{f}
	if _, _, err := run(t, d, s); err != nil {
		t.Fatal(err)
	}
	waitWarm(t, d)
	tmp := filepath.Join(ws, "held.new")
	if err := os.WriteFile(tmp, []byte("new\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, f); err != nil {
		t.Fatal(err)
	}
	res, out, err := run(t, d, s)
	if err != nil || res.ExitCode != 0 || string(out.stdout.Bytes()) != "new\n" {
		t.Fatalf("after the held file was replaced: %v %+v %q", err, res, string(out.stdout.Bytes()))
	}
	if d.pre.taken.Load() != 0 {
		t.Error("a sandbox holding the replaced file was taken")
	}
	// Another view (one more path held) does not take it either.
	waitWarm(t, d)
	g := filepath.Join(ws, "other.txt")
	if err := os.WriteFile(g, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	s.ReadOnly = append(s.ReadOnly, g)
	s.Argv = []string{"sh", "-c", "echo x > other.txt"}
	res, _, err = run(t, d, s)
	if err != nil || res.ExitCode == 0 {
		t.Fatalf("a path held read-only was writable: %v %+v", err, res)
	}
	if d.pre.taken.Load() != 0 {
		t.Error("a sandbox built for another view was taken")
	}
}

// TestPrestartedHeldOvermounted: a held file that is another file at its
// name while the sandbox's bind of the first is still mounted there (here:
// a file bound over the name in the test's own mount namespace after the
// sandbox was built) makes the call start cold, by the identities the
// sandbox was built with; the mount's presence alone (stillMounted) would
// take it.
func TestPrestartedHeldOvermounted(t *testing.T) {
	requireSpawn(t)
	testenv.Require(t, os.Geteuid() == 0, "running as root (to mount in a mount namespace of the test's own)", testenv.ShapeNoUserns)
	if !inPrivateMounts(t) {
		return
	}
	d := prestarting(t)
	ws := workspace(t)
	f, other := filepath.Join(ws, "held.txt"), filepath.Join(ws, "other.txt")
	if err := os.WriteFile(f, []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(other, []byte("new\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := shSpec(t, ws, "cat held.txt")
	s.ReadOnly = []string{f}
	if _, out, err := run(t, d, s); err != nil || string(out.stdout.Bytes()) != "old\n" {
		t.Fatalf("first call: %v %q", err, string(out.stdout.Bytes()))
	}
	w := waitWarm(t, d)
	if err := unix.Mount(other, f, "", unix.MS_BIND, ""); err != nil {
		t.Fatalf("bind %s over %s: %v", other, f, err)
	}
	t.Cleanup(func() { unix.Unmount(f, unix.MNT_DETACH) }) // before the directory's removal
	if !w.stillMounted() {
		t.Fatal("the sandbox's own binds were detached by a mount over the host's name: the case this test is for did not arise")
	}
	res, out, err := run(t, d, s)
	if err != nil || res.ExitCode != 0 || string(out.stdout.Bytes()) != "new\n" {
		t.Fatalf("after a file was bound over the held name: %v %+v %q", err, res, string(out.stdout.Bytes()))
	}
	if d.pre.taken.Load() != 0 {
		t.Error("a sandbox holding the file that was at the name before was taken")
	}
}

// TestPrestartClosed: closing leaves no sandbox process, alive or a
// zombie (each process of the sandbox found through /proc before close
// must be gone after, or be another process by its start time), and no
// leaf (its directory and any call-* beside it), and later calls still
// run (cold). It runs in a re-run child: the cgroup manager may move the
// process it runs in.
func TestPrestartClosed(t *testing.T) {
	requireSpawn(t)
	if !inChildCgroup(t, true) {
		return
	}
	opts := testOptions()
	m := leafManager(t)
	if m != nil {
		opts.Cgroup = m
	}
	d := newDirect(opts)
	d.pre = &prestarter{}
	t.Cleanup(d.closePrestart)
	ws := workspace(t)
	if _, _, err := run(t, d, shSpec(t, ws, "true")); err != nil {
		t.Fatal(err)
	}
	w := waitWarm(t, d)
	procs := sandboxProcesses(os.Getpid())
	initPid, stage, ok := oneSandbox(procs)
	if !ok || initPid != w.l.cmd.Process.Pid {
		t.Fatalf("the pre-started sandbox's processes: %v, want its init %d and its waiting stage", procs, w.l.cmd.Process.Pid)
	}
	before := map[int]procState{}
	for _, pid := range []int{initPid, stage} {
		st, ok, err := readProcState(pid)
		if err != nil || !ok {
			t.Fatalf("process %d of the sandbox: %v (exists %v)", pid, err, ok)
		}
		before[pid] = st
	}
	var leaf string
	if m != nil {
		if w.l.leaf == nil {
			t.Fatal("the pre-started sandbox has no leaf under a cgroup manager")
		}
		leaf = w.l.leaf.Path()
		if _, err := os.Stat(leaf); err != nil {
			t.Fatalf("the pre-started sandbox's leaf: %v", err)
		}
	}
	d.closePrestart()
	requireGone(t, "after close", before)
	if leaf != "" {
		if _, err := os.Stat(leaf); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the pre-started sandbox's leaf %s after close: %v, want it removed", leaf, err)
		}
		ents, err := os.ReadDir(m.Parent())
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			if e.IsDir() && strings.HasPrefix(e.Name(), "call-") {
				t.Errorf("leaf left behind after close: %s", filepath.Join(m.Parent(), e.Name()))
			}
		}
	}
	res, _, err := run(t, d, shSpec(t, ws, "true"))
	if err != nil || res.ExitCode != 0 || res.Prestarted {
		t.Fatalf("call after close: %v %+v", err, res)
	}
	d.pre.mu.Lock()
	defer d.pre.mu.Unlock()
	if len(d.pre.ready) != 0 || d.pre.inflight != 0 || len(d.pre.builds) != 0 {
		t.Error("a sandbox was pre-started after close")
	}
}

// leafManager opens a cgroup manager whose leaves need no controller,
// closed in t.Cleanup; nil in the cgroup-v1 shape, which has no cgroup v2
// (declared absent there).
func leafManager(t *testing.T) *cgroup.Manager {
	t.Helper()
	m, err := cgroup.Open(cgroup.Options{Name: "b10x-spawn-test"})
	switch {
	case err == nil:
		t.Cleanup(func() {
			if err := m.Close(); err != nil {
				t.Errorf("cgroup manager Close: %v", err)
			}
		})
		return m
	case errors.Is(err, cgroup.ErrNotSupported) && testenv.Shape() == testenv.ShapeCgroupV1:
		t.Logf("no cgroup v2 (%v): the sandbox has no leaf", err)
		return nil
	case errors.Is(err, cgroup.ErrNotSupported):
		testenv.Require(t, false, "cgroup v2 ("+err.Error()+")", testenv.ShapeCgroupV1)
	default:
		t.Fatalf("cgroup.Open: %v", err)
	}
	return nil
}

// TestBrokerPrestart: a broker started with Prestart runs its second call
// in a pre-started sandbox, and Close leaves no helper behind.
func TestBrokerPrestart(t *testing.T) {
	requireSpawn(t)
	b, err := StartBroker(BrokerOptions{Require: testOptions().Require, Prestart: true})
	if err != nil {
		t.Fatal(err)
	}
	ws := workspace(t)
	sleep := uniqueSleep()
	s := shSpec(t, ws, "echo ok")
	bpid := b.cmd.Process.Pid
	var got []bool
	for i := 0; i < 3; i++ {
		res, out, err := run(t, b, s)
		if err != nil || res.ExitCode != 0 || string(out.stdout.Bytes()) != "ok\n" {
			t.Fatalf("call %d: %v %+v %s", i, err, res, out)
		}
		got = append(got, res.Prestarted)
		// The model's turn: until the broker's next sandbox is confined
		// and waiting.
		brokerSandbox(t, bpid)
	}
	if got[0] || !got[1] || !got[2] {
		t.Errorf("pre-started: %v, want [false true true]", got)
	}
	// A call that leaves a daemon behind in its sandbox's namespace, and a
	// sandbox waiting when the broker closes: nothing survives Close.
	if _, _, err := run(t, b, shSpec(t, ws, "(setsid sleep "+sleep+" &)")); err != nil {
		t.Fatal(err)
	}
	before := map[int]procState{}
	for _, pid := range append(brokerSandbox(t, bpid), bpid) {
		st, ok, err := readProcState(pid)
		if err != nil || !ok {
			t.Fatalf("process %d (the broker or its sandbox's): %v (exists %v)", pid, err, ok)
		}
		before[pid] = st
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	requireGone(t, "after Close", before)
	if left := processesWith(sleep); len(left) > 0 {
		t.Errorf("processes left after Close: %v", left)
	}
}

// brokerSandbox waits (at most a minute) until the broker bpid holds a
// pre-started sandbox whose stage is confined (its seccomp filter
// installed, as /proc says: it is about to say GoReady or has), and
// returns the sandbox's init and stage.
func brokerSandbox(t *testing.T, bpid int) []int {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		procs := sandboxProcesses(bpid)
		if initPid, stage, ok := oneSandbox(procs); ok {
			if status, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(stage), "status")); err == nil && strings.Contains(string(status), "\nSeccomp:\t2\n") {
				return []int{initPid, stage}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no confined pre-started sandbox under the broker %d within a minute: %v", bpid, procs)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// ancestor reports whether anc is pid's parent or an ancestor of it.
func ancestor(pid, anc int) bool {
	for i := 0; i < 64 && pid > 1; i++ {
		b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
		if err != nil {
			return false
		}
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
		if len(f) < 2 {
			return false
		}
		pid, _ = strconv.Atoi(f[1])
		if pid == anc {
			return true
		}
	}
	return false
}

// TestPrestartedProxy: with Spec.ProxyPort, the proxy listener opened in
// the call's network namespace reaches the caller on Stdio.Proxy and
// takes the program's connection, cold and in a pre-started sandbox
// (where it was opened before the call came), and nothing else listens.
func TestPrestartedProxy(t *testing.T) {
	d := prestarting(t)
	ws := workspace(t)
	s := probeSpec(t, ws, "tcp:127.0.0.1:3128", "tcp:127.0.0.1:3129")
	s.ProxyPort = 3128
	for i, want := range []bool{false, true} {
		if want {
			waitWarm(t, d)
		}
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		mine, child := os.NewFile(uintptr(fds[0]), "proxy"), os.NewFile(uintptr(fds[1]), "proxy-child")
		accepted := make(chan string, 1)
		go func() {
			defer mine.Close()
			buf, oob := make([]byte, 1), make([]byte, unix.CmsgSpace(4))
			n, oobn, _, _, err := unix.Recvmsg(int(mine.Fd()), buf, oob, unix.MSG_CMSG_CLOEXEC)
			if err != nil || n != 1 || buf[0] != 'L' {
				accepted <- fmt.Sprintf("no listener: %d %v", n, err)
				return
			}
			rights, err := parseRights(oob[:oobn])
			if err != nil || len(rights) != 1 {
				accepted <- fmt.Sprintf("no listener descriptor: %v", err)
				return
			}
			l, err := net.FileListener(os.NewFile(uintptr(rights[0]), "listener"))
			if err != nil {
				accepted <- err.Error()
				return
			}
			defer l.Close()
			c, err := l.Accept()
			if err != nil {
				accepted <- err.Error()
				return
			}
			c.Close()
			accepted <- "accepted"
		}()
		outR, outW, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		res, err := d.Run(context.Background(), s, Stdio{Stdout: outW, Proxy: child})
		outW.Close()
		child.Close()
		out, _ := io.ReadAll(outR)
		outR.Close()
		if err != nil || res.ExitCode != 0 || res.Prestarted != want {
			t.Fatalf("call %d: %v %+v %s", i, err, res, out)
		}
		if got := probeLines(out); got["tcp:127.0.0.1:3128"] != "ok" || got["tcp:127.0.0.1:3129"] != "ECONNREFUSED" {
			t.Errorf("call %d (pre-started %v): %v", i, want, got)
		}
		select {
		case a := <-accepted:
			if a != "accepted" {
				t.Errorf("call %d: the caller's side: %s", i, a)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("call %d: no connection reached the caller's listener", i)
		}
	}
}

// waitPool waits until d's pool holds n sandboxes, none being built, each
// confined and waiting (GoReady said), and returns them.
func waitPool(t testing.TB, d *direct, n int) []*warm {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		d.pre.mu.Lock()
		ready := slices.Clone(d.pre.ready)
		inflight := d.pre.inflight
		d.pre.mu.Unlock()
		if inflight == 0 && len(ready) == n {
			for _, w := range ready {
				select {
				case <-w.ready:
				case <-time.After(30 * time.Second):
					t.Fatal("a pooled sandbox was not ready within 30s")
				}
				if !w.said {
					t.Fatal("a pooled sandbox failed a step: the test would prove nothing")
				}
			}
			return ready
		}
		time.Sleep(2 * time.Millisecond)
	}
	d.pre.mu.Lock()
	defer d.pre.mu.Unlock()
	t.Fatalf("the pool did not hold %d ready sandboxes within 30s (ready %d, in flight %d)", n, len(d.pre.ready), d.pre.inflight)
	return nil
}

// burst runs k copies of s at once and returns their results and outputs.
func burst(t *testing.T, r Runner, s Spec, k int) ([]Result, []output) {
	t.Helper()
	res, outs, errs := make([]Result, k), make([]output, k), make([]error, k)
	var wg sync.WaitGroup
	for i := range k {
		wg.Go(func() { res[i], outs[i], errs[i] = run(t, r, s) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("call %d of the burst: %v %+v\n%s", i, err, res[i], outs[i])
		}
	}
	return res, outs
}

// requireExited waits (at most 30s) until each sandbox's init has ended:
// the sandbox served its call, or was discarded.
func requireExited(t *testing.T, what string, ws []*warm) {
	t.Helper()
	for i, w := range ws {
		select {
		case <-w.l.exited:
		case <-time.After(30 * time.Second):
			t.Errorf("%s: pooled sandbox %d (init %d) is still alive", what, i, w.l.cmd.Process.Pid)
		}
	}
}

// TestPrestartPoolBurst: with a pool of three, three calls that come
// together each run in a sandbox of its own, pre-started before them,
// whose /tmp no call has used (the workspace may be beneath /tmp: a
// marker file tells); two more calls in the same burst start
// cold or take one built behind the first; and the pool is refilled to
// three, never more (sandboxes in the pool by /proc: three inits).
func TestPrestartPoolBurst(t *testing.T) {
	requireSpawn(t)
	d := newDirect(testOptions())
	d.pre = newPrestarter(3)
	t.Cleanup(d.closePrestart)
	ws := workspace(t)
	// Each call holds its sandbox half a second, so that all of the
	// burst's calls have come before the first ends.
	s := shSpec(t, ws, `test -e /tmp/b10x-used && { echo "/tmp used"; exit 1; }; : > /tmp/b10x-used; sleep 0.5; echo ok`)
	if res, out, err := run(t, d, s); err != nil || res.ExitCode != 0 || res.Prestarted {
		t.Fatalf("first call: %v %+v\n%s", err, res, out)
	}
	pool := waitPool(t, d, 3)
	if procs := sandboxProcesses(os.Getpid()); len(procs[helper.Argv0]) != 3 || len(procs[stageLabel]) != 3 {
		t.Fatalf("the pool's processes: %v, want three inits and three waiting stages", procs)
	}
	res, outs := burst(t, d, s, 5)
	warm := 0
	for i := range res {
		if res[i].ExitCode != 0 || string(outs[i].stdout.Bytes()) != "ok\n" {
			t.Errorf("call %d of the burst: %+v\n%s", i, res[i], outs[i])
		}
		if res[i].Prestarted {
			warm++
		}
	}
	if warm < 3 || d.pre.taken.Load() != int64(warm) {
		t.Errorf("%d of 5 calls ran pre-started (taken %d), want at least the pool's 3", warm, d.pre.taken.Load())
	}
	// Each of the three pooled sandboxes served a call and died with it:
	// none is left to serve a second.
	requireExited(t, "after the burst", pool)
	after := waitPool(t, d, 3)
	for _, w := range after {
		if slices.Contains(pool, w) {
			t.Error("a sandbox that served the burst is in the pool again")
		}
	}
	if procs := sandboxProcesses(os.Getpid()); len(procs[helper.Argv0]) != 3 {
		t.Errorf("after the refill: %v, want three sandboxes", procs)
	}
}

// TestPrestartPoolStaleView: a held file replaced after the pool was
// built makes the next call start cold and discards every pooled
// sandbox; the refilled pool holds the new file.
func TestPrestartPoolStaleView(t *testing.T) {
	requireSpawn(t)
	d := newDirect(testOptions())
	d.pre = newPrestarter(3)
	t.Cleanup(d.closePrestart)
	ws := workspace(t)
	f := filepath.Join(ws, "held.txt")
	if err := os.WriteFile(f, []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := shSpec(t, ws, "cat held.txt")
	s.ReadOnly = []string{f}
	if _, _, err := run(t, d, s); err != nil {
		t.Fatal(err)
	}
	pool := waitPool(t, d, 3)
	tmp := filepath.Join(ws, "held.new")
	if err := os.WriteFile(tmp, []byte("new\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, f); err != nil {
		t.Fatal(err)
	}
	res, out, err := run(t, d, s)
	if err != nil || res.ExitCode != 0 || res.Prestarted || string(out.stdout.Bytes()) != "new\n" {
		t.Fatalf("after the held file was replaced: %v %+v %q", err, res, string(out.stdout.Bytes()))
	}
	requireExited(t, "after the view changed", pool)
	waitPool(t, d, 3)
	results, outs := burst(t, d, s, 3)
	for i, res := range results {
		if !res.Prestarted || string(outs[i].stdout.Bytes()) != "new\n" {
			t.Errorf("call %d in the refilled pool: %+v %q", i, res, string(outs[i].stdout.Bytes()))
		}
	}
	if n := d.pre.taken.Load(); n != 3 {
		t.Errorf("taken %d, want the 3 calls of the refilled pool", n)
	}
}

// TestPrestartPoolClosed: closing a full pool leaves none of its
// processes, alive or a zombie, and none of its leaves; a build still in
// flight when it closes is discarded too. It runs in a re-run child: the
// cgroup manager may move the process it runs in.
func TestPrestartPoolClosed(t *testing.T) {
	requireSpawn(t)
	if !inChildCgroup(t, true) {
		return
	}
	opts := testOptions()
	m := leafManager(t)
	if m != nil {
		opts.Cgroup = m
	}
	d := newDirect(opts)
	d.pre = newPrestarter(3)
	t.Cleanup(d.closePrestart)
	ws := workspace(t)
	if _, _, err := run(t, d, shSpec(t, ws, "true")); err != nil {
		t.Fatal(err)
	}
	pool := waitPool(t, d, 3)
	before := map[int]procState{}
	procs := sandboxProcesses(os.Getpid())
	for _, pids := range procs {
		for _, pid := range pids {
			st, ok, err := readProcState(pid)
			if err != nil || !ok {
				t.Fatalf("process %d of the pool: %v (exists %v)", pid, err, ok)
			}
			before[pid] = st
		}
	}
	if len(before) != 6 {
		t.Fatalf("the pool's processes: %v, want three inits and three stages", procs)
	}
	var leaves []string
	for _, w := range pool {
		if m != nil {
			if w.l.leaf == nil {
				t.Fatal("a pooled sandbox has no leaf under a cgroup manager")
			}
			leaves = append(leaves, w.l.leaf.Path())
		}
	}
	// One call takes a sandbox, and the refill behind it is in flight
	// when the pool closes.
	if res, _, err := run(t, d, shSpec(t, ws, "true")); err != nil || !res.Prestarted {
		t.Fatalf("call in the pool: %v %+v", err, res)
	}
	d.closePrestart()
	requireGone(t, "after close", before)
	if procs := sandboxProcesses(os.Getpid()); len(procs) != 0 {
		t.Errorf("sandbox processes after close: %v", procs)
	}
	for _, leaf := range leaves {
		if _, err := os.Stat(leaf); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("a pooled sandbox's leaf %s after close: %v, want it removed", leaf, err)
		}
	}
	if m != nil {
		ents, err := os.ReadDir(m.Parent())
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			if e.IsDir() && strings.HasPrefix(e.Name(), "call-") {
				t.Errorf("leaf left behind after close: %s", filepath.Join(m.Parent(), e.Name()))
			}
		}
	}
	d.pre.mu.Lock()
	defer d.pre.mu.Unlock()
	if len(d.pre.ready) != 0 || d.pre.inflight != 0 {
		t.Errorf("after close: %d ready, %d in flight, want none", len(d.pre.ready), d.pre.inflight)
	}
}

// TestBrokerPrestartPool: a broker with PrestartPool 3 runs three calls
// that come together each in a pre-started sandbox.
func TestBrokerPrestartPool(t *testing.T) {
	requireSpawn(t)
	b, err := StartBroker(BrokerOptions{Require: testOptions().Require, Prestart: true, PrestartPool: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ws := workspace(t)
	s := shSpec(t, ws, "sleep 0.3; echo ok")
	if _, _, err := run(t, b, s); err != nil {
		t.Fatal(err)
	}
	bpid := b.cmd.Process.Pid
	deadline := time.Now().Add(time.Minute)
	for {
		confined := 0
		for _, stage := range sandboxProcesses(bpid)[stageLabel] {
			if status, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(stage), "status")); err == nil && strings.Contains(string(status), "\nSeccomp:\t2\n") {
				confined++
			}
		}
		if confined == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d confined pre-started sandboxes under the broker within a minute, want 3", confined)
		}
		time.Sleep(5 * time.Millisecond)
	}
	res, outs := burst(t, b, s, 3)
	for i := range res {
		if !res[i].Prestarted || res[i].ExitCode != 0 || string(outs[i].stdout.Bytes()) != "ok\n" {
			t.Errorf("call %d of the burst: %+v\n%s", i, res[i], outs[i])
		}
	}
}

// TestPrestartPoolRefillAfterBurst: a call that ends while another runs
// builds no more than one sandbox (here none: one is still ready), so a
// burst's builds do not compete with its calls; when the last running
// call ends, the pool is filled again.
func TestPrestartPoolRefillAfterBurst(t *testing.T) {
	requireSpawn(t)
	d := newDirect(testOptions())
	d.pre = newPrestarter(3)
	t.Cleanup(d.closePrestart)
	ws := workspace(t)
	if _, _, err := run(t, d, shSpec(t, ws, "true")); err != nil {
		t.Fatal(err)
	}
	waitPool(t, d, 3)
	long := make(chan error, 1)
	go func() {
		res, out, err := run(t, d, shSpec(t, ws, "sleep 2"))
		if err == nil && (res.ExitCode != 0 || !res.Prestarted) {
			err = fmt.Errorf("the long call: %+v\n%s", res, out)
		}
		long <- err
	}()
	for deadline := time.Now().Add(30 * time.Second); d.pre.taken.Load() != 1; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the long call took no sandbox within 30s")
		}
	}
	if res, out, err := run(t, d, shSpec(t, ws, "true")); err != nil || res.ExitCode != 0 || !res.Prestarted {
		t.Fatalf("the short call: %v %+v\n%s", err, res, out)
	}
	d.pre.mu.Lock()
	ready, inflight := len(d.pre.ready), d.pre.inflight
	d.pre.mu.Unlock()
	if ready+inflight != 1 {
		t.Errorf("after a call ended beside a running one: %d ready, %d being built; want the one left ready and none built", ready, inflight)
	}
	if err := <-long; err != nil {
		t.Fatal(err)
	}
	waitPool(t, d, 3)
}

// TestPrestartedMaskDetached: a pre-started sandbox masks .env; the user
// then gives the same file a new name entry (a hard link made, the old
// name removed, the link renamed back: what an inode number reused by an
// editor's rename looks like), so .env is the same device and inode but
// the sandbox's mask, which sat on the removed name, is gone. The next
// call must not take that sandbox, and its program must not read the
// secret.
func TestPrestartedMaskDetached(t *testing.T) {
	d := prestarting(t)
	ws := workspace(t)
	secret := filepath.Join(ws, ".env")
	if err := os.WriteFile(secret, []byte("API_KEY=sk-live-detached\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	own(t, secret)
	id := func() FileID {
		var st syscall.Stat_t
		if err := syscall.Lstat(secret, &st); err != nil {
			t.Fatal(err)
		}
		return FileID{Dev: st.Dev, Ino: st.Ino}
	}
	s := shSpec(t, ws, "cat .env; echo ran")
	s.Hold = func() (Held, error) {
		return Held{Masked: []string{secret}, IDs: map[string]FileID{secret: id()}}, nil
	}
	if res, o, err := run(t, d, s); err != nil || res.ExitCode != 0 || strings.Contains(o.String(), "sk-live") {
		t.Fatalf("first call: %v %+v %s", err, res, o)
	}
	if w := waitWarm(t, d); !w.said {
		t.Fatal("the pre-started sandbox failed")
	}
	before := id()
	keep := filepath.Join(ws, ".env.keep")
	for _, step := range []func() error{
		func() error { return os.Link(secret, keep) },
		func() error { return os.Remove(secret) },
		func() error { return os.Rename(keep, secret) },
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	if id() != before {
		t.Fatalf(".env's identity changed: %v, was %v", id(), before)
	}
	res, o, err := run(t, d, s)
	if strings.Contains(o.String(), "sk-live") {
		t.Fatalf("the secret was read (pre-started %t): %s", res.Prestarted, o)
	}
	if err != nil || res.Prestarted || !strings.Contains(o.String(), "ran") {
		t.Fatalf("second call: %v, pre-started %t, want a cold start that masks .env again\n%s", err, res.Prestarted, o)
	}
}
