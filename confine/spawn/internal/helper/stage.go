package helper

import (
	"encoding/binary"
	"errors"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
)

// The program's stage: forked from the first stage without a Go runtime of
// its own (stage_unsafe.go; docs/decisions/0094-stage-without-a-runtime.md).
// This file is the first stage's side of it: what it prepares before the
// fork, the user namespace's maps it writes, the reports it reads and the
// errors it makes of them, and a pre-started sandbox's call.

// stageStep names the stage's steps in its reports; each is worded as the
// step a failure names (stepName).
type stageStep uint32

const (
	stepStart      stageStep = iota + 1 // process group, death signal, maps, ids
	stepChdir                           // the call's directory
	stepIdentity                        // the ids read back
	stepCaps                            // every capability dropped and read back
	stepNProc                           // RLIMIT_NPROC set and proven
	stepCloseRange                      // every descriptor but 0-2 close-on-exec
	stepNoNewPrivs                      // no_new_privs set and read back
	stepSeccomp                         // the filter, and its listener sent
	stepLandlock                        // the domain's name, the domain
	stepReceive                         // a pre-started sandbox's call
	stepProgram                         // the pinned program opened
	stepExec                            // execveat, or execve for a script
)

// Which check of a step failed (stageReport.what).
const (
	whatSetpgid = iota + 1
	whatPdeathsig
	whatMaps
	whatSetgroups
	whatSetresgid
	whatSetresuid
	whatBoundRead
	whatBoundDrop
	whatAmbient
	whatCapset
	whatCapget
	whatSetsLeft
	whatBoundLeft
	whatProof
	whatForked
	whatNeither
	whatReadBack
	whatMismatch
	whatSet
	whatFilter
	whatListener
	whatSendListener
	whatSetName
	whatGetName
	whatNameDiffers
	whatRestrict
	whatRecvmsg
	whatTooMany
	whatTooFew
	whatDup
	whatOpenRoot
	whatWalk
	whatFstat
	whatExecveat
	whatExecve
)

// failure returns the step's name and error for a failed report, worded
// as the steps were when the stage was a Go program of its own: p is the
// plan (with the call's path and directory in it).
func (r *stageReport) failure(p *Plan) (string, error) {
	e := syscall.Errno(r.errno)
	switch stageStep(r.step) {
	case stepStart:
		op := map[uint32]string{whatSetpgid: "setpgid", whatPdeathsig: "prctl PR_SET_PDEATHSIG", whatMaps: "read",
			whatSetgroups: "setgroups", whatSetresgid: "setresgid", whatSetresuid: "setresuid"}[r.what]
		operand := "0"
		switch r.what {
		case whatMaps:
			operand = "the id maps' pipe"
		case whatSetresgid, whatSetresuid:
			operand = strconv.FormatUint(r.a, 10)
		}
		return "start the program's stage", opErr(op, operand, e)
	case stepChdir:
		return "chdir " + p.Dir, e
	case stepIdentity:
		what := [2]string{"uid", "gid"}[r.what&1]
		if e != 0 {
			return "identity", opErr("getres"+what, "self", e)
		}
		return "identity", errors.New("the program stage runs as " + what + " " + strconv.FormatUint(r.a, 10) + ", want " + strconv.FormatUint(r.b, 10))
	case stepCaps:
		return "drop capabilities", capsError(r)
	case stepNProc:
		return "pids rlimit", nprocError(r)
	case stepCloseRange:
		return "close descriptors", opErr("close_range", "CLOEXEC", e)
	case stepNoNewPrivs:
		if r.what == whatSet {
			return "no_new_privs", opErr("prctl", "PR_SET_NO_NEW_PRIVS", e)
		}
		return "no_new_privs", errors.New("PR_GET_NO_NEW_PRIVS does not report it set")
	case stepSeccomp:
		switch r.what {
		case whatListener:
			return "seccomp", opErr("seccomp", "SET_MODE_FILTER NEW_LISTENER", e)
		case whatSendListener:
			return "seccomp", opErr("sendmsg", "the seccomp listener", e)
		}
		return "seccomp", opErr("seccomp", "SET_MODE_FILTER", e)
	case stepLandlock:
		switch r.what {
		case whatSetName:
			return "landlock", opErr("prctl PR_SET_NAME", p.DomainName, e)
		case whatGetName:
			return "landlock", opErr("prctl PR_GET_NAME", p.DomainName, e)
		case whatNameDiffers:
			return "landlock", opErr("prctl PR_GET_NAME", p.DomainName, errors.New("the name read back differs"))
		}
		return "landlock", opErr("landlock_restrict_self", "", e)
	case stepReceive:
		return "receive the call", receiveError(r)
	case stepProgram:
		return "program " + p.Path, programError(r, p)
	case stepExec:
		if r.what == whatExecveat {
			return "exec " + p.Path, opErr("execveat", p.Path, e)
		}
		return "exec " + p.Path, e
	}
	return "program stage", errors.New("bug: report of an unknown step " + strconv.FormatUint(uint64(r.step), 10))
}

