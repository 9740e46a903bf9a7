package workspace

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/b10x/harness/internal/dirent"
)

// TempPrefix and TempSuffix frame the name of the temporary file a write
// creates next to its target: TempPrefix + 16 hex digits + TempSuffix.
// Where the file system supports O_TMPFILE the content is written to an
// unnamed file and given this name only for the instant between linkat and
// rename; elsewhere the named file exists while the content is written. A
// process killed in that window leaves such a file behind. Later writes
// never trip over it (every name is random and created exclusively); it can
// be recognised by IsTempName and removed.
const (
	TempPrefix = ".b10x-write-"
	TempSuffix = ".tmp"
)

// IsTempName reports whether a file name is one a write gives its
// temporary files.
func IsTempName(name string) bool {
	mid, ok := strings.CutPrefix(name, TempPrefix)
	if !ok {
		return false
	}
	mid, ok = strings.CutSuffix(mid, TempSuffix)
	if !ok || len(mid) != 16 {
		return false
	}
	_, err := hex.DecodeString(mid)
	return err == nil
}

// tempName returns a new random temporary file name.
func tempName() string {
	var b [8]byte
	rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return TempPrefix + hex.EncodeToString(b[:]) + TempSuffix
}

// How a write commits (docs/decisions/0049-what-an-edit-preserves.md):
//
//  1. The target's directory is locked with flock(LOCK_EX) on a descriptor
//     of its own. Every write of the harness, in this process or another,
//     holds that lock from the moment it looks at its target to its rename,
//     so harness writers in one directory are serialised: an edit's read,
//     rebuild and rename cannot interleave with another harness write.
//  2. The file is examined (hard links, read-only mode, owner) and, for
//     an edit (a Change with Read: file_edit), read; the new content is
//     built from it (Build).
//  3. The new content goes to a temporary file (writeTemp) that gets the
//     old file's owner, permission bits and extended attributes.
//  4. Compare and swap (an edit): just before the rename the target's
//     entry is examined again. Same device, inode, size, modification and
//     change time: renamed over it. Anything else (a writer that does not
//     take the lock, such as a program's echo >> file): the content is
//     read again; unchanged (a touch), the rename goes ahead; changed, the
//     temporary file is dropped and the edit starts over on the fresh
//     content, at most maxCommitAttempts times, then Conflict. A plain
//     write (file_write) replaces the whole content whatever is there, so
//     only a symbolic link appearing at the target stops it.
//
// What remains: a writer that ignores the lock and changes the file in the
// microseconds between the last check and the rename loses its change.

// maxCommitAttempts bounds how often a write starts over because its
// target changed under it.
const maxCommitAttempts = 5

// lockWait bounds how long a write waits for another holder of its
// target's lock (a program of the workspace could hold it forever).
var lockWait = 5 * time.Second

// staleTempAge is how old (by modification time) a temporary file of the
// harness must be before a write in its directory removes it.
var staleTempAge = 10 * time.Minute

// Change is one write for Commit: which file, and how to build its new
// content. Path is required; the zero value is not a usable Change.
type Change struct {
	// Path is the canonical workspace-relative path of the file to create
	// or replace (from ResolveForWrite, or Resolve for an edit), never
	// ".". A missing parent directory is created, unless Read is set.
	Path string
	// Read, when set, makes the change an edit: the file must exist and be
	// a regular file, and Read reads its content from fd (open for
	// reading, size bytes long at its last fstat; read it with pread, as
	// ReadAll does) while the directory's lock is held. The content is
	// given to Build, and the change commits only if the file still holds
	// it at the rename (compare and swap). Read's error refuses the write
	// and is returned as it is. Without Read, the change replaces whatever
	// regular file is there, and Build gets nil.
	Read func(fd int, size int64) ([]byte, error)
	// Build returns the new content from the old. It is called once per
	// attempt, with the lock held; its error refuses the write and is
	// returned as it is. A nil Build writes an empty file.
	Build func(old []byte) ([]byte, error)
}

// Effect is what a committed Change did to the file.
type Effect struct {
	Created    bool     // there was no file before
	SizeBefore int64    // the size of the file replaced (0 when Created)
	Mode       uint32   // the permission bits of the file written
	Notes      []string // metadata the new file did not keep, one sentence each
	Attempts   int      // how many times the change started (1 unless the target changed under it)
}

