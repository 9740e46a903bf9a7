package helper

import (
	"syscall"
	"unsafe"

	"github.com/b10x/harness/confine/spawn/internal/rawfork"
)

// The program's stage runs no Go (docs/decisions/0094): the first stage
// forks it with package rawfork and it takes its steps as raw system calls
// over memory the first stage prepared (stageArgs), then executes the
// program. Every function it runs is in this file and marked
// //go:nosplit: between the fork and the execve there is no runtime in it,
// no allocation, no lock, nothing but its own stack and its copy of the
// first stage's memory. What it cannot say in a system call it says in a
// fixed-size report on a pipe (stageReport), which the first stage turns
// into the step's error (stage.go).

// stageReport is one message of the stage on its report pipe: a step that
// failed (reportFailed, with its errno and up to three numbers of detail)
// or, in a pre-started sandbox, that every step before the call is done
// (reportConfined). A report is 32 bytes, written at once (below
// PIPE_BUF, so never split).
type stageReport struct {
	kind  uint32
	step  uint32
	errno uint32
	what  uint32 // which check of the step failed (step-specific)
	a, b  uint64
	c     uint64
}

const (
	reportFailed   = 1
	reportConfined = 2
)

// callArgs is the program a stage executes, as pointers into an arena of C
// strings and pointer arrays: the first stage's heap for a cold call, the
// shared mapping of a pre-started sandbox (filled when the call comes).
// Pointers are held as uintptr: the arena outlives the fork by
// construction, and the mapping is no memory the collector knows.
type callArgs struct {
	argv, envv uintptr  // NULL-terminated arrays of C strings
	path       uintptr  // the whole path, a C string (a script's fallback)
	comps      *uintptr // the first of ncomps C strings: the path's components
	ncomps     uintptr
	dev, ino   uint64  // the pinned identity
	dir        uintptr // C string; 0: stay where the stage is
	stdio      uint32  // pre-started: bit i, descriptor i came with the call
}

// stageArgs is everything the stage reads, prepared before the fork, and
// the few buffers it writes into (its own copy of them).
type stageArgs struct {
	flags        uintptr // clone flags, SIGCHLD included
	nest         bool    // the stage's user namespace is its own: wait for its maps
	syncR, syncW int     // the maps-written pipe (nest): EOF when the first stage wrote them
	repW         int     // the report pipe's write end (close-on-exec)
	uid, gid     uintptr // the ids to take: NSUID/NSGID (nest) or ChildUID/ChildGID
	nproc        uint64
	call         *callArgs
	chdir        bool // cold: change to call.dir before confining
	statusFD     int
	ready        [5]byte // StatusReady and the layer bits (the listener's added here)
	probe, warm  bool

	seccomp, notify    bool
	fprog, fprogNotify syscall.SockFprog
	notifyFD           int // the stage's end of the listener socket
	notifyMsg          syscall.Msghdr
	notifyIov          syscall.Iovec
	notifyByte         [1]byte
	notifyCmsg         [24]byte // syscall.CmsgSpace(4): one descriptor

	landlockFD    int // -1: no domain
	landlockFlags uintptr
	name          [16]byte // the domain's name (comm); name[0] == 0: none
	nameLen       int
	gotName       [16]byte

	callFD   int // pre-started: the stage's end of the call socket
	callMsg  syscall.Msghdr
	callIov  syscall.Iovec
	callByte [1]byte
	callCmsg [32]byte // syscall.CmsgSpace(12): three descriptors

	prog   uintptr // the program, opened O_PATH
	empty  [1]byte // "" for execveat
	rep    stageReport
	st     syscall.Stat_t
	capHdr capUserHeader
	caps   [2]capUserData
	ids    [3]uint32
	rl     rlimit
}