func capsError(r *stageReport) error {
	e := syscall.Errno(r.errno)
	switch r.what {
	case whatBoundRead:
		return opErr("prctl PR_CAPBSET_READ", strconv.FormatUint(r.a, 10), e)
	case whatBoundDrop:
		return opErr("prctl PR_CAPBSET_DROP", strconv.FormatUint(r.a, 10), e)
	case whatAmbient:
		return opErr("prctl", "PR_CAP_AMBIENT_CLEAR_ALL", e)
	case whatCapset:
		return opErr("capset", "0", e)
	case whatCapget:
		return opErr("capget", "self", e)
	case whatSetsLeft:
		return errors.New("capabilities remain after capset: effective, permitted or inheritable set not empty")
	}
	return errors.New("capability " + strconv.FormatUint(r.a, 10) + " remains in the bounding set")
}

func nprocError(r *stageReport) error {
	switch r.what {
	case whatProof:
		return opErr("prlimit RLIMIT_NPROC, or the proof's fork", strconv.FormatUint(r.a, 10), syscall.Errno(r.errno))
	case whatForked:
		return errors.New("RLIMIT_NPROC is not enforced for this process (uid 0 of the initial user namespace, or CAP_SYS_RESOURCE): a fork under a limit of 1 succeeded")
	case whatNeither:
		return errors.New("RLIMIT_NPROC: the proof neither forked nor was refused")
	case whatReadBack:
		return opErr("prlimit RLIMIT_NPROC", "read", syscall.Errno(r.errno))
	}
	return errors.New("RLIMIT_NPROC reads " + strconv.FormatUint(r.a, 10) + "/" + strconv.FormatUint(r.b, 10) + ", want " + strconv.FormatUint(r.c, 10))
}

func receiveError(r *stageReport) error {
	switch r.what {
	case whatRecvmsg:
		return opErr("recvmsg", "call socket", syscall.Errno(r.errno))
	case whatTooFew:
		return errors.New("fewer descriptors than the call names")
	case whatDup:
		return opErr("dup3", strconv.FormatUint(r.a, 10), syscall.Errno(r.errno))
	}
	return errors.New("more descriptors than the call names")
}

// programError words a failure to open the pinned program (see
// openProgram in exec.go for the walk the stage makes).
func programError(r *stageReport, p *Plan) error {
	e := syscall.Errno(r.errno)
	switch r.what {
	case whatOpenRoot:
		return opErr("open", "/", e)
	case whatFstat:
		return opErr("fstat", p.Path, e)
	case whatMismatch:
		return &pinMismatch{path: p.Path, program: true, wantDev: p.ProgDev, wantIno: p.ProgIno, gotDev: r.a, gotIno: r.b, gotDir: r.c&syscall.S_IFMT == syscall.S_IFDIR}
	}
	switch e {
	case syscall.ENOTDIR, syscall.ELOOP:
		return opErr("open", p.Path, &hintError{e, "a component is now a symbolic link or a file; the program is pinned at start and never followed through links made since"})
	case syscall.ENOENT:
		return opErr("open", p.Path, &hintError{syscall.ENOENT, "the program pinned at start was moved or removed since"})
	}
	return opErr("open", p.Path, e)
}

