package gate

import (
	"fmt"
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
// same device, inode and change time: one openat2 and one fstat a
// directory instead of reading and matching every name.
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
// own local change times (ext4, xfs, btrfs, tmpfs, f2fs, overlayfs,
// bcachefs, zfs; not NFS, SMB, FUSE or FAT, whose times come from a server
// or are coarse), so a directory changed a moment before the listing is
// read again at the next call. What it trusts is the host's realtime clock
// not being set backwards between two calls.

// listingMargin is how much older than the moment it is read a directory's
// ctime must be for its listing to be kept: more than a file system's
// timestamp granularity (a second at worst among those trusted) and the
// coarse clock's tick.
var listingMargin = 2 * time.Second

// trustedCtimeFS are the file systems whose directories' ctimes the masks'
// walk trusts, by statfs magic.
var trustedCtimeFS = map[int64]bool{
	0xEF53:     true, // ext2, ext3, ext4
	0x58465342: true, // xfs
	0x9123683E: true, // btrfs
	0x01021994: true, // tmpfs
	0xF2F52010: true, // f2fs
	0x794C7630: true, // overlayfs
	0xCA451A4E: true, // bcachefs
	0x2FC12FC1: true, // zfs
}

// maskListings holds, for one gate (its read scope and protected paths are
// fixed), the masks' walk's findings in each directory, by canonical
// relative path. Its zero value is empty and ready; it is safe for
// concurrent use.
type maskListings struct {
	mu   sync.Mutex
	dirs map[string]*maskListing
	hits int // directories taken from here, for tests
}

// maskListing is what the masks' walk found in one directory, and the
// directory as it was when its entries were read.
type maskListing struct {
	dev, ino uint64
	ctime    unix.Timespec
	items    []maskItem // in name order
}

// maskItem is a masked file or a subdirectory to enter.
type maskItem struct {
	name string
	dir  bool
}

// maxListings bounds the directories kept: past it, a session's walk reads
// the directories it has no room for every time, as before.
const maxListings = 1 << 16

// lookup returns the listing of the directory rel, open at fd with stat
// st, when the one kept still describes it.
func (m *maskListings) lookup(rel string, st *unix.Stat_t) *maskListing {
	m.mu.Lock()
	defer m.mu.Unlock()
	l := m.dirs[rel]
	if l == nil || l.dev != st.Dev || l.ino != st.Ino || l.ctime != st.Ctim {
		return nil
	}
	m.hits++
	return l
}

// keep stores l as the listing of rel, or forgets rel's when keep is false.
func (m *maskListings) keep(rel string, l *maskListing, keep bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !keep {
		delete(m.dirs, rel)
		return
	}
	if m.dirs == nil {
		m.dirs = map[string]*maskListing{}
	}
	if _, ok := m.dirs[rel]; ok || len(m.dirs) < maxListings {
		m.dirs[rel] = l
	}
}

// walkMasks finds the files of the workspace the read scope denies, for a
// run call's child to see empty (h.hold.Masked, at most MaxReadMasks, the
// rest counted in h.maskOverflow), as a walk of Workspace.Walk would, in
// the same order, taking unchanged directories from g.masks. It returns the
// directories it could not read or enter.
func (g *Gate) walkMasks(h *runHold) (skipped int, err error) {
	verdict := g.reads.verdicts()
	buf := make([]byte, 32<<10)
	add := func(rel string) {
		if len(h.hold.Masked) == MaxReadMasks {
			h.maskOverflow++
		} else {
			h.hold.Masked = append(h.hold.Masked, rel)
		}
	}
	err = h.ws.WithRoot(func(root int) error {
		fd, err := workspace.OpenBeneath(root, ".", unix.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			return fmt.Errorf("walk: open the root: %w", err)
		}
		var walk func(fd int, rel string, depth int)
		walk = func(fd int, rel string, depth int) {
			defer unix.Close(fd)
			var st unix.Stat_t
			if unix.Fstat(fd, &st) != nil {
				skipped++
				return
			}
			l := g.masks.lookup(rel, &st)
			if l == nil {
				read := time.Now()
				ents, err := dirent.Read(fd, buf)
				if err != nil {
					g.masks.keep(rel, nil, false)
					skipped++
					return
				}
				l = h.listMasks(fd, rel, ents, verdict)
				l.dev, l.ino, l.ctime = st.Dev, st.Ino, st.Ctim
				g.masks.keep(rel, l, trustCtime(fd, &st, read))
			}
			for _, it := range l.items {
				crel := workspace.Child(rel, it.name)
				if !it.dir {
					add(crel)
					continue
				}
				if depth+1 >= workspace.MaxWalkDepth {
					skipped++
					continue
				}
				sfd, err := workspace.OpenBeneath(fd, it.name, unix.O_RDONLY|unix.O_DIRECTORY, 0)
				if err != nil {
					skipped++
					continue
				}
				walk(sfd, crel, depth+1)
			}
		}
		walk(fd, ".", 0)
		return nil
	})
	return skipped, err
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
		typ := e.Type
		if typ == unix.DT_UNKNOWN {
			var st unix.Stat_t
			if unix.Fstatat(fd, e.Name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil {
				switch st.Mode & unix.S_IFMT {
				case unix.S_IFREG:
					typ = unix.DT_REG
				case unix.S_IFDIR:
					typ = unix.DT_DIR
				}
			}
		}
		switch typ {
		case unix.DT_DIR:
			l.items = append(l.items, maskItem{name: e.Name, dir: true})
		case unix.DT_REG:
			if _, denied := verdict(crel); denied {
				l.items = append(l.items, maskItem{name: e.Name})
			}
		}
	}
	return l
}

// trustCtime reports whether the listing of the directory open at fd, with
// stat st, read at read, may be kept: its file system keeps local change
// times, and its ctime is older than read by more than listingMargin.
func trustCtime(fd int, st *unix.Stat_t, read time.Time) bool {
	var fs unix.Statfs_t
	if unix.Fstatfs(fd, &fs) != nil || !trustedCtimeFS[int64(fs.Type)] {
		return false
	}
	return time.Unix(st.Ctim.Unix()).Before(read.Add(-listingMargin))
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
