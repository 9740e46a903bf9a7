package spawn

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// waitWarm waits until d holds a pre-started sandbox whose stage is ready.
func waitWarm(t testing.TB, d *direct) *warm {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		d.pre.mu.Lock()
		w := d.pre.slot
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
func TestPrestartedDeadlineCountsFromCall(t *testing.T) {
	d := prestarting(t)
	ws := workspace(t)
	s := shSpec(t, ws, "true")
	if _, _, err := run(t, d, s); err != nil {
		t.Fatal(err)
	}
	waitWarm(t, d)
	time.Sleep(700 * time.Millisecond)
	s = shSpec(t, ws, "sleep 0.2; echo done")
	s.Timeout = 600 * time.Millisecond
	res, out, err := run(t, d, s)
	if err != nil || res.TimedOut || !strings.Contains(string(out.stdout.Bytes()), "done") {
		t.Fatalf("a call whose sandbox waited 0.7s was cut at 0.6s: %v %+v %q", err, res, out)
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

// TestPrestartClosed: closing leaves no sandbox process and no leaf, and
// later calls still run (cold).
func TestPrestartClosed(t *testing.T) {
	d := prestarting(t)
	ws := workspace(t)
	if _, _, err := run(t, d, shSpec(t, ws, "true")); err != nil {
		t.Fatal(err)
	}
	w := waitWarm(t, d)
	pid := w.l.cmd.Process.Pid
	d.closePrestart()
	if _, err := os.Stat(filepath.Join("/proc", strconv.Itoa(pid))); err == nil {
		t.Errorf("the pre-started sandbox's helper %d is alive after close", pid)
	}
	res, _, err := run(t, d, shSpec(t, ws, "true"))
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("call after close: %v %+v", err, res)
	}
	d.pre.mu.Lock()
	defer d.pre.mu.Unlock()
	if d.pre.slot != nil || d.pre.building != nil {
		t.Error("a sandbox was pre-started after close")
	}
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
	var got []bool
	for i := 0; i < 3; i++ {
		res, out, err := run(t, b, s)
		if err != nil || res.ExitCode != 0 || string(out.stdout.Bytes()) != "ok\n" {
			t.Fatalf("call %d: %v %+v %s", i, err, res, out)
		}
		got = append(got, res.Prestarted)
		time.Sleep(300 * time.Millisecond) // the model's turn
	}
	if got[0] || !got[1] || !got[2] {
		t.Errorf("pre-started: %v, want [false true true]", got)
	}
	// A call that leaves a daemon behind in its sandbox's namespace, and a
	// sandbox waiting when the broker closes: nothing survives Close.
	if _, _, err := run(t, b, shSpec(t, ws, "(setsid sleep "+sleep+" &)")); err != nil {
		t.Fatal(err)
	}
	bpid := b.cmd.Process.Pid
	time.Sleep(300 * time.Millisecond)
	helpers := processesWhere(func(pid int, argv []string) bool {
		return strings.HasPrefix(argv[0], "b10x-reexec:spawn-") && ancestor(pid, bpid)
	})
	if len(helpers) == 0 {
		t.Fatal("no pre-started sandbox under the broker: the test would prove nothing")
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	for _, pid := range append(helpers, bpid) {
		if _, err := os.Stat(filepath.Join("/proc", strconv.Itoa(pid))); err == nil {
			t.Errorf("process %d (the broker or one of its sandbox's) alive after Close", pid)
		}
	}
	if left := processesWith(sleep); len(left) > 0 {
		t.Errorf("processes left after Close: %v", left)
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
