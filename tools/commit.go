package tools

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/b10x/harness/internal/dirent"
)

// How a write commits (docs/decisions/0049-what-an-edit-preserves.md):
//
//  1. The target's directory is locked with flock(LOCK_EX) on a descriptor
//     of its own. Every write of the harness, in this process or another,
//     holds that lock from the moment it looks at its target to its rename,
//     so harness writers in one directory are serialised: an edit's read,
//     rebuild and rename cannot interleave with another harness write.
//  2. The file is examined (hard links, read-only mode, owner) and, for
//     file_edit, read; the new content is built from it.
//  3. The new content goes to a temporary file (writeTemp) that gets the
//     old file's owner, permission bits and extended attributes.
//  4. Compare and swap (file_edit): just before the rename the target's
//     entry is examined again. Same device, inode, size, modification and
//     change time: renamed over it. Anything else (a writer that does not
//     take the lock, such as a program's echo >> file): the content is
//     read again; unchanged (a touch), the rename goes ahead; changed, the
//     temporary file is dropped and the edit starts over on the fresh
//     content, at most maxCommitAttempts times, then ReasonConflict.
//     file_write replaces the whole content whatever is there, so only a
//     symbolic link appearing at the target stops it.
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

// writeReq is one write: what to replace and how to build its content.
type writeReq struct {
	rel string
	// edit: the target must exist; its content is read and given to build.
	edit bool
	// build returns the new content from the old (nil for file_write).
	// It is called once per attempt and may refuse.
	build func(old []byte) ([]byte, error)
	// afterBuild, when set by a test, runs between build and the check
	// before the rename.
	afterBuild func()
}

// writeEffect is what a committed write did to the file.
type writeEffect struct {
	created    bool
	sizeBefore int64
	modeBefore uint32 // permission and set-id bits of the file replaced
	mode       uint32 // permission bits of the file written
	notes      []string
	attempts   int
}

// commit performs req beneath the root. Errors are *Error.
func (w *Workspace) commit(ctx context.Context, req writeReq) (writeEffect, error) {
	var eff writeEffect
	err := w.withRoot(func(root int) error {
		dirRel, base := splitRel(req.rel)
		var dfd int
		var err error
		if req.edit {
			dfd, err = openBeneath(root, dirRel, unix.O_RDONLY|unix.O_DIRECTORY, 0)
			if err != nil {
				return fsError(req.rel, "open directory", err)
			}
		} else if dfd, err = mkdirAllBeneath(root, dirRel); err != nil {
			return err
		}
		defer unix.Close(dfd)
		unlock, err := lockDir(ctx, dfd, req.rel)
		if err != nil {
			return err
		}
		defer unlock()
		cleanStaleTemps(dfd)
		for attempt := 1; ; attempt++ {
			if attempt > maxCommitAttempts {
				return Errorf(ReasonConflict, nil, "%q kept changing while being written (%d attempts); nothing was written; read it again and retry", req.rel, maxCommitAttempts)
			}
			done, err := w.commitOnce(ctx, dfd, dirRel, base, req, &eff)
			if err != nil || done {
				eff.attempts = attempt
				return err
			}
		}
	})
	return eff, err
}