// programComponents splits a program's path (canonical and absolute) into
// the components the stage walks, or fails as the walk would.
func programComponents(path string, ino uint64) ([]string, error) {
	if !strings.HasPrefix(path, "/") || ino == 0 {
		return nil, opErr("open", path, syscall.EINVAL)
	}
	parts := strings.Split(path[1:], "/")
	if len(parts) > maxComps {
		return nil, opErr("open", path, syscall.ENAMETOOLONG)
	}
	for _, c := range parts {
		if c == "" || c == "." || c == ".." {
			return nil, opErr("open", path, syscall.EINVAL)
		}
	}
	return parts, nil
}

// layCall lays the program (path, its identity, argv, env, directory) out
// in r for the stage: the callArgs at the arena's start.
func layCall(r *arena, path string, dev, ino uint64, argv, env []string, dir string) (*callArgs, error) {
	parts, err := programComponents(path, ino)
	if err != nil {
		return nil, err
	}
	c := r.callArgsAt()
	*c = callArgs{dev: dev, ino: ino}
	full := func() error {
		return opErr("exec", path, errors.New("the call's arguments or environment are too large, or hold a NUL byte"))
	}
	if c.argv = r.ptrs(argv, true); c.argv == 0 {
		return nil, full()
	}
	if c.envv = r.ptrs(env, true); c.envv == 0 {
		return nil, full()
	}
	if c.path = r.str(path); c.path == 0 {
		return nil, full()
	}
	comps := r.ptrs(parts, false)
	if comps == 0 {
		return nil, full()
	}
	c.comps, c.ncomps = r.compsAt(comps), uintptr(len(parts))
	if dir != "" {
		if c.dir = r.str(dir); c.dir == 0 {
			return nil, full()
		}
	}
	return c, nil
}

// callArena sizes a cold call's arena: the strings, their NULs, the
// pointer arrays and the callArgs, with room to align.
func callArena(p *Plan) int {
	n := 256 + len(p.Path)*2 + len(p.Dir) + 8*(len(p.Argv)+len(p.Env)+len(p.Path)/2+4)
	for _, s := range p.Argv {
		n += len(s) + 1
	}
	for _, s := range p.Env {
		n += len(s) + 1
	}
	return n
}

// warmArena is the size of a pre-started sandbox's shared mapping: any
// call the harness may send (at most MaxWire bytes, whose strings need
// their NULs and a pointer each, a u32 length being four bytes of it).
const warmArena = 3*MaxWire + 4096

// stage is a started program's stage, as the first stage holds it.
type stage struct {
	pid    int
	notify int // the init's end of the listener socket, or -1
	repR   int // the report pipe's read end
	callFD int // pre-started: the first stage's end of the call socket, or -1
	args   *stageArgs
	shared []byte // pre-started: the mapping the call is laid out in
	keep   []any  // what the stage's memory points into, kept until it is forked
}

// startProgram forks the program's stage (stageMain) with everything it
// needs prepared, in a cgroup namespace of its own (rooted at the call's
// leaf, so the host's cgroup paths stay hidden). With Plan.NestUser it
// runs in a new user and mount namespace whose root is
// Plan.ChildUID/ChildGID of this one: the mount namespace is a copy made
// for a less privileged user namespace, so the kernel locks every mount of
// the view in it (no mount call, old or new, can clone, detach, move,
// remount or reveal what they cover). Without a user namespace it switches
// to ChildUID/ChildGID, which must not be root. It returns once the stage
// runs; the caller waits for it (stage.wait).
func startProgram(p *Plan) (*stage, error) {
	if !p.NestUser && (p.ChildUID == 0 || p.ChildGID == 0) {
		return nil, errors.New("bug: the program would run as root without a user namespace")
	}
	// The bounding set is emptied before the fork: without a user
	// namespace the stage cannot empty it itself (it is no longer root),
	// and a nested user namespace starts with a full one anyway, which
	// the stage then empties.
	if err := dropBoundingSet(); err != nil {
		return nil, err
	}
	a := &stageArgs{statusFD: StatusFD, landlockFD: -1, notifyFD: -1, callFD: -1, syncR: -1, syncW: -1, probe: p.Probe, warm: p.GoFD > 0, nproc: p.NProc}
	s := &stage{notify: -1, repR: -1, callFD: -1, args: a}
	ok := false
	defer func() {
		if !ok {
			s.closeAll()
		}
	}()
	layers, err := s.prepare(p)
	if err != nil {
		return nil, err
	}
	a.ready[0] = StatusReady
	a.ready[1], a.ready[2], a.ready[3], a.ready[4] = byte(layers), byte(layers>>8), byte(layers>>16), byte(layers>>24)
	if err := s.pipes(p); err != nil {
		return nil, err
	}
	runtime.LockOSThread()
	pid, e := forkStage(a)
	runtime.UnlockOSThread()
	runtime.KeepAlive(s.keep)
	if e != 0 {
		return nil, opErr("clone", "the program's stage", e)
	}
	s.pid = pid
	s.closeStageEnds()
	if p.NestUser {
		if err := writeIDMaps(pid, p); err != nil {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			var ws syscall.WaitStatus
			_, _ = syscall.Wait4(pid, &ws, 0, nil)
			return nil, err
		}
	}
	if a.syncW >= 0 {
		sysClose(a.syncW) // the maps are written: the stage goes on
		a.syncW = -1
	}
	ok = true
	return s, nil
}