// forkStage forks the stage from the calling thread, which must be locked
// (runtime.LockOSThread). It returns the stage's PID, or the clone's error.
// The stage never returns from it.
//
//go:nosplit
//go:norace
func forkStage(a *stageArgs) (int, syscall.Errno) {
	pid, e := rawfork.Fork(a.flags)
	if e == 0 && pid == 0 {
		stageMain(a)
	}
	rawfork.Done()
	return pid, e
}

// stageMain is the stage from its fork to its execve: each step in order,
// the first failure reported and the stage ended with ExitSetup.
//
//go:nosplit
//go:norace
func stageMain(a *stageArgs) {
	rawfork.ChildReady()
	if stageSetup(a) != 0 || stageConfine(a) != 0 {
		stageExit(a)
	}
	// A cold call (or a probe) knows its program now: it must be the file
	// pinned before the stage says it is ready.
	if !a.warm && stageOpen(a) != 0 {
		stageExit(a)
	}
	if _, _, e := syscall.RawSyscall(syscall.SYS_WRITE, uintptr(a.statusFD), uintptr(unsafe.Pointer(&a.ready[0])), uintptr(len(a.ready))); e != 0 {
		rawfork.Exit(ExitSetup) // the harness is gone
	}
	if a.probe {
		rawfork.Exit(0)
	}
	if a.warm && (stageAwait(a) != 0 || stageOpen(a) != 0) {
		stageExit(a)
	}
	stageExec(a)
	stageExit(a)
}

// stageExit sends the report a step filled in and ends the stage.
//
//go:nosplit
//go:norace
func stageExit(a *stageArgs) {
	a.rep.kind = reportFailed
	syscall.RawSyscall(syscall.SYS_WRITE, uintptr(a.repW), uintptr(unsafe.Pointer(&a.rep)), unsafe.Sizeof(a.rep))
	rawfork.Exit(ExitSetup)
}

// fail fills in the report of a failed step and returns the step, as the
// steps' non-zero result.
//
//go:nosplit
//go:norace
func (a *stageArgs) fail(step stageStep, what uint32, e syscall.Errno, x, y, z uint64) stageStep {
	a.rep.step, a.rep.what, a.rep.errno, a.rep.a, a.rep.b, a.rep.c = uint32(step), what, uint32(e), x, y, z
	return step
}

// stageSetup takes the stage's process group, its death signal, its user
// namespace's maps, its ids and its directory.
//
//go:nosplit
//go:norace
func stageSetup(a *stageArgs) stageStep {
	// The program leads a process group of its own, so that the signals
	// a terminal sends a foreground job reach all of it (see initLoop).
	if _, _, e := syscall.RawSyscall(syscall.SYS_SETPGID, 0, 0, 0); e != 0 {
		return a.fail(stepStart, whatSetpgid, e, 0, 0, 0)
	}
	if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_PDEATHSIG, uintptr(syscall.SIGKILL), 0); e != 0 {
		return a.fail(stepStart, whatPdeathsig, e, 0, 0, 0)
	}
	if a.nest {
		syscall.RawSyscall(syscall.SYS_CLOSE, uintptr(a.syncW), 0, 0)
		for {
			n, _, e := syscall.RawSyscall(syscall.SYS_READ, uintptr(a.syncR), uintptr(unsafe.Pointer(&a.ids[0])), 1)
			if e == syscall.EINTR {
				continue
			}
			if e != 0 {
				return a.fail(stepStart, whatMaps, e, 0, 0, 0)
			}
			if n == 0 {
				break
			}
		}
		syscall.RawSyscall(syscall.SYS_CLOSE, uintptr(a.syncR), 0, 0)
		// The new namespace gave this process every capability in it:
		// CAP_SETPCAP empties the bounding set while it is held (a
		// non-root id loses it at setresuid).
		if w, c, e := dropBounding(); e != 0 {
			return a.fail(stepCaps, w, e, c, 0, 0)
		}
	} else if _, _, e := syscall.RawSyscall(syscall.SYS_SETGROUPS, 0, 0, 0); e != 0 {
		return a.fail(stepStart, whatSetgroups, e, 0, 0, 0)
	}
	if _, _, e := syscall.RawSyscall(syscall.SYS_SETRESGID, a.gid, a.gid, a.gid); e != 0 {
		return a.fail(stepStart, whatSetresgid, e, uint64(a.gid), 0, 0)
	}
	if _, _, e := syscall.RawSyscall(syscall.SYS_SETRESUID, a.uid, a.uid, a.uid); e != 0 {
		return a.fail(stepStart, whatSetresuid, e, uint64(a.uid), 0, 0)
	}
	if a.chdir && a.call.dir != 0 {
		if _, _, e := syscall.RawSyscall(syscall.SYS_CHDIR, a.call.dir, 0, 0); e != 0 {
			return a.fail(stepChdir, 0, e, 0, 0, 0)
		}
	}
	return 0
}

