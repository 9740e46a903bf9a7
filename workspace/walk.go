package workspace

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/b10x/harness/internal/dirent"
)

// MaxWalkDepth bounds how deep Walk and a Walker descend; each level holds
// one directory descriptor.
const MaxWalkDepth = 256

// dirEntry is one name read from a directory, with the kernel's d_type.
type dirEntry = dirent.Entry

// Dir is a directory open during a walk, shared by whoever holds an entry
// of it: a search hands its files to other goroutines, which open them
// from Fd. It counts references; the descriptor is closed with the last
// Release when the Dir owns it. A Dir is safe for concurrent use.
type Dir struct {
	fd    int
	rel   string
	owned bool // false for the workspace root descriptor, never closed here
	refs  atomic.Int32
}

// NewDir makes a Dir of fd, a descriptor of the canonical directory rel
// open for reading (O_RDONLY|O_DIRECTORY, not O_PATH), holding one
// reference, the caller's. When owned, the last Release closes fd;
// otherwise fd stays its owner's (the root descriptor of WithRoot, which
// stays open while WithRoot's function runs) and nothing here closes it.
func NewDir(fd int, rel string, owned bool) *Dir {
	d := &Dir{fd: fd, rel: rel, owned: owned}
	d.refs.Store(1)
	return d
}

// Fd returns the directory's descriptor, for opening its entries with
// OpenBeneath. It is valid while a reference is held.
func (d *Dir) Fd() int { return d.fd }

// Acquire takes one more reference; each must be dropped by a Release.
func (d *Dir) Acquire() { d.refs.Add(1) }

// Release drops one reference; the last closes an owned descriptor.
func (d *Dir) Release() {
	if d.refs.Add(-1) == 0 && d.owned {
		unix.Close(d.fd)
	}
}

// Entry is one entry a Walker met.
type Entry struct {
	// Dir is the directory holding the entry. It is referenced for the
	// Visit call only: a visitor that keeps it must Acquire it (and
	// Release it once done).
	Dir  *Dir
	Name string // the entry's name in Dir
	Rel  string // its canonical workspace-relative path
	// Type is its type, unix.DT_*, without following a link; DT_UNKNOWN
	// when neither getdents nor a stat could tell.
	Type uint8
}

// Walker traverses a directory tree beneath the workspace root for search
// and find: depth first, entries in byte order of their names, never
// following a symbolic link. Every directory it enters is opened from its
// parent's descriptor with OpenBeneath, so a directory swapped for a link
// between listing and entering is skipped (and said so to Skip), never
// entered. Directories named .git are visited but not entered; temporary
// files of writes (IsTempName) are not visited at all. It goes at most
// MaxWalkDepth levels deep.
//
// Visit is required; Skip and Stop may be nil, so the zero value is not
// usable. A Walker is a value of functions: Walk may be called any number
// of times, from several goroutines at once if its functions allow it;
// Visit, Skip and Stop run on the goroutine that called Walk.
//
// What it does not protect against is what Workspace does not: a
// directory moved out of the root by another process while the walk is
// beneath it is walked where it now is, through the descriptor already
// open.
type Walker struct {
	// Visit is called with each entry, in walk order.
	Visit func(e Entry)
	// Skip is told each path whose listing the walk could not read or
	// would not enter, and why, in a sentence for a model.
	Skip func(rel, why string)
	// Stop is asked before each entry; true ends the walk.
	Stop func() bool
}

// Walk visits everything beneath the canonical directory start, opened
// from root (the root descriptor of WithRoot) with OpenBeneath. It returns
// once the tree is walked, Stop says so or ctx is done (ctx's end is not
// an error: the caller asks ctx). The error is the raw errno of opening
// start (ENOTDIR for a file, ELOOP or EXDEV for a link swapped in); what
// happens beneath it goes to Skip.
func (wk Walker) Walk(ctx context.Context, root int, start string) error {
	fd, err := OpenBeneath(root, start, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return err
	}
	t := &treeWalk{wk: wk, ctx: ctx, buf: make([]byte, 32<<10)}
	t.dir(NewDir(fd, start, true), 0)
	return nil
}

// treeWalk is the state of one Walker.Walk.
type treeWalk struct {
	wk  Walker
	ctx context.Context
	buf []byte // getdents buffer, shared down the recursion
}

func (t *treeWalk) stop() bool {
	return t.wk.Stop != nil && t.wk.Stop() || t.ctx.Err() != nil
}

func (t *treeWalk) skip(rel, why string) {
	if t.wk.Skip != nil {
		t.wk.Skip(rel, why)
	}
}

// dir visits the entries of d and walks its subdirectories, releasing d.
func (t *treeWalk) dir(d *Dir, depth int) {
	defer d.Release()
	ents, err := dirent.Read(d.fd, t.buf)
	if err != nil {
		t.skip(d.rel, "cannot read the directory: "+errnoText(err))
		return
	}
	slices.SortFunc(ents, func(a, b dirEntry) int { return strings.Compare(a.Name, b.Name) })
	for _, e := range ents {
		if t.stop() {
			return
		}
		if IsTempName(e.Name) {
			continue // a write's temporary file (or one a killed write left)
		}
		typ := dirent.Type(d.fd, e)
		rel := Child(d.rel, e.Name)
		t.wk.Visit(Entry{Dir: d, Name: e.Name, Rel: rel, Type: typ})
		if typ != unix.DT_DIR || e.Name == ".git" {
			continue
		}
		if depth+1 >= MaxWalkDepth {
			t.skip(rel, fmt.Sprintf("deeper than %d levels", MaxWalkDepth))
			continue
		}
		sfd, err := OpenBeneath(d.fd, e.Name, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			t.skip(rel, SkipReason(err))
			continue
		}
		t.dir(NewDir(sfd, rel, true), depth+1)
	}
}

// SkipReason says, for a walk's skip notes, why an entry met during a walk
// could not be opened with OpenBeneath, err being its errno: it changed
// into a symbolic link (not followed), into a non-directory, vanished, or
// the errno's own text.
func SkipReason(err error) string {
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

// errnoText is an errno's text.
func errnoText(err error) string {
	if e, ok := err.(unix.Errno); ok {
		return e.Error()
	}
	return err.Error()
}
