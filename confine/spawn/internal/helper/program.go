package helper

import (
	"encoding/binary"
	"errors"
	"os"
	"os/signal"
	"strconv"
	"syscall"
)

// programEnv is the second stage's whole environment (the program gets
// Plan.Env), as the parent gives the first.
var programEnv = []string{"GOMAXPROCS=1", "GOGC=off"}

// startProgram starts the second stage (programMain) from this executable
// and hands it the plan, in a cgroup namespace of its own (rooted at the
// call's leaf, so the host's cgroup paths stay hidden). With Plan.NestUser
// it runs in a new user and mount namespace whose root is
// Plan.ChildUID/ChildGID of this one: the
// mount namespace is a copy made for a less privileged user namespace, so
// the kernel locks every mount of the view in it (no mount call, old or
// new, can clone, detach, move, remount or reveal what they cover).
// Without a user namespace it switches to ChildUID/ChildGID, which must
// not be root.
func startProgram(p *Plan) (pid int, notify int, err error) {
	notify = -1
	if !p.NestUser && (p.ChildUID == 0 || p.ChildGID == 0) {
		return 0, -1, errors.New("bug: the program would run as root without a user namespace")
	}
	// The bounding set is emptied before the clone: without a user
	// namespace the second stage cannot empty it itself (it is no longer
	// root), and a nested user namespace starts with a full one anyway,
	// which the second stage then empties.
	if err := dropBoundingSet(); err != nil {
		return 0, -1, err
	}
	var fds [2]int
	if err := syscall.Pipe2(fds[:], syscall.O_CLOEXEC); err != nil {
		return 0, -1, opErr("pipe2", "plan", err)
	}
	var e Encoder
	mounts := p.Mounts
	p.Mounts = nil // the second stage has no use for them
	p.Encode(&e)
	p.Mounts = mounts

	// The program leads a process group of its own, so that the signals
	// a terminal sends a foreground job reach all of it (see initLoop).
	attr := &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if p.NestUser {
		attr.Cloneflags = syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS | syscall.CLONE_NEWCGROUP
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: int(p.NSUID), HostID: int(p.ChildUID), Size: 1}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: int(p.NSGID), HostID: int(p.ChildGID), Size: 1}}
		attr.GidMappingsEnableSetgroups = false
		// Become the one id the new namespace maps (this process's own is
		// not mapped in it): its root, or the host ids themselves. Not
		// root, the second stage holds no capability from its execve on;
		// it needs none (it mounts nothing, and empties the sets anyway).
		attr.Credential = &syscall.Credential{Uid: p.NSUID, Gid: p.NSGID, NoSetGroups: true}
		if p.NSUID != 0 {
			// A new user namespace starts with a full bounding set, and a
			// stage that is not root of it loses every capability at its
			// execve: CAP_SETPCAP is kept (ambient) for the stage to empty
			// the bounding set, then dropped with everything else and
			// read back (dropCapabilities).
			attr.AmbientCaps = []uintptr{capSetPCap}
		}
	} else {
		attr.Credential = &syscall.Credential{Uid: p.ChildUID, Gid: p.ChildGID, Groups: []uint32{}}
		attr.Cloneflags = syscall.CLONE_NEWCGROUP
	}
	files := []uintptr{0, 1, 2, StatusFD, uintptr(fds[0])}
	if p.GoFD > 0 {
		files = append(files, uintptr(p.GoFD)) // StageGoFD
	}
	stageNotify := -1
	if p.SeccompNotify && len(p.Seccomp) > 0 {
		// The stage sends the filter's listener to this init on it.
		pair, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_SEQPACKET|syscall.SOCK_CLOEXEC, 0)
		if err != nil {
			sysClose(fds[0])
			sysClose(fds[1])
			return 0, -1, opErr("socketpair", "seccomp listener", err)
		}
		notify, stageNotify = pair[0], pair[1]
		for len(files) < StageNotifyFD {
			files = append(files, ^uintptr(0)) // closed in the stage
		}
		files = append(files, uintptr(stageNotify)) // StageNotifyFD
	}
	pid, err = syscall.ForkExec("/proc/self/exe", []string{Argv0Program}, &syscall.ProcAttr{
		Dir:   "/",
		Env:   programEnv,
		Files: files,
		Sys:   attr,
	})
	sysClose(fds[0])
	if stageNotify >= 0 {
		sysClose(stageNotify)
	}
	if p.GoFD > 0 {
		// Only the second stage speaks on it: when it dies, the parent
		// reads the end of the socket.
		sysClose(p.GoFD)
	}
	if err != nil {
		sysClose(fds[1])
		if notify >= 0 {
			sysClose(notify)
		}
		return 0, -1, opErr("fork and exec", "/proc/self/exe", err)
	}
	go func() {
		// A failed write means the second stage died; it or the wait
		// below says why.
		_ = sysWriteAll(fds[1], e.B)
		sysClose(fds[1])
	}()
	return pid, notify, nil
}