// prepare computes what the stage reads: its clone flags and ids, the
// call (a cold one), the seccomp programs, the Landlock ruleset (built
// here, enforced there) and the domain's name. It returns the layers the
// stage reports once every step succeeded (the listener's bit aside,
// which only the stage knows).
func (s *stage) prepare(p *Plan) (uint32, error) {
	a := s.args
	layers := LayerMountNS | LayerNoCaps | LayerNoNewPrivs
	a.flags = uintptr(syscall.SIGCHLD) | syscall.CLONE_NEWCGROUP
	a.uid, a.gid = uintptr(p.ChildUID), uintptr(p.ChildGID)
	if p.NestUser {
		a.flags = uintptr(syscall.SIGCHLD) | syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS | syscall.CLONE_NEWCGROUP
		a.nest = true
		a.uid, a.gid = uintptr(p.NSUID), uintptr(p.NSGID)
		layers |= LayerLockedView
	}
	if p.NProc > 0 {
		layers |= LayerNProc
	}
	if !a.warm {
		if _, err := programComponents(p.Path, p.ProgIno); err != nil {
			return 0, &stepError{"program " + p.Path, err}
		}
		r := &arena{b: make([]byte, callArena(p))}
		c, err := layCall(r, p.Path, p.ProgDev, p.ProgIno, p.Argv, p.Env, p.Dir)
		if err != nil {
			return 0, &stepError{"exec " + p.Path, err}
		}
		a.call, a.chdir = c, true
		s.keep = append(s.keep, r.b)
	}
	a.prepareMessages()
	if len(p.Seccomp) > 0 {
		prog, err := sockFilters(p.Seccomp)
		if err != nil {
			return 0, &stepError{"seccomp", err}
		}
		var notify []syscall.SockFilter
		if p.SeccompNotify {
			if notify, err = sockFilters(notifying(p.Seccomp)); err != nil {
				return 0, &stepError{"seccomp", err}
			}
			a.notify = true
		}
		a.seccomp = true
		a.setFilters(prog, notify)
		s.keep = append(s.keep, prog, notify)
		layers |= LayerSeccomp
	}
	if p.LandlockFS != 0 || p.LandlockScoped != 0 {
		if p.DomainName != "" {
			if len(p.DomainName) > maxDomainName || strings.IndexByte(p.DomainName, 0) >= 0 {
				return 0, &stepError{"landlock", opErr("prctl PR_SET_NAME", p.DomainName, syscall.EINVAL)}
			}
			copy(a.name[:], p.DomainName)
			a.nameLen = len(p.DomainName)
		}
		rs, err := landlockRuleset(p)
		if err != nil {
			return 0, &stepError{"landlock", err}
		}
		a.landlockFD, a.landlockFlags = rs, uintptr(p.LandlockFlags)
		layers |= LayerLandlock
	}
	return layers, nil
}

// stepError is a step that failed in the first stage on the stage's
// behalf (preparing it), named as the stage would have named it.
type stepError struct {
	step string
	err  error
}

func (e *stepError) Error() string { return e.step + ": " + e.err.Error() }
func (e *stepError) Unwrap() error { return e.err }

