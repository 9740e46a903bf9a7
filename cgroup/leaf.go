package cgroup

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Limits are the resource limits of one leaf. The zero value sets no limit;
// each non-zero field needs its controller (see Manager.Controllers), and
// NewLeaf refuses a limit whose controller leaves do not get.
type Limits struct {
	// PidsMax is written to pids.max: the most tasks (processes and
	// threads) the leaf may hold at once; fork and clone fail beyond it.
	// Needs the pids controller. 0: no limit.
	PidsMax int64
	// MemoryMax is written to memory.max, in bytes (the kernel rounds it
	// down to a whole page); past it the kernel reclaims and then
	// OOM-kills inside the leaf. memory.swap.max is set to 0 as well
	// whenever that file exists, so the limit cannot be dodged by swapping.
	// Needs the memory controller. 0: no limit.
	MemoryMax int64
	// CPUQuota is the CPU time the leaf may use per CPUPeriod, written to
	// cpu.max in microseconds (truncated); at least 1ms. It may exceed
	// CPUPeriod to allow several CPUs. Needs the cpu controller. 0: no
	// limit ("max").
	CPUQuota time.Duration
	// CPUPeriod is the period of CPUQuota, between 1ms and 1s; 0 means
	// 100ms. Setting it without CPUQuota is an error.
	CPUPeriod time.Duration
}

// DefaultCPUPeriod is the CPUPeriod used when Limits.CPUPeriod is zero.
const DefaultCPUPeriod = 100 * time.Millisecond

// check validates l and returns the effective CPU period.
func (l Limits) check() (time.Duration, error) {
	switch {
	case l.PidsMax < 0:
		return 0, errorf("Limits.PidsMax is negative (%d)", l.PidsMax)
	case l.MemoryMax < 0:
		return 0, errorf("Limits.MemoryMax is negative (%d)", l.MemoryMax)
	case l.CPUQuota < 0:
		return 0, errorf("Limits.CPUQuota is negative (%v)", l.CPUQuota)
	case l.CPUPeriod < 0:
		return 0, errorf("Limits.CPUPeriod is negative (%v)", l.CPUPeriod)
	case l.CPUPeriod != 0 && l.CPUQuota == 0:
		return 0, errorf("Limits.CPUPeriod (%v) is set without a CPUQuota", l.CPUPeriod)
	}
	period := l.CPUPeriod
	if period == 0 {
		period = DefaultCPUPeriod
	}
	if l.CPUQuota != 0 {
		if period < time.Millisecond || period > time.Second {
			return 0, errorf("Limits.CPUPeriod %v is outside 1ms..1s", period)
		}
		if l.CPUQuota < time.Millisecond {
			return 0, errorf("Limits.CPUQuota %v is below 1ms", l.CPUQuota)
		}
	}
	return period, nil
}

// Leaf is one per-call cgroup: a directory under the Manager's parent, with
// its limits written, and an open directory descriptor for placing a child
// process in it atomically at clone time.
//
// The zero Leaf is not usable: get one from Manager.NewLeaf. Methods are
// safe for concurrent use. A Leaf must be closed (Close, or the Manager's
// Close).
//
// A process that may write the cgroup hierarchy (root outside the
// harness's Landlock domain, or the owner of a delegated subtree) can move
// itself out of the leaf, and then neither the limits nor Kill reach it;
// keeping the child from writing cgroupfs is the confinement's job. Child
// cgroups a process makes inside the leaf stay covered: Kill, WaitEmpty and
// the limits apply to the whole subtree.
type Leaf struct {
	m    *Manager
	path string

	mu     sync.Mutex
	fd     int
	closed bool
}