// stageConfine checks the ids, drops every capability, sets and proves
// the process limit, marks every descriptor but 0-2 close-on-exec, sets
// no_new_privs, loads the seccomp filter and enforces the Landlock
// domain, in this order.
//
//go:nosplit
//go:norace
func stageConfine(a *stageArgs) stageStep {
	if s := a.checkIDs(); s != 0 {
		return s
	}
	if s := a.dropCaps(); s != 0 {
		return s
	}
	if a.nproc > 0 {
		// After the capabilities are gone: the kernel waives the limit
		// for CAP_SYS_RESOURCE, and the proof must see what the
		// program will be.
		if s := a.limitProcs(); s != 0 {
			return s
		}
	}
	// Every descriptor but 0-2 closes at execve: the status pipe (which
	// must stay open until then) and everything of the first stage's.
	if _, _, e := syscall.RawSyscall(sysCloseRangeNr, 3, ^uintptr(0), closeRangeCloexec); e != 0 {
		return a.fail(stepCloseRange, 0, e, 0, 0, 0)
	}
	if _, _, e := syscall.RawSyscall6(syscall.SYS_PRCTL, prSetNoNewPrivs, 1, 0, 0, 0, 0); e != 0 {
		return a.fail(stepNoNewPrivs, whatSet, e, 0, 0, 0)
	}
	if r, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, prGetNoNewPrivs, 0, 0); e != 0 || r != 1 {
		return a.fail(stepNoNewPrivs, whatReadBack, e, 0, 0, 0)
	}
	if a.seccomp {
		if s := a.loadSeccomp(); s != 0 {
			return s
		}
	}
	if a.landlockFD >= 0 {
		if s := a.restrict(); s != 0 {
			return s
		}
	}
	return 0
}

// checkIDs fails unless the real, effective and saved uid and gid are the
// plan's: a second lock behind setresuid and setresgid.
//
//go:nosplit
//go:norace
func (a *stageArgs) checkIDs() stageStep {
	for i, nr := range [2]uintptr{syscall.SYS_GETRESUID, syscall.SYS_GETRESGID} {
		want := a.uid
		if i == 1 {
			want = a.gid
		}
		_, _, e := syscall.RawSyscall(nr, uintptr(unsafe.Pointer(&a.ids[0])), uintptr(unsafe.Pointer(&a.ids[1])), uintptr(unsafe.Pointer(&a.ids[2])))
		if e != 0 {
			return a.fail(stepIdentity, uint32(i), e, 0, 0, 0)
		}
		if uintptr(a.ids[0]) != want || uintptr(a.ids[1]) != want || uintptr(a.ids[2]) != want {
			return a.fail(stepIdentity, uint32(i), 0, uint64(a.ids[1]), uint64(want), 0)
		}
	}
	return 0
}

