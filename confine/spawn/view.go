package spawn

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/b10x/harness/confine/spawn/internal/helper"
	"github.com/b10x/harness/internal/dirent"
)

// The child's filesystem view: a fresh tmpfs root holding read-only binds of
// the system directories, the workspace and the extra paths at their own
// paths, a private /tmp, a minimal /dev and a fresh /proc. Nothing else of
// the host is visible: not /home, /root, /run, /var, the host's /tmp, nor the
// sockets in them. See docs/decisions/0031-spawn-view.md.

// systemDirs are bound read-only when they exist (a symlink, as on
// merged-/usr systems, is recreated as the same symlink).
var systemDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt"}

// llKind is the access a Landlock rule grants; see childRights.
type llKind uint8

const (
	llRead  llKind = iota + 1 // read and execute
	llWrite                   // read, write, create, remove, execute
	llDev                     // a device file: read and write (and its ioctls)
	llList                    // list the directory's entries, nothing more
)

// llRule is one Landlock rule of the child's domain, before its access
// mask is computed for the ABI.
type llRule struct {
	Path string
	Dir  bool
	Kind llKind
}

// devFiles are the device nodes of the child's /dev.
var devFiles = []string{"null", "zero", "full", "random", "urandom"}

// maskedRoot is the system directory whose entries that are not readable by
// every user are hidden from the child (see etcMasks).
const maskedRoot = "/etc"

// buildView returns the mounts and Landlock rules of the child's view of s,
// with masks hiding the listed paths beneath maskedRoot. The paths the
// caller named are pinned (Spec.Workspace, ReadPaths, WritePaths): their
// binds carry the identity the helper checks.
func buildView(s Spec, masks []string) ([]helper.Mount, []llRule, error) {
	entries, err := systemEntries(s)
	if err != nil {
		return nil, nil, err
	}
	named, err := userEntries(s)
	if err != nil {
		return nil, nil, err
	}
	entries = append(entries, named...)
	entries = append(entries, resolverEntries(s)...)
	kept := dedupeView(entries)
	if kept, err = withProgram(kept, s); err != nil {
		return nil, nil, err
	}
	kept = withMasks(kept, masks)
	orderView(kept)

	// The held paths beneath the workspace come last: each is resolved
	// in the view, beneath the workspace's bind, after every bind it may
	// lie in.
	for _, m := range s.held() {
		kept = append(kept, viewEntry{op: m})
	}
	// The masks of the read scope last: over the held binds they may lie
	// in.
	for _, m := range s.masks() {
		kept = append(kept, viewEntry{op: m})
	}

	ops := make([]helper.Mount, 0, len(kept))
	rules := []llRule{{Path: "/", Dir: true, Kind: llList}}
	for _, e := range kept {
		ops = append(ops, e.op)
		if e.rule != 0 {
			rules = append(rules, llRule{Path: e.op.Dst, Dir: !e.op.File, Kind: e.rule})
		}
	}
	return ops, rules, nil
}

// viewEntry is one mount of the view and the Landlock rule it carries.
type viewEntry struct {
	op   helper.Mount
	user bool // named by the Spec (the workspace, extra paths, the program)
	rule llKind
}

