package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/b10x/harness/internal/reexec"
	"github.com/b10x/harness/internal/testenv"
	"github.com/b10x/harness/session"
)

// ttyHostileEntry is the hostile child of the terminal tests: the test
// binary, run by `exec` under the name "b10x-reexec:tty-hostile" (a link of
// that name on the harness's PATH), so reexec dispatches it.
const ttyHostileEntry = "tty-hostile"

// nTTY is the default line discipline, N_TTY.
const nTTY = 0

// nNull is the N_NULL line discipline: it discards output and reads nothing.
const nNull = 27

func init() { reexec.Register(ttyHostileEntry, ttyHostileMain) }

// ttyHostileMain breaks its stdin terminal every way a child can without
// privilege: echo and canonical mode off, a 1x1 window, exclusive mode,
// output stopped, the N_NULL line discipline (the last: after it, writes to
// the terminal fail). It writes what each step returned to hostile.out in
// its working directory, then exits or, with the argument "sleep", waits.
func ttyHostileMain() {
	var notes []string
	note := func(op string, err error) {
		s := "ok"
		if err != nil {
			s = err.Error()
		}
		notes = append(notes, op+"="+s)
	}
	tio, err := unix.IoctlGetTermios(0, unix.TCGETS)
	if err == nil {
		tio.Lflag &^= unix.ECHO | unix.ICANON
		err = unix.IoctlSetTermios(0, unix.TCSETS, tio)
	}
	note("TCSETS", err)
	note("TIOCSWINSZ", unix.IoctlSetWinsize(0, unix.TIOCSWINSZ, &unix.Winsize{Row: 1, Col: 1}))
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, 0, unix.TIOCEXCL, 0); e != 0 {
		note("TIOCEXCL", e)
	} else {
		note("TIOCEXCL", nil)
	}
	note("TCXONC", unix.IoctlSetInt(0, unix.TCXONC, unix.TCOOFF))
	note("TIOCSETD", unix.IoctlSetPointerInt(0, unix.TIOCSETD, nNull))
	if err := os.WriteFile("hostile.out", []byte(strings.Join(notes, "\n")+"\n"), 0o644); err != nil {
		os.Exit(3)
	}
	if len(os.Args) > 1 && os.Args[1] == "sleep" {
		time.Sleep(time.Minute)
	}
	os.Exit(0)
}

// rawFD runs fn with f's descriptor, without f.Fd(): that would put f in
// blocking mode, and the tests' read deadlines would stop working.
func rawFD(t *testing.T, f *os.File, fn func(fd int)) {
	t.Helper()
	rc, err := f.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	if err := rc.Control(func(fd uintptr) { fn(int(fd)) }); err != nil {
		t.Fatal(err)
	}
}

// pty is a pseudo-terminal pair opened by the test.
type pty struct {
	master, slave *os.File
	name          string
}

func openPTY(t *testing.T) *pty {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("opening /dev/ptmx: %v", err)
	}
	var n int
	rawFD(t, m, func(fd int) {
		if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
			t.Fatalf("unlocking the pty (TIOCSPTLCK): %v", err)
		}
		if n, err = unix.IoctlGetInt(fd, unix.TIOCGPTN); err != nil {
			t.Fatalf("TIOCGPTN: %v", err)
		}
	})
	name := "/dev/pts/" + strconv.Itoa(n)
	s, err := os.OpenFile(name, os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("opening %s: %v", name, err)
	}
	p := &pty{master: m, slave: s, name: name}
	t.Cleanup(func() { s.Close(); m.Close() })
	return p
}

// ttySnapshot is what the tests compare on the terminal.
type ttySnapshot struct {
	termios unix.Termios
	ldisc   int
	winsize unix.Winsize
	excl    int
}

