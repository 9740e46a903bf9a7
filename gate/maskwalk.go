package gate

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/b10x/harness/internal/dirent"
	"github.com/b10x/harness/workspace"
)

// The masks' walk (docs/decisions/0096-scope-globs-compiled.md).
//
// Before each run call the gate must name every file of the workspace the
// read scope denies, for the child's view to mask: a walk of the whole
// tree, which in a repository of 11,000 files costs about 20 ms, at every
// call. Most directories do not change between two calls of a session, so
// the gate keeps what it found in each directory (the masked files and
// the subdirectories to enter, in name order) with the directory's
// identity and change time, and at the next call takes a directory's
// entries from there when its descriptor, opened as before, still has the
// same device, inode and change time: one openat2 (O_PATH) and one fstat
// a directory instead of reading and matching every name.
//
// Why the change time is enough: every change to a directory's entries
// (a name created, removed, renamed in or out, a link made) sets the
// directory's ctime to the current time, and nothing can set a ctime to
// another value (utimensat sets it to now as well): a run child, which can
// reset a directory's mtime, cannot reset its ctime. A change made after
// the listing was read gets a ctime later than the one kept, provided the
// clock moved between the two: a listing is kept only when the directory's
// ctime is older than listingMargin when it is read (its file system's
// timestamps are no coarser than a second, and the kernel's coarse clock
// advances every tick), and only on file systems whose inodes carry their
// own local change times (ext4, xfs, btrfs, tmpfs, f2fs, bcachefs, zfs;
// not NFS, SMB, FUSE or FAT, whose times come from a server or are coarse,
// nor overlayfs, whose merged directory shows its upper layer's ctime while
// a file can appear in a lower one), so a directory changed a moment
// before the listing is read again at the next call. A step of the
// realtime clock backwards (against the monotonic one) since the last walk
// drops every listing: a change after it could take a ctime already seen.

// listingMargin is how much older than the moment it is read a directory's
// ctime must be for its listing to be kept: more than a file system's
// timestamp granularity (a second at worst among those trusted) and the
// coarse clock's tick.
var listingMargin = 2 * time.Second

// trustedCtimeFS are the file systems whose directories' ctimes the masks'
// walk trusts, by statfs magic.
var trustedCtimeFS = map[int64]bool{
	unix.EXT4_SUPER_MAGIC:     true, // ext2, ext3, ext4
	unix.XFS_SUPER_MAGIC:      true,
	unix.BTRFS_SUPER_MAGIC:    true,
	unix.TMPFS_MAGIC:          true,
	unix.F2FS_SUPER_MAGIC:     true,
	unix.BCACHEFS_SUPER_MAGIC: true,
	0x2FC12FC1:                true, // zfs (out of tree: no constant)
}

// fsMagic is the statfs magic of the file system of fd, or -1.
func fsMagic(fd int) int64 {
	var fs unix.Statfs_t
	if unix.Fstatfs(fd, &fs) != nil {
		return -1
	}
	return int64(fs.Type)
}

// maskListings holds, for one gate (its read scope and protected paths are
// fixed), the masks' walk's findings in each directory, by canonical
// relative path. Its zero value is empty and ready; it is safe for
// concurrent use.
type maskListings struct {
	walkMu sync.Mutex // one walk at a time (the session's turn already orders a session's run calls; this orders WarmRunHold's walk too)
	mu     sync.Mutex
	dirs   map[string]*maskListing
	items  int    // the items of every listing kept
	walks  uint64 // walks begun
	// offset is the realtime clock less the monotonic one at the last
	// walk's start: when it falls, the realtime clock was set back.
	offset time.Duration
	hits   int // directories taken from here, for tests
	// watch is the gate's inotify instance (maskwatch.go), made at the
	// first walk; nil before, and for good once it failed or the gate
	// closed (watchOff).
	watch    *dirWatch
	watchOff bool
	unopened int // directories taken without being opened, for tests
}