// systemEntries are the system directories (read-only binds, or symlinks
// recreated as such), the minimal /dev, /proc and the private /tmp.
func systemEntries(s Spec) ([]viewEntry, error) {
	var entries []viewEntry
	add := func(e viewEntry) { entries = append(entries, e) }
	for _, d := range systemDirs {
		fi, err := os.Lstat(d)
		switch {
		case errors.Is(err, os.ErrNotExist):
			continue
		case err != nil:
			return nil, fmt.Errorf("spawn: system directory %s: %w", d, err)
		case fi.Mode()&os.ModeSymlink != 0:
			target, err := os.Readlink(d)
			if err != nil {
				return nil, fmt.Errorf("spawn: system directory %s: %w", d, err)
			}
			add(viewEntry{op: helper.Mount{Kind: helper.Symlink, Src: target, Dst: d}})
		case fi.IsDir():
			add(viewEntry{op: helper.Mount{Kind: helper.Bind, Src: d, Dst: d, RO: true}, rule: llRead})
		}
	}
	add(viewEntry{op: helper.Mount{Kind: helper.Tmpfs, Dst: "/dev", RO: true, Data: "mode=0755,size=64k"}, rule: llList})
	for _, f := range devFiles {
		add(viewEntry{op: helper.Mount{Kind: helper.Bind, Src: "/dev/" + f, Dst: "/dev/" + f, File: true, Dev: true}, rule: llDev})
	}
	for _, l := range [][2]string{{"/proc/self/fd", "/dev/fd"}, {"/proc/self/fd/0", "/dev/stdin"}, {"/proc/self/fd/1", "/dev/stdout"}, {"/proc/self/fd/2", "/dev/stderr"}} {
		add(viewEntry{op: helper.Mount{Kind: helper.Symlink, Src: l[0], Dst: l[1]}})
	}
	add(viewEntry{op: helper.Mount{Kind: helper.Tmpfs, Dst: "/dev/shm", Data: tmpfsData(s)}, rule: llWrite})
	add(viewEntry{op: helper.Mount{Kind: helper.Proc, Dst: "/proc"}, rule: llRead})
	add(viewEntry{op: helper.Mount{Kind: helper.Tmpfs, Dst: "/tmp", Data: tmpfsData(s)}, rule: llWrite})
	return entries, nil
}

// userEntries are the paths the caller named. They were pinned at start
// (Pin): each is bound from the file found then, never resolved again here.
func userEntries(s Spec) ([]viewEntry, error) {
	var entries []viewEntry
	user := func(what string, p Pinned, rw bool) error {
		if err := viewable(what, p.Path); err != nil {
			return err
		}
		k := llRead
		if rw {
			k = llWrite
		}
		entries = append(entries, viewEntry{op: helper.Mount{Kind: helper.Bind, Src: p.Path, Dst: p.Path, RO: !rw, File: !p.Dir,
			Pinned: true, PinDev: p.Dev, PinIno: p.Ino}, user: true, rule: k})
		return nil
	}
	if err := user("workspace", s.Workspace, true); err != nil {
		return nil, err
	}
	for _, p := range s.ReadPaths {
		if err := user("read path", p, false); err != nil {
			return nil, err
		}
	}
	for _, p := range s.WritePaths {
		if err := user("write path", p, true); err != nil {
			return nil, err
		}
	}
	return entries, nil
}

// resolverEntries: with the host's network, name resolution must work: a
// resolv.conf that links out of the view (systemd-resolved's in /run) gets
// its target bound, read-only, at its own path.
func resolverEntries(s Spec) []viewEntry {
	if !s.Net {
		return nil
	}
	if target, err := canonical(resolvConf); err == nil && target != resolvConf && !withinAny(target, systemDirs) {
		if fi, err := os.Stat(target); err == nil && fi.Mode().IsRegular() {
			if err := viewable("resolver configuration", target); err == nil {
				return []viewEntry{{op: helper.Mount{Kind: helper.Bind, Src: target, Dst: target, RO: true, File: true}, rule: llRead}}
			}
		}
	}
	return nil
}

// dedupeView keeps one entry per destination: a Spec path replaces a
// system entry; read-write beats read-only.
func dedupeView(entries []viewEntry) []viewEntry {
	byDst := map[string]int{}
	var kept []viewEntry
	for _, e := range entries {
		i, dup := byDst[e.op.Dst]
		if !dup {
			byDst[e.op.Dst] = len(kept)
			kept = append(kept, e)
			continue
		}
		old := kept[i]
		switch {
		case e.user && !old.user:
			kept[i] = e
		case e.user && old.user && old.op.RO && !e.op.RO:
			kept[i] = e
		}
	}
	return kept
}

// withProgram makes the program visible: it is when a directory of the
// view holds it; otherwise that one file is bound read-only, from the file
// pinned at start (the helper refuses the bind unless it is still that
// file). Its path is never resolved again here: a link a child put there
// since start is not followed (docs/decisions/0071-programs-pinned.md).
func withProgram(kept []viewEntry, s Spec) ([]viewEntry, error) {
	prog := s.Program
	for _, e := range kept {
		if e.op.Kind == helper.Bind && (e.op.Dst == prog.Path || !e.op.File && within(prog.Path, e.op.Dst)) {
			return kept, nil
		}
	}
	if err := viewable("program", prog.Path); err != nil {
		return nil, err
	}
	return append(kept, viewEntry{op: helper.Mount{Kind: helper.Bind, Src: prog.Path, Dst: prog.Path, RO: true, File: true,
		Pinned: true, PinDev: prog.Dev, PinIno: prog.Ino}, user: true, rule: llRead}), nil
}

