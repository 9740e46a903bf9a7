package tools

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

// Limits on path arguments. A longer argument is refused with
// ReasonInvalidArgument before anything is opened.
const (
	MaxPathBytes = 4096 // whole path argument, in bytes
	MaxNameBytes = 255  // one component, in bytes
)

// maxLinks bounds the symbolic links one resolution may follow, as the
// kernel's own MAXSYMLINKS does.
const maxLinks = 40

// errLinkLoop is the cause of a resolution that met more than maxLinks
// symbolic links: a loop, or a chain as long.
var errLinkLoop = errors.New("too many levels of symbolic links")

// maxSteps bounds the components one resolution examines, links' targets
// included, so planted links with long targets cannot make it slow.
const maxSteps = 16384

// beneath is the openat2 resolve set used for every open the tools make:
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
// The zero value is not usable: get one from OpenWorkspace. A Workspace is
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

// OpenWorkspace opens dir as a workspace root. dir is made absolute and
// canonical (symbolic links evaluated) once, here; later renames of its
// ancestors do not move the workspace, because every operation goes through
// the descriptor taken now.
//
// Errors name the operation and the directory and wrap the cause; dir must
// exist and be a directory.
func OpenWorkspace(dir string) (*Workspace, error) {
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
// with the descriptor they hold; later calls fail with ReasonToolError.
func (w *Workspace) Close() error { return w.root.Close() }

// Resolve returns the canonical workspace-relative path ("." for the root)
// of an existing file or directory named by p, following symbolic links
// whose targets stay inside the root.
//
// p is relative to the root, or absolute and beginning with the root's
// path. It is taken as the exact bytes given: never URL-decoded, never
// Unicode-normalised.
//
// Errors are *Error: ReasonInvalidArgument for an empty path, a NUL byte,
// invalid UTF-8, more than MaxPathBytes bytes or a component of more than
// MaxNameBytes; ReasonDeniedPath for anything that leaves the root ("..",
// an absolute path outside it, a symbolic link or chain of links out of it,
// including absolute links to elsewhere, /proc magic links, and relative
// links that leave the root and come back in); ReasonToolError for a missing
// file, a non-directory used as a directory or a loop of links.
//
// The canonical path holds no symbolic link at the moment of resolution.
// The tools open it again with RESOLVE_NO_SYMLINKS, so a link swapped in
// afterwards makes the call fail with ReasonDeniedPath instead of escaping.
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
// dangling, whose target is outside the root is ReasonDeniedPath, so writing
// through it can never create or change anything outside. A path ending in
// "/", or with ".." after a component that does not exist, is
// ReasonInvalidArgument.
func (w *Workspace) ResolveForWrite(p string) (string, error) {
	rel, err := w.resolve(p, true)
	if err != nil {
		return "", err
	}
	return rel, nil
}

// withRoot runs fn with the root descriptor, which stays open for fn's
// whole duration even if Close is called meanwhile.
func (w *Workspace) withRoot(fn func(root int) error) error {
	if w == nil || w.root == nil {
		return Errorf(ReasonToolError, errors.New("nil workspace"), "no workspace is open")
	}
	var ferr error
	if err := w.rc.Control(func(fd uintptr) { ferr = fn(int(fd)) }); err != nil {
		return Errorf(ReasonToolError, fmt.Errorf("workspace root %s: %w", w.dir, err), "the workspace is closed")
	}
	return ferr
}

// checkPathArg validates a path argument's bytes and returns the path it
// names (decodePathArg: quoted names unquoted). The length limits apply to
// the decoded path.
func checkPathArg(p string) (string, *Error) {
	switch {
	case p == "":
		return "", Errorf(ReasonInvalidArgument, nil, "path must not be empty")
	case strings.IndexByte(p, 0) >= 0:
		return "", Errorf(ReasonInvalidArgument, nil, "path must not contain NUL bytes")
	case !utf8.ValidString(p):
		return "", Errorf(ReasonInvalidArgument, nil, "path must be valid UTF-8 (a name that is not is written quoted, as results print it: \"\\xff\")")
	case len(p) > MaxPathFieldBytes:
		return "", Errorf(ReasonInvalidArgument, nil, "path is %d bytes long; the limit is %d", len(p), MaxPathFieldBytes)
	}
	d, err := decodePathArg(p)
	if err != nil {
		return "", err
	}
	if d == "" {
		return "", Errorf(ReasonInvalidArgument, nil, "path must not be empty")
	}
	if len(d) > MaxPathBytes {
		return "", Errorf(ReasonInvalidArgument, nil, "path is %d bytes long; the limit is %d", len(d), MaxPathBytes)
	}
	for c := range strings.SplitSeq(d, "/") {
		if len(c) > MaxNameBytes {
			return "", Errorf(ReasonInvalidArgument, nil, "a path component is %d bytes long; the limit is %d", len(c), MaxNameBytes)
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
		return "", Errorf(ReasonToolError, errors.New("nil workspace"), "no workspace is open")
	}
	orig := p
	p, cerr := checkPathArg(p)
	if cerr != nil {
		return "", cerr
	}
	if write && strings.HasSuffix(p, "/") {
		return "", Errorf(ReasonInvalidArgument, nil, "path %q ends with '/': name a file", orig)
	}
	rel, err := w.lexicalRel(p, orig)
	if err != nil {
		return "", err
	}
	var out string
	err = w.withRoot(func(root int) error {
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
		return "", Errorf(ReasonDeniedPath, nil, "path %q is outside the workspace", orig)
	}
	return r, nil
}

// resolveRegular is Resolve for a file about to be read, which it also
// opens when it can: a clean path the kernel opens beneath the root
// without meeting a symbolic link is its own canonical form, so one openat2
// both resolves it and yields the descriptor the read uses (the file read
// is the very file resolved). The file is nil when that fast path did not
// apply; the path was then resolved by the walk and the caller opens it.
func (w *Workspace) resolveRegular(p string) (string, *regularFile, error) {
	if w == nil || w.root == nil {
		return "", nil, Errorf(ReasonToolError, errors.New("nil workspace"), "no workspace is open")
	}
	dp, cerr := checkPathArg(p)
	if cerr != nil {
		return "", nil, cerr
	}
	rel, err := w.lexicalRel(dp, p)
	if err != nil {
		return "", nil, err
	}
	if isCleanRel(rel) {
		var f *regularFile
		var ferr error
		opened := false
		if err := w.withRoot(func(root int) error {
			fd, err := openBeneath(root, rel, unix.O_RDONLY|unix.O_NONBLOCK, 0)
			if err != nil {
				return nil // the walk below says why, or finds the link's target
			}
			opened = true
			f, ferr = regularFrom(fd, rel)
			return nil
		}); err != nil {
			return "", nil, err
		}
		if opened {
			if ferr != nil {
				return "", nil, ferr
			}
			return rel, f, nil
		}
	}
	rel, err = w.resolve(p, false)
	return rel, nil, err
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
			return "", Errorf(ReasonToolError, nil, "path %q: too many components after following symbolic links", orig)
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
	return Errorf(ReasonDeniedPath, cause, "path %q %s", r.orig, why)
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
		return fsError(r.orig, "open", err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return fsError(r.orig, "stat", err)
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
			return Errorf(ReasonToolError, nil, "path %q: %q is not a directory", r.orig, joinRel(r.stack))
		}
	}
	return nil
}

// up takes a ".." component: a pop of the stack, never above the root.
func (r *pathWalk) up() error {
	if r.missing {
		return Errorf(ReasonInvalidArgument, nil, "path %q has '..' after a component that does not exist", r.orig)
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
		return fsError(r.orig, "readlink", err)
	}
	r.links++
	if r.links > maxLinks {
		return Errorf(ReasonToolError, errLinkLoop, "path %q: too many levels of symbolic links", r.orig)
	}
	if target == "" {
		return Errorf(ReasonToolError, nil, "path %q: a symbolic link on it is empty", r.orig)
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

// childRel is the workspace-relative path of name inside directory dir.
func childRel(dir, name string) string {
	if dir == "." {
		return name
	}
	return dir + "/" + name
}

// splitRel splits a canonical relative path into its directory and its
// final component.
func splitRel(rel string) (dir, base string) {
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

// openBeneath opens rel (canonical, or a single name) relative to dirfd
// with the beneath resolve set: no symbolic link anywhere, nothing outside.
// This is the one safe-open every tool uses after resolution.
func openBeneath(dirfd int, rel string, flags int, mode uint32) (int, error) {
	return openat2(dirfd, rel, flags|unix.O_NOCTTY, mode, beneath)
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

// fsError turns a failed system call on a workspace path into an *Error.
// A symbolic link or an escape met by an open made with the beneath resolve
// set means the path changed after it was resolved: denied_path.
func fsError(path, op string, err error) *Error {
	cause := fmt.Errorf("%s %q: %w", op, path, err)
	var errno unix.Errno
	if !errors.As(err, &errno) {
		return Errorf(ReasonToolError, cause, "%s %q failed", op, path)
	}
	switch errno {
	case unix.ENOENT:
		return Errorf(ReasonToolError, cause, "%q: no such file or directory", path)
	case unix.ELOOP, unix.EXDEV:
		return Errorf(ReasonDeniedPath, cause, "%q: refused: the path leads through a symbolic link or out of the workspace (it may have changed while in use)", path)
	case unix.ENOTDIR:
		return Errorf(ReasonToolError, cause, "%q: a component of the path is not a directory", path)
	case unix.EISDIR:
		return Errorf(ReasonToolError, cause, "%q is a directory", path)
	case unix.EACCES, unix.EPERM:
		return Errorf(ReasonToolError, cause, "%q: permission denied (%s)", path, op)
	case unix.ENAMETOOLONG:
		return Errorf(ReasonInvalidArgument, cause, "%q: name too long", path)
	case unix.ENOSYS:
		return Errorf(ReasonToolError, cause, "%s %q: the kernel lacks a required system call", op, path)
	}
	return Errorf(ReasonToolError, cause, "%s %q failed: %s", op, path, errno.Error())
}
