package workspace

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"unicode/utf8"

	"golang.org/x/sys/unix"
)

// Limits on path arguments. A longer argument is refused with Invalid
// before anything is opened.
const (
	MaxPathBytes = 4096 // the path a path argument names, in bytes
	MaxNameBytes = 255  // one component of it, in bytes
	// MaxPathArgBytes bounds a path argument as given: MaxPathBytes of
	// name, each byte of which a quoted name may spell in up to 4 (\xff).
	MaxPathArgBytes = 4 * MaxPathBytes
)

// maxLinks bounds the symbolic links one resolution may follow, as the
// kernel's own MAXSYMLINKS does.
const maxLinks = 40

// ErrLinkLoop is the cause of a resolution that met more than 40 symbolic
// links (the kernel's MAXSYMLINKS): a loop, or a chain as long. The *Error
// is Failed; errors.Is(err, ErrLinkLoop) tells a loop from a broken link.
var ErrLinkLoop = errors.New("too many levels of symbolic links")

// maxSteps bounds the components one resolution examines, links' targets
// included, so planted links with long targets cannot make it slow.
const maxSteps = 16384

// beneath is the openat2 resolve set used for every open beneath the root:
// the kernel refuses any step out of the directory fd, any symbolic link
// and any /proc-style magic link.
const beneath = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS

// Workspace is the root every tool acts beneath. It holds an O_PATH
// directory descriptor for the root, taken once when it is opened, and
// resolves every path relative to that descriptor with the kernel's help
// (openat2 with RESOLVE_BENEATH, RESOLVE_NO_SYMLINKS and
// RESOLVE_NO_MAGICLINKS, one component at a time), so neither "..", nor an
// absolute path, nor a symbolic link, nor a /proc magic link can lead out of
// it, including one swapped in while a call runs.
//
// The zero value is not usable: get one from Open. A Workspace is
// safe for concurrent use by multiple goroutines. Close releases the root
// descriptor; calls already running keep it alive until they return.
//
// What it does not protect against: a hard link inside the root to a file
// outside it (the link is an ordinary file of the workspace); a bind mount
// or other mount point inside the root; device nodes or FIFOs placed in the
// root (reads open them non-blocking and refuse anything that is not a
// regular file, but the open itself happens); a directory moved out of the
// root by another process while a search is walking beneath it (descriptors
// already open keep referring to it). Confining the process (Landlock) is
// the layer that covers those.
type Workspace struct {
	dir   string   // canonical absolute root
	alias string   // absolute spelling of the root as given, when it differs from dir
	root  *os.File // O_PATH|O_DIRECTORY descriptor of dir
	rc    syscall.RawConn
}

// Open opens dir as a workspace root. dir is made absolute and
// canonical (symbolic links evaluated) once, here; later renames of its
// ancestors do not move the workspace, because every operation goes through
// the descriptor taken now.
//
// Errors name the operation and the directory and wrap the cause; dir must
// exist and be a directory.
func Open(dir string) (*Workspace, error) {
	if dir == "" {
		return nil, errors.New("open workspace: empty directory name")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("open workspace %q: %w", dir, err)
	}
	canon, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, fmt.Errorf("open workspace %q: %w", dir, err)
	}
	// No symbolic link may be on the canonical path at the moment it is
	// opened, so the descriptor is the directory the canonical name means.
	fd, err := openat2(unix.AT_FDCWD, canon, unix.O_PATH|unix.O_DIRECTORY, 0,
		unix.RESOLVE_NO_SYMLINKS|unix.RESOLVE_NO_MAGICLINKS)
	if err != nil {
		return nil, fmt.Errorf("open workspace %q: openat2 %q: %w", dir, canon, err)
	}
	f := os.NewFile(uintptr(fd), canon)
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("open workspace %q: %w", dir, err)
	}
	w := &Workspace{dir: canon, root: f, rc: rc}
	if abs != canon {
		w.alias = filepath.Clean(abs)
	}
	return w, nil
}

// Dir returns the canonical absolute path of the root.
func (w *Workspace) Dir() string { return w.dir }

// Gone reports whether the workspace's directory was removed after it was
// opened: the descriptor still holds it, but it has no name any more
// (rmdir leaves it no links), so no path in it can be made or found.
func (w *Workspace) Gone() bool {
	var st unix.Stat_t
	var err error
	if cerr := w.rc.Control(func(fd uintptr) { err = unix.Fstat(int(fd), &st) }); cerr != nil {
		return false // closed: its calls fail on their own
	}
	return err == nil && st.Nlink == 0
}

