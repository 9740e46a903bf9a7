package spawn

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/b10x/harness/internal/reexec"
)

// TestMain runs the tests and, when they pass, checks that they left
// nothing behind in this process: no descriptor open that was not open
// before them, no process descended from this one, and no cgroup directory
// of the kind the tests make (a re-run child's cgroup, a cgroup manager's
// parent) beside or below this process's own cgroup. A call that leaks a
// descriptor, a process or a leaf once per run is what a harness serving
// many calls cannot afford, and a test shows it only where it looks; this
// looks after all of them. Re-run children (inChild) are this test binary
// too and check themselves the same way; their parent test fails with
// their report.
//
// What the tests started gets leakSettle to finish (a goroutine closing a
// pipe after the program ended, a child not yet reaped). Left out are the
// descriptors the runtime and this package hold for the life of the
// process (startPoller; heldForProcess, by number, not by kind) and Go's
// own id-map pipes (idMapPipes: both ends here, blocking), with a note. An
// *os.File dropped unclosed counts until the garbage collector closes it;
// the check does not force a collection, which would hide it. A check
// that cannot look fails rather than passing silently: /proc/self/fd that
// cannot be read or lists nothing, a /proc walk that does not find this
// process.
func TestMain(m *testing.M) {
	reexec.Init()
	startPoller()
	w, err := watchLeaks()
	code := m.Run()
	if code != 0 {
		os.Exit(code)
	}
	if err == nil {
		var leaks []string
		leaks, err = w.leftBehind(leakSettle)
		if n := len(w.idMapPipes); n > 0 {
			fmt.Fprintf(os.Stderr, "leak check: %d descriptors (%d pipes) left out as the id-map pipes Go's syscall package leaves open when a clone with UidMappings fails (a kernel refusing a user namespace)\n", n, n/2)
		}
		if w.procUnread != nil {
			fmt.Fprintf(os.Stderr, "leak check: processes checked through waitid only (whether a child remains, not which): %v\n", w.procUnread)
		}
		for _, l := range leaks {
			fmt.Fprintln(os.Stderr, "leak check: "+l)
		}
		if len(leaks) > 0 {
			fmt.Fprintf(os.Stderr, "leak check: FAIL: %d left behind by the tests, still there %v after they ended\n", len(leaks), leakSettle)
			os.Exit(1)
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "leak check: FAIL: cannot check: %v\n", err)
		os.Exit(1)
	}
	os.Exit(code)
}

// leakSettle bounds how long the check waits for what the tests started to
// close and exit.
const leakSettle = 5 * time.Second

// startPoller starts the Go runtime's poller, whose epoll and eventfd
// descriptors stay open for the life of the process, by opening a pipe:
// they are then open before the tests and not taken for theirs.
func startPoller() {
	r, w, err := os.Pipe()
	if err == nil {
		r.Close()
		w.Close()
	}
}

// leakWatch holds what the check compares against, and the directories it
// lists, opened before the tests: a test may close /proc and the cgroup
// tree to this process (Landlock, TestBrokerUnderRestrictedHarness), and
// an open directory can still be read.
type leakWatch struct {
	fdDir   *os.File   // /proc/self/fd
	cgDirs  []*os.File // where the tests make cgroups, see watchedCgroups
	fds     map[int]string
	procs   map[procKey]bool
	cgroups map[string]bool
	// procUnread is why /proc could not be walked, when it could not:
	// processes were then checked through waitid only.
	procUnread error
	// idMapPipes are the descriptors left out as Go's id-map pipes, at
	// the last comparison.
	idMapPipes map[int]bool
}

// procKey names a process across pid reuse; pid -1 is a child that waitid
// reports and /proc does not show.
type procKey struct {
	pid   int
	start uint64 // clock ticks after boot
}

