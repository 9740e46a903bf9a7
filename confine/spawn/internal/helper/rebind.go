package helper

import (
	"strconv"
	"strings"
	"syscall"
)

// Rebinds (Mount kind Rebind): a file or directory beneath an earlier bind
// of the view (the workspace) is bound over itself, read-only or not. Once
// the program's mount namespace is made (nested, so every mount is locked),
// a read-only rebind cannot be written, chmod-ed, unmounted or remounted,
// and no mount point, read-only or not, can be renamed, removed or
// replaced: rename(2), unlink(2) and rmdir(2) of a mount point fail with
// EBUSY. The parent computes which paths; here each is resolved beneath its
// bind without following any symbolic link, and cloned from the descriptor
// resolved, so a link planted in the workspace never redirects a rebind.

// beneathSrc resolves m.Dst beneath base+m.Src without following any
// symbolic link and returns its O_PATH descriptor and status. With
// m.Pinned, the file found must be m.PinDev and m.PinIno (the file the
// caller read at that path), else it fails (ESTALE).
func beneathSrc(base string, m Mount, what, gone string) (int, syscall.Stat_t, error) {
	var st syscall.Stat_t
	if !strings.HasPrefix(m.Dst, m.Src+"/") {
		return -1, st, opErr(what, m.Dst, syscall.EINVAL)
	}
	rel := m.Dst[len(m.Src)+1:]
	root, err := sysOpenat2(atFDCWDInt, base+m.Src, oPath|syscall.O_DIRECTORY|syscall.O_CLOEXEC, resolveNoSymlinks|resolveNoMagiclinks)
	if err != nil {
		return -1, st, opErr("openat2", m.Src, err)
	}
	defer sysClose(root)
	fd, err := sysOpenat2(root, rel, oPath|syscall.O_CLOEXEC, resolveBeneath|resolveNoSymlinks|resolveNoMagiclinks)
	switch err {
	case nil:
	case syscall.ELOOP:
		return -1, st, opErr("openat2", m.Dst, &hintError{err, "a component is a symbolic link; a path held for the child is never followed through a link"})
	case syscall.ENOENT:
		return -1, st, opErr("openat2", m.Dst, &hintError{err, gone})
	default:
		return -1, st, opErr("openat2", m.Dst, err)
	}
	st, e := sysFstatFD(fd)
	if e != 0 {
		sysClose(fd)
		return -1, st, opErr("fstat", m.Dst, e)
	}
	if m.Pinned && (uint64(st.Dev) != m.PinDev || uint64(st.Ino) != m.PinIno) {
		// The caller read the path as another file: it was moved or
		// replaced since, and what is there now is not what it decided
		// about.
		sysClose(fd)
		return -1, st, opErr(what, m.Dst, &hintError{syscall.ESTALE, "the path is no longer the file it was when the call's paths were read (device " +
			strconv.FormatUint(m.PinDev, 10) + " inode " + strconv.FormatUint(m.PinIno, 10) + ", now device " +
			strconv.FormatUint(uint64(st.Dev), 10) + " inode " + strconv.FormatUint(uint64(st.Ino), 10) + "): something moved it meanwhile"})
	}
	return fd, st, nil
}

// maskBeneath attaches tree, the bind of the mask's own empty file
// (makeMasks), over the regular file m.Dst of the view at base,
// resolved as a rebind's path is (beneathSrc): the child reads it as
// empty, and a write to it fails. Its mount, like every other of the view,
// is locked in the program's namespace: it cannot be unmounted, renamed or
// removed.
func maskBeneath(base string, m Mount, tree int) error {
	fd, st, err := beneathSrc(base, m, "mask", "the path to mask was removed before the call started")
	if err != nil {
		return err
	}
	defer sysClose(fd)
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return opErr("mask", m.Dst, &hintError{syscall.EINVAL, "only a regular file is masked; it was replaced before the call started"})
	}
	if e := sysMoveMountFD(tree, fd); e != 0 {
		return opErr("move_mount", m.Dst, e)
	}
	return nil
}

// rebind binds m.Dst over itself in the view at base: resolved beneath
// base+m.Src (an earlier bind's destination) with RESOLVE_BENEATH and
// RESOLVE_NO_SYMLINKS, it must be a regular file or a directory.
func rebind(base string, m Mount) error {
	fd, st, err := beneathSrc(base, m, "rebind", "the path to hold was removed before the call started")
	if err != nil {
		return err
	}
	defer sysClose(fd)
	if t := st.Mode & syscall.S_IFMT; t != syscall.S_IFREG && t != syscall.S_IFDIR {
		return opErr("rebind", m.Dst, &hintError{syscall.EINVAL, "only a regular file or a directory can be held"})
	}
	tree, e := sysOpenTreeFD(fd, openTreeClone|openTreeCloexec|atRecursive)
	if e != 0 {
		return opErr("open_tree", m.Dst, e)
	}
	defer sysClose(tree)
	attr := uint64(mountAttrNosuid | mountAttrNodev)
	if m.RO {
		attr |= mountAttrRdonly
	}
	if err := sysMountSetattr(tree, "", atEmptyPath|atRecursive, attr); err != nil {
		return opErr("mount_setattr", m.Dst, err)
	}
	if e := sysMoveMountFD(tree, fd); e != 0 {
		return opErr("move_mount", m.Dst, e)
	}
	return nil
}