// pipes makes the stage's descriptors: the report pipe, the maps' pipe
// (NestUser), the listener's socket (SeccompNotify) and a pre-started
// sandbox's call socket and shared mapping.
func (s *stage) pipes(p *Plan) error {
	a := s.args
	var fds [2]int
	if err := syscall.Pipe2(fds[:], syscall.O_CLOEXEC); err != nil {
		return opErr("pipe2", "stage reports", err)
	}
	s.repR, a.repW = fds[0], fds[1]
	if p.NestUser {
		if err := syscall.Pipe2(fds[:], syscall.O_CLOEXEC); err != nil {
			return opErr("pipe2", "id maps", err)
		}
		a.syncR, a.syncW = fds[0], fds[1]
	}
	if a.notify {
		// The stage sends the filter's listener to this init on it.
		pair, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_SEQPACKET|syscall.SOCK_CLOEXEC, 0)
		if err != nil {
			return opErr("socketpair", "seccomp listener", err)
		}
		s.notify, a.notifyFD = pair[0], pair[1]
	}
	if a.warm {
		pair, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_SEQPACKET|syscall.SOCK_CLOEXEC, 0)
		if err != nil {
			return opErr("socketpair", "call", err)
		}
		s.callFD, a.callFD = pair[0], pair[1]
		if s.shared, err = sharedMapping(warmArena); err != nil {
			return opErr("mmap", "the call's shared mapping", err)
		}
		a.call = (&arena{b: s.shared}).callArgsAt()
	}
	return nil
}

// closeStageEnds closes, in the first stage, what only the stage uses.
func (s *stage) closeStageEnds() {
	a := s.args
	for _, fd := range []*int{&a.repW, &a.syncR, &a.notifyFD, &a.callFD, &a.landlockFD} {
		if *fd >= 0 {
			sysClose(*fd)
			*fd = -1
		}
	}
}

// closeAll closes everything the stage would have had, for a stage that
// was not started.
func (s *stage) closeAll() {
	s.closeStageEnds()
	for _, fd := range []*int{&s.args.syncW, &s.repR, &s.notify, &s.callFD} {
		if *fd >= 0 {
			sysClose(*fd)
			*fd = -1
		}
	}
	if s.shared != nil {
		_ = syscall.Munmap(s.shared)
		s.shared = nil
	}
}

// writeIDMaps maps the stage's user namespace: NSUID and NSGID onto
// ChildUID and ChildGID, setgroups denied.
func writeIDMaps(pid int, p *Plan) error {
	dir := "/proc/" + strconv.Itoa(pid) + "/"
	for _, f := range []struct{ name, text string }{
		{"uid_map", strconv.FormatUint(uint64(p.NSUID), 10) + " " + strconv.FormatUint(uint64(p.ChildUID), 10) + " 1\n"},
		{"setgroups", "deny"},
		{"gid_map", strconv.FormatUint(uint64(p.NSGID), 10) + " " + strconv.FormatUint(uint64(p.ChildGID), 10) + " 1\n"},
	} {
		fd, err := sysOpen(dir+f.name, syscall.O_WRONLY|syscall.O_CLOEXEC, 0)
		if err != nil {
			return opErr("open", dir+f.name, err)
		}
		err = sysWriteAll(fd, []byte(f.text))
		sysClose(fd)
		if err != nil {
			return opErr("write", dir+f.name, err)
		}
	}
	return nil
}

// wait reads the stage's reports until it has executed the program (the
// report pipe closes at its execve) or ended, and fails with the step that
// failed. A pre-started sandbox's stage reports itself confined first:
// then the call is awaited here (awaitCall) and handed to it.
func (s *stage) wait(p *Plan) {
	for {
		r, ok, err := readReport(s.repR)
		if err != nil {
			fail("program stage", opErr("read", "stage reports", err))
		}
		if !ok {
			sysClose(s.repR)
			s.repR = -1
			return // executed, exited (a probe) or killed: the init's wait says which
		}
		if r.kind == reportConfined && s.callFD >= 0 {
			s.handCall(p) // or not, when the stage ended meanwhile: its report or its end comes next
			continue
		}
		fail(r.failure(p))
	}
}