func watchLeaks() (*leakWatch, error) {
	w := &leakWatch{}
	var err error
	if w.fdDir, err = os.Open("/proc/self/fd"); err != nil {
		return nil, fmt.Errorf("cannot list this process's descriptors: %w", err)
	}
	dirs, err := watchedCgroups()
	if err != nil {
		return nil, err
	}
	for _, d := range dirs {
		// A directory this process cannot read is one it cannot make
		// cgroups in either.
		if f, err := os.Open(d); err == nil {
			w.cgDirs = append(w.cgDirs, f)
		}
	}
	if w.fds, err = w.openFDs(); err != nil {
		return nil, err
	}
	if w.procs, err = w.descendants(); err != nil {
		return nil, err
	}
	if w.cgroups, err = w.childCgroups(); err != nil {
		return nil, err
	}
	return w, nil
}

// leftBehind compares until nothing the tests made remains or settle has
// passed, and returns what remains, each described for the report.
func (w *leakWatch) leftBehind(settle time.Duration) ([]string, error) {
	deadline := time.Now().Add(settle)
	for {
		leaks, err := w.newSince()
		if err != nil || len(leaks) == 0 || time.Now().After(deadline) {
			return leaks, err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (w *leakWatch) newSince() ([]string, error) {
	var leaks []string
	fds, err := w.openFDs()
	if err != nil {
		return nil, err
	}
	held := heldForProcess()
	fresh := map[int]string{}
	for fd, target := range fds {
		if was, ok := w.fds[fd]; !(ok && was == target) && !held[fd] {
			fresh[fd] = target
		}
	}
	w.idMapPipes = idMapPipes(fresh)
	for _, fd := range slices.Sorted(maps.Keys(fresh)) {
		if !w.idMapPipes[fd] {
			leaks = append(leaks, fmt.Sprintf("descriptor %d open: %s", fd, fresh[fd]))
		}
	}
	procs, err := w.descendants()
	if err != nil {
		return nil, err
	}
	for _, p := range slices.SortedFunc(maps.Keys(procs), func(a, b procKey) int { return a.pid - b.pid }) {
		if !w.procs[p] {
			leaks = append(leaks, "process "+describeProc(p.pid))
		}
	}
	cgroups, err := w.childCgroups()
	if err != nil {
		return nil, err
	}
	for _, d := range slices.Sorted(maps.Keys(cgroups)) {
		if !w.cgroups[d] && testCgroup(filepath.Base(d)) {
			leaks = append(leaks, "cgroup directory "+d)
		}
	}
	return leaks, nil
}

// heldForProcess returns the descriptors this package keeps open for the
// life of the process by design: one O_PATH descriptor per pinned file
// (Pin), one user namespace per idmapping (idmapUserns), the /etc mask
// watch (one inotify instance) and the helper image's sealed memfd, all
// but the first opened at a first call that needs them. They are left out
// by number, not by kind, so one more of any kind still counts.
func heldForProcess() map[int]bool {
	held := map[int]bool{}
	for _, fd := range PinnedDescriptors() {
		held[fd] = true
	}
	idmapNS.Lock()
	for _, f := range idmapNS.f {
		held[int(f.Fd())] = true
	}
	idmapNS.Unlock()
	sharedMasks.mu.Lock()
	if sharedMasks.fd >= 0 {
		held[sharedMasks.fd] = true
	}
	sharedMasks.mu.Unlock()
	// This loads the image if no test did; its memfd is then the one
	// left out.
	if h := currentHelper(); h.file != nil {
		held[int(h.file.Fd())] = true
	}
	return held
}

// idMapPipes picks out of fresh, new descriptors and their links, those
// that are Go's id-map pipes: syscall.forkAndExecInChild returns without
// closing the pipe it makes for UidMappings and GidMappings when clone
// fails (docs/decisions/0042), which a call makes, once per helper it
// tries to start, where the kernel refuses a user namespace
// (TestRootWithoutUserNamespace; every call in the no-userns shape). Such
// a pipe has both ends here, close-on-exec and blocking (syscall.Pipe2),
// where a pipe of os.Pipe is non-blocking: one end open, or an os.Pipe
// left open, still counts.
func idMapPipes(fresh map[int]string) map[int]bool {
	type end struct {
		fd    int
		flags uint64
	}
	ends := map[string][]end{}
	for fd, target := range fresh {
		if !strings.HasPrefix(target, "pipe:[") {
			continue
		}
		flags, ok := fdFlags(fd)
		if !ok {
			continue
		}
		ends[target] = append(ends[target], end{fd, flags})
	}
	out := map[int]bool{}
	for _, e := range ends {
		if len(e) != 2 || e[0].flags&unix.O_ACCMODE == e[1].flags&unix.O_ACCMODE {
			continue
		}
		ok := true
		for _, x := range e {
			ok = ok && x.flags&unix.O_NONBLOCK == 0 && x.flags&unix.O_CLOEXEC != 0
		}
		if ok {
			out[e[0].fd], out[e[1].fd] = true, true
		}
	}
	return out
}

// fdFlags reads a descriptor's open flags from /proc/self/fdinfo.
func fdFlags(fd int) (uint64, bool) {
	b, err := os.ReadFile("/proc/self/fdinfo/" + strconv.Itoa(fd))
	if err != nil {
		return 0, false
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "flags:"); ok {
			flags, err := strconv.ParseUint(strings.TrimSpace(v), 8, 64)
			return flags, err == nil
		}
	}
	return 0, false
}

// openFDs lists this process's open descriptors with their links, but for
// the check's own.
func (w *leakWatch) openFDs() (map[int]string, error) {
	if _, err := w.fdDir.Seek(0, io.SeekStart); err != nil {
		return nil, fmt.Errorf("cannot list this process's descriptors: %w", err)
	}
	names, err := w.fdDir.Readdirnames(-1)
	if err != nil {
		return nil, fmt.Errorf("cannot list this process's descriptors: %w", err)
	}
	own := map[int]bool{int(w.fdDir.Fd()): true}
	for _, d := range w.cgDirs {
		own[int(d.Fd())] = true
	}
	fds := map[int]string{}
	for _, n := range names {
		fd, err := strconv.Atoi(n)
		if err != nil || own[fd] {
			continue
		}
		target, err := os.Readlink("/proc/self/fd/" + n)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			continue // closed since the listing
		case err != nil:
			target = "(" + err.Error() + ")"
		}
		fds[fd] = target
	}
	if len(fds) == 0 {
		// A test binary has at least its standard output and error.
		return nil, errors.New("/proc/self/fd lists no descriptor")
	}
	return fds, nil
}

// descendants walks /proc for the processes descended from this one
// (orphans included where this process is their subreaper). Zombies
// count: a child nobody waits for is a leak too. The walk must find this
// process, or it sees none. Where /proc cannot be read at all (a test
// closed it to this process), or shows no child though there is one (a
// /proc that hides processes), waitid tells whether a child remains, as
// pid -1: what it cannot tell is which, nor about grandchildren.
func (w *leakWatch) descendants() (map[procKey]bool, error) {
	hasChild, werr := waitChild()
	if werr != nil {
		return nil, werr
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		w.procUnread = err
		if hasChild {
			return map[procKey]bool{{pid: -1}: true}, nil
		}
		return map[procKey]bool{}, nil
	}
	self := os.Getpid()
	children := map[int][]procKey{}
	found := false
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		ppid, start, ok := procStat(pid)
		if !ok {
			continue // exited since the listing
		}
		found = found || pid == self
		children[ppid] = append(children[ppid], procKey{pid, start})
	}
	if !found {
		return nil, fmt.Errorf("this process (%d) is not in /proc's list of processes", self)
	}
	out := map[procKey]bool{}
	queue := []int{self}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			if !out[c] {
				out[c] = true
				queue = append(queue, c.pid)
			}
		}
	}
	if hasChild && len(children[self]) == 0 {
		out[procKey{pid: -1}] = true
	}
	return out, nil
}