// capSetPCap is CAP_SETPCAP.
const capSetPCap = 8

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
// status pipe (after what the filter refused and the packets that found
// no route out of a fresh network namespace) and exits (with the program's exit status, or 128 plus its
// signal's number); the kernel then kills whatever is left in the
// namespace.
func initLoop(pid int, sigs chan os.Signal, refused *refusals, noRoute *noRoutes) {
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
		e.U8(StatusExit)
		e.U32(uint32(ws))
		_ = sysWriteAll(StatusFD, e.B)
		if ws.Signaled() {
			os.Exit(128 + int(ws.Signal()))
		}
		os.Exit(ws.ExitStatus())
	}
}

// programMain is the second stage: it confines itself and executes the
// program. It never returns.
func programMain() {
	p := startStage()
	layers, step, err := confineProgram(p)
	if err != nil {
		fail(step, err)
	}
	prog := -1
	if p.GoFD == 0 {
		// A cold call (or a probe) knows its program now: it must be
		// the file pinned before the stage says it is ready.
		if prog, err = openProgram(p.Path, p.ProgDev, p.ProgIno); err != nil {
			fail("program "+p.Path, err)
		}
	}
	var e Encoder
	e.U8(StatusReady)
	e.U32(layers)
	if err := sysWriteAll(StatusFD, e.B); err != nil {
		os.Exit(ExitSetup)
	}
	if p.Probe {
		os.Exit(0)
	}
	if p.GoFD > 0 {
		awaitCall(p)
		if prog, err = openProgram(p.Path, p.ProgDev, p.ProgIno); err != nil {
			fail("program "+p.Path, err)
		}
	}
	execProgram(p, prog)
}

// confineProgram performs the second stage's steps before execve, in
// order. It returns the layers applied, or the failed step and its error.
func confineProgram(p *Plan) (layers uint32, step string, err error) {
	layers = LayerMountNS
	if p.NestUser {
		layers |= LayerLockedView
	}
	if p.GoFD == 0 {
		// A pre-started sandbox changes directory when its call comes
		// (awaitCall).
		if err := sysChdir(p.Dir); err != nil {
			return 0, "chdir " + p.Dir, err
		}
	}
	if err := checkIdentity(p); err != nil {
		return 0, "identity", err
	}
	if err := dropCapabilities(); err != nil {
		return 0, "drop capabilities", err
	}
	layers |= LayerNoCaps
	if p.NProc > 0 {
		// After the capabilities are gone: the kernel waives the limit
		// for CAP_SYS_RESOURCE, and the proof must see what the
		// program will be.
		if err := limitProcs(p.NProc); err != nil {
			return 0, "pids rlimit", err
		}
		layers |= LayerNProc
	}
	// Every descriptor but 0-2 closes at execve: the status pipe (which
	// must stay open until then) and anything the runtime opened.
	if _, _, e := syscall.RawSyscall(sysCloseRangeNr, StatusFD, ^uintptr(0), closeRangeCloexec); e != 0 {
		return 0, "close descriptors", opErr("close_range", "CLOEXEC", e)
	}
	if err := sysPrctl(prSetNoNewPrivs, 1, 0, 0, 0); err != nil {
		return 0, "no_new_privs", opErr("prctl", "PR_SET_NO_NEW_PRIVS", err)
	}
	if r, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, prGetNoNewPrivs, 0, 0); e != 0 || r != 1 {
		return 0, "no_new_privs", errors.New("PR_GET_NO_NEW_PRIVS does not report it set")
	}
	layers |= LayerNoNewPrivs
	if len(p.Seccomp) > 0 {
		if p.SeccompNotify {
			listening, err := loadNotifying(p.Seccomp)
			if err != nil {
				return 0, "seccomp", err
			}
			if listening {
				layers |= LayerSeccompListener
			}
		} else if err := loadSeccomp(p.Seccomp); err != nil {
			return 0, "seccomp", err
		}
		layers |= LayerSeccomp
	}
	if p.LandlockFS != 0 || p.LandlockScoped != 0 {
		if err := landlock(p); err != nil {
			return 0, "landlock", err
		}
		layers |= LayerLandlock
	}
	return layers, "", nil
}

// checkIdentity fails unless this process runs as the plan says: NSUID and
// NSGID of its own user namespace (NestUser), or ChildUID and ChildGID.
// Supplementary groups are not checked: as root the helper dropped them
// (setgroups), and a harness that is not root cannot drop its own (the
// kernel forbids it in a user namespace it made), so they are its own.
func checkIdentity(p *Plan) error {
	wantUID, wantGID := p.ChildUID, p.ChildGID
	if p.NestUser {
		wantUID, wantGID = p.NSUID, p.NSGID
	}
	for _, id := range []struct {
		nr   uintptr
		what string
		want uint32
	}{{syscall.SYS_GETRESUID, "uid", wantUID}, {syscall.SYS_GETRESGID, "gid", wantGID}} {
		r, e, s, errno := sysGetres(id.nr)
		if errno != 0 {
			return opErr("getres"+id.what, "self", errno)
		}
		if r != id.want || e != id.want || s != id.want {
			return errors.New("the program stage runs as " + id.what + " " + strconv.FormatUint(uint64(e), 10) + ", want " + strconv.FormatUint(uint64(id.want), 10))
		}
	}
	return nil
}

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