// dropBounding empties the bounding set, dropping only what is still in it
// (dropping needs CAP_SETPCAP even for a capability already gone). On
// failure it says which call (whatBoundRead or whatBoundDrop) and for
// which capability.
//
//go:nosplit
//go:norace
func dropBounding() (uint32, uint64, syscall.Errno) {
	for c := uintptr(0); c < 64; c++ {
		r, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_CAPBSET_READ, c, 0)
		if e == syscall.EINVAL {
			return 0, 0, 0 // past the kernel's last capability
		}
		if e != 0 {
			return whatBoundRead, uint64(c), e
		}
		if r == 0 {
			continue
		}
		if _, _, e := syscall.RawSyscall6(syscall.SYS_PRCTL, syscall.PR_CAPBSET_DROP, c, 0, 0, 0, 0); e != 0 {
			return whatBoundDrop, uint64(c), e
		}
	}
	return 0, 0, 0
}

// dropCaps empties the bounding, ambient, inheritable, permitted and
// effective sets, then reads them back: the program, even as uid 0 of its
// namespace, holds and can gain no capability.
//
//go:nosplit
//go:norace
func (a *stageArgs) dropCaps() stageStep {
	if w, c, e := dropBounding(); e != 0 {
		return a.fail(stepCaps, w, e, c, 0, 0)
	}
	if _, _, e := syscall.RawSyscall6(syscall.SYS_PRCTL, prCapAmbient, prCapAmbientClearAll, 0, 0, 0, 0); e != 0 && e != syscall.EINVAL {
		return a.fail(stepCaps, whatAmbient, e, 0, 0, 0)
	}
	a.capHdr = capUserHeader{version: linuxCapabilityVersion3}
	a.caps = [2]capUserData{}
	if _, _, e := syscall.RawSyscall(syscall.SYS_CAPSET, uintptr(unsafe.Pointer(&a.capHdr)), uintptr(unsafe.Pointer(&a.caps[0])), 0); e != 0 {
		return a.fail(stepCaps, whatCapset, e, 0, 0, 0)
	}
	return a.checkNoCaps()
}

// checkNoCaps reads the capability sets back and fails unless every one
// is empty.
//
//go:nosplit
//go:norace
func (a *stageArgs) checkNoCaps() stageStep {
	a.capHdr = capUserHeader{version: linuxCapabilityVersion3}
	if _, _, e := syscall.RawSyscall(syscall.SYS_CAPGET, uintptr(unsafe.Pointer(&a.capHdr)), uintptr(unsafe.Pointer(&a.caps[0])), 0); e != 0 {
		return a.fail(stepCaps, whatCapget, e, 0, 0, 0)
	}
	if a.caps[0].effective|a.caps[0].permitted|a.caps[0].inheritable|a.caps[1].effective|a.caps[1].permitted|a.caps[1].inheritable != 0 {
		return a.fail(stepCaps, whatSetsLeft, 0, 0, 0, 0)
	}
	for c := uintptr(0); c < 64; c++ {
		r, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_CAPBSET_READ, c, 0)
		if e == syscall.EINVAL {
			break
		}
		if e != 0 || r != 0 {
			return a.fail(stepCaps, whatBoundLeft, 0, uint64(c), 0, 0)
		}
	}
	return 0
}

// limitProcs sets RLIMIT_NPROC to a.nproc and proves that the kernel
// enforces it (nprocProof), then reads it back.
//
//go:nosplit
//go:norace
func (a *stageArgs) limitProcs() stageStep {
	e, forked := nprocProof(a.nproc)
	switch {
	case e == syscall.EAGAIN:
		// The fork was refused: enforced.
	case e != 0:
		return a.fail(stepNProc, whatProof, e, a.nproc, 0, 0)
	case forked:
		return a.fail(stepNProc, whatForked, 0, 0, 0, 0)
	default:
		return a.fail(stepNProc, whatNeither, 0, 0, 0, 0)
	}
	if _, _, e := syscall.RawSyscall6(syscall.SYS_PRLIMIT64, 0, rlimitNproc, 0, uintptr(unsafe.Pointer(&a.rl)), 0, 0); e != 0 {
		return a.fail(stepNProc, whatReadBack, e, 0, 0, 0)
	}
	if a.rl.cur != a.nproc || a.rl.max != a.nproc {
		return a.fail(stepNProc, whatMismatch, 0, a.rl.cur, a.rl.max, a.nproc)
	}
	return 0
}