// withMasks adds the masks: none at or beneath a path the Spec named (the
// caller asked for it explicitly).
func withMasks(kept []viewEntry, masks []string) []viewEntry {
	for _, m := range masks {
		explicit := false
		for _, e := range kept {
			if e.user && within(m, e.op.Dst) {
				explicit = true
				break
			}
		}
		if explicit {
			continue
		}
		kind := helper.MaskFile
		if strings.HasSuffix(m, "/") {
			kind = helper.MaskDir
		}
		m = strings.TrimSuffix(m, "/")
		kept = append(kept, viewEntry{op: helper.Mount{Kind: kind, Dst: m, RO: true}})
	}
	return kept
}

// orderView puts parents before children: it sorts by depth, keeping the
// order above for equal depths. A masked directory with a mount beneath it
// stays writable at the mount level so the mount point can be made
// (Landlock still denies writes).
func orderView(kept []viewEntry) {
	slices.SortStableFunc(kept, func(a, b viewEntry) int { return depth(a.op.Dst) - depth(b.op.Dst) })
	for i := range kept {
		if kept[i].op.Kind != helper.MaskDir {
			continue
		}
		for _, e := range kept[i+1:] {
			if within(e.op.Dst, kept[i].op.Dst) {
				kept[i].op.RO = false
				break
			}
		}
	}
}

// viewable refuses paths that cannot be added to the view: the root itself
// (it would bring back the whole host) and the view's own /proc and /dev.
func viewable(what, p string) error {
	switch {
	case p == "/":
		return errorf("%s %q: the root cannot be added to the view; name the directories instead", what, p)
	case within(p, "/proc"):
		return errorf("%s %q: /proc is the child's own; host /proc paths cannot be added", what, p)
	case p == "/dev":
		return errorf("%s %q: /dev is the child's own minimal one; name single devices instead", what, p)
	}
	return nil
}

// InView reports whether the canonical path p is visible to a run child
// whose view holds the system directories and dirs (the workspace and the
// extra paths), without a bind of its own.
func InView(p string, dirs []string) bool {
	if withinAny(p, systemDirs) {
		return true
	}
	for _, d := range dirs {
		if d != "" && within(p, d) {
			return true
		}
	}
	return false
}

// canonical resolves p to an absolute path without symlinks.
func canonical(p string) (string, error) {
	c, err := filepath.EvalSymlinks(p)
	if err != nil {
		return "", err
	}
	return filepath.Abs(c)
}

// resolvConf is the resolver configuration, followed out of /etc when the
// call has the host's network (a variable for the tests).
var resolvConf = "/etc/resolv.conf"

// withinAny reports whether p is within one of dirs.
func withinAny(p string, dirs []string) bool {
	for _, d := range dirs {
		if within(p, d) {
			return true
		}
	}
	return false
}

// within reports whether p is dir or beneath it, component-wise.
func within(p, dir string) bool {
	if dir == "/" {
		return true
	}
	return p == dir || strings.HasPrefix(p, dir+"/")
}

func depth(p string) int {
	if p == "/" {
		return 0
	}
	return strings.Count(p, "/")
}

// etcMasks finds the entries of maskedRoot that not every user of the host
// may read: regular files (and other non-directories) without the
// other-read bit, directories without other-read and other-search. Those
// are hidden in the child's view: a child running as root (in its user
// namespace or not) would otherwise read /etc/shadow, /etc/gshadow, private
// keys and the like through the owner bits. A directory's result ends in
// "/".
//
// The scan is cached and watched with inotify: a change anywhere in the tree
// (an entry created, removed, renamed, or its mode changed) makes the next
// call scan again. Without inotify every call scans.
type etcMasks struct {
	mu    sync.Mutex
	root  string
	fd    int // inotify descriptor, -1 when none
	masks []string
	valid bool
	scans int // scans made so far
}

func newEtcMasks(root string) *etcMasks { return &etcMasks{root: root, fd: -1} }

