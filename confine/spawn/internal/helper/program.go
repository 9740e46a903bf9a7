package helper

import (
	"errors"
	"os"
	"os/signal"
	"strconv"
	"syscall"
)

// forwardedSignals are the signals the init passes on to the program. They
// are caught from the helper's start (catchSignals): as PID 1 of its
// namespace, an init with no handler ignores what an ancestor sends it, so
// a cancel that came while the view was being built would wait the whole
// grace; caught, it reaches the program as soon as it runs.
var forwardedSignals = []os.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGWINCH}

// catchSignals starts catching forwardedSignals, for initLoop.
func catchSignals() chan os.Signal {
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, forwardedSignals...)
	return sigs
}

// initLoop is the first stage's life once the program runs: PID 1 of the
// namespace. It forwards the signals it is sent to the program, reaps
// every orphan, and when the program ends reports its wait status on the
// status pipe (after what the filter refused, the packets that found no
// route out of a fresh network namespace, the masked files read and,
// when nothing else of the call is left, StatusAlone) and exits (with the
// program's exit status, or 128 plus its signal's number);
// the kernel then kills whatever is left in the namespace.
func initLoop(pid int, sigs chan os.Signal, refused *refusals, noRoute *noRoutes, masks *maskFiles) {
	// Signals a shell would not forward must not end the init (and with
	// it the call) or make its runtime print a trace on the program's
	// stderr, where a program can send them (below Landlock ABI 6, which
	// scopes signals).
	signal.Ignore(syscall.SIGABRT, syscall.SIGALRM, syscall.SIGPIPE, syscall.SIGPROF, syscall.SIGVTALRM,
		syscall.SIGXCPU, syscall.SIGXFSZ, syscall.SIGTRAP, syscall.SIGSTKFLT, syscall.SIGPWR,
		syscall.SIGTSTP, syscall.SIGTTIN, syscall.SIGTTOU)
	go func() {
		for s := range sigs {
			sig, ok := s.(syscall.Signal)
			if !ok {
				continue
			}
			switch sig {
			case syscall.SIGINT, syscall.SIGQUIT, syscall.SIGWINCH:
				// What a terminal sends a foreground job (Ctrl-C, Ctrl-\,
				// a resize) goes to the program's whole process group, as
				// the terminal would: a shell waiting for its foreground
				// command ends with it. To the program alone when it has
				// left its group (the group is gone).
				if syscall.Kill(-pid, sig) != nil {
					_ = syscall.Kill(pid, sig)
				}
			default:
				// SIGTERM, SIGHUP, SIGUSR1, SIGUSR2, as a supervisor sends
				// them (docker, a kubelet): to the program, which may end
				// its own children as it sees fit.
				_ = syscall.Kill(pid, sig)
			}
		}
	}()
	for {
		var ws syscall.WaitStatus
		wpid, err := syscall.Wait4(-1, &ws, 0, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			fail("wait for the program", opErr("wait4", "-1", err))
		}
		if wpid != pid {
			continue // an orphan, reaped
		}
		var e Encoder
		if refused != nil {
			refused.encode(&e)
		}
		if noRoute != nil {
			noRoute.encode(&e)
		}
		if masks != nil {
			masks.encode(&e)
		}
		if alone() {
			e.U8(StatusAlone)
		}
		e.U8(StatusExit)
		e.U32(uint32(ws))
		_ = sysWriteAll(StatusFD, e.B)
		if ws.Signaled() {
			os.Exit(128 + int(ws.Signal()))
		}
		os.Exit(ws.ExitStatus())
	}
}

// alone reaps the orphans that have ended and reports whether the init
// has no child left. Every process of the namespace descends from the
// init, and a process whose parent ends becomes the init's child before
// that parent can be reaped: with no child, nothing of the call runs but
// the init. A child still running (the program's background job) means
// false; the kernel kills it when the init exits. So does a stream of
// orphans ending faster than the init reaps them (past maxAloneReaps): the
// program's status must not wait on what its background jobs do.
func alone() bool {
	for reaped := 0; reaped <= maxAloneReaps; {
		var ws syscall.WaitStatus
		wpid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		switch {
		case errors.Is(err, syscall.EINTR):
			continue
		case errors.Is(err, syscall.ECHILD):
			return true
		case err != nil || wpid == 0:
			return false
		}
		reaped++
	}
	return false
}

// maxAloneReaps bounds the orphans alone reaps before it gives up.
const maxAloneReaps = 256

// dropBoundingSet empties this thread's capability bounding set, dropping
// only what is still in it (dropping needs CAP_SETPCAP even for a
// capability already gone).
func dropBoundingSet() error {
	for c := uintptr(0); c < 64; c++ {
		r, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_CAPBSET_READ, c, 0)
		if e == syscall.EINVAL {
			return nil // past the kernel's last capability
		}
		if e != 0 {
			return opErr("prctl PR_CAPBSET_READ", strconv.Itoa(int(c)), e)
		}
		if r == 0 {
			continue
		}
		if err := sysPrctl(syscall.PR_CAPBSET_DROP, c, 0, 0, 0); err != nil {
			return opErr("prctl PR_CAPBSET_DROP", strconv.Itoa(int(c)), err)
		}
	}
	return nil
}

// The program's stage is forked without a runtime (stage.go,
// stage_unsafe.go); its checks can also be called from Go, as the tests
// do, through these.

// checkIdentity fails unless this thread runs as the plan says: NSUID and
// NSGID of its own user namespace (NestUser), or ChildUID and ChildGID.
// Supplementary groups are not checked: as root the helper dropped them
// (setgroups), and a harness that is not root cannot drop its own (the
// kernel forbids it in a user namespace it made), so they are its own.
func checkIdentity(p *Plan) error {
	a := &stageArgs{uid: uintptr(p.ChildUID), gid: uintptr(p.ChildGID)}
	if p.NestUser {
		a.uid, a.gid = uintptr(p.NSUID), uintptr(p.NSGID)
	}
	return a.err(a.checkIDs(), p)
}

// checkNoCapabilities reads this thread's capability sets back and fails
// unless every one is empty.
func checkNoCapabilities() error {
	a := &stageArgs{}
	return a.err(a.checkNoCaps(), &Plan{})
}

// limitProcs sets RLIMIT_NPROC to n, soft and hard, and proves that the
// kernel enforces it for this process (nprocProof): with the soft limit
// at 1 (this process alone counts already) a fork must be refused with
// EAGAIN. The kernel counts the tasks of a real uid in each user namespace
// (Linux 5.14's ucounts), so in the program's own user namespace n bounds
// the processes and threads of the call; it does not hold for uid 0 of the
// initial user namespace or a holder of CAP_SYS_RESOURCE or CAP_SYS_ADMIN
// there, which is what the proof catches (docs/decisions/0091).
func limitProcs(n uint64) error {
	a := &stageArgs{nproc: n}
	return a.err(a.limitProcs(), &Plan{})
}

// err is the error of a step's result s (nil for 0).
func (a *stageArgs) err(s stageStep, p *Plan) error {
	if s == 0 {
		return nil
	}
	_, err := a.rep.failure(p)
	return err
}