// Commit makes c beneath the root, atomically: the file holds its old
// content or its new one, never a mix, even across a crash (see "How a
// write commits" above and docs/decisions/0049-what-an-edit-preserves.md).
// A replaced file keeps its permission bits (not its set-id and sticky
// bits: a note says so), its owner and group (root gives them; otherwise
// the harness must own the file, and a group it is a member of is kept),
// and its extended attributes (not security.capability: a note says so).
// A new file gets 0644 and new directories 0755; run as root, they get the
// owner of the directory they are made in.
//
// Errors are *Error, or Read's and Build's errors as they are: Failed for
// a file with other hard links, a read-only file, an owner or group the
// harness cannot give, a directory or other non-regular file, a missing
// file for an edit, a failed system call; Denied for a symbolic link that
// appeared at the target or on the way after resolution; Conflict when the
// target kept changing (an edit starts over at most 5 times) or its
// directory stayed locked by another process for more than 5 seconds;
// Timeout or Cancelled when ctx ended while waiting for that lock. On any
// error nothing was written, except a failure to fsync the directory after
// the rename, which says so.
//
// Commit is safe for concurrent use; writes in one directory are
// serialised. What it does not protect against: a writer that ignores the
// lock and changes the file in the microseconds between the last check
// and the rename loses its change.
func (w *Workspace) Commit(ctx context.Context, c Change) (Effect, error) {
	var eff Effect
	err := w.WithRoot(func(root int) error {
		dirRel, base := Split(c.Path)
		var dfd int
		var err error
		if c.Read != nil {
			dfd, err = OpenBeneath(root, dirRel, unix.O_RDONLY|unix.O_DIRECTORY, 0)
			if err != nil {
				return FileError(c.Path, "open directory", err)
			}
		} else if dfd, err = mkdirAllBeneath(root, dirRel); err != nil {
			return err
		}
		defer unix.Close(dfd)
		unlock, err := lockDir(ctx, dfd, c.Path)
		if err != nil {
			return err
		}
		defer unlock()
		cleanStaleTemps(dfd)
		for attempt := 1; ; attempt++ {
			if attempt > maxCommitAttempts {
				return errorf(Conflict, nil, "%q kept changing while being written (%d attempts); nothing was written; read it again and retry", c.Path, maxCommitAttempts)
			}
			done, err := commitOnce(dfd, dirRel, base, c, &eff)
			if err != nil || done {
				eff.Attempts = attempt
				return err
			}
		}
	})
	return eff, err
}

// commitOnce is one attempt; done false means the target changed and the
// write starts over.
func commitOnce(dfd int, dirRel, base string, c Change, eff *Effect) (done bool, err error) {
	rel := c.Path
	*eff = Effect{}
	var st unix.Stat_t
	exists := true
	if err := unix.Fstatat(dfd, base, &st, unix.AT_SYMLINK_NOFOLLOW); err == unix.ENOENT {
		exists = false
	} else if err != nil {
		return false, FileError(rel, "stat", err)
	}
	if !exists && c.Read != nil {
		return false, errorf(Failed, nil, "%q: no such file or directory (it may have been removed while being edited)", rel)
	}
	tfd := -1
	defer func() {
		if tfd >= 0 {
			unix.Close(tfd) // releases the lock
		}
	}()
	var old []byte
	var readAt time.Time
	if exists {
		var again bool
		tfd, old, readAt, again, err = lockTarget(dfd, base, rel, c.Read, &st)
		if err != nil || again {
			return false, err
		}
	}
	var data []byte
	if c.Build != nil {
		if data, err = c.Build(old); err != nil {
			return false, err
		}
	}
	mode, owner, notes, err := newFileMode(dfd, dirRel, rel, exists, &st)
	if err != nil {
		return false, err
	}
	tmp, tmpFd, xnotes, err := writeTemp(dfd, tfd, rel, data, mode, owner)
	if err != nil {
		return false, err
	}
	defer unix.Close(tmpFd)
	notes = append(notes, xnotes...)
	drop := func() { unix.Unlinkat(dfd, tmp, 0) }
	if again, err := stillLocked(dfd, base, rel, c.Read != nil, &st, tfd, old, readAt); err != nil || again {
		drop()
		return false, err
	}
	if err := unix.Renameat(dfd, tmp, dfd, base); err != nil {
		drop()
		return false, FileError(rel, "rename", err)
	}
	if err := fsyncRetry(dfd); err != nil {
		return true, FileError(dirRel, "fsync directory (the file was replaced)", err)
	}
	*eff = Effect{Created: !exists, Mode: mode, Notes: notes}
	if exists {
		eff.SizeBefore = st.Size
	}
	return true, nil
}

