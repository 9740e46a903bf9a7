package tools

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/b10x/harness/internal/dirent"
)

// maxWalkDepth bounds how deep search and find descend; each level holds
// one directory descriptor.
const maxWalkDepth = 256

// maxNotes bounds the skipped-path notes a walk keeps for the result text.
const maxNotes = 10

// dirEntry is one name read from a directory, with the kernel's d_type.
type dirEntry = dirent.Entry

// entryType returns the d_type of name inside dirfd, asking the kernel
// (without following a link) when getdents said DT_UNKNOWN.
func entryType(dirfd int, e dirEntry) uint8 {
	if e.Type != unix.DT_UNKNOWN {
		return e.Type
	}
	var st unix.Stat_t
	if err := unix.Fstatat(dirfd, e.Name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return unix.DT_UNKNOWN
	}
	return modeType(st.Mode)
}

// modeType maps st_mode to a d_type value.
func modeType(mode uint32) uint8 {
	switch mode & unix.S_IFMT {
	case unix.S_IFREG:
		return unix.DT_REG
	case unix.S_IFDIR:
		return unix.DT_DIR
	case unix.S_IFLNK:
		return unix.DT_LNK
	case unix.S_IFIFO:
		return unix.DT_FIFO
	case unix.S_IFSOCK:
		return unix.DT_SOCK
	case unix.S_IFCHR:
		return unix.DT_CHR
	case unix.S_IFBLK:
		return unix.DT_BLK
	}
	return unix.DT_UNKNOWN
}

// walkDir is an open directory of a walk. Entries handed to other
// goroutines hold a reference; the descriptor is closed with the last one.
type walkDir struct {
	fd    int
	rel   string
	owned bool // false for the workspace root descriptor, never closed here
	refs  atomic.Int32
}

func newWalkDir(fd int, rel string, owned bool) *walkDir {
	d := &walkDir{fd: fd, rel: rel, owned: owned}
	d.refs.Store(1)
	return d
}

func (d *walkDir) acquire() { d.refs.Add(1) }

func (d *walkDir) release() {
	if d.refs.Add(-1) == 0 && d.owned {
		unix.Close(d.fd)
	}
}

// walkEntry is one entry met by a walk. dir is referenced for the duration
// of the visit only; a visitor that keeps it must acquire it.
type walkEntry struct {
	dir  *walkDir
	name string
	rel  string
	typ  uint8
}

// notes collects the paths a walk or a search skipped, with the reason.
// Safe for concurrent use.
type notes struct {
	mu    sync.Mutex
	count int
	list  []string
}

func (n *notes) add(rel, why string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.count++
	if len(n.list) < maxNotes {
		n.list = append(n.list, fmt.Sprintf("%s: %s", showPath(rel), why))
	}
}

// text renders the notes as a footer for a result text, or "".
func (n *notes) text() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.count == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "[%d path(s) skipped]\n", n.count)
	for _, l := range n.list {
		b.WriteString("  skipped ")
		b.WriteString(l)
		b.WriteByte('\n')
	}
	if n.count > len(n.list) {
		fmt.Fprintf(&b, "  ... and %d more\n", n.count-len(n.list))
	}
	return b.String()
}

// walker traverses a directory tree beneath the workspace root, depth
// first, entries in byte order of their names, never following a symbolic
// link: every directory it enters is opened from its parent's descriptor
// with the beneath resolve set, so a directory swapped for a link between
// listing and entering is skipped (and noted), never entered. Directories
// named .git are listed but not entered.
type walker struct {
	ctx     context.Context
	stopped *atomic.Bool
	visit   func(e walkEntry)
	notes   *notes
	buf     []byte
}

// walk visits everything beneath the canonical directory startRel. The
// error is the raw errno of opening startRel; what happens beneath is noted.
func (wk *walker) walk(root int, startRel string) error {
	fd, err := openBeneath(root, startRel, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return err
	}
	if wk.buf == nil {
		wk.buf = make([]byte, 32<<10)
	}
	wk.walkDir(newWalkDir(fd, startRel, true), 0)
	return nil
}

func (wk *walker) stop() bool {
	return wk.stopped.Load() || wk.ctx.Err() != nil
}

func (wk *walker) walkDir(d *walkDir, depth int) {
	defer d.release()
	ents, err := dirent.Read(d.fd, wk.buf)
	if err != nil {
		wk.notes.add(d.rel, "cannot read the directory: "+errnoText(err))
		return
	}
	slices.SortFunc(ents, func(a, b dirEntry) int { return strings.Compare(a.Name, b.Name) })
	for _, e := range ents {
		if wk.stop() {
			return
		}
		if IsTempName(e.Name) {
			continue // a write's temporary file (or one a killed write left)
		}
		typ := entryType(d.fd, e)
		rel := childRel(d.rel, e.Name)
		wk.visit(walkEntry{dir: d, name: e.Name, rel: rel, typ: typ})
		if typ != unix.DT_DIR || e.Name == ".git" {
			continue
		}
		if depth+1 >= maxWalkDepth {
			wk.notes.add(rel, fmt.Sprintf("deeper than %d levels", maxWalkDepth))
			continue
		}
		sfd, err := openBeneath(d.fd, e.Name, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			wk.notes.add(rel, openNote(err))
			continue
		}
		wk.walkDir(newWalkDir(sfd, rel, true), depth+1)
	}
}

// openNote explains why an entry met during a walk could not be opened.
func openNote(err error) string {
	switch err {
	case unix.ELOOP, unix.EXDEV:
		return "changed into a symbolic link during the walk; not followed"
	case unix.ENOTDIR:
		return "changed into a non-directory during the walk"
	case unix.ENOENT:
		return "vanished during the walk"
	}
	return "cannot open: " + errnoText(err)
}

// kindName names the type of a file that is not regular, for a message.
func kindName(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFIFO:
		return "a FIFO"
	case unix.S_IFSOCK:
		return "a socket"
	case unix.S_IFCHR:
		return "a character device"
	case unix.S_IFBLK:
		return "a block device"
	case unix.S_IFLNK:
		return "a symbolic link"
	case unix.S_IFDIR:
		return "a directory"
	}
	return "not a regular file"
}

func errnoText(err error) string {
	if e, ok := err.(unix.Errno); ok {
		return e.Error()
	}
	return err.Error()
}