// NewLeaf creates the leaf PARENT/name, writes the limits in l and reads
// each one back. name may hold ASCII letters, digits, '_', '.' and '-',
// starting with a letter or digit, at most 200 bytes; a leaf of that name
// must not exist yet.
//
// A limit whose controller the Manager's leaves do not get is refused
// before anything is created, with an *UnavailableError naming the limit
// and controller (it matches ErrNotSupported): the caller decides
// beforehand, from Controllers, what to ask for. Any failure after the
// directory was made removes it again. NewLeaf on a closed Manager fails.
func (m *Manager) NewLeaf(name string, l Limits) (*Leaf, error) {
	if len(name) > 200 || !validName(name) {
		return nil, errorf("leaf name %q: want 1 to 200 ASCII letters, digits, '_', '.' or '-', starting with a letter or digit", name)
	}
	period, err := l.check()
	if err != nil {
		return nil, err
	}
	for _, need := range l.Needs() {
		if !slices.Contains(m.controllers, string(need.Controller)) {
			return nil, &UnavailableError{Controller: string(need.Controller), Limit: need.Limit, Reason: m.missingFor(string(need.Controller))}
		}
	}
	m.mu.Lock()
	closed := m.closed
	m.mu.Unlock()
	if closed {
		return nil, errorf("new leaf %q: the Manager for %s is closed", name, m.parent)
	}
	dir := filepath.Join(m.parent, name)
	if err := unix.Mkdir(dir, 0o755); err != nil {
		return nil, errorf("create leaf %s: %w", dir, err)
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		err = errorf("open leaf %s: %w", dir, err)
		if rerr := rmdirRetry(dir); rerr != nil {
			err = fmt.Errorf("%w (and removing it: %v)", err, rerr)
		}
		return nil, err
	}
	leaf := &Leaf{m: m, path: dir, fd: fd}
	if err := leaf.apply(l, period); err != nil {
		unix.Close(fd)
		if rerr := rmdirRetry(dir); rerr != nil {
			err = fmt.Errorf("%w (and removing it: %v)", err, rerr)
		}
		return nil, err
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		unix.Close(fd)
		_ = rmdirRetry(dir)
		return nil, errorf("new leaf %q: the Manager for %s was closed meanwhile", name, m.parent)
	}
	m.leaves[leaf] = struct{}{}
	m.mu.Unlock()
	return leaf, nil
}

// apply writes the limits and verifies each by reading it back.
func (l *Leaf) apply(lim Limits, period time.Duration) error {
	if lim.PidsMax > 0 {
		if err := l.writeCheck("pids.max", strconv.FormatInt(lim.PidsMax, 10), lim.PidsMax); err != nil {
			return err
		}
	}
	if lim.MemoryMax > 0 {
		page := int64(os.Getpagesize())
		if err := l.writeCheck("memory.max", strconv.FormatInt(lim.MemoryMax, 10), lim.MemoryMax/page*page); err != nil {
			return err
		}
		var st unix.Stat_t
		switch err := unix.Fstatat(l.fd, "memory.swap.max", &st, 0); err {
		case nil:
			if err := l.writeCheck("memory.swap.max", "0", 0); err != nil {
				return err
			}
		case unix.ENOENT:
		default:
			return errorf("stat %s: %w", filepath.Join(l.path, "memory.swap.max"), err)
		}
	}
	if lim.CPUQuota > 0 {
		want := fmt.Sprintf("%d %d", lim.CPUQuota.Microseconds(), period.Microseconds())
		if err := writeAt(l.fd, l.path, "cpu.max", want); err != nil {
			return err
		}
		b, err := readAt(l.fd, l.path, "cpu.max")
		if err != nil {
			return err
		}
		if got := strings.TrimSpace(string(b)); got != want {
			return errorf("%s reads %q after writing %q", filepath.Join(l.path, "cpu.max"), got, want)
		}
	}
	return nil
}

// writeCheck writes value to file and verifies it reads back as want.
func (l *Leaf) writeCheck(file, value string, want int64) error {
	if err := writeAt(l.fd, l.path, file, value); err != nil {
		return err
	}
	b, err := readAt(l.fd, l.path, file)
	if err != nil {
		return err
	}
	got, err := parseSingleInt(b)
	if err != nil {
		return errorf("parse %s: %w", filepath.Join(l.path, file), err)
	}
	if got != want {
		return errorf("%s reads %d after writing %s (want %d)", filepath.Join(l.path, file), got, value, want)
	}
	return nil
}

// FD returns the leaf's directory descriptor (O_RDONLY|O_DIRECTORY,
// close-on-exec) for syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd},
// which starts a child directly inside the leaf (clone3 with
// CLONE_INTO_CGROUP). The Leaf owns it: do not close it. -1 after Close.
func (l *Leaf) FD() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return -1
	}
	return l.fd
}

// Path returns the leaf's absolute directory.
func (l *Leaf) Path() string { return l.path }

// Kill kills every process in the leaf and its descendant cgroups, started
// or not by the harness, whatever their session or process group. It
// writes 1 to cgroup.kill (Linux 5.14+); on kernels without it, it freezes
// the leaf (cgroup.freeze) and sends SIGKILL to every process listed in
// cgroup.procs until none is left, then thaws it. Kill returns once the
// signals are sent; WaitEmpty waits for the processes to be gone. Killed
// processes become zombies until their parent (or subreaper) reaps them.
// Errors name the file or process; Kill on a closed Leaf fails.
func (l *Leaf) Kill() error {
	l.mu.Lock()
	closed := l.closed
	l.mu.Unlock()
	if closed {
		return errorf("kill %s: leaf is closed", l.path)
	}
	return killTree(l.path, l.m.hasKill && !l.m.freezeKill, l.m.loc, time.Now().Add(teardownTimeout))
}