// lockTarget opens the existing regular file at base (which holds its
// lock until closed: the caller closes tfd whenever it is not -1, error or
// not) and, for an edit (read set), reads it. again true means the target
// changed under it and the write starts over.
func lockTarget(dfd int, base, rel string, read func(fd int, size int64) ([]byte, error), st *unix.Stat_t) (tfd int, old []byte, readAt time.Time, again bool, err error) {
	tfd = -1
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
	case unix.S_IFLNK:
		return tfd, nil, readAt, false, errorf(Denied, nil, "%q: refused: a symbolic link appeared at the target after it was checked", rel)
	case unix.S_IFDIR:
		return tfd, nil, readAt, false, errorf(Failed, nil, "%q is a directory", rel)
	default:
		return tfd, nil, readAt, false, errorf(Failed, nil, "%q is not a regular file", rel)
	}
	tfd, err = OpenBeneath(dfd, base, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if err == unix.ENOENT || err == unix.ELOOP {
		return tfd, nil, readAt, true, nil // replaced since the stat: start over
	}
	if err != nil {
		return tfd, nil, readAt, false, FileError(rel, "open", err)
	}
	// Is the name still the file opened?
	var now unix.Stat_t
	if err := unix.Fstat(tfd, st); err != nil {
		return tfd, nil, readAt, false, FileError(rel, "stat", err)
	}
	if err := unix.Fstatat(dfd, base, &now, unix.AT_SYMLINK_NOFOLLOW); err != nil || now.Dev != st.Dev || now.Ino != st.Ino {
		return tfd, nil, readAt, true, nil
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return tfd, nil, readAt, false, errorf(Failed, nil, "%q is not a regular file", rel)
	}
	if err := writable(rel, st); err != nil {
		return tfd, nil, readAt, false, err
	}
	if read != nil {
		readAt = time.Now()
		if old, err = read(tfd, st.Size); err != nil {
			return tfd, nil, readAt, false, err
		}
		var after unix.Stat_t
		if err := unix.Fstat(tfd, &after); err != nil {
			return tfd, nil, readAt, false, FileError(rel, "stat", err)
		}
		if !sameState(st, &after) {
			return tfd, nil, readAt, true, nil // written while we read it
		}
	}
	return tfd, old, readAt, false, nil
}

// newFileMode is the mode and owner the new file gets: an existing file's
// (without its set-id and sticky bits, said in a note), or 0644 and, as
// root, the directory's owner.
func newFileMode(dfd int, dirRel, rel string, exists bool, st *unix.Stat_t) (mode uint32, owner fileOwner, notes []string, err error) {
	mode = 0o644
	owner = noOwner
	if exists {
		mode = st.Mode & 0o777
		if st.Mode&(unix.S_ISUID|unix.S_ISGID|unix.S_ISVTX) != 0 {
			notes = append(notes, fmt.Sprintf("mode %04o kept without its setuid, setgid and sticky bits (was %04o)", mode, st.Mode&0o7777))
		}
		if owner, err = keepOwner(rel, st); err != nil {
			return 0, noOwner, nil, err
		}
	} else if asRoot {
		if owner, err = dirOwner(dfd); err != nil {
			return 0, noOwner, nil, FileError(dirRel, "stat directory", err)
		}
	}
	return mode, owner, notes, nil
}