// handCall is a pre-started sandbox's wait for its call, once its stage is
// confined: it says GoReady, receives one Go message on p.GoFD (and the
// standard streams it names, SCM_RIGHTS), lays the call out in the shared
// mapping and sends the streams to the stage with one byte. A parent that
// closes its end before sending (a sandbox discarded unused) ends this
// process without a report; a malformed message fails the call like a
// setup step.
func (s *stage) handCall(p *Plan) {
	if err := sysWriteAll(p.GoFD, []byte{GoReady}); err != nil {
		os.Exit(ExitSetup)
	}
	// A stage that ends while it waits (killed) makes this init end too,
	// as its wait for the program would: the sandbox is dead, and its
	// harness must see it so before it hands it a call.
	for {
		goReady, stageEnded, e := pollTwo(p.GoFD, s.repR)
		if e == syscall.EINTR {
			continue
		}
		if e != 0 {
			fail("receive the call", opErr("ppoll", "go socket", e))
		}
		if stageEnded != 0 {
			return
		}
		if goReady != 0 {
			break
		}
	}
	g, fds := awaitCall(p.GoFD)
	sysClose(p.GoFD) // only the call came on it; its end tells the harness this init ended
	p.Path, p.ProgDev, p.ProgIno, p.Argv, p.Env, p.Dir = g.Path, g.Dev, g.Ino, g.Argv, g.Env, g.Dir
	r := &arena{b: s.shared}
	if _, err := programComponents(g.Path, g.Ino); err != nil {
		fail("program "+g.Path, err)
	}
	c, err := layCall(r, g.Path, g.Dev, g.Ino, g.Argv, g.Env, g.Dir)
	if err != nil {
		fail("exec "+g.Path, err)
	}
	if c != s.args.call {
		fail("receive the call", errors.New("bug: the call is not where the stage reads it"))
	}
	c.stdio = uint32(g.Stdio)
	var rights []byte
	if len(fds) > 0 {
		rights = syscall.UnixRights(fds...)
	}
	if err := syscall.Sendmsg(s.callFD, []byte{'c'}, rights, nil, 0); err != nil {
		fail("receive the call", opErr("sendmsg", "the call to the program's stage", err))
	}
	for _, fd := range fds {
		sysClose(fd)
	}
	sysClose(s.callFD)
	s.callFD = -1
}

// awaitCall reads the call from fd: the message and the descriptors that
// came with it (close-on-exec here).
func awaitCall(fd int) (*Go, []int) {
	// A call is a few KiB (argv, environment); a longer one is read on
	// below. A smaller buffer is fewer fresh pages touched on the call's
	// path.
	buf := make([]byte, 8<<10)
	oob := make([]byte, syscall.CmsgSpace(3*4))
	var n, oobn, flags int
	var err error
	for {
		n, oobn, flags, _, err = syscall.Recvmsg(fd, buf, oob, syscall.MSG_CMSG_CLOEXEC)
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
		n, err := sysRead(fd, buf)
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
	if bits := g.Stdio&1 + g.Stdio>>1&1 + g.Stdio>>2&1; int(bits) != len(fds) {
		if int(bits) > len(fds) {
			fail("receive the call", errors.New("fewer descriptors than the call names"))
		}
		fail("receive the call", errors.New("more descriptors than the call names"))
	}
	return g, fds
}

// landlockRuleset creates the program's ruleset and adds its rules; the
// stage enforces it. The caller closes it.
func landlockRuleset(p *Plan) (int, error) {
	rs, err := sysLandlockCreate(p.LandlockFS, p.LandlockScoped)
	if err != nil {
		return -1, opErr("landlock_create_ruleset", "", err)
	}
	for _, r := range p.Rules {
		fd, err := sysOpen(r.Path, oPath|syscall.O_CLOEXEC, 0)
		if err != nil {
			sysClose(rs)
			return -1, opErr("open O_PATH", r.Path, err)
		}
		err = sysLandlockAddPath(rs, fd, r.Access)
		sysClose(fd)
		if err != nil {
			sysClose(rs)
			return -1, opErr("landlock_add_rule", r.Path, err)
		}
	}
	return rs, nil
}