// WaitEmpty returns nil once no process is left in the leaf or its
// descendants ("populated 0" in cgroup.events), waking on inotify events on
// that file and polling every 50ms besides. It returns an error wrapping
// ctx.Err() when ctx ends first, or one naming the file it could not read.
func (l *Leaf) WaitEmpty(ctx context.Context) error {
	return waitEmpty(ctx, l.path)
}

// Freeze stops every process in the leaf and its descendant cgroups
// (cgroup.freeze, Linux 5.2+) and returns once the kernel reports the
// whole tree frozen ("frozen 1" in cgroup.events) or empty, at most until
// ctx ends.
// A frozen process runs no instruction and no system call of its own until
// Thaw: one in the middle of a system call is frozen when it leaves it,
// and the kernel reports the tree frozen only once every process is. A
// fatal signal still ends a frozen process (Kill works on a frozen leaf).
// Processes that join the leaf while it is frozen are frozen too.
//
// Errors: the leaf is closed; the kernel has no cgroup.freeze (the error
// matches ErrNotSupported); the file could not be written or read; ctx
// ended before the tree was frozen (the leaf is then left freezing: call
// Thaw). Freeze and Thaw are safe for concurrent use with the leaf's other
// methods; they do not count: a Thaw undoes every Freeze.
func (l *Leaf) Freeze(ctx context.Context) error {
	if err := l.setFrozen("1"); err != nil {
		return err
	}
	// Polled, not watched: the kernel rate-limits cgroup.events
	// notifications to one per 20 ms, and a freeze takes microseconds
	// (or as long as a dying process takes to leave).
	wait := 20 * time.Microsecond
	for {
		ok, err := frozenNow(l.path)
		if (errors.Is(err, os.ErrNotExist) || errors.Is(err, unix.ENODEV)) && l.isClosed() {
			// Closed meanwhile: its processes are gone, and so is the
			// directory (ENOENT; ENODEV when it went between the open
			// and the read, on kernels before 6.18 at least).
			return errorf("freeze %s: %w", l.path, ErrLeafClosed)
		}
		if err != nil || ok {
			return err
		}
		if err := ctx.Err(); err != nil {
			return errorf("wait for %s to freeze: %w", l.path, err)
		}
		time.Sleep(wait)
		wait = min(2*wait, 2*time.Millisecond)
	}
}

// Thaw lets the leaf's processes run again (cgroup.freeze 0). On a closed
// leaf it does nothing (its processes are gone): nil.
func (l *Leaf) Thaw() error {
	err := l.setFrozen("0")
	if errors.Is(err, ErrLeafClosed) {
		return nil
	}
	return err
}

// isClosed reports whether Close has run (it holds the lock until the
// directory is gone).
func (l *Leaf) isClosed() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.closed
}

// ErrLeafClosed is matched by Freeze's error on a closed leaf.
var ErrLeafClosed = errors.New("leaf is closed")

// setFrozen writes v to the leaf's cgroup.freeze.
func (l *Leaf) setFrozen(v string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return errorf("freeze %s: %w", l.path, ErrLeafClosed)
	}
	err := writeAt(l.fd, l.path, "cgroup.freeze", v)
	if errors.Is(err, unix.ENOENT) {
		return errorf("freeze %s: no cgroup.freeze (Linux 5.2+): %w", l.path, ErrNotSupported)
	}
	return err
}

// Known says which fields of Stats were read; a field whose bit is not set
// is zero because its file does not exist (the controller is not enabled,
// or the kernel predates the file). The zero value: nothing known.
type Known uint32

const (
	KnownMemoryPeak Known = 1 << iota // memory.peak (Linux 5.19+, memory controller)
	KnownPidsPeak                     // pids.peak (Linux 6.1+, pids controller)
	KnownCPU                          // cpu.stat usage_usec, user_usec, system_usec (always in cgroup v2)
	KnownOOMKills                     // memory.events oom_kill (memory controller)
)

// Stats are the figures of one leaf, read from its files. See Known; the
// zero value knows nothing.
type Stats struct {
	Known      Known
	MemoryPeak int64         // bytes, the most memory charged to the leaf at once
	PidsPeak   int64         // the most tasks the leaf held at once
	CPUUsage   time.Duration // CPU time used, user plus system
	CPUUser    time.Duration
	CPUSystem  time.Duration
	OOMKills   int64 // processes the OOM killer killed inside the leaf
}