func (p *pty) snapshot(t *testing.T) ttySnapshot {
	t.Helper()
	var snap ttySnapshot
	rawFD(t, p.slave, func(fd int) {
		tio, err := unix.IoctlGetTermios(fd, unix.TCGETS)
		if err != nil {
			t.Fatalf("TCGETS: %v", err)
		}
		ld, err := unix.IoctlGetInt(fd, unix.TIOCGETD)
		if err != nil {
			t.Fatalf("TIOCGETD: %v", err)
		}
		ws, err := unix.IoctlGetWinsize(fd, unix.TIOCGWINSZ)
		if err != nil {
			t.Fatalf("TIOCGWINSZ: %v", err)
		}
		ex, err := unix.IoctlGetInt(fd, unix.TIOCGEXCL)
		if err != nil {
			t.Fatalf("TIOCGEXCL: %v", err)
		}
		snap = ttySnapshot{*tio, ld, *ws, ex}
	})
	return snap
}

// check compares the terminal with before, and proves it works: a line
// typed on the master is echoed and read, whole, on the slave.
func (p *pty) check(t *testing.T, what string, before ttySnapshot) {
	t.Helper()
	after := p.snapshot(t)
	if after.termios.Lflag&(unix.ECHO|unix.ICANON) != unix.ECHO|unix.ICANON {
		t.Errorf("%s: ECHO or ICANON left cleared (lflag %#o)", what, after.termios.Lflag)
	}
	if after.termios != before.termios {
		t.Errorf("%s: termios changed:\n before %+v\n after  %+v", what, before.termios, after.termios)
	}
	if after.ldisc != nTTY {
		t.Errorf("%s: line discipline %d left, want N_TTY (%d)", what, after.ldisc, nTTY)
	}
	if after.winsize != before.winsize {
		t.Errorf("%s: window size %+v, want %+v", what, after.winsize, before.winsize)
	}
	if after.excl != 0 {
		t.Errorf("%s: exclusive mode left on", what)
	}
	if t.Failed() {
		return
	}
	// What the harness wrote, then the echo of a typed line.
	p.drain()
	if _, err := p.master.Write([]byte("typed line\n")); err != nil {
		t.Fatalf("%s: typing: %v", what, err)
	}
	p.slave.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 100)
	n, err := p.slave.Read(buf)
	if err != nil || string(buf[:n]) != "typed line\n" {
		t.Errorf("%s: the terminal took no input: read %q, %v", what, buf[:n], err)
	}
	echo := p.drain()
	if !strings.Contains(echo, "typed line") {
		t.Errorf("%s: the terminal shows nothing: echo %q", what, echo)
	}
}

// drain reads what is waiting on the master.
func (p *pty) drain() string {
	var b bytes.Buffer
	buf := make([]byte, 4096)
	for {
		p.master.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		n, err := p.master.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			return b.String()
		}
	}
}

// execOnTTY starts `b10x-harness exec` with the pty as its controlling
// terminal and stdin, stdout and stderr, and PATH holding dir first.
func execOnTTY(t *testing.T, p *pty, dir string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := harnessCommand(append([]string{"exec"}, args...)...)
	cmd.Env = append(os.Environ(), "B10X_TEST_MAIN=1", "PATH="+dir+":"+session.SafePath)
	// A descriptor of its own: starting a process puts the files it is
	// given in blocking mode.
	f, err := os.OpenFile(p.name, os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd.Stdin, cmd.Stdout, cmd.Stderr = f, f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd
}

// waitExit waits for cmd with a deadline (a harness blocked on a stopped
// terminal must fail the test, not hang it) and returns its exit status.
func waitExit(t *testing.T, cmd *exec.Cmd) int {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0
	case <-time.After(90 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatal("the harness did not end within 90s")
		return -1
	}
}

// ttySetup makes a workspace, a directory with the hostile child's link and
// a pty with a known window size.
func ttySetup(t *testing.T) (ws, bin string, p *pty, before ttySnapshot) {
	t.Helper()
	testenv.Require(t, execution(), "confined execution", testenv.ShapeNoLandlock, testenv.ShapeNoUserns)
	ws, _ = sampleWorkspace(t)
	bin = t.TempDir()
	self, err := os.Executable()
	must(t, err)
	must(t, os.Symlink(self, filepath.Join(bin, "b10x-reexec:"+ttyHostileEntry)))
	p = openPTY(t)
	rawFD(t, p.slave, func(fd int) { must(t, unix.IoctlSetWinsize(fd, unix.TIOCSWINSZ, &unix.Winsize{Row: 41, Col: 133})) })
	return ws, bin, p, p.snapshot(t)
}

// TestExecRestoresTerminal: a child that turns echo and canonical mode off,
// changes the line discipline to N_NULL, the window size, exclusive mode
// and stops output leaves the user's terminal as it was once exec returns.
func TestExecRestoresTerminal(t *testing.T) {
	ws, bin, p, before := ttySetup(t)

	cmd := execOnTTY(t, p, bin, "--workspace", ws, "--", "b10x-reexec:"+ttyHostileEntry)
	code := waitExit(t, cmd)
	out, _ := os.ReadFile(filepath.Join(ws, "hostile.out"))
	t.Logf("the hostile child: %s", strings.ReplaceAll(strings.TrimSpace(string(out)), "\n", ", "))
	if code != 0 || !strings.Contains(string(out), "TCSETS=ok") {
		t.Fatalf("exec: exit %d, the child did not run as planned (%q)\nterminal: %s", code, out, p.drain())
	}
	p.check(t, "raw ioctls", before)

	cmd = execOnTTY(t, p, bin, "--workspace", ws, "--", "sh", "-c", "stty -echo -icanon && stty -a > stty.out")
	if code := waitExit(t, cmd); code != 0 {
		t.Fatalf("exec stty: exit %d\nterminal: %s", code, p.drain())
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "stty.out")); !strings.Contains(string(b), "-echo") || !strings.Contains(string(b), "-icanon") {
		t.Fatalf("stty did not change the terminal inside the call: %q", b)
	}
	p.check(t, "stty -echo -icanon", before)
}

