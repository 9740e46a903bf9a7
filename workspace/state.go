package workspace

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/b10x/harness/internal/dirent"
)

// EntryState is the state of one workspace path, read without following a
// symbolic link (Lstat, Walk), for telling later whether it changed. The
// zero value means "does not exist".
type EntryState struct {
	Exists       bool   // false: nothing is there (every other field is zero)
	Mode         uint32 // st_mode: type and permission bits
	Dev, Ino     uint64 // the file's device and inode
	Nlink        uint64 // its link count
	Size         int64  // its size in bytes
	Mtime, Ctime int64  // nanoseconds since the epoch
}

// IsDir reports whether the path is a directory.
func (s EntryState) IsDir() bool { return s.Mode&unix.S_IFMT == unix.S_IFDIR }

// IsRegular reports whether the path is a regular file.
func (s EntryState) IsRegular() bool { return s.Mode&unix.S_IFMT == unix.S_IFREG }

// SameFile reports whether both states are the same file: both absent, or
// the same type, device and inode.
func (s EntryState) SameFile(o EntryState) bool {
	if !s.Exists || !o.Exists {
		return s.Exists == o.Exists
	}
	return s.Mode&unix.S_IFMT == o.Mode&unix.S_IFMT && s.Dev == o.Dev && s.Ino == o.Ino
}

// Same reports whether both states are the same file, unchanged: SameFile,
// and the same mode, link count, size, modification and change times.
func (s EntryState) Same(o EntryState) bool {
	return s.SameFile(o) && s.Mode == o.Mode && s.Nlink == o.Nlink && s.Size == o.Size && s.Mtime == o.Mtime && s.Ctime == o.Ctime
}

// stateOf is the EntryState of a stat.
func stateOf(st *unix.Stat_t) EntryState {
	return EntryState{Exists: true, Mode: st.Mode, Dev: uint64(st.Dev), Ino: st.Ino, Nlink: uint64(st.Nlink), Size: st.Size,
		Mtime: st.Mtim.Nano(), Ctime: st.Ctim.Nano()}
}

// ErrLinkInPath is returned by Lstat when a directory on the way to the path
// is a symbolic link: the path cannot be reached from the root without
// following one.
var ErrLinkInPath = errors.New("a directory on the way is a symbolic link")

// Lstat returns the state of the canonical relative path rel, reached from
// the root without following any symbolic link (its last component, if a
// link, is described itself). A missing path, or a missing or
// non-directory parent, is the zero EntryState and no error; a link on
// the way is an error wrapping ErrLinkInPath. Errors are plain errors
// naming rel, not *Error (they are for the record, not a model), except
// an *Error for a closed Workspace.
func (w *Workspace) Lstat(rel string) (EntryState, error) {
	var out EntryState
	err := w.WithRoot(func(root int) error {
		dir, base := Split(rel)
		dfd, err := openat2(root, dir, unix.O_PATH|unix.O_DIRECTORY, 0, beneath)
		switch {
		case errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR):
			return nil
		case errors.Is(err, unix.ELOOP) || errors.Is(err, unix.EXDEV):
			return fmt.Errorf("lstat %q: %w", rel, ErrLinkInPath)
		case err != nil:
			return fmt.Errorf("lstat %q: open %q: %w", rel, dir, err)
		}
		defer unix.Close(dfd)
		var st unix.Stat_t
		if err := unix.Fstatat(dfd, base, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			if errors.Is(err, unix.ENOENT) {
				return nil
			}
			return fmt.Errorf("lstat %q: %w", rel, err)
		}
		out = stateOf(&st)
		return nil
	})
	return out, err
}