// waitChild reports whether this process has a child, running or a
// zombie, without reaping it (WNOWAIT).
func waitChild() (bool, error) {
	var info unix.Siginfo
	err := unix.Waitid(unix.P_ALL, 0, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT|unix.WALL, nil)
	switch {
	case errors.Is(err, unix.ECHILD):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("waitid: %w", err)
	}
	return true, nil
}

// procStat reads a process's parent and start time from /proc/PID/stat.
func procStat(pid int) (ppid int, start uint64, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, 0, false
	}
	// After the command name: state, ppid, ..., starttime (field 22).
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return 0, 0, false
	}
	ppid, err = strconv.Atoi(f[1])
	if err != nil {
		return 0, 0, false
	}
	start, err = strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return 0, 0, false
	}
	return ppid, start, true
}

// describeProc names a process for the report: its pid, state, parent
// and command line (its command name when it has none, as a zombie).
func describeProc(pid int) string {
	if pid < 0 {
		return "unknown: this process has a child that /proc does not show"
	}
	p := "/proc/" + strconv.Itoa(pid)
	name, state, ppid := "?", "?", "?"
	if b, err := os.ReadFile(p + "/stat"); err == nil {
		s := string(b)
		i, j := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if i >= 0 && j > i {
			name = s[i+1 : j]
			if f := strings.Fields(s[j+1:]); len(f) > 1 {
				state, ppid = f[0], f[1]
			}
		}
	}
	line := "(" + name + ", no command line)"
	if b, err := os.ReadFile(p + "/cmdline"); err == nil && len(b) > 0 {
		line = strconv.Quote(strings.Join(strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00"), " "))
	}
	return fmt.Sprintf("%d (state %s, parent %s): %s", pid, state, ppid, line)
}

// watchedCgroups returns where the tests make cgroup directories: this
// process's cgroup v2 cgroup (a cgroup manager's parent, from a test here
// or in a re-run child started in the same cgroup) and, unless that is
// the hierarchy's root, its parent (siblingCgroup's, for re-run children).
// Without a cgroup2 mount the tests make none.
func watchedCgroups() ([]string, error) {
	cg, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, fmt.Errorf("cannot read this process's cgroup: %w", err)
	}
	self := ""
	for _, l := range strings.Split(string(cg), "\n") {
		if p, ok := strings.CutPrefix(l, "0::"); ok {
			self = p
		}
	}
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("cannot read this process's mounts: %w", err)
	}
	mount := ""
	for _, l := range strings.Split(string(mi), "\n") {
		f := strings.Fields(l)
		for i, x := range f {
			if x == "-" && i+1 < len(f) && f[i+1] == "cgroup2" && len(f) > 4 && f[3] == "/" && mount == "" {
				mount = f[4]
			}
		}
	}
	if self == "" || mount == "" {
		return nil, nil
	}
	own := filepath.Join(mount, self)
	if self == "/" {
		return []string{own}, nil
	}
	return []string{own, filepath.Dir(own)}, nil
}

