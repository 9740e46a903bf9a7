package proc

import (
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/b10x/harness/cgroup"
	"github.com/b10x/harness/internal/reexec"
)

// A hook's lifetime is bounded by a small init between the gate and the
// hook (docs/decisions/0053-bounded-hooks.md): the harness re-executes
// itself under the hidden entry point initEntry, which starts the hook,
// waits for it, and then kills and reaps everything the hook left behind
// before it reports the hook's exit status. Two ways to see everything:
//
//   - where the harness may create a PID namespace without a user namespace
//     (it holds CAP_SYS_ADMIN: root), the init is PID 1 of a new one: every
//     descendant of the hook, setsid or double fork included, is in it and
//     dies with it (kill(-1) from PID 1, and the kernel's own kill of the
//     namespace when PID 1 exits);
//   - elsewhere the init is a child subreaper (PR_SET_CHILD_SUBREAPER):
//     every orphan of the hook's tree is re-parented to it, and it kills its
//     children until it has none.
//
// The hook itself is never PID 1 (which would ignore its own signals), its
// identity and environment are unchanged, and a signal the init receives
// (the gate's timeout, the harness's death through PR_SET_PDEATHSIG) ends
// the hook and its tree the same way.

// initEntry is the hidden entry point of the hook init.
const initEntry = "hook-init"

func init() { reexec.Register(initEntry, initMain) }

// HookCommand is the command that runs argv (a hook) under the init with
// the environment env (nil: the harness's own), in a new PID namespace
// when withPIDNS. It exits with the hook's exit status, 128+N when a
// signal N ended the hook, 127 when the hook could not be started; by
// then nothing the hook started is left.
func HookCommand(argv, env []string, withPIDNS bool) *exec.Cmd {
	cmd := reexec.Command(initEntry, argv...)
	cmd.Env = env
	// As a subreaper, SIGTERM, not SIGKILL: the init must live long
	// enough to kill the hook's tree when the harness dies. As PID 1 of
	// its own namespace, SIGKILL: the kernel then kills everything in the
	// namespace, and no window is left open (a SIGTERM that arrives before
	// the init has installed its handler is ignored by a PID 1).
	attr := &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if withPIDNS {
		attr.Cloneflags = syscall.CLONE_NEWPID
		attr.Pdeathsig = syscall.SIGKILL
	}
	cmd.SysProcAttr = attr
	cmd.WaitDelay = time.Second
	return cmd
}

// initMain is the hook init: os.Args[1:] is the hook's argv. It exits
// with the hook's exit status, 128+N when a signal N ended the hook, 127
// when the hook could not be started.
func initMain() {
	argv := os.Args[1:]
	inNS := os.Getpid() == 1
	if !inNS {
		// Checked by reading it back: an init that is not the subreaper
		// would let the hook's orphans outlive it.
		if err := cgroup.SetChildSubreaper(); err != nil {
			fmt.Fprintf(os.Stderr, "hook init: %v\n", err)
			os.Exit(127)
		}
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	if len(argv) == 0 {
		fmt.Fprintln(os.Stderr, "hook init: no hook")
		os.Exit(127)
	}
	path, err := exec.LookPath(argv[0])
	if err != nil {
		fmt.Fprintf(os.Stderr, "hook init: %v\n", err)
		os.Exit(127)
	}
	pid, err := syscall.ForkExec(path, argv, &syscall.ProcAttr{
		Env:   os.Environ(),
		Files: []uintptr{0, 1, 2},
		// Out of the terminal's foreground group: a ^C reaches the
		// harness, which cancels through the init, not the hook directly.
		Sys: &syscall.SysProcAttr{Setpgid: true},
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "hook init: starting %s: %v\n", argv[0], err)
		os.Exit(127)
	}
	go func() {
		<-sigs
		_ = unix.Kill(pid, unix.SIGKILL)
	}()
	code := 70
	for {
		var ws unix.WaitStatus
		wpid, err := unix.Wait4(-1, &ws, 0, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			break // ECHILD: cannot happen before the hook is reaped
		}
		if wpid == pid {
			switch {
			case ws.Exited():
				code = ws.ExitStatus()
			case ws.Signaled():
				code = 128 + int(ws.Signal())
			}
			break
		}
	}
	killTree(inNS)
	os.Exit(code)
}

// killTree kills and reaps every process left under the init: in its own
// PID namespace everything but itself (kill(-1)); as a subreaper each child,
// round after round (killing one re-parents its children to the init),
// until none is left.
func killTree(inNS bool) {
	self := os.Getpid()
	for {
		if inNS {
			_ = unix.Kill(-1, unix.SIGKILL)
		} else {
			for _, p := range childrenOf(self) {
				_ = unix.Kill(p, unix.SIGKILL)
			}
		}
		for {
			var ws unix.WaitStatus
			wpid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
			if err == unix.ECHILD {
				return
			}
			if err != nil && err != unix.EINTR {
				return
			}
			if wpid == 0 {
				break
			}
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// childrenOf lists the processes whose parent is pid (from /proc/*/stat).
func childrenOf(pid int) []int {
	d, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range d {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// The command name is in parentheses and may hold anything;
		// the fields after its last ')' are state, ppid, ...
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			out = append(out, p)
		}
	}
	return out
}