// Walk visits every path beneath the root in lexical pre-order, without
// following any symbolic link: visit gets each path's canonical relative
// name and its directory-entry type (unix.DT_*), and returns whether to
// descend (only directories are descended into). stat reads the state of
// the entry being visited. It goes at most MaxWalkDepth levels deep; the
// returned count says how many directories were too deep or could not be
// read (their content was not visited).
//
// Unlike a Walker, it shows everything: .git directories are entered and
// temporary files of writes (IsTempName) visited. It runs on the calling
// goroutine; the error is opening the root's listing, or a closed
// Workspace's *Error.
func (w *Workspace) Walk(visit func(rel string, typ uint8, stat func() EntryState) bool) (skipped int, err error) {
	buf := make([]byte, 32<<10)
	err = w.WithRoot(func(root int) error {
		fd, err := OpenBeneath(root, ".", unix.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			return fmt.Errorf("walk: open the root: %w", err)
		}
		var walk func(fd int, rel string, depth int)
		walk = func(fd int, rel string, depth int) {
			defer unix.Close(fd)
			ents, err := dirent.Read(fd, buf)
			if err != nil {
				skipped++
				return
			}
			sortEntries(ents)
			for _, e := range ents {
				typ := dirent.Type(fd, e)
				name := e.Name
				crel := Child(rel, name)
				stat := func() EntryState {
					var st unix.Stat_t
					if unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
						return EntryState{}
					}
					return stateOf(&st)
				}
				if !visit(crel, typ, stat) || typ != unix.DT_DIR {
					continue
				}
				if depth+1 >= MaxWalkDepth {
					skipped++
					continue
				}
				sfd, err := OpenBeneath(fd, name, unix.O_RDONLY|unix.O_DIRECTORY, 0)
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

// sortEntries sorts directory entries by name, in byte order.
func sortEntries(ents []dirEntry) {
	slices.SortFunc(ents, func(a, b dirEntry) int { return strings.Compare(a.Name, b.Name) })
}

// RemoveAll removes the canonical relative path rel and, when it is a
// directory, everything beneath it, beneath the root and without following
// any symbolic link (a link is removed, never its target). A directory it
// may not write is given owner rwx first (through its own descriptor,
// never a name that could be swapped). A path that does not exist is not
// an error; the root itself is refused. It stops at the first entry it
// cannot remove, returning a plain error naming it, and goes at most
// MaxWalkDepth levels deep.
func (w *Workspace) RemoveAll(rel string) error {
	if rel == "." || rel == "" {
		return errors.New("remove: refusing to remove the workspace root")
	}
	return w.WithRoot(func(root int) error {
		dir, base := Split(rel)
		dfd, err := OpenBeneath(root, dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("remove %q: open %q: %w", rel, dir, err)
		}
		defer unix.Close(dfd)
		return removeAt(dfd, base, rel, 0)
	})
}

// removeAt removes name, in directory dfd, and what is beneath it.
func removeAt(dfd int, name, rel string, depth int) error {
	var st unix.Stat_t
	if err := unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		return fmt.Errorf("remove %q: %w", rel, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		if err := unix.Unlinkat(dfd, name, 0); err != nil && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("remove %q: %w", rel, err)
		}
		return nil
	}
	if depth >= MaxWalkDepth {
		return fmt.Errorf("remove %q: deeper than %d levels", rel, MaxWalkDepth)
	}
	// Make the directory the harness's to empty: through an O_PATH
	// descriptor that is this directory (no link followed), by its
	// /proc/self/fd name, which chmod resolves to that very inode.
	if st.Mode&0o700 != 0o700 {
		pfd, err := openat2(dfd, name, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0, beneath)
		if err == nil {
			_ = unix.Chmod("/proc/self/fd/"+strconv.Itoa(pfd), st.Mode&0o7777|0o700)
			unix.Close(pfd)
		}
	}
	sfd, err := OpenBeneath(dfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return fmt.Errorf("remove %q: open: %w", rel, err)
	}
	ents, err := dirent.Read(sfd, make([]byte, 8<<10))
	if err == nil {
		for _, e := range ents {
			if err = removeAt(sfd, e.Name, rel+"/"+e.Name, depth+1); err != nil {
				break
			}
		}
	}
	unix.Close(sfd)
	if err != nil {
		return err
	}
	if err := unix.Unlinkat(dfd, name, unix.AT_REMOVEDIR); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("remove %q: %w", rel, err)
	}
	return nil
}