// maskListing is what the masks' walk found in one directory, and the
// directory as it was when its entries were read.
type maskListing struct {
	dev, ino uint64
	ctime    unix.Timespec
	items    []maskItem // in name order
	seen     uint64     // the last walk that took or stored it
	// wd is the directory's watch (0: none); clean, that the watch was
	// added before the listing was last checked and has had no event
	// since (maskwatch.go).
	wd    int32
	clean bool
}

// maskItem is a masked file (with its device and inode as read: a file
// put under its name since changes the directory's ctime) or a
// subdirectory to enter.
type maskItem struct {
	name     string
	dir      bool
	dev, ino uint64
}

// maxListings and maxListedItems bound what is kept: past them, a
// session's walk reads the directories it has no room for every time, as
// before. Listings a complete walk did not reach (their directory gone,
// renamed, or beneath one) are dropped at its end, so what is kept is at
// most the tree as it is.
const (
	maxListings    = 1 << 16
	maxListedItems = 1 << 20
)

// begin starts a walk: it returns the walk's number, drops every listing
// when the realtime clock was set back since the last walk, and takes the
// trust of every watched listing whose watch has had an event since.
func (m *maskListings) begin() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	off := clockOffset()
	if m.walks > 0 && off < m.offset-10*time.Millisecond {
		m.dirs, m.items = nil, 0
	}
	m.offset = off
	m.walks++
	if m.watch == nil && !m.watchOff && len(m.dirs) > 0 {
		// Once a walk has kept listings: a gate that never keeps one (a
		// one-shot call, a tree changing at every call) makes no
		// instance. The gate's Close ends it; one never closed ends
		// with the gate.
		if m.watch = newDirWatch(); m.watch == nil {
			m.watchOff = true
		} else {
			runtime.AddCleanup(m, (*dirWatch).close, m.watch)
		}
	}
	// A failed instance is dropped: with no live watch, nothing is
	// taken unopened (takeUnopened).
	if m.watch != nil && !m.watch.drain(func(rel string) {
		if l := m.dirs[rel]; l != nil {
			l.clean = false
		}
	}, func() {
		for _, l := range m.dirs {
			l.clean = false
		}
	}) {
		m.watch, m.watchOff = nil, true
	}
	return m.walks
}

// close ends the listings' watches; later walks check every directory
// (with no live watch, takeUnopened takes none).
func (m *maskListings) close() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.watch.close()
	m.watch, m.watchOff = nil, true
}

// watchDir watches the directory open (O_PATH) at fd, on the file system
// of magic fsType, as rel, before the walk checks it: its watch, or 0.
func (m *maskListings) watchDir(fd int, fsType int64, rel string) int32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.watch.add(fd, fsType, rel)
}

// takeUnopened returns rel's listing when it may be taken without opening
// its directory (clean, and its parent taken so or checked unchanged in
// this walk, which the caller knows), else nil. Its watch must be live and
// answer to rel: the kernel gives one watch to an inode, whatever the
// names it is opened by (one directory bound at another name), and an
// event is told to the name it was last opened by, so a listing whose
// watch answers to another name is checked. A closed instance answers to
// none (a walk that was running at Close may have left a listing clean).
func (m *maskListings) takeUnopened(rel string, walk uint64) *maskListing {
	m.mu.Lock()
	defer m.mu.Unlock()
	l := m.dirs[rel]
	if l == nil || !l.clean || !m.watch.answers(l.wd, rel) {
		return nil
	}
	l.seen = max(l.seen, walk)
	m.hits++
	m.unopened++
	return l
}

// clockOffset is the realtime clock less the monotonic one.
func clockOffset() time.Duration {
	var rt, mono unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_REALTIME, &rt)
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &mono)
	return time.Duration(rt.Nano() - mono.Nano())
}

// sweep drops, after the complete walk number walk, the listings no walk
// since it began has reached.
func (m *maskListings) sweep(walk uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for rel, l := range m.dirs {
		if l.seen < walk {
			m.items -= len(l.items)
			delete(m.dirs, rel)
			m.watch.remove(l.wd, rel)
		}
	}
}