// Has reports whether all of the bits in k are known.
func (s Stats) Has(k Known) bool { return s.Known&k == k }

// Stats reads the leaf's figures. Read them before Close: the files go with
// the directory. A file that does not exist leaves its field unknown; a
// file that exists but cannot be read or parsed is an error naming it.
func (l *Leaf) Stats() (Stats, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return Stats{}, errorf("stats of %s: leaf is closed", l.path)
	}
	var s Stats
	read := func(name string) ([]byte, bool, error) {
		b, err := readAt(l.fd, l.path, name)
		if errors.Is(err, unix.ENOENT) {
			return nil, false, nil
		}
		return b, err == nil, err
	}
	single := func(name string, k Known, dst *int64) error {
		b, ok, err := read(name)
		if !ok {
			return err
		}
		v, err := parseSingleInt(b)
		if err != nil || v < 0 {
			return errorf("parse %s: want a count, got %q", filepath.Join(l.path, name), strings.TrimSpace(string(b)))
		}
		*dst = v
		s.Known |= k
		return nil
	}
	keyed := func(name string) (map[string]uint64, error) {
		b, ok, err := read(name)
		if !ok {
			return nil, err
		}
		kv, err := parseFlatKeyed(b)
		if err != nil {
			return nil, errorf("parse %s: %w", filepath.Join(l.path, name), err)
		}
		return kv, nil
	}
	if err := single("memory.peak", KnownMemoryPeak, &s.MemoryPeak); err != nil {
		return Stats{}, err
	}
	if err := single("pids.peak", KnownPidsPeak, &s.PidsPeak); err != nil {
		return Stats{}, err
	}
	cpu, err := keyed("cpu.stat")
	if err != nil {
		return Stats{}, err
	}
	if u, ok := cpu["usage_usec"]; ok {
		s.CPUUsage = time.Duration(u) * time.Microsecond
		s.CPUUser = time.Duration(cpu["user_usec"]) * time.Microsecond
		s.CPUSystem = time.Duration(cpu["system_usec"]) * time.Microsecond
		s.Known |= KnownCPU
	}
	ev, err := keyed("memory.events")
	if err != nil {
		return Stats{}, err
	}
	if v, ok := ev["oom_kill"]; ok {
		s.OOMKills = int64(v)
		s.Known |= KnownOOMKills
	}
	return s, nil
}

// leafCloseTimeout bounds how long Close waits for the leaf to empty.
const leafCloseTimeout = teardownTimeout

// Close kills what runs in the leaf, waits (at most 5s) until it is empty,
// removes the directory and closes the descriptor. The descriptor is closed
// and the Leaf counts as closed even when a step fails; the error names the
// step, and a directory left behind is removed by the Manager's Close or
// the next Sweep. Later calls return nil.
func (l *Leaf) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	var errs []error
	if err := killTree(l.path, l.m.hasKill && !l.m.freezeKill, l.m.loc, time.Now().Add(teardownTimeout)); err != nil {
		errs = append(errs, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), leafCloseTimeout)
	err := waitEmpty(ctx, l.path)
	cancel()
	if err != nil {
		errs = append(errs, err)
	} else if err := removeTree(l.path); err != nil {
		errs = append(errs, err)
	}
	unix.Close(l.fd)
	l.fd = -1
	l.closed = true
	l.mu.Unlock()
	l.m.forget(l)
	return errors.Join(errs...)
}