// stillLocked is the compare of the compare and swap: the target must
// still be what was locked and read. again true means it changed and the
// write starts over; an error refuses the write. Either way the caller
// drops its temporary file.
func stillLocked(dfd int, base, rel string, edit bool, st *unix.Stat_t, tfd int, old []byte, readAt time.Time) (again bool, err error) {
	// Compare and swap: the target must still be what was locked and read.
	var now unix.Stat_t
	nerr := unix.Fstatat(dfd, base, &now, unix.AT_SYMLINK_NOFOLLOW)
	switch {
	case nerr == nil && now.Mode&unix.S_IFMT == unix.S_IFLNK:
		return false, errorf(Denied, nil, "%q: refused: a symbolic link appeared at the target during the write", rel)
	case !edit:
		// file_write replaces whatever is there.
	case nerr == unix.ENOENT:
		return false, errorf(Failed, nil, "%q was removed while being edited; nothing was written", rel)
	case nerr != nil && nerr != unix.ENOENT:
		return false, FileError(rel, "stat", nerr)
	case !sameState(st, &now):
		if now.Dev != st.Dev || now.Ino != st.Ino || !sameContent(tfd, old) {
			return true, nil
		}
	case recentlyChanged(st, readAt) && !sameContent(tfd, old):
		// The same size and times, but the times may not have moved: a
		// file system's clock ticks in milliseconds (tmpfs on Linux 6.1:
		// a jiffy) or seconds, and a write in the tick of the last one
		// leaves them as they were.
		return true, nil
	}
	return false, nil
}

// writable refuses what the harness does not replace: a file with other
// hard links (replacing it would leave them the old content, and writing
// in place is not atomic) and a read-only file.
func writable(rel string, st *unix.Stat_t) error {
	if st.Nlink > 1 {
		return errorf(Failed, nil, "%q has %d hard links; replacing it would leave the other names with the old content, and writing it in place is not atomic; nothing was written", rel, st.Nlink)
	}
	if st.Mode&0o222 == 0 {
		return errorf(Failed, nil, "%q is read-only (mode %04o); nothing was written; make it writable first if it is meant to change", rel, st.Mode&0o7777)
	}
	return nil
}

// keepOwner is the owner the new file must get: the old file's. Root
// gives it; otherwise the harness's own uid must be the owner, and a
// group other than its own is set when the kernel allows (the harness is
// a member), else the write is refused rather than changing the owner.
func keepOwner(rel string, st *unix.Stat_t) (fileOwner, error) {
	if asRoot {
		return fileOwner{int(st.Uid), int(st.Gid)}, nil
	}
	if int(st.Uid) != os.Geteuid() {
		return noOwner, errorf(Failed, nil, "%q is owned by uid %d; the harness (uid %d) cannot give the new file that owner; nothing was written", rel, st.Uid, os.Geteuid())
	}
	if int(st.Gid) != os.Getegid() {
		return fileOwner{-1, int(st.Gid)}, nil
	}
	return noOwner, nil
}

// lockDir takes flock(LOCK_EX) on a descriptor of its own of directory
// dfd and returns its release. The wait is bounded by ctx and lockWait (a
// program of the workspace could hold the lock forever): the blocking
// flock runs on a goroutine that, if abandoned, releases the lock as soon
// as it gets it.
func lockDir(ctx context.Context, dfd int, rel string) (func(), error) {
	lfd, err := OpenBeneath(dfd, ".", unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, FileError(rel, "open directory", err)
	}
	got := make(chan error, 1)
	go func() {
		for {
			err := unix.Flock(lfd, unix.LOCK_EX)
			if err != unix.EINTR {
				got <- err
				return
			}
		}
	}()
	abandon := func() {
		go func() { <-got; unix.Close(lfd) }()
	}
	timer := time.NewTimer(lockWait)
	defer timer.Stop()
	select {
	case err := <-got:
		if err != nil {
			unix.Close(lfd)
			return nil, FileError(rel, "lock directory", err)
		}
		return func() { unix.Close(lfd) }, nil
	case <-ctx.Done():
		abandon()
		return nil, ctxError(ctx.Err(), "waiting for the write lock of "+quote(rel)+"'s directory")
	case <-timer.C:
		abandon()
		return nil, errorf(Conflict, nil, "%q: its directory is locked (flock) by another process for more than %s; nothing was written", rel, lockWait)
	}
}

// sameState reports whether two stats describe the same file, unchanged.
func sameState(a, b *unix.Stat_t) bool {
	return a.Dev == b.Dev && a.Ino == b.Ino && a.Size == b.Size && a.Mtim == b.Mtim && a.Ctim == b.Ctim
}

// timeGranularity is the coarsest clock tick of a file system the harness
// expects to write on (FAT and some network file systems: 2 s).
const timeGranularity = 2 * time.Second