// commitOnce is one attempt; done false means the target changed and the
// write starts over.
func (w *Workspace) commitOnce(ctx context.Context, dfd int, dirRel, base string, req writeReq, eff *writeEffect) (done bool, err error) {
	rel := req.rel
	*eff = writeEffect{}
	var st unix.Stat_t
	exists := true
	if err := unix.Fstatat(dfd, base, &st, unix.AT_SYMLINK_NOFOLLOW); err == unix.ENOENT {
		exists = false
	} else if err != nil {
		return false, fsError(rel, "stat", err)
	}
	if !exists && req.edit {
		return false, Errorf(ReasonToolError, nil, "%q: no such file or directory (it may have been removed while being edited)", rel)
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
		tfd, old, readAt, again, err = lockTarget(dfd, base, rel, req.edit, &st)
		if err != nil || again {
			return false, err
		}
	}
	var data []byte
	if req.build != nil {
		if data, err = req.build(old); err != nil {
			return false, err
		}
	}
	if len(data) > MaxWriteBytes {
		return false, tooLarge(rel, int64(len(data)))
	}
	if req.afterBuild != nil {
		req.afterBuild()
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
	if again, err := stillLocked(dfd, base, rel, req.edit, &st, tfd, old, readAt); err != nil || again {
		drop()
		return false, err
	}
	if err := unix.Renameat(dfd, tmp, dfd, base); err != nil {
		drop()
		return false, fsError(rel, "rename", err)
	}
	if err := fsyncRetry(dfd); err != nil {
		return true, fsError(dirRel, "fsync directory (the file was replaced)", err)
	}
	*eff = writeEffect{created: !exists, mode: mode, notes: notes}
	if exists {
		eff.sizeBefore, eff.modeBefore = st.Size, st.Mode&0o7777
	}
	return true, nil
}

// lockTarget opens the existing regular file at base (which holds its
// lock until closed: the caller closes tfd whenever it is not -1, error or
// not) and, for an edit, reads it. again true means the target changed
// under it and the write starts over.
func lockTarget(dfd int, base, rel string, edit bool, st *unix.Stat_t) (tfd int, old []byte, readAt time.Time, again bool, err error) {
	tfd = -1
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
	case unix.S_IFLNK:
		return tfd, nil, readAt, false, Errorf(ReasonDeniedPath, nil, "%q: refused: a symbolic link appeared at the target after it was checked", rel)
	case unix.S_IFDIR:
		return tfd, nil, readAt, false, Errorf(ReasonToolError, nil, "%q is a directory", rel)
	default:
		return tfd, nil, readAt, false, Errorf(ReasonToolError, nil, "%q is not a regular file", rel)
	}
	tfd, err = openBeneath(dfd, base, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if err == unix.ENOENT || err == unix.ELOOP {
		return tfd, nil, readAt, true, nil // replaced since the stat: start over
	}
	if err != nil {
		return tfd, nil, readAt, false, fsError(rel, "open", err)
	}
	// Is the name still the file opened?
	var now unix.Stat_t
	if err := unix.Fstat(tfd, st); err != nil {
		return tfd, nil, readAt, false, fsError(rel, "stat", err)
	}
	if err := unix.Fstatat(dfd, base, &now, unix.AT_SYMLINK_NOFOLLOW); err != nil || now.Dev != st.Dev || now.Ino != st.Ino {
		return tfd, nil, readAt, true, nil
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return tfd, nil, readAt, false, Errorf(ReasonToolError, nil, "%q is not a regular file", rel)
	}
	if err := writable(rel, st); err != nil {
		return tfd, nil, readAt, false, err
	}
	if edit {
		readAt = time.Now()
		if old, err = readAllFd(tfd, rel, st.Size); err != nil {
			return tfd, nil, readAt, false, err
		}
		var after unix.Stat_t
		if err := unix.Fstat(tfd, &after); err != nil {
			return tfd, nil, readAt, false, fsError(rel, "stat", err)
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
			return 0, noOwner, nil, fsError(dirRel, "stat directory", err)
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
		return false, Errorf(ReasonDeniedPath, nil, "%q: refused: a symbolic link appeared at the target during the write", rel)
	case !edit:
		// file_write replaces whatever is there.
	case nerr == unix.ENOENT:
		return false, Errorf(ReasonToolError, nil, "%q was removed while being edited; nothing was written", rel)
	case nerr != nil && nerr != unix.ENOENT:
		return false, fsError(rel, "stat", nerr)
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
		return Errorf(ReasonToolError, nil, "%q has %d hard links; replacing it would leave the other names with the old content, and writing it in place is not atomic; nothing was written", rel, st.Nlink)
	}
	if st.Mode&0o222 == 0 {
		return Errorf(ReasonToolError, nil, "%q is read-only (mode %04o); nothing was written; make it writable first if it is meant to change", rel, st.Mode&0o7777)
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
		return noOwner, Errorf(ReasonToolError, nil, "%q is owned by uid %d; the harness (uid %d) cannot give the new file that owner; nothing was written", rel, st.Uid, os.Geteuid())
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
	lfd, err := openBeneath(dfd, ".", unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, fsError(rel, "open directory", err)
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
			return nil, fsError(rel, "lock directory", err)
		}
		return func() { unix.Close(lfd) }, nil
	case <-ctx.Done():
		abandon()
		return nil, ctxError(ctx.Err(), "waiting for the write lock of "+quote(rel)+"'s directory")
	case <-timer.C:
		abandon()
		return nil, Errorf(ReasonConflict, nil, "%q: its directory is locked (flock) by another process for more than %s; nothing was written", rel, lockWait)
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
	cur, err := preadAll(fd, st.Size)
	return err == nil && sha256.Sum256(cur) == sha256.Sum256(old)
}

// readAllFd reads the whole file open at fd (from offset 0), refusing one
// larger than readLimit.
func readAllFd(fd int, rel string, size int64) ([]byte, error) {
	if size > int64(readLimit) {
		return nil, Errorf(ReasonToolError, nil, "%q is larger than %d bytes; file_edit edits text files up to that size", rel, readLimit)
	}
	data, err := preadAll(fd, size)
	if err != nil {
		return nil, fsError(rel, "read", err)
	}
	if len(data) > readLimit {
		return nil, Errorf(ReasonToolError, nil, "%q is larger than %d bytes; file_edit edits text files up to that size", rel, readLimit)
	}
	return data, nil
}

// preadAll reads fd from offset 0 to its end (at most readLimit+1 bytes).
func preadAll(fd int, sizeHint int64) ([]byte, error) {
	buf := make([]byte, 0, min(sizeHint, int64(readLimit))+1)
	for off := int64(0); ; {
		if len(buf) == cap(buf) {
			if len(buf) > readLimit {
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

// tooLarge is the error for new content over MaxWriteBytes.
func tooLarge(rel string, size int64) *Error {
	return Errorf(ReasonTooLarge, nil, "the new content of %q would be %d bytes; the limit is %d bytes; nothing was written", rel, size, MaxWriteBytes)
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
		return nil, fsError(rel, "list extended attributes", err)
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
			return nil, Errorf(ReasonToolError, fmt.Errorf("xattr %q of %q: %w", name, rel, err),
				"%q: its extended attribute %q could not be kept (%s); nothing was written", rel, capText(name, maxEchoBytes), errnoText(err))
		}
	}
	return notes, nil
}

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
		fd, err := openBeneath(dfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
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
	fd, err := openBeneath(dfd, ".", unix.O_RDONLY|unix.O_DIRECTORY, 0)
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

// shaHex is the hex SHA-256 of data.
func shaHex(data []byte) string {
	s := sha256.Sum256(data)
	return hex.EncodeToString(s[:])
}

// countLines counts the lines of data (a last line without a newline
// counts).
func countLines(data []byte) int {
	n := bytes.Count(data, []byte{'\n'})
	if len(data) > 0 && data[len(data)-1] != '\n' {
		n++
	}
	return n
}

// notesText renders effect notes as one line each.
func notesText(notes []string) string {
	var b strings.Builder
	for _, n := range notes {
		b.WriteString("note: ")
		b.WriteString(n)
		b.WriteByte('\n')
	}
	return b.String()
}

// readEntries reads every entry of the directory open at fd.
func readEntries(fd int) ([]dirEntry, error) {
	return dirent.Read(fd, make([]byte, 32<<10))
}
