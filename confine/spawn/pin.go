package spawn

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// Pinned is a file or directory of the host that a caller names for the
// child's view (the workspace, an extra read or write path), resolved once
// by Pin. It is a plain, comparable value; Spec carries it, and it crosses
// the broker as it is.
//
// Every call binds exactly the file Pin found, or fails: the helper opens
// Path without following any symbolic link and refuses the call (a
// *SetupError at its "bind <Path>" step, the program never runs) unless the
// file it reaches has the same device, inode and kind. So a child that may
// write a parent of a pinned path (an extra write path that holds the
// workspace or another extra path) cannot make a later call bind something
// else there: renaming the directory away, putting another one or a
// symbolic link in its place only makes later calls fail, naming the path.
// See docs/decisions/0035-pinned-view-paths.md.
//
// The zero value pins nothing; a Spec holding one is refused.
type Pinned struct {
	// Path is the canonical absolute path: no symbolic link, "." or "..".
	// The child sees the file at this path.
	Path string
	// Dev and Ino are the st_dev and st_ino of the file Pin opened.
	Dev, Ino uint64
	// Dir is true when the file is a directory.
	Dir bool
}

// pins holds one O_PATH descriptor per pinned file for the life of the
// process: while it is open, the inode cannot be freed, so its number can
// never be reused by another file that a child creates in its place.
var pins struct {
	sync.Mutex
	held map[[2]uint64]*os.File
}

// Pin resolves path once: made absolute (against the working directory),
// its symbolic links evaluated, then opened O_PATH with openat2 and
// RESOLVE_NO_SYMLINKS (so a link swapped in during the resolution is
// refused, not followed) and its identity read from that descriptor.
//
// The descriptor stays open until the process exits: Pin is meant to be
// called at start, once per path, not per call (a path pinned again reuses
// the descriptor of its file). It is safe for concurrent use.
//
// Errors name the path: it does not exist, it cannot be opened, or it cannot
// be part of a child's view at all ("/", /proc, /dev).
//
// What it does not protect against: changes inside a pinned directory (the
// directory is pinned, not its content), and a file of the same identity
// reached through another mount of the same file system at Path (a mount
// made over Path by someone who may mount on the host).
func Pin(path string) (Pinned, error) {
	if path == "" || strings.IndexByte(path, 0) >= 0 {
		return Pinned{}, errorf("pin %q: empty or holds a NUL byte", path)
	}
	c, err := canonical(path)
	if err != nil {
		return Pinned{}, errorf("pin %s: %w", path, err)
	}
	if err := viewable("path", c); err != nil {
		return Pinned{}, err
	}
	fd, st, err := openNoFollow(c)
	if err != nil {
		return Pinned{}, errorf("pin %s: %w", path, err)
	}
	p := Pinned{Path: c, Dev: uint64(st.Dev), Ino: uint64(st.Ino), Dir: st.Mode&unix.S_IFMT == unix.S_IFDIR}
	pins.Lock()
	defer pins.Unlock()
	if pins.held == nil {
		pins.held = map[[2]uint64]*os.File{}
	}
	key := [2]uint64{p.Dev, p.Ino}
	if _, ok := pins.held[key]; ok {
		unix.Close(fd)
	} else {
		pins.held[key] = os.NewFile(uintptr(fd), c)
	}
	return p, nil
}

// check reports what is wrong with p for a Spec field named what.
func (p Pinned) check(what string) error {
	switch {
	case p.Path == "" || p.Ino == 0:
		return errorf("%s %q is not pinned: get it from Pin", what, p.Path)
	case !isAbs(p.Path) || filepath.Clean(p.Path) != p.Path:
		return errorf("%s %q: want a canonical absolute path", what, p.Path)
	case strings.IndexByte(p.Path, 0) >= 0:
		return errorf("%s holds a NUL byte: %q", what, p.Path)
	}
	return nil
}

// openNoFollow opens path O_PATH, following no symbolic or magic link in
// any component, and returns the descriptor with its status.
func openNoFollow(path string) (int, unix.Stat_t, error) {
	var st unix.Stat_t
	how := unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS}
	var fd int
	var err error
	for {
		fd, err = unix.Openat2(unix.AT_FDCWD, path, &how)
		if !errors.Is(err, unix.EINTR) && !errors.Is(err, unix.EAGAIN) {
			break
		}
	}
	if err != nil {
		return -1, st, fmt.Errorf("openat2 %s: %w", path, err)
	}
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, st, fmt.Errorf("fstat %s: %w", path, err)
	}
	return fd, st, nil
}

// open opens p's path again, as openNoFollow does, and checks it is still
// the file pinned; the caller closes the descriptor.
func (p Pinned) open() (int, unix.Stat_t, error) {
	fd, st, err := openNoFollow(p.Path)
	if err != nil {
		return -1, st, err
	}
	if uint64(st.Dev) != p.Dev || uint64(st.Ino) != p.Ino || (st.Mode&unix.S_IFMT == unix.S_IFDIR) != p.Dir {
		unix.Close(fd)
		return -1, st, fmt.Errorf("%s is no longer the file pinned at start: it was moved or replaced since", p.Path)
	}
	return fd, st, nil
}

// stat returns the pinned file's status, read from a descriptor checked to
// be the file pinned.
func (p Pinned) stat() (unix.Stat_t, error) {
	fd, st, err := p.open()
	if err == nil {
		unix.Close(fd)
	}
	return st, err
}

// PinProgram pins path as Pin does, and checks that the file pinned is a
// regular file with an execute bit: what Spec.Program wants. The error
// names the path.
func PinProgram(path string) (Pinned, error) {
	p, err := Pin(path)
	if err != nil {
		return Pinned{}, err
	}
	st, err := p.stat()
	if err != nil {
		return Pinned{}, errorf("program %s: %w", path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Mode&0o111 == 0 {
		return Pinned{}, errorf("program %s: %s is not an executable file", path, p.Path)
	}
	return p, nil
}

// Current reports whether p's path still reaches, without following any
// symbolic link, the file pinned: nil, or an error saying it was moved or
// replaced (or cannot be opened) since. It is a check of this instant
// only; the helper checks again at the moment it binds or executes.
func (p Pinned) Current() error {
	if err := p.check("pinned path"); err != nil {
		return err
	}
	_, err := p.stat()
	return err
}

// PinnedDescriptors lists the descriptors Pin holds for the life of the
// process, one per file pinned: what a leak check of a test binary must
// not count as leaked.
func PinnedDescriptors() []int {
	pins.Lock()
	defer pins.Unlock()
	fds := make([]int, 0, len(pins.held))
	for _, f := range pins.held {
		fds = append(fds, int(f.Fd()))
	}
	return fds
}