// recentlyChanged reports whether the file's modification or change time
// is within timeGranularity of readAt: a later write in the same tick
// could leave both times unchanged.
func recentlyChanged(st *unix.Stat_t, readAt time.Time) bool {
	latest := max(st.Mtim.Nano(), st.Ctim.Nano())
	return readAt.UnixNano()-latest < int64(timeGranularity)
}

// sameContent reports whether the file open at fd holds exactly old.
func sameContent(fd int, old []byte) bool {
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || st.Size != int64(len(old)) {
		return false
	}
	cur, err := ReadAll(fd, st.Size, len(old))
	return err == nil && sha256.Sum256(cur) == sha256.Sum256(old)
}

// ReadAll reads the file open at fd from offset 0 to its end with pread,
// leaving the descriptor's offset alone, and stops once it holds more than
// limit bytes: a result longer than limit means the file is longer.
// sizeHint (its size by fstat) sizes the first buffer. EINTR is retried;
// any other error is the raw errno.
func ReadAll(fd int, sizeHint int64, limit int) ([]byte, error) {
	buf := make([]byte, 0, min(sizeHint, int64(limit))+1)
	for off := int64(0); ; {
		if len(buf) == cap(buf) {
			if len(buf) > limit {
				return buf, nil
			}
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := unix.Pread(fd, buf[len(buf):cap(buf)], off)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, err
		}
		if n == 0 {
			return buf, nil
		}
		buf = buf[:len(buf)+n]
		off += int64(n)
	}
}

// copyXattrs gives the file at to every extended attribute of the file at
// from, except security.capability (file capabilities are never carried
// over to content the harness wrote). It returns notes for the result, or
// an error naming the attribute that could not be kept.
func copyXattrs(from, to int, rel string) ([]string, error) {
	names, err := listXattrs(from)
	if err == unix.ENOTSUP || err == unix.EOPNOTSUPP {
		return nil, nil
	}
	if err != nil {
		return nil, FileError(rel, "list extended attributes", err)
	}
	var notes []string
	for _, name := range names {
		if name == "security.capability" {
			notes = append(notes, "file capabilities (security.capability) dropped")
			continue
		}
		val, err := getXattr(from, name)
		if err == unix.ENODATA {
			continue
		}
		if err == nil {
			err = unix.Fsetxattr(to, name, val, 0)
		}
		if err != nil {
			return nil, errorf(Failed, fmt.Errorf("xattr %q of %q: %w", name, rel, err),
				"%q: its extended attribute %q could not be kept (%s); nothing was written", rel, capText(name, maxEchoBytes), errnoText(err))
		}
	}
	return notes, nil
}

// listXattrs lists the names of the extended attributes of fd.
func listXattrs(fd int) ([]string, error) {
	size := 256
	for {
		buf := make([]byte, size)
		n, err := unix.Flistxattr(fd, buf)
		if err == unix.ERANGE && size < 1<<20 {
			size *= 4
			continue
		}
		if err != nil {
			return nil, err
		}
		var names []string
		for _, b := range bytes.Split(buf[:n], []byte{0}) {
			if len(b) > 0 {
				names = append(names, string(b))
			}
		}
		return names, nil
	}
}

// getXattr reads the value of the extended attribute name of fd.
func getXattr(fd int, name string) ([]byte, error) {
	size := 256
	for {
		buf := make([]byte, size)
		n, err := unix.Fgetxattr(fd, name, buf)
		if err == unix.ERANGE && size < 1<<20 {
			size *= 4
			continue
		}
		if err != nil {
			return nil, err
		}
		return buf[:n], nil
	}
}