// Close releases the root descriptor. Calls running at that moment finish
// with the descriptor they hold; later calls fail with Failed.
func (w *Workspace) Close() error { return w.root.Close() }

// Resolve returns the canonical workspace-relative path ("." for the root)
// of an existing file or directory named by p, following symbolic links
// whose targets stay inside the root.
//
// p is relative to the root, or absolute and beginning with the root's
// path. It is taken as the exact bytes given: never URL-decoded, never
// Unicode-normalised.
//
// Errors are *Error: Invalid for an empty path, a NUL byte, invalid UTF-8,
// more than MaxPathBytes bytes or a component of more than MaxNameBytes;
// Denied for anything that leaves the root ("..", an absolute path outside
// it, a symbolic link or chain of links out of it, including absolute
// links to elsewhere, /proc magic links, and relative links that leave the
// root and come back in); Failed for a missing file, a non-directory used
// as a directory or a loop of links (ErrLinkLoop).
//
// The canonical path holds no symbolic link at the moment of resolution.
// Open it again with OpenBeneath, which refuses any link, so a link swapped
// in afterwards makes the open fail (FileError: Denied) instead of
// escaping.
func (w *Workspace) Resolve(p string) (string, error) {
	rel, err := w.resolve(p, false)
	if err != nil {
		return "", err
	}
	return rel, nil
}

// ResolveForWrite is Resolve for a path about to be written: the final
// component and any missing parent directories need not exist. A final
// symbolic link whose target is inside the root resolves to that target's
// canonical path, whether or not the target exists yet; a link, live or
// dangling, whose target is outside the root is Denied, so writing through
// it can never create or change anything outside. A path ending in "/", or
// with ".." after a component that does not exist, is Invalid.
func (w *Workspace) ResolveForWrite(p string) (string, error) {
	rel, err := w.resolve(p, true)
	if err != nil {
		return "", err
	}
	return rel, nil
}

// WithRoot runs fn with the root's O_PATH directory descriptor, which
// stays open for fn's whole duration even if Close is called meanwhile.
// fn must not close it or keep it past its return.
//
// The descriptor protects nothing by itself: an open relative to it stays
// beneath the root only when made with OpenBeneath (or openat2 with
// RESOLVE_BENEATH, as OpenBeneath does); openat or a path with a symbolic
// link can leave it.
//
// The error is an *Error (Failed) when w is nil or closed, else fn's, as
// it is.
func (w *Workspace) WithRoot(fn func(root int) error) error {
	if w == nil || w.root == nil {
		return errorf(Failed, errors.New("nil workspace"), "no workspace is open")
	}
	var ferr error
	if err := w.rc.Control(func(fd uintptr) { ferr = fn(int(fd)) }); err != nil {
		return errorf(Failed, fmt.Errorf("workspace root %s: %w", w.dir, err), "the workspace is closed")
	}
	return ferr
}

// checkPathArg validates a path argument's bytes and returns the path it
// names (decodePathArg: quoted names unquoted). MaxPathArgBytes applies
// to the argument, MaxPathBytes and MaxNameBytes to the decoded path.
func checkPathArg(p string) (string, *Error) {
	switch {
	case p == "":
		return "", errorf(Invalid, nil, "path must not be empty")
	case strings.IndexByte(p, 0) >= 0:
		return "", errorf(Invalid, nil, "path must not contain NUL bytes")
	case !utf8.ValidString(p):
		return "", errorf(Invalid, nil, "path must be valid UTF-8 (a name that is not is written quoted, as results print it: \"\\xff\")")
	case len(p) > MaxPathArgBytes:
		return "", errorf(Invalid, nil, "path is %d bytes long; the limit is %d", len(p), MaxPathArgBytes)
	}
	d, err := decodePathArg(p)
	if err != nil {
		return "", err
	}
	if d == "" {
		return "", errorf(Invalid, nil, "path must not be empty")
	}
	if len(d) > MaxPathBytes {
		return "", errorf(Invalid, nil, "path is %d bytes long; the limit is %d", len(d), MaxPathBytes)
	}
	for c := range strings.SplitSeq(d, "/") {
		if len(c) > MaxNameBytes {
			return "", errorf(Invalid, nil, "a path component is %d bytes long; the limit is %d", len(c), MaxNameBytes)
		}
	}
	return d, nil
}

