package helper

import (
	"strconv"
	"syscall"
)

// Pinned bind sources (Mount.Pinned): the workspace and the extra paths the
// harness's caller named. The harness resolved each once, at start, and
// holds it open, so its inode lives as long as the harness; here the path is
// opened again without following any symbolic link and the file reached
// must be that inode. A child that could write a parent of the path (an
// extra write path holding it) and renamed it away, or put a directory or a
// link to /etc in its place, makes the bind fail: it never binds what the
// child put there. The tree is then cloned from the descriptor checked, not
// from the name, so nothing can be swapped between the check and the clone.

// pinMismatch reports that a pinned bind source is no longer the file
// pinned at start.
type pinMismatch struct {
	path                             string
	program                          bool // the program to execute, not a bind source
	wantDev, wantIno, gotDev, gotIno uint64
	wantDir, gotDir                  bool
}

func (e *pinMismatch) Error() string {
	kind := func(dir bool) string {
		if dir {
			return "directory"
		}
		return "file"
	}
	if e.program {
		return e.path + " is no longer the program pinned at start (device " + strconv.FormatUint(e.wantDev, 10) +
			" inode " + strconv.FormatUint(e.wantIno, 10) + ", now device " + strconv.FormatUint(e.gotDev, 10) + " inode " +
			strconv.FormatUint(e.gotIno, 10) + "): it was moved, replaced or linked elsewhere since; refusing to run what is there now"
	}
	if e.wantDev == e.gotDev && e.wantIno == e.gotIno {
		return e.path + " is now a " + kind(e.gotDir) + ", not the " + kind(e.wantDir) + " pinned at start"
	}
	return e.path + " is no longer the " + kind(e.wantDir) + " pinned at start (device " + strconv.FormatUint(e.wantDev, 10) +
		" inode " + strconv.FormatUint(e.wantIno, 10) + ", now device " + strconv.FormatUint(e.gotDev, 10) + " inode " +
		strconv.FormatUint(e.gotIno, 10) + "): it was moved or replaced since; refusing to bind what is there now"
}

// openPinned opens m.Src with O_PATH, following no symbolic link (nor magic
// link) in any component, and checks that it is the file pinned in m. It
// returns the descriptor (close-on-exec) or an error naming the path.
func openPinned(m Mount) (int, error) {
	fd, err := sysOpenat2(atFDCWDInt, m.Src, oPath|syscall.O_CLOEXEC, resolveNoSymlinks|resolveNoMagiclinks)
	switch err {
	case nil:
	case syscall.ELOOP:
		return -1, opErr("openat2", m.Src, &hintError{err, "a component is now a symbolic link; pinned paths are never followed through links made after start"})
	case syscall.ENOENT:
		return -1, opErr("openat2", m.Src, &hintError{err, "the pinned path was moved or removed since start"})
	default:
		return -1, opErr("openat2", m.Src, err)
	}
	st, e := sysFstatFD(fd)
	if e != 0 {
		sysClose(fd)
		return -1, opErr("fstat", m.Src, e)
	}
	gotDir := st.Mode&syscall.S_IFMT == syscall.S_IFDIR
	if uint64(st.Dev) != m.PinDev || uint64(st.Ino) != m.PinIno || gotDir == m.File {
		sysClose(fd)
		return -1, &pinMismatch{path: m.Src, wantDev: m.PinDev, wantIno: m.PinIno, gotDev: uint64(st.Dev), gotIno: uint64(st.Ino), wantDir: !m.File, gotDir: gotDir}
	}
	return fd, nil
}

// bindTree returns a detached clone (open_tree OPEN_TREE_CLONE, recursive)
// of m's source: of the file opened and checked by openPinned when m is
// pinned, else of m.Src by name (the system directories and devices).
func bindTree(m Mount) (int, error) {
	const flags = openTreeClone | openTreeCloexec | atRecursive
	if !m.Pinned {
		fd, err := sysOpenTree(m.Src, flags)
		return fd, opErr("open_tree", m.Src, err)
	}
	src, err := openPinned(m)
	if err != nil {
		return -1, err
	}
	defer sysClose(src)
	fd, e := sysOpenTreeFD(src, flags)
	if e != 0 {
		return -1, opErr("open_tree", m.Src, e)
	}
	return fd, nil
}