// loadSeccomp installs the filter. With a.notify, the notifying form
// goes first and its listener to the init (a.notifyFD); where the stack
// already has a listener (EBUSY) the plain filter is installed instead
// (see loadNotifying's history in docs/decisions/0090).
//
//go:nosplit
//go:norace
func (a *stageArgs) loadSeccomp() stageStep {
	if !a.notify {
		if _, _, e := syscall.RawSyscall(sysSeccomp, seccompSetModeFilter, 0, uintptr(unsafe.Pointer(&a.fprog))); e != 0 {
			return a.fail(stepSeccomp, whatFilter, e, 0, 0, 0)
		}
		return 0
	}
	// Once the init has received a notification, only a fatal signal
	// may end the caller's wait (WAIT_KILLABLE_RECV): a signal that ended
	// it would make the kernel restart the call, which the init would then
	// count twice. Before Linux 5.19 the flag is refused (EINVAL).
	lfd, _, e := syscall.RawSyscall(sysSeccomp, seccompSetModeFilter, seccompFilterFlagNewListener|seccompFilterFlagWaitKillable, uintptr(unsafe.Pointer(&a.fprogNotify)))
	if e == syscall.EINVAL {
		lfd, _, e = syscall.RawSyscall(sysSeccomp, seccompSetModeFilter, seccompFilterFlagNewListener, uintptr(unsafe.Pointer(&a.fprogNotify)))
	}
	if e == syscall.EBUSY {
		syscall.RawSyscall(syscall.SYS_CLOSE, uintptr(a.notifyFD), 0, 0)
		if _, _, e := syscall.RawSyscall(sysSeccomp, seccompSetModeFilter, 0, uintptr(unsafe.Pointer(&a.fprog))); e != 0 {
			return a.fail(stepSeccomp, whatFilter, e, 0, 0, 0)
		}
		return 0
	}
	if e != 0 {
		return a.fail(stepSeccomp, whatListener, e, 0, 0, 0)
	}
	*(*int32)(unsafe.Pointer(&a.notifyCmsg[syscall.SizeofCmsghdr])) = int32(lfd)
	_, _, e = syscall.RawSyscall(syscall.SYS_SENDMSG, uintptr(a.notifyFD), uintptr(unsafe.Pointer(&a.notifyMsg)), 0)
	syscall.RawSyscall(syscall.SYS_CLOSE, lfd, 0, 0)
	syscall.RawSyscall(syscall.SYS_CLOSE, uintptr(a.notifyFD), 0, 0)
	if e != 0 {
		// The filter is in place and answers ENOSYS without a listener:
		// still refused, but this call cannot go on untold.
		return a.fail(stepSeccomp, whatSendListener, e, 0, 0, 0)
	}
	a.ready[1] |= byte(LayerSeccompListener)
	return 0
}

// restrict names the thread (the domain's audit records carry the name
// of its creator) and enforces the ruleset the first stage built.
//
//go:nosplit
//go:norace
func (a *stageArgs) restrict() stageStep {
	if a.nameLen > 0 {
		if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, prSetName, uintptr(unsafe.Pointer(&a.name[0])), 0); e != 0 {
			return a.fail(stepLandlock, whatSetName, e, 0, 0, 0)
		}
		if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, prGetName, uintptr(unsafe.Pointer(&a.gotName[0])), 0); e != 0 {
			return a.fail(stepLandlock, whatGetName, e, 0, 0, 0)
		}
		if a.gotName != a.name {
			return a.fail(stepLandlock, whatNameDiffers, 0, 0, 0, 0)
		}
	}
	if _, _, e := syscall.RawSyscall(sysLandlockRestrictSelfNr, uintptr(a.landlockFD), a.landlockFlags, 0); e != 0 {
		return a.fail(stepLandlock, whatRestrict, e, 0, 0, 0)
	}
	return 0
}