// MaskedSystemPaths lists what a run call's view hides beneath /etc now
// (its program reads each as empty): the entries not every user of the
// host may read, as each call's start finds them. A directory ends in
// "/".
func MaskedSystemPaths() ([]string, error) { return newEtcMasks(maskedRoot).get() }

// get returns the current mask list. The first call only scans: a
// process that spawns once (exec) would pay for a watch on every directory
// and never use it. From the second call on, the scan is watched and kept
// until the watch sees a change.
func (m *etcMasks) get() ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.valid && m.fd >= 0 && !m.changed() {
		return m.masks, nil
	}
	if m.fd >= 0 {
		closeFD(m.fd)
		m.fd = -1
	}
	fd := -1
	if m.scans > 0 {
		if ifd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC); err == nil {
			fd = ifd
		}
	}
	m.scans++
	masks, err := scanMasks(m.root, fd)
	if err != nil {
		if fd >= 0 {
			closeFD(fd)
		}
		m.valid = false
		return nil, err
	}
	m.fd, m.masks, m.valid = fd, masks, true
	return masks, nil
}

// changed reports whether the watch saw any event (or overflowed).
func (m *etcMasks) changed() bool {
	var buf [4096]byte
	n, err := unix.Read(m.fd, buf[:])
	if errors.Is(err, unix.EAGAIN) {
		return false
	}
	return n != 0 || err != nil
}

// close releases the watch.
func (m *etcMasks) close() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fd >= 0 {
		closeFD(m.fd)
		m.fd = -1
	}
	m.valid = false
}

const watchMask = unix.IN_ATTRIB | unix.IN_CREATE | unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO |
	unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_ONLYDIR | unix.IN_DONT_FOLLOW

// scanMasks walks root, watching each directory (when fd >= 0) before
// reading it, so that no change after the read goes unnoticed. Each
// directory is opened once (never through a link) and its entries are
// examined relative to that descriptor: one fstatat per entry that is not
// a symbolic link, nothing more.
//
// No cheaper proof stands in for the walk. What it finds depends on every
// directory's entries and on the mode of every entry beneath root, and a
// chmod of one file changes only that file's ctime: no mtime, inode or
// ctime of root or of any directory would tell a cached result from a
// stale one (nor would they see a mount over a directory), so a cache
// would be checked with one stat per entry, which is most of the walk.
func scanMasks(root string, fd int) ([]string, error) {
	var st unix.Stat_t
	if err := unix.Lstat(root, &st); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil, nil
		}
		return nil, fmt.Errorf("spawn: scan %s: %w", root, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return nil, nil
	}
	if st.Mode&0o005 != 0o005 {
		return []string{root + "/"}, nil
	}
	// Directories are read side by side, one per processor (at most
	// four), by as many workers taking the next directory from one list:
	// on a host where a system call is slow (a VM) the scan is most of a
	// one-shot spawn's planning. A worker per directory would cost a
	// goroutine, its stack and their page faults for each of /etc's
	// hundred-odd directories.
	sc := &maskScan{fd: fd, todo: []string{root}}
	sc.wake.L = &sc.mu
	var wg sync.WaitGroup
	for range min(max(runtime.GOMAXPROCS(0), 1), 4) - 1 {
		wg.Go(sc.work)
	}
	sc.work()
	wg.Wait()
	if sc.err != nil {
		return nil, sc.err
	}
	slices.Sort(sc.masks)
	return sc.masks, nil
}

// maskScan is one scanMasks walk shared by its workers.
type maskScan struct {
	fd   int // inotify descriptor, -1 when none
	mu   sync.Mutex
	wake sync.Cond // a directory was listed, or the walk ended
	// todo are the directories still to read; busy counts those being
	// read (each may add more).
	todo  []string
	busy  int
	masks []string
	err   error // the first error; the walk stops at it
}

// work reads directories from the list until none is left and none is
// being read, or one failed.
func (sc *maskScan) work() {
	buf := make([]byte, 32<<10)
	sc.mu.Lock()
	defer sc.mu.Unlock()
	for {
		for len(sc.todo) == 0 && sc.busy > 0 && sc.err == nil {
			sc.wake.Wait()
		}
		if len(sc.todo) == 0 || sc.err != nil {
			sc.wake.Broadcast()
			return
		}
		dir := sc.todo[len(sc.todo)-1]
		sc.todo = sc.todo[:len(sc.todo)-1]
		sc.busy++
		sc.mu.Unlock()
		subdirs, masks, err := scanDir(dir, sc.fd, buf)
		sc.mu.Lock()
		sc.busy--
		sc.masks = append(sc.masks, masks...)
		sc.todo = append(sc.todo, subdirs...)
		if err != nil && sc.err == nil {
			sc.err = err
		}
		if len(subdirs) > 1 || sc.busy == 0 || sc.err != nil {
			sc.wake.Broadcast()
		}
	}
}