// dropCapabilities empties the bounding, ambient, inheritable, permitted
// and effective sets of this thread, then reads them back: the program,
// even as uid 0 of its namespace, holds and can gain no capability.
func dropCapabilities() error {
	if err := dropBoundingSet(); err != nil {
		return err
	}
	if err := sysPrctl(prCapAmbient, prCapAmbientClearAll, 0, 0, 0); err != nil && !errors.Is(err, syscall.EINVAL) {
		return opErr("prctl", "PR_CAP_AMBIENT_CLEAR_ALL", err)
	}
	hdr := capUserHeader{version: linuxCapabilityVersion3}
	var data [2]capUserData
	if err := sysCapset(&hdr, &data); err != nil {
		return opErr("capset", "0", err)
	}
	return checkNoCapabilities()
}

// checkNoCapabilities reads the thread's capability sets back and fails
// unless every one is empty.
func checkNoCapabilities() error {
	hdr := capUserHeader{version: linuxCapabilityVersion3}
	var data [2]capUserData
	if err := sysCapget(&hdr, &data); err != nil {
		return opErr("capget", "self", err)
	}
	for _, d := range data {
		if d.effective|d.permitted|d.inheritable != 0 {
			return errors.New("capabilities remain after capset: effective, permitted or inheritable set not empty")
		}
	}
	for c := uintptr(0); c < 64; c++ {
		r, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_CAPBSET_READ, c, 0)
		if e == syscall.EINVAL {
			break
		}
		if e != 0 || r != 0 {
			return errors.New("capability " + strconv.Itoa(int(c)) + " remains in the bounding set")
		}
	}
	return nil
}

// StageGoFD is the second stage's descriptor of Plan.GoFD.
const StageGoFD = 5

// awaitCall is a pre-started sandbox's wait for its call, once confined:
// it says GoReady, receives one Go message (and the standard streams it
// names, SCM_RIGHTS), puts the streams in place, changes to the call's
// directory and fills in what the plan left out. A parent that closes its
// end before sending (a sandbox discarded unused) ends this process
// without a report; a malformed message fails the call like a setup step.
func awaitCall(p *Plan) {
	if err := sysWriteAll(StageGoFD, []byte{GoReady}); err != nil {
		os.Exit(ExitSetup)
	}
	buf := make([]byte, 64<<10)
	oob := make([]byte, syscall.CmsgSpace(3*4))
	var n, oobn, flags int
	var err error
	for {
		n, oobn, flags, _, err = syscall.Recvmsg(StageGoFD, buf, oob, syscall.MSG_CMSG_CLOEXEC)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		fail("receive the call", opErr("recvmsg", "go socket", err))
	}
	if n == 0 {
		os.Exit(ExitSetup)
	}
	if flags&syscall.MSG_CTRUNC != 0 {
		fail("receive the call", errors.New("more descriptors than the three standard streams"))
	}
	var fds []int
	if oobn > 0 {
		msgs, err := syscall.ParseSocketControlMessage(oob[:oobn])
		if err != nil {
			fail("receive the call", opErr("parse", "control message", err))
		}
		for i := range msgs {
			rights, err := syscall.ParseUnixRights(&msgs[i])
			if err != nil {
				fail("receive the call", opErr("parse", "SCM_RIGHTS", err))
			}
			fds = append(fds, rights...)
		}
	}
	msg := append([]byte(nil), buf[:n]...)
	for len(msg) < 4 || len(msg) < 4+int(binary.LittleEndian.Uint32(msg)) {
		if len(msg) > MaxWire {
			fail("receive the call", errors.New("call too large"))
		}
		n, err := sysRead(StageGoFD, buf)
		if err != nil {
			fail("receive the call", opErr("read", "go socket", err))
		}
		if n == 0 {
			fail("receive the call", errors.New("the call was cut short"))
		}
		msg = append(msg, buf[:n]...)
	}
	d := Decoder{B: msg}
	size := int(d.U32())
	d.B = d.B[:size]
	g := DecodeGo(&d)
	if err := d.End(); err != nil {
		fail("receive the call", err)
	}
	k := 0
	for i := 0; i < 3; i++ {
		if g.Stdio&(1<<i) == 0 {
			continue
		}
		if k >= len(fds) {
			fail("receive the call", errors.New("fewer descriptors than the call names"))
		}
		if err := syscall.Dup3(fds[k], i, 0); err != nil {
			fail("receive the call", opErr("dup3", strconv.Itoa(i), err))
		}
		sysClose(fds[k])
		k++
	}
	if k != len(fds) {
		fail("receive the call", errors.New("more descriptors than the call names"))
	}
	if err := sysChdir(g.Dir); err != nil {
		fail("chdir "+g.Dir, err)
	}
	p.Path, p.ProgDev, p.ProgIno, p.Argv, p.Env, p.Dir = g.Path, g.Dev, g.Ino, g.Argv, g.Env, g.Dir
}