// TestExecRestoresTerminalOnSignal: the same child, still running when the
// harness gets SIGTERM, SIGINT, SIGHUP or SIGQUIT (which a child can bind
// to any key), or when the call times out.
func TestExecRestoresTerminalOnSignal(t *testing.T) {
	ws, bin, p, before := ttySetup(t)
	grace := "1s"
	if testenv.InVM() {
		grace = "3s"
	}
	for _, c := range []struct {
		name    string
		sig     syscall.Signal
		timeout string
		code    int
	}{
		// Each is forwarded to the child, which dies of it (a Go
		// program's SIGQUIT too, after its trace): 128 + its number.
		{"SIGTERM", syscall.SIGTERM, "", 128 + int(syscall.SIGTERM)},
		{"SIGINT", syscall.SIGINT, "", 128 + int(syscall.SIGINT)},
		{"SIGHUP", syscall.SIGHUP, "", 128 + int(syscall.SIGHUP)},
		{"SIGQUIT", syscall.SIGQUIT, "", 128 + int(syscall.SIGQUIT)},
		{"timeout", 0, execLimit(t, ws, "2s"), exitTimeout},
	} {
		os.Remove(filepath.Join(ws, "hostile.out"))
		// A short grace: the child's SIGQUIT trace blocks on the
		// terminal it stopped, so that case always ends at the grace.
		args := []string{"--workspace", ws, "--grace", grace}
		if c.timeout != "" {
			args = append(args, "--timeout", c.timeout)
		}
		cmd := execOnTTY(t, p, bin, append(args, "--", "b10x-reexec:"+ttyHostileEntry, "sleep")...)
		deadline := time.Now().Add(30 * time.Second)
		for {
			if _, err := os.Stat(filepath.Join(ws, "hostile.out")); err == nil {
				break
			}
			if time.Now().After(deadline) {
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatalf("%s: the child never ran\nterminal: %s", c.name, p.drain())
			}
			time.Sleep(20 * time.Millisecond)
		}
		if c.sig != 0 {
			must(t, cmd.Process.Signal(c.sig))
		}
		if code := waitExit(t, cmd); code != c.code {
			t.Errorf("%s: exit %d, want %d\nterminal: %s", c.name, code, c.code, p.drain())
		}
		p.check(t, c.name, before)
	}
}

// TestRestoreTerminalsReportsFailures: one terminal is saved once however
// many streams it is, a stream that is no terminal is skipped, and a
// restore that fails (the terminal hung up) gives one single-line error per
// failed operation, naming the terminal and the operation.