// childCgroups lists the child directories of the watched cgroups (full
// paths).
func (w *leakWatch) childCgroups() (map[string]bool, error) {
	out := map[string]bool{}
	for _, d := range w.cgDirs {
		if _, err := d.Seek(0, io.SeekStart); err != nil {
			return nil, fmt.Errorf("cannot list %s: %w", d.Name(), err)
		}
		ents, err := d.ReadDir(-1)
		if err != nil {
			return nil, fmt.Errorf("cannot list %s: %w", d.Name(), err)
		}
		for _, e := range ents {
			if e.IsDir() {
				out[filepath.Join(d.Name(), e.Name())] = true
			}
		}
	}
	return out, nil
}

// testCgroup reports whether a cgroup directory that appeared during the
// tests is one of theirs left behind: named as the tests and the cgroup
// manager name theirs, b10x-...-PID-N with PID the process that made it,
// and made by this process or by one that has ended. A directory whose
// maker still runs belongs to another test binary or harness on this host
// (or to a descendant of this process, which the process check names).
func testCgroup(name string) bool {
	f := strings.Split(name, "-")
	if f[0] != "b10x" || len(f) < 3 {
		return false
	}
	pid, err := strconv.Atoi(f[len(f)-2])
	if err != nil || pid <= 0 {
		return false
	}
	if pid == os.Getpid() {
		return true
	}
	_, err = os.Stat("/proc/" + strconv.Itoa(pid))
	return errors.Is(err, fs.ErrNotExist)
}