// inRoot maps an absolute path to the root-relative remainder when it lies
// lexically beneath the root (its canonical or its given spelling).
func (w *Workspace) inRoot(p string) (string, bool) {
	for _, d := range [2]string{w.dir, w.alias} {
		switch {
		case d == "":
		case d == "/":
			return p[1:], true
		case p == d:
			return ".", true
		case strings.HasPrefix(p, d) && p[len(d)] == '/':
			return p[len(d)+1:], true
		}
	}
	return "", false
}

// resolve walks p beneath the root one component at a time.
func (w *Workspace) resolve(p string, write bool) (string, error) {
	if w == nil || w.root == nil {
		return "", errorf(Failed, errors.New("nil workspace"), "no workspace is open")
	}
	orig := p
	p, cerr := checkPathArg(p)
	if cerr != nil {
		return "", cerr
	}
	if write && strings.HasSuffix(p, "/") {
		return "", errorf(Invalid, nil, "path %q ends with '/': name a file", orig)
	}
	rel, err := w.lexicalRel(p, orig)
	if err != nil {
		return "", err
	}
	var out string
	err = w.WithRoot(func(root int) error {
		// Fast path: a path with no ".", ".." or empty component that the
		// kernel opens beneath the root without meeting any symbolic link
		// is its own canonical form.
		if isCleanRel(rel) {
			if fd, err := openat2(root, rel, unix.O_PATH, 0, beneath); err == nil {
				unix.Close(fd)
				out = rel
				return nil
			}
		}
		var err error
		out, err = walkPath(root, w, orig, rel, write)
		return err
	})
	return out, err
}

// lexicalRel maps a validated path argument to the root-relative spelling
// the resolver walks: an absolute path must lie lexically beneath the root.
func (w *Workspace) lexicalRel(p, orig string) (string, error) {
	if !strings.HasPrefix(p, "/") {
		return p, nil
	}
	r, ok := w.inRoot(p)
	if !ok {
		return "", errorf(Denied, nil, "path %q is outside the workspace", orig)
	}
	return r, nil
}

// ResolveOpen is Resolve for a file about to be opened with flags (for
// reading: O_RDONLY, perhaps O_NONBLOCK; never O_PATH or O_CREAT), which it
// also opens when it can: a clean path (no empty, "." or ".." component)
// that the kernel opens beneath the root without meeting a symbolic link
// is its own canonical form, so one openat2 both resolves it and opens
// it, and the file opened is the very file resolved. fd is then that
// descriptor, which the caller must close.
//
// Otherwise fd is -1: rel was resolved by the walk (following in-root
// links, as Resolve does) and the caller opens it with OpenBeneath. Errors
// are Resolve's.
func (w *Workspace) ResolveOpen(p string, flags int) (rel string, fd int, err error) {
	if w == nil || w.root == nil {
		return "", -1, errorf(Failed, errors.New("nil workspace"), "no workspace is open")
	}
	dp, cerr := checkPathArg(p)
	if cerr != nil {
		return "", -1, cerr
	}
	rel, err = w.lexicalRel(dp, p)
	if err != nil {
		return "", -1, err
	}
	if isCleanRel(rel) {
		fd = -1
		if err := w.WithRoot(func(root int) error {
			if ofd, err := OpenBeneath(root, rel, flags, 0); err == nil {
				fd = ofd
			} // else the walk below says why, or finds the link's target
			return nil
		}); err != nil {
			return "", -1, err
		}
		if fd >= 0 {
			return rel, fd, nil
		}
	}
	rel, err = w.resolve(p, false)
	return rel, -1, err
}

// isCleanRel reports whether rel is a relative path with no empty, "." or
// ".." component.
func isCleanRel(rel string) bool {
	if rel == "" || rel[0] == '/' || rel[len(rel)-1] == '/' {
		return false
	}
	for c := range strings.SplitSeq(rel, "/") {
		if c == "" || c == "." || c == ".." {
			return false
		}
	}
	return true
}

// walkPath is the resolver proper. It keeps the canonical components found
// so far (stack) and a descriptor of the directory they name (cur). Every
// component is opened from cur with openat2(O_PATH|O_NOFOLLOW) under the
// beneath resolve set, so the kernel checks each step; a symbolic link is
// read through the descriptor of the link itself (no race between lstat
// and readlink) and its target is spliced in front of the remaining
// components.
func walkPath(root int, w *Workspace, orig, rel string, write bool) (string, error) {
	r := &pathWalk{root: root, w: w, orig: orig, write: write, pending: strings.Split(rel, "/")}
	defer r.closeAll()
	for steps := 0; len(r.pending) > 0; steps++ {
		if steps > maxSteps {
			return "", errorf(Failed, nil, "path %q: too many components after following symbolic links", orig)
		}
		c := r.pending[0]
		r.pending = r.pending[1:]
		if err := r.step(c); err != nil {
			return "", err
		}
	}
	return joinRel(r.stack), nil
}