// stageAwait is a pre-started sandbox's wait for its call, once confined:
// it tells the first stage, which says GoReady to the harness, receives
// the call and lays it out in the shared mapping a.call points into, and
// sends one byte here with the call's standard streams (SCM_RIGHTS). The
// stage puts them in place and changes to the call's directory. An end of
// the socket before the byte (a sandbox discarded unused, or a call the
// first stage could not read) ends the stage without a report.
//
//go:nosplit
//go:norace
func stageAwait(a *stageArgs) stageStep {
	a.rep.kind = reportConfined
	if _, _, e := syscall.RawSyscall(syscall.SYS_WRITE, uintptr(a.repW), uintptr(unsafe.Pointer(&a.rep)), unsafe.Sizeof(a.rep)); e != 0 {
		rawfork.Exit(ExitSetup)
	}
	var n uintptr
	var e syscall.Errno
	for {
		n, _, e = syscall.RawSyscall(syscall.SYS_RECVMSG, uintptr(a.callFD), uintptr(unsafe.Pointer(&a.callMsg)), syscall.MSG_CMSG_CLOEXEC)
		if e != syscall.EINTR {
			break
		}
	}
	if e != 0 {
		return a.fail(stepReceive, whatRecvmsg, e, 0, 0, 0)
	}
	if n == 0 {
		rawfork.Exit(ExitSetup)
	}
	if a.callMsg.Flags&syscall.MSG_CTRUNC != 0 {
		return a.fail(stepReceive, whatTooMany, 0, 0, 0, 0)
	}
	h := (*syscall.Cmsghdr)(unsafe.Pointer(&a.callCmsg[0]))
	fds := (*[3]int32)(unsafe.Pointer(&a.callCmsg[syscall.SizeofCmsghdr]))
	count := 0
	if a.callMsg.Controllen >= syscall.SizeofCmsghdr && h.Level == syscall.SOL_SOCKET && h.Type == syscall.SCM_RIGHTS && h.Len >= syscall.SizeofCmsghdr {
		count = int(h.Len-syscall.SizeofCmsghdr) / 4
	}
	k := 0
	for i := uintptr(0); i < 3; i++ {
		if a.call.stdio&(1<<i) == 0 {
			continue
		}
		if k >= count {
			return a.fail(stepReceive, whatTooFew, 0, 0, 0, 0)
		}
		if _, _, e := syscall.RawSyscall(syscall.SYS_DUP3, uintptr(fds[k]), i, 0); e != 0 {
			return a.fail(stepReceive, whatDup, e, uint64(i), 0, 0)
		}
		syscall.RawSyscall(syscall.SYS_CLOSE, uintptr(fds[k]), 0, 0)
		k++
	}
	if k != count {
		return a.fail(stepReceive, whatTooMany, 0, 0, 0, 0)
	}
	if _, _, e := syscall.RawSyscall(syscall.SYS_CHDIR, a.call.dir, 0, 0); e != 0 {
		return a.fail(stepChdir, 0, e, 0, 0, 0)
	}
	return 0
}