// lookup returns the listing of the directory rel, open at fd with stat
// st, when the one kept still describes it. wd is the directory's watch,
// added before st was read (0: none): the listing is clean from here.
func (m *maskListings) lookup(rel string, st *unix.Stat_t, walk uint64, wd int32) *maskListing {
	m.mu.Lock()
	defer m.mu.Unlock()
	l := m.dirs[rel]
	if l == nil || l.dev != st.Dev || l.ino != st.Ino || l.ctime != st.Ctim {
		return nil
	}
	l.seen = max(l.seen, walk)
	l.wd, l.clean = wd, wd != 0
	m.hits++
	return l
}

// keep stores l as the listing of rel, or forgets rel's when keep is false.
// l.wd is its directory's watch, added before its entries were read.
func (m *maskListings) keep(rel string, l *maskListing, keep bool, walk uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if old, ok := m.dirs[rel]; ok {
		m.items -= len(old.items)
		delete(m.dirs, rel)
	}
	if !keep || len(m.dirs) >= maxListings || m.items+len(l.items) > maxListedItems {
		// Watches are for kept listings only: this directory is read
		// again at every walk.
		m.watch.remove(l.wd, rel)
		return
	}
	l.clean = l.wd != 0
	if m.dirs == nil {
		m.dirs = map[string]*maskListing{}
	}
	l.seen = walk
	m.dirs[rel] = l
	m.items += len(l.items)
}

// walkMasks finds the files of the workspace the read scope denies, for a
// run call's child to see empty (h.hold.Masked, at most MaxReadMasks, the
// rest counted in h.maskOverflow), as a walk of Workspace.Walk would, in
// the same order, taking unchanged directories from g.masks. A directory
// it cannot read or enter (deeper than workspace.MaxWalkDepth, or one the
// harness may not read) is counted in h.skipped and the first named in
// h.unwalked: what lies beneath it is unknown, and holdFor refuses the
// call.
func (g *Gate) walkMasks(h *runHold) error {
	g.masks.walkMu.Lock()
	defer g.masks.walkMu.Unlock()
	verdict := g.reads.verdicts()
	walkNo := g.masks.begin()
	buf := make([]byte, 32<<10)

	skip := func(rel, why string) {
		if h.skipped == 0 {
			h.unwalked = workspace.ShowPath(rel) + " (" + why + ")"
		}
		h.skipped++
	}
	err := h.ws.WithRoot(func(root int) error {
		// The walk holds O_PATH descriptors: a directory whose listing
		// is kept is only looked at (fstat), and one read is opened
		// again from its descriptor. An O_PATH open is about a third of
		// a full one's cost (no file opened, no open hooks), and a tree
		// of 1,300 directories is 1,300 of them at every call.
		fd, err := workspace.OpenBeneath(root, ".", unix.O_PATH|unix.O_DIRECTORY, 0)
		if err != nil {
			return fmt.Errorf("walk: open the root: %w", err)
		}
		var walk func(fd int, rel string, depth int)
		// children goes through the items of rel's listing l. stable: every
		// name in rel is the inode it was when l was made (rel was checked
		// unchanged, or taken unopened), so a clean subdirectory may be
		// taken unopened too (maskwatch.go). fd is rel's descriptor, -1
		// when it was taken unopened.
		var children func(l *maskListing, rel string, depth, fd int, stable bool)
		children = func(l *maskListing, rel string, depth, fd int, stable bool) {
			for _, it := range l.items {
				crel := workspace.Child(rel, it.name)
				if !it.dir {
					h.mask(crel, workspace.EntryState{Exists: true, Mode: unix.S_IFREG, Dev: it.dev, Ino: it.ino})
					continue
				}
				if depth+1 >= workspace.MaxWalkDepth {
					skip(crel, fmt.Sprintf("more than %d directories deep", workspace.MaxWalkDepth))
					continue
				}
				if stable {
					if c := g.masks.takeUnopened(crel, walkNo); c != nil {
						children(c, crel, depth+1, -1, true)
						continue
					}
				}
				var sfd int
				var err error
				if fd >= 0 {
					sfd, err = workspace.OpenBeneath(fd, it.name, unix.O_PATH|unix.O_DIRECTORY, 0)
				} else {
					sfd, err = workspace.OpenBeneath(root, crel, unix.O_PATH|unix.O_DIRECTORY, 0)
				}
				if err != nil {
					skip(crel, err.Error())
					continue
				}
				walk(sfd, crel, depth+1)
			}
		}
		walk = func(fd int, rel string, depth int) {
			defer unix.Close(fd)
			// The watch first: a change after it is an event on it.
			fsType := fsMagic(fd)
			wd := g.masks.watchDir(fd, fsType, rel)
			var st unix.Stat_t
			if err := unix.Fstat(fd, &st); err != nil {
				skip(rel, err.Error())
				return
			}
			l := g.masks.lookup(rel, &st, walkNo, wd)
			stable := l != nil
			if l == nil {
				read := time.Now()
				ents, err := readDir(fd, buf)
				if err != nil {
					g.masks.keep(rel, &maskListing{wd: wd}, false, walkNo)
					skip(rel, err.Error())
					return
				}
				l = h.listMasks(fd, rel, ents, verdict)
				l.dev, l.ino, l.ctime, l.wd = st.Dev, st.Ino, st.Ctim, wd
				g.masks.keep(rel, l, trustCtime(fsType, &st, read), walkNo)
			}
			children(l, rel, depth, fd, stable)
		}
		walk(fd, ".", 0)
		return nil
	})
	if err == nil && h.skipped == 0 {
		g.masks.sweep(walkNo)
	}
	return err
}