// scanDir examines one directory of the scan (see scanMasks): its masked
// entries and its subdirectories to examine next.
func scanDir(dir string, fd int, buf []byte) (subdirs, masks []string, err error) {
	if fd >= 0 {
		if _, err := unix.InotifyAddWatch(fd, dir, watchMask); err != nil {
			return nil, nil, fmt.Errorf("spawn: watch %s: %w", dir, err)
		}
	}
	dfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		// Unreadable to the harness itself (or swapped for a link since it
		// was examined): hide it.
		return nil, []string{dir + "/"}, nil
	}
	defer unix.Close(dfd)
	var st unix.Stat_t
	var statErr error
	readErr := dirent.Each(dfd, buf, func(b []byte, typ uint8) {
		if statErr != nil || typ == unix.DT_LNK {
			// A link is resolved in the view, where its target is masked
			// or absent.
			return
		}
		name := string(b)
		if err := unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			if !errors.Is(err, unix.ENOENT) {
				statErr = fmt.Errorf("spawn: scan %s: %w", dir+"/"+name, err)
			}
			return
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFLNK:
		case unix.S_IFDIR:
			if st.Mode&0o005 != 0o005 {
				masks = append(masks, dir+"/"+name+"/")
				return
			}
			subdirs = append(subdirs, dir+"/"+name)
		default:
			if st.Mode&0o004 == 0 {
				masks = append(masks, dir+"/"+name)
			}
		}
	})
	switch {
	case readErr != nil:
		// Not listed whole: hide it.
		return nil, []string{dir + "/"}, nil
	case statErr != nil:
		return nil, nil, statErr
	}
	return subdirs, masks, nil
}

func closeFD(fd int) { _ = unix.Close(fd) }

// SystemReadPaths returns what a run child reads of the host's system,
// as paths a Landlock rule can grant: the system directories (those that
// exist and are not symbolic links) other than /etc, and of /etc the
// entries every user of the host may read — the same entries a run
// child's view shows, with those it masks left out. An entry is a whole
// directory where nothing beneath it is masked, else its entries one by
// one; symbolic links are left out (their targets are granted where they
// lie beneath a system directory). The harness grants them to its own
// domain when it starts hook programs, which inherit it.
//
// It scans /etc each time it is called (no cache). The error names the
// path that could not be examined.
func SystemReadPaths() ([]string, error) {
	var out []string
	for _, d := range systemDirs {
		if d == maskedRoot {
			continue
		}
		fi, err := os.Lstat(d)
		switch {
		case errors.Is(err, os.ErrNotExist):
			continue
		case err != nil:
			return nil, fmt.Errorf("spawn: system directory %s: %w", d, err)
		case fi.IsDir():
			out = append(out, d)
		}
	}
	masks, err := scanMasks(maskedRoot, -1)
	if err != nil {
		return nil, err
	}
	etc, err := unmasked(maskedRoot, masks)
	if err != nil {
		return nil, err
	}
	return append(out, etc...), nil
}

// unmasked returns the paths beneath dir (dir itself when nothing beneath
// it is masked) that no mask hides, leaving out symbolic links.
func unmasked(dir string, masks []string) ([]string, error) {
	if slices.Contains(masks, dir+"/") {
		return nil, nil
	}
	if !slices.ContainsFunc(masks, func(m string) bool { return strings.HasPrefix(m, dir+"/") }) {
		return []string{dir}, nil
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("spawn: read %s: %w", dir, err)
	}
	var out []string
	for _, e := range ents {
		p := dir + "/" + e.Name()
		switch {
		case e.Type()&os.ModeSymlink != 0, slices.Contains(masks, p):
		case e.IsDir():
			sub, err := unmasked(p, masks)
			if err != nil {
				return nil, err
			}
			out = append(out, sub...)
		default:
			out = append(out, p)
		}
	}
	return out, nil
}