// stageOpen opens the pinned program into a.prog: component by component
// from "/" with O_PATH, following no link, and the file reached must be
// the pinned identity (see exec.go for why).
//
//go:nosplit
//go:norace
func stageOpen(a *stageArgs) stageStep {
	c := a.call
	dir, _, e := syscall.RawSyscall(syscall.SYS_OPEN, uintptr(unsafe.Pointer(&slashC[0])), oPath|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if e != 0 {
		return a.fail(stepProgram, whatOpenRoot, e, 0, 0, 0)
	}
	for i := uintptr(0); i < c.ncomps; i++ {
		flags := uintptr(oPath | syscall.O_NOFOLLOW | syscall.O_CLOEXEC)
		if i < c.ncomps-1 {
			flags |= syscall.O_DIRECTORY
		}
		comp := *(*uintptr)(unsafe.Add(unsafe.Pointer(c.comps), i*unsafe.Sizeof(uintptr(0))))
		next, _, e := syscall.RawSyscall6(syscall.SYS_OPENAT, dir, comp, flags, 0, 0, 0)
		syscall.RawSyscall(syscall.SYS_CLOSE, dir, 0, 0)
		if e != 0 {
			return a.fail(stepProgram, whatWalk, e, 0, 0, 0)
		}
		dir = next
	}
	if _, _, e := syscall.RawSyscall(syscall.SYS_FSTAT, dir, uintptr(unsafe.Pointer(&a.st)), 0); e != 0 {
		return a.fail(stepProgram, whatFstat, e, 0, 0, 0)
	}
	if uint64(a.st.Dev) != c.dev || uint64(a.st.Ino) != c.ino || a.st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return a.fail(stepProgram, whatMismatch, 0, uint64(a.st.Dev), uint64(a.st.Ino), uint64(a.st.Mode))
	}
	a.prog = dir
	return 0
}

// stageExec executes the program opened by stageOpen through its
// descriptor; a "#!" script, whose interpreter the kernel cannot hand
// /dev/fd/N of a close-on-exec descriptor (ENOENT), by its path, checked
// to be the pinned file an instant before (see execProgram in exec.go).
// It returns only on failure, with a.rep filled in.
//
//go:nosplit
//go:norace
func stageExec(a *stageArgs) {
	c := a.call
	_, _, e := syscall.RawSyscall6(sysExecveat, a.prog, uintptr(unsafe.Pointer(&a.empty[0])), c.argv, c.envv, atEmptyPath, 0)
	if e != syscall.ENOENT {
		a.fail(stepExec, whatExecveat, e, 0, 0, 0)
		return
	}
	syscall.RawSyscall(syscall.SYS_CLOSE, a.prog, 0, 0)
	_, _, e = syscall.RawSyscall(syscall.SYS_EXECVE, c.path, c.argv, c.envv)
	a.fail(stepExec, whatExecve, e, 0, 0, 0)
}

// slashC is "/" as a C string.
var slashC = [2]byte{'/', 0}

// maxComps bounds a program path's components (a path is at most PATH_MAX,
// 4096 bytes, so at most 2048 components).
const maxComps = 2048

// arena lays C strings and pointer arrays out in a byte buffer that does
// not move (the heap, or a mapping), handing out their addresses.
type arena struct {
	b   []byte
	off int
}

// base is the address of the arena's first byte.
func (r *arena) base() uintptr { return uintptr(unsafe.Pointer(&r.b[0])) }

// str copies s and a NUL into the arena and returns its address, or 0
// when the arena is full or s holds a NUL.
func (r *arena) str(s string) uintptr {
	if r.off+len(s)+1 > len(r.b) {
		return 0
	}
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			return 0
		}
	}
	p := r.base() + uintptr(r.off)
	copy(r.b[r.off:], s)
	r.b[r.off+len(s)] = 0
	r.off += len(s) + 1
	return p
}

// ptrs lays out the addresses of ss as C strings, then an array of them
// (NULL-terminated when null), and returns the array's address; 0 when
// the arena is full or a string holds a NUL.
func (r *arena) ptrs(ss []string, null bool) uintptr {
	addrs := make([]uintptr, 0, len(ss)+1)
	for _, s := range ss {
		p := r.str(s)
		if p == 0 {
			return 0
		}
		addrs = append(addrs, p)
	}
	if null {
		addrs = append(addrs, 0)
	}
	r.off = (r.off + 7) &^ 7
	size := len(addrs) * int(unsafe.Sizeof(uintptr(0)))
	if r.off+size > len(r.b) {
		return 0
	}
	p := r.base() + uintptr(r.off)
	for i, v := range addrs {
		*(*uintptr)(unsafe.Pointer(&r.b[r.off+i*int(unsafe.Sizeof(v))])) = v
	}
	r.off += size
	return p
}