// readDir reads the entries of the directory open (O_PATH) at fd, through
// a descriptor of its own opened from fd: the same directory.
func readDir(fd int, buf []byte) ([]dirent.Entry, error) {
	rfd, err := unix.Openat(fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(rfd)
	return dirent.Read(rfd, buf)
}

// listMasks makes the listing of the directory rel, open at fd, from its
// entries: the regular files the read scope denies and the directories,
// in name order, leaving out what a protected path covers (held whole).
func (h *runHold) listMasks(fd int, rel string, ents []dirent.Entry, verdict func(string) (string, bool)) *maskListing {
	slices.SortFunc(ents, func(a, b dirent.Entry) int { return strings.Compare(a.Name, b.Name) })
	l := &maskListing{}
	for _, e := range ents {
		crel := workspace.Child(rel, e.Name)
		if h.protectedCovers(crel) {
			continue
		}
		switch dirent.Type(fd, e) {
		case unix.DT_DIR:
			l.items = append(l.items, maskItem{name: e.Name, dir: true})
		case unix.DT_REG:
			if _, denied := verdict(crel); denied {
				// Its identity, for the view to mask this file only; one
				// gone meanwhile is not there to mask.
				var st unix.Stat_t
				if unix.Fstatat(fd, e.Name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFREG {
					l.items = append(l.items, maskItem{name: e.Name, dev: st.Dev, ino: st.Ino})
				}
			}
		}
	}
	return l
}

// trustCtime reports whether the listing of a directory on the file system
// of magic fsType, with stat st, read at read, may be kept: its file system
// keeps local change times, and its ctime is older than read by more than
// listingMargin.
func trustCtime(fsType int64, st *unix.Stat_t, read time.Time) bool {
	return trustedCtimeFS[fsType] && time.Unix(st.Ctim.Unix()).Before(read.Add(-listingMargin))
}

// WarmRunHold reads, on another goroutine, what the masks' walk of the
// first run call will read, so that the directories of a large workspace
// are kept (see above) by the time a model makes that call: a session
// whose calls come from a model calls it once it is open. It does nothing
// when run is not published or when a restricting write-scope rule makes
// every call walk the whole tree anyway. It returns at once; what it reads
// decides nothing (each call still checks every directory it takes), and
// an error (the workspace closed under it) is dropped.
func (g *Gate) WarmRunHold() {
	if !g.published["run"] || len(g.reads.rules) == 0 {
		return
	}
	for _, r := range g.cfg.WriteScope {
		if restricting(r.Access) {
			return
		}
	}
	go func() { _, _ = g.holdBefore() }()
}