// killTree kills every process in the cgroup tree at dir: through
// cgroup.kill when useKillFile, else by freezing the tree and sending
// SIGKILL to every listed process until none is left (or deadline).
func killTree(dir string, useKillFile bool, loc location, deadline time.Time) error {
	if useKillFile {
		return writeFile(filepath.Join(dir, "cgroup.kill"), "1")
	}
	freeze := filepath.Join(dir, "cgroup.freeze")
	frozen := exists(freeze) && writeFile(freeze, "1") == nil
	var errs []error
	for {
		pids, err := treePids(dir)
		if err != nil {
			errs = append(errs, err)
			break
		}
		if len(pids) == 0 {
			break
		}
		for _, pid := range pids {
			if err := killMember(pid, dir, loc); err != nil {
				errs = append(errs, err)
			}
		}
		if len(errs) > 0 {
			break
		}
		if time.Now().After(deadline) {
			errs = append(errs, errorf("%s still holds processes %v after SIGKILL", dir, pids))
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	if frozen {
		if err := writeFile(freeze, "0"); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// killMember sends SIGKILL to pid only if it is (still) a member of the
// cgroup tree at dir: it pins the process with a pidfd, then checks its
// cgroup, so a pid reused by a process elsewhere is never signalled.
func killMember(pid int, dir string, loc location) error {
	pfd, err := unix.PidfdOpen(pid, 0)
	if err == unix.ESRCH {
		return nil
	}
	if err != nil {
		return errorf("pidfd_open %d: %w", pid, err)
	}
	defer unix.Close(pfd)
	b, err := readFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return errorf("read cgroup of process %d: %w", pid, err)
	}
	p, ok, err := parseProcCgroup(b)
	if err != nil || !ok {
		return errorf("read cgroup of process %d: no cgroup v2 path", pid)
	}
	rel, _ := within(dir, loc.mount)
	want := filepath.Join(loc.mountRoot, rel)
	if _, in := within(p, want); !in {
		return nil // left the tree (or the pid was reused): not ours to kill
	}
	if err := unix.PidfdSendSignal(pfd, unix.SIGKILL, nil, 0); err != nil && err != unix.ESRCH {
		return errorf("SIGKILL process %d in %s: %w", pid, dir, err)
	}
	return nil
}

// treePids lists the processes in dir and its descendant cgroups.
func treePids(dir string) ([]int, error) {
	pids, err := readPids(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil, err
	}
	subs, err := subdirs(dir)
	if err != nil {
		return nil, err
	}
	for _, s := range subs {
		more, err := treePids(filepath.Join(dir, s))
		if err != nil {
			return nil, err
		}
		pids = append(pids, more...)
	}
	return pids, nil
}

// readEvents reads the tree at dir's cgroup.events, checking that it has
// the line key. Errors name the file; a missing file matches
// os.ErrNotExist.
func readEvents(dir, key string) (map[string]uint64, error) {
	path := filepath.Join(dir, "cgroup.events")
	b, err := readFile(path)
	if err != nil {
		return nil, errorf("%w", err)
	}
	kv, err := parseFlatKeyed(b)
	if err != nil {
		return nil, errorf("parse %s: %w", path, err)
	}
	if _, ok := kv[key]; !ok {
		return nil, errorf("%s has no %q line", path, key)
	}
	return kv, nil
}

// populated reports whether the tree at dir holds a process: cgroup.events
// "populated", or on kernels without that file, any listed process.
func populated(dir string) (bool, error) {
	kv, err := readEvents(dir, "populated")
	if errors.Is(err, os.ErrNotExist) {
		pids, err := treePids(dir)
		return len(pids) > 0, err
	}
	return err == nil && kv["populated"] != 0, err
}

// frozenNow reports whether the kernel says the tree at dir is frozen
// ("frozen 1" in cgroup.events) or holds no process (an empty tree runs
// nothing).
func frozenNow(dir string) (bool, error) {
	kv, err := readEvents(dir, "frozen")
	if err != nil {
		return false, err
	}
	pop, known := kv["populated"]
	return kv["frozen"] != 0 || (known && pop == 0), nil
}

// waitEmpty waits until the tree at dir holds no process; see Leaf.WaitEmpty.
func waitEmpty(ctx context.Context, dir string) error {
	// Most calls find the tree empty already: no inotify for them.
	if pop, err := populated(dir); err != nil || !pop {
		return err
	}
	events := filepath.Join(dir, "cgroup.events")
	ifd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err == nil {
		if _, err := unix.InotifyAddWatch(ifd, events, unix.IN_MODIFY); err != nil {
			unix.Close(ifd)
			ifd = -1
		}
	} else {
		ifd = -1
	}
	if ifd >= 0 {
		defer unix.Close(ifd)
	}
	var buf [4096]byte
	for {
		pop, err := populated(dir)
		if err != nil {
			return err
		}
		if !pop {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return errorf("wait for %s to empty: %w", dir, err)
		}
		wait := 50 * time.Millisecond
		if ifd < 0 {
			wait = 5 * time.Millisecond
		}
		if d, ok := ctx.Deadline(); ok {
			if left := time.Until(d); left < wait {
				wait = max(left, time.Millisecond)
			}
		}
		if ifd < 0 {
			time.Sleep(wait)
			continue
		}
		fds := []unix.PollFd{{Fd: int32(ifd), Events: unix.POLLIN}}
		if _, err := unix.Poll(fds, int(wait/time.Millisecond)); err != nil && err != unix.EINTR {
			return errorf("poll inotify on %s: %w", events, err)
		}
		for {
			if _, err := unix.Read(ifd, buf[:]); err != nil {
				break // EAGAIN: drained
			}
		}
	}
}