// cleanStaleTemps removes, from directory dfd, temporary files a write of
// the harness left behind when it was killed between naming its temporary
// file and renaming it: only entries whose name IsTempName, that are
// regular files with one link, not modified for staleTempAge, and not
// locked (a live write holds flock on its temporary file from creation to
// rename). Everything else is left alone; failures are ignored (the next
// write tries again).
//
// A directory is looked at once per staleTempAge per process (a write in a
// directory of 100,000 entries should not list it every time).
func cleanStaleTemps(dfd int) {
	var dst unix.Stat_t
	if unix.Fstat(dfd, &dst) != nil {
		return
	}
	key := [2]uint64{uint64(dst.Dev), dst.Ino}
	now := time.Now()
	if last, ok := tempsCleaned.Load(key); ok && now.Sub(last.(time.Time)) < staleTempAge {
		return
	}
	tempsCleaned.Store(key, now)
	ents, err := readDirNames(dfd)
	if err != nil {
		return
	}
	for _, name := range ents {
		if !IsTempName(name) {
			continue
		}
		var st unix.Stat_t
		if unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil ||
			st.Mode&unix.S_IFMT != unix.S_IFREG || st.Nlink != 1 ||
			time.Since(time.Unix(st.Mtim.Unix())) < staleTempAge {
			continue
		}
		fd, err := OpenBeneath(dfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
		if err != nil {
			continue
		}
		var fst unix.Stat_t
		if unix.Fstat(fd, &fst) == nil && fst.Ino == st.Ino && fst.Dev == st.Dev &&
			unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB) == nil {
			unix.Unlinkat(dfd, name, 0)
		}
		unix.Close(fd)
	}
}

// tempsCleaned maps a directory (device, inode) to when cleanStaleTemps
// last looked at it.
var tempsCleaned sync.Map

// readDirNames lists the names in directory dfd (through a descriptor of
// its own, so dfd's offset is untouched).
func readDirNames(dfd int) ([]string, error) {
	fd, err := OpenBeneath(dfd, ".", unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	ents, err := readEntries(fd)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(ents))
	for _, e := range ents {
		names = append(names, e.Name)
	}
	return names, nil
}

// readEntries reads every entry of the directory open at fd.
func readEntries(fd int) ([]dirEntry, error) {
	return dirent.Read(fd, make([]byte, 32<<10))
}