// pathWalk is the state of one walkPath.
type pathWalk struct {
	root  int
	w     *Workspace
	orig  string // the path as given, for messages
	write bool
	// pending are the components still to take, links' targets spliced in.
	pending []string
	// stack holds the canonical components so far; fds[i] is a descriptor
	// of the directory stack[:i+1] names, so ".." is a pop, not a reopen.
	// The two have the same length except after a missing component (write
	// mode) or a final non-directory, after which neither ".." nor another
	// open can come.
	stack   []string
	fds     []int
	links   int
	missing bool // write mode: a component did not exist; the rest is lexical
}

// closeAll closes the descriptors of the directories on the stack.
func (r *pathWalk) closeAll() {
	for _, fd := range r.fds {
		unix.Close(fd)
	}
	r.fds = r.fds[:0]
}

// cur is the descriptor of the directory the stack names.
func (r *pathWalk) cur() int {
	if len(r.fds) == 0 {
		return r.root
	}
	return r.fds[len(r.fds)-1]
}

func (r *pathWalk) denied(cause error, why string) error {
	return errorf(Denied, cause, "path %q %s", r.orig, why)
}

// step takes one component: "" and "." are nothing, ".." pops, a link is
// followed, a directory is entered and anything else ends the path.
func (r *pathWalk) step(c string) error {
	switch c {
	case "", ".":
		return nil
	case "..":
		return r.up()
	}
	if r.missing {
		r.stack = append(r.stack, c)
		return nil
	}
	fd, err := openat2(r.cur(), c, unix.O_PATH|unix.O_NOFOLLOW, 0, beneath)
	if err == unix.ENOENT && r.write {
		r.missing = true
		r.stack = append(r.stack, c)
		return nil
	}
	if err != nil {
		return FileError(r.orig, "open", err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return FileError(r.orig, "stat", err)
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFLNK:
		return r.follow(fd, c)
	case unix.S_IFDIR:
		r.fds = append(r.fds, fd)
		r.stack = append(r.stack, c)
	default:
		unix.Close(fd)
		r.stack = append(r.stack, c)
		if len(r.pending) > 0 {
			return errorf(Failed, nil, "path %q: %q is not a directory", r.orig, joinRel(r.stack))
		}
	}
	return nil
}

// up takes a ".." component: a pop of the stack, never above the root.
func (r *pathWalk) up() error {
	if r.missing {
		return errorf(Invalid, nil, "path %q has '..' after a component that does not exist", r.orig)
	}
	if len(r.stack) == 0 {
		return r.denied(nil, "leaves the workspace")
	}
	r.stack = r.stack[:len(r.stack)-1]
	unix.Close(r.fds[len(r.fds)-1])
	r.fds = r.fds[:len(r.fds)-1]
	return nil
}

// follow splices the target of the symbolic link c, open at fd (which it
// closes), in front of the pending components. An absolute target must
// lie beneath the root and restarts the walk from it.
func (r *pathWalk) follow(fd int, c string) error {
	target, err := readlinkFd(fd)
	unix.Close(fd)
	if err != nil {
		return FileError(r.orig, "readlink", err)
	}
	r.links++
	if r.links > maxLinks {
		return errorf(Failed, ErrLinkLoop, "path %q: too many levels of symbolic links", r.orig)
	}
	if target == "" {
		return errorf(Failed, nil, "path %q: a symbolic link on it is empty", r.orig)
	}
	if strings.HasPrefix(target, "/") {
		rel, ok := r.w.inRoot(target)
		if !ok {
			return r.denied(fmt.Errorf("symlink %q -> %q", joinRel(append(r.stack, c)), target), "goes through a symbolic link that leads outside the workspace")
		}
		target = rel
		r.stack = r.stack[:0]
		r.closeAll()
	}
	r.pending = append(strings.Split(target, "/"), r.pending...)
	return nil
}

// joinRel joins canonical components into a workspace-relative path.
func joinRel(stack []string) string {
	if len(stack) == 0 {
		return "."
	}
	return strings.Join(stack, "/")
}

// Child returns the workspace-relative path of name inside the
// workspace-relative directory dir: name itself in ".", dir/name elsewhere.
// It joins, nothing more: no cleaning, no checks.
func Child(dir, name string) string {
	if dir == "." {
		return name
	}
	return dir + "/" + name
}

// Split splits a canonical workspace-relative path into its directory
// ("." for a name in the root) and its final component. It is Child's
// inverse for canonical paths; it cleans nothing.
func Split(rel string) (dir, base string) {
	i := strings.LastIndexByte(rel, '/')
	if i < 0 {
		return ".", rel
	}
	return rel[:i], rel[i+1:]
}

// openat2 wraps unix.Openat2, retrying EINTR and the EAGAIN the kernel
// returns when a concurrent rename may have raced a ".." step.
func openat2(dirfd int, path string, flags int, mode uint32, resolve uint64) (int, error) {
	how := unix.OpenHow{Flags: uint64(flags | unix.O_CLOEXEC), Mode: uint64(mode), Resolve: resolve}
	for i := 0; ; i++ {
		fd, err := unix.Openat2(dirfd, path, &how)
		if (err == unix.EINTR || err == unix.EAGAIN) && i < 16 {
			continue
		}
		return fd, err
	}
}

// OpenBeneath opens rel (a canonical workspace-relative path, or a single
// name) relative to the directory descriptor dirfd (the root from
// WithRoot, or a directory opened beneath it), with openat2 and
// RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS|RESOLVE_NO_MAGICLINKS: the kernel
// refuses any symbolic link on the way, the last component included
// (ELOOP), and any step out of dirfd (EXDEV). So a link swapped in after
// resolution fails the open instead of leading out. This is the one safe
// open after resolution.
//
// O_CLOEXEC is always added, and O_NOCTTY unless flags hold O_PATH (with
// which openat2 takes no flag but O_DIRECTORY and O_NOFOLLOW). EINTR and
// the EAGAIN of a rename racing a ".." step are retried. The error is the
// raw errno; FileError makes an *Error of it.
//
// What it does not protect against is what Workspace does not: hard
// links, mount points and device nodes inside the root.
func OpenBeneath(dirfd int, rel string, flags int, mode uint32) (int, error) {
	if flags&unix.O_PATH == 0 {
		flags |= unix.O_NOCTTY
	}
	return openat2(dirfd, rel, flags, mode, beneath)
}

// readlinkFd reads the target of the symbolic link an O_PATH descriptor
// refers to.
func readlinkFd(fd int) (string, error) {
	buf := make([]byte, 256)
	for {
		n, err := unix.Readlinkat(fd, "", buf)
		if err != nil {
			return "", err
		}
		if n < len(buf) {
			return string(buf[:n]), nil
		}
		if len(buf) >= 1<<16 {
			return "", unix.ENAMETOOLONG
		}
		buf = make([]byte, 2*len(buf))
	}
}

// FileError turns a failed system call op (such as "open" or "read") on
// the workspace path path into an *Error whose cause wraps err. A symbolic
// link or an escape met by an open made with OpenBeneath (ELOOP, EXDEV)
// means the path changed after it was resolved: Denied. ENAMETOOLONG is
// Invalid; everything else is Failed, its message naming the path and
// what went wrong, never a host path.
func FileError(path, op string, err error) *Error {
	cause := fmt.Errorf("%s %q: %w", op, path, err)
	var errno unix.Errno
	if !errors.As(err, &errno) {
		return errorf(Failed, cause, "%s %q failed", op, path)
	}
	switch errno {
	case unix.ENOENT:
		return errorf(Failed, cause, "%q: no such file or directory", path)
	case unix.ELOOP, unix.EXDEV:
		return errorf(Denied, cause, "%q: refused: the path leads through a symbolic link or out of the workspace (it may have changed while in use)", path)
	case unix.ENOTDIR:
		return errorf(Failed, cause, "%q: a component of the path is not a directory", path)
	case unix.EISDIR:
		return errorf(Failed, cause, "%q is a directory", path)
	case unix.EACCES, unix.EPERM:
		return errorf(Failed, cause, "%q: permission denied (%s)", path, op)
	case unix.ENAMETOOLONG:
		return errorf(Invalid, cause, "%q: name too long", path)
	case unix.ENOSYS:
		return errorf(Failed, cause, "%s %q: the kernel lacks a required system call", op, path)
	}
	return errorf(Failed, cause, "%s %q failed: %s", op, path, errno.Error())
}