// callArgsAt returns the callArgs at the arena's start, reserving it.
func (r *arena) callArgsAt() *callArgs {
	c := (*callArgs)(unsafe.Pointer(&r.b[0]))
	r.off = int(unsafe.Sizeof(callArgs{}))
	return c
}

// sharedMapping maps size bytes shared with the processes this one forks
// after (MAP_SHARED|MAP_ANONYMOUS, reserved lazily): what it writes there
// later, they read.
func sharedMapping(size int) ([]byte, error) {
	return syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED|syscall.MAP_ANONYMOUS|syscall.MAP_NORESERVE)
}

// compsAt returns the first of the component addresses at p (from ptrs):
// a pointer to one element, not to an array of maxComps, which would reach
// past the arena (checkptr refuses it under -race).
func (r *arena) compsAt(p uintptr) *uintptr {
	return (*uintptr)(unsafe.Pointer(&r.b[p-r.base()]))
}

// comp is the address of component i of c (test code: the stage reads
// them inline).
func (c *callArgs) comp(i uintptr) uintptr {
	return *(*uintptr)(unsafe.Add(unsafe.Pointer(c.comps), i*unsafe.Sizeof(uintptr(0))))
}

// prepareMessages fills in the two messages the stage sends or receives
// with sendmsg and recvmsg: the listener's (one byte and one descriptor)
// and the call's (one byte and up to three descriptors).
func (a *stageArgs) prepareMessages() {
	a.notifyByte[0] = 'N'
	a.notifyIov = syscall.Iovec{Base: &a.notifyByte[0], Len: 1}
	a.notifyMsg = syscall.Msghdr{Iov: &a.notifyIov, Iovlen: 1, Control: &a.notifyCmsg[0]}
	a.notifyMsg.SetControllen(len(a.notifyCmsg))
	h := (*syscall.Cmsghdr)(unsafe.Pointer(&a.notifyCmsg[0]))
	h.Level, h.Type = syscall.SOL_SOCKET, syscall.SCM_RIGHTS
	h.SetLen(syscall.CmsgLen(4))
	a.callIov = syscall.Iovec{Base: &a.callByte[0], Len: 1}
	a.callMsg = syscall.Msghdr{Iov: &a.callIov, Iovlen: 1, Control: &a.callCmsg[0]}
	a.callMsg.SetControllen(len(a.callCmsg))
}

// setFilters points the stage's two seccomp programs at prog and notify.
func (a *stageArgs) setFilters(prog, notify []syscall.SockFilter) {
	a.fprog = syscall.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	if len(notify) > 0 {
		a.fprogNotify = syscall.SockFprog{Len: uint16(len(notify)), Filter: &notify[0]}
	}
}

// pollTwo waits, without a time limit, until fd a or fd b is readable or
// hung up, and returns their revents. It blocks, so it is a Syscall.
func pollTwo(a, b int) (int16, int16, syscall.Errno) {
	pfd := [2]pollFD{{fd: int32(a), events: pollIn}, {fd: int32(b), events: pollIn}}
	_, _, e := syscall.Syscall6(syscall.SYS_PPOLL, uintptr(unsafe.Pointer(&pfd[0])), 2, 0, 0, 0, 0)
	return pfd[0].revents, pfd[1].revents, e
}

// readReport reads one report from the pipe fd: ok false at its end.
func readReport(fd int) (r stageReport, ok bool, err error) {
	for {
		n, _, e := syscall.Syscall(syscall.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(&r)), unsafe.Sizeof(r))
		if e == syscall.EINTR {
			continue
		}
		if e != 0 {
			return r, false, e
		}
		if n == 0 {
			return r, false, nil
		}
		if n != unsafe.Sizeof(r) {
			return r, false, syscall.EPROTO
		}
		return r, true, nil
	}
}