// mkdirAllBeneath opens canonical directory rel (O_RDONLY, for fsync and
// as a directory descriptor), creating missing components with mode 0755,
// each created entry made durable by an fsync of its parent. Every open
// is made with the beneath resolve set from the previous component.
func mkdirAllBeneath(root int, rel string) (int, error) {
	fd, err := OpenBeneath(root, rel, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != unix.ENOENT {
		if err != nil {
			return -1, FileError(rel, "open directory", err)
		}
		return fd, nil
	}
	cur, err := OpenBeneath(root, ".", unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return -1, FileError(".", "open directory", err)
	}
	done := "."
	for c := range strings.SplitSeq(rel, "/") {
		done = Child(done, c)
		fd, err := OpenBeneath(cur, c, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		if err == unix.ENOENT {
			merr := unix.Mkdirat(cur, c, 0o755)
			if merr == nil && asRoot {
				// Chowned through a descriptor of the directory made (the
				// beneath open refuses a link swapped in), never by name:
				// the workspace's owner could replace the name with a hard
				// link to a file of theirs before the chown.
				var o fileOwner
				if o, merr = dirOwner(cur); merr == nil {
					var nfd int
					if nfd, merr = OpenBeneath(cur, c, unix.O_RDONLY|unix.O_DIRECTORY, 0); merr == nil {
						merr = unix.Fchown(nfd, o.uid, o.gid)
						unix.Close(nfd)
					}
				}
			}
			if merr != nil && merr != unix.EEXIST {
				unix.Close(cur)
				return -1, FileError(done, "mkdir", merr)
			}
			if err := fsyncRetry(cur); err != nil {
				unix.Close(cur)
				return -1, FileError(done, "fsync directory", err)
			}
			fd, err = OpenBeneath(cur, c, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		}
		unix.Close(cur)
		if err != nil {
			return -1, FileError(done, "open directory", err)
		}
		cur = fd
	}
	return cur, nil
}

// writeTemp writes data to a new temporary file in dfd, gives it mode,
// owner and (from the file open at from, when from >= 0) the extended
// attributes, fsyncs it and returns its name and an open descriptor of
// it, locked with flock (so cleanStaleTemps leaves it alone) until the
// caller closes it after the rename. It prefers an unnamed O_TMPFILE
// file, named (linked) only once complete; where the file system lacks
// O_TMPFILE it creates the named file exclusively and removes it on
// failure.
func writeTemp(dfd, from int, rel string, data []byte, mode uint32, owner fileOwner) (string, int, []string, error) {
	fd, err := -1, error(unix.EOPNOTSUPP)
	if !noTmpfile {
		fd, err = OpenBeneath(dfd, ".", unix.O_TMPFILE|unix.O_WRONLY, 0o600)
	}
	anon := err == nil
	var name string
	if !anon {
		for i := 0; ; i++ {
			name = tempName()
			fd, err = OpenBeneath(dfd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL, 0o600)
			if err != unix.EEXIST || i == 8 {
				break
			}
		}
		if err != nil {
			return "", -1, nil, FileError(rel, "create temporary file", err)
		}
	}
	fail := func(op string, err error) (string, int, []string, error) {
		unix.Close(fd)
		if !anon {
			unix.Unlinkat(dfd, name, 0)
		}
		if e, ok := err.(*Error); ok {
			return "", -1, nil, e
		}
		return "", -1, nil, FileError(rel, op, err)
	}
	if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		return fail("lock temporary file", err)
	}
	for off := 0; off < len(data); {
		n, err := unix.Write(fd, data[off:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return fail("write", err)
		}
		off += n
	}
	if owner != noOwner {
		if err := unix.Fchown(fd, owner.uid, owner.gid); err != nil {
			if owner.uid == -1 && (err == unix.EPERM || err == unix.EINVAL) {
				return fail("chown", errorf(Failed, fmt.Errorf("fchown group %d: %w", owner.gid, err),
					"%q belongs to group %d; the harness (uid %d) is not a member and cannot give the new file that group; nothing was written", rel, owner.gid, os.Geteuid()))
			}
			return fail("chown", err)
		}
	}
	if err := unix.Fchmod(fd, mode); err != nil {
		return fail("chmod", err)
	}
	var notes []string
	if from >= 0 {
		if notes, err = copyXattrs(from, fd, rel); err != nil {
			return fail("copy extended attributes", err)
		}
	}
	if err := fsyncRetry(fd); err != nil {
		return fail("fsync", err)
	}
	if anon {
		for i := 0; ; i++ {
			name = tempName()
			err = unix.Linkat(fd, "", dfd, name, unix.AT_EMPTY_PATH)
			if err == unix.ENOENT || err == unix.EPERM {
				// AT_EMPTY_PATH needs CAP_DAC_READ_SEARCH on older
				// kernels; the /proc link to our own descriptor does not.
				err = unix.Linkat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(fd), dfd, name, unix.AT_SYMLINK_FOLLOW)
			}
			if err != unix.EEXIST || i == 8 {
				break
			}
		}
		if err != nil {
			unix.Close(fd)
			return "", -1, nil, FileError(rel, "link temporary file", err)
		}
	}
	return name, fd, notes, nil
}

// fileOwner is the owner a written file or made directory gets.
type fileOwner struct{ uid, gid int }

// noOwner leaves the owner to the kernel (the harness's own ids).
var noOwner = fileOwner{-1, -1}

// asRoot is true when the harness runs as root: what it writes then takes
// the owner of the file it replaces or of its directory.
var asRoot = os.Geteuid() == 0

// dirOwner returns the owner of the directory dfd.
func dirOwner(dfd int) (fileOwner, error) {
	var st unix.Stat_t
	if err := unix.Fstat(dfd, &st); err != nil {
		return noOwner, err
	}
	return fileOwner{int(st.Uid), int(st.Gid)}, nil
}

// noTmpfile, set by tests, makes writeTemp use a named temporary file as
// it does on file systems without O_TMPFILE.
var noTmpfile bool

// fsyncRetry is fsync, retried on EINTR.
func fsyncRetry(fd int) error {
	for {
		err := unix.Fsync(fd)
		if err != unix.EINTR {
			return err
		}
	}
}

// ctxError is the error for a write whose context ended while it waited:
// Timeout for a deadline, Cancelled for a cancel. The cause wraps err, so
// errors.Is(e, context.DeadlineExceeded) or context.Canceled tells them
// apart too.
func ctxError(err error, what string) *Error {
	if errors.Is(err, context.DeadlineExceeded) {
		return errorf(Timeout, fmt.Errorf("%s: %w", what, err), "%s timed out", what)
	}
	return errorf(Cancelled, fmt.Errorf("%s: %w", what, err), "%s was cancelled", what)
}
