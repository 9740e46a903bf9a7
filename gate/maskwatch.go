package gate

import (
	"encoding/binary"
	"strconv"

	"golang.org/x/sys/unix"
)

// Watched directories (docs/decisions/0099-watched-mask-listings.md).
//
// A kept listing (maskwalk.go) still costs its directory an openat2 and an
// fstat at every walk: 1,300 of them in Go's source tree, about 3 ms of a
// run call. A directory that carries an inotify watch, added before the
// listing was last checked against it, and whose watch has had no event
// since, is taken without being opened at all. What a listing holds (the
// names of its subdirectories, and of its denied regular files with their
// inodes) changes only when a name in the directory is created, removed,
// or renamed in or out, and each of these comes with an event on the
// directory's watch (IN_CREATE, IN_DELETE, IN_MOVED_FROM, IN_MOVED_TO: a
// hard link made is IN_CREATE), which the kernel queues before the system
// call that made the change returns: a change made before a walk begins is
// in the queue the walk drains first. A watch follows its inode, not its
// name: a directory is taken unopened only when its parent was taken
// unopened or checked unchanged in the same walk (then every name in the
// parent is the inode it was), which is what catches a directory renamed
// or exchanged (RENAME_EXCHANGE) while its own watch has no event. A full
// queue (IN_Q_OVERFLOW) or an error reading it makes every directory be
// checked again; a watch the kernel removed (the directory deleted,
// IN_IGNORED, which comes whatever the mask) takes its listing's trust
// with it.
//
// Watches are kept only on file systems whose every change to a
// directory's entries is made through the VFS (ext4, xfs, tmpfs), at most
// maxWatches of them, and only for directories whose listing is kept.
// A listing is taken so only while its watch is live and was last added
// for its name: the kernel gives an inode one watch whatever the names it
// is opened by (a directory bound at a second name), and tells an event to
// the name it was last added for.
//
// What they do not see, from outside the session: a mount made over a
// workspace directory (the session's run children mount only in their
// own namespaces), which the openat2 of the walk without watches would
// have crossed, and an encrypted directory's names appearing with its key.

// maxWatches bounds the watches of one gate: each pins an inode in the
// kernel and counts against the user's fs.inotify.max_user_watches, which
// other programs (editors, build tools) share.
const maxWatches = 8192

// watchedFS are the file systems whose directories may be watched instead
// of checked, by statfs magic: those whose directory entries change only
// through the VFS, where inotify sees every change.
var watchedFS = map[int64]bool{
	unix.EXT4_SUPER_MAGIC: true, // ext2, ext3, ext4
	unix.XFS_SUPER_MAGIC:  true,
	unix.TMPFS_MAGIC:      true,
}

// watchMask is what a watch reports: every change to the directory's
// names. (Its mode, owner and times change nothing a listing holds.)
const watchMask = unix.IN_CREATE | unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO | unix.IN_ONLYDIR

// dirWatch is a gate's inotify instance and its watches.
type dirWatch struct {
	fd  int              // the instance (non-blocking); -1 once closed or failed
	wds map[int32]string // each watch, by the directory it was last added for
	buf []byte
}

// newDirWatch makes the instance, or returns nil (no watching: every
// kept directory is checked, as without one).
func newDirWatch() *dirWatch {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil
	}
	return &dirWatch{fd: fd, wds: map[int32]string{}, buf: make([]byte, 64<<10)}
}

// close ends the instance and every watch.
func (w *dirWatch) close() {
	if w != nil && w.fd >= 0 {
		unix.Close(w.fd)
		w.fd = -1
	}
}

// add watches the directory open (O_PATH) at fd, on the file system of
// magic fsType, as rel and returns the watch, or 0 when it has none (its
// file system is not watched, the bound is reached, or the kernel
// refused).
func (w *dirWatch) add(fd int, fsType int64, rel string) int32 {
	if w == nil || w.fd < 0 || !watchedFS[fsType] {
		return 0
	}
	wd, err := unix.InotifyAddWatch(w.fd, "/proc/self/fd/"+strconv.Itoa(fd), watchMask)
	if err != nil || wd <= 0 {
		return 0
	}
	if _, known := w.wds[int32(wd)]; !known && len(w.wds) >= maxWatches {
		_, _ = unix.InotifyRmWatch(w.fd, uint32(wd))
		return 0
	}
	w.wds[int32(wd)] = rel
	return int32(wd)
}

// answers reports whether wd is a live watch last added for rel.
func (w *dirWatch) answers(wd int32, rel string) bool {
	return w != nil && w.fd >= 0 && wd != 0 && w.wds[wd] == rel
}

// remove ends watch wd, which rel's listing held, unless the watch has
// been added for another directory since.
func (w *dirWatch) remove(wd int32, rel string) {
	if w == nil || w.fd < 0 || wd == 0 || w.wds[wd] != rel {
		return
	}
	delete(w.wds, wd)
	_, _ = unix.InotifyRmWatch(w.fd, uint32(wd))
}

// drain reads every queued event: changed is called with the directory
// of each watch that had one, all when the queue overflowed; false means
// the instance failed and is closed (every listing must be checked).
func (w *dirWatch) drain(changed func(rel string), all func()) bool {
	if w == nil || w.fd < 0 {
		return false
	}
	for {
		n, err := unix.Read(w.fd, w.buf)
		if err == unix.EINTR {
			continue
		}
		if err == unix.EAGAIN {
			return true
		}
		if err != nil || n <= 0 {
			w.close()
			return false
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			b := w.buf[off:n]
			wd := int32(binary.NativeEndian.Uint32(b[0:]))
			mask := binary.NativeEndian.Uint32(b[4:])
			size := unix.SizeofInotifyEvent + int(binary.NativeEndian.Uint32(b[12:]))
			off += size
			if mask&unix.IN_Q_OVERFLOW != 0 {
				all()
				continue
			}
			rel, ok := w.wds[wd]
			if !ok {
				continue
			}
			changed(rel)
			if mask&unix.IN_IGNORED != 0 {
				delete(w.wds, wd)
			}
		}
	}
}
