package tools

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// TempPrefix and TempSuffix frame the name of the temporary file a write
// tool creates next to its target: TempPrefix + 16 hex digits + TempSuffix.
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

// IsTempName reports whether a file name is one a write tool gives its
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

// FileWriteArgs are file_write's arguments.
type FileWriteArgs struct {
	Path    string `json:"path" max:"16384" desc:"File to create or replace, relative to the workspace root. Missing parent directories are created."`
	Content string `json:"content" max:"67108864" desc:"The complete new content of the file."`
}

// FileWrite is the file_write tool: create or replace a whole file,
// atomically. The path is resolved with ResolveForWrite (a link at the
// target is resolved to its in-root target or refused); missing parent
// directories are created beneath the root; the content goes to a
// temporary file in the target's directory, is fsynced and renamed over
// the target, and the directory is fsynced. A crash at any moment leaves
// the old content or the new one. The open and rename use the canonical
// path relative to the root descriptor with RESOLVE_NO_SYMLINKS, so a link
// swapped in after Prepare fails the call with ReasonDeniedPath; the
// rename replaces a directory entry, it never writes through one.
//
// An existing file keeps its permission bits (setuid, setgid and sticky
// bits are dropped); a new file gets 0644, new directories 0755. A harness
// running as root gives a replaced file its old owner and a new file or
// directory the owner of the directory it is made in, so a run child (the
// workspace's owner, never root) can change what the file tools wrote;
// otherwise ownership is that of the harness process. Other hard links to a replaced file keep
// the old content. The zero value is ready to use; it holds no state and is
// safe for concurrent use.
type FileWrite struct{}

var fileWriteSpec = sync.OnceValue(func() *argSpec { return mustArgSpec(FileWriteArgs{}) })

// Name implements Tool.
func (FileWrite) Name() string { return "file_write" }

// Description implements Tool.
func (FileWrite) Description() string {
	return "Create a file or replace its whole content. Missing parent directories are created. " +
		"The write is atomic: the file holds either its old content or the new one, never a mix. " +
		"To change part of an existing file, prefer file_edit. " + pathRules
}

// Schema implements Tool.
func (FileWrite) Schema() json.RawMessage { return fileWriteSpec().schema }

// Prepare implements Tool.
func (FileWrite) Prepare(ws *Workspace, raw json.RawMessage) (Prepared, error) {
	var a FileWriteArgs
	if _, err := fileWriteSpec().decode(raw, &a); err != nil {
		return nil, err
	}
	rel, err := ws.ResolveForWrite(a.Path)
	if err != nil {
		return nil, err
	}
	if rel == "." {
		return nil, Errorf(ReasonToolError, nil, "%q is the workspace root, a directory", a.Path)
	}
	return &fileWriteCall{ws: ws, args: a, rel: rel}, nil
}

type fileWriteCall struct {
	ws   *Workspace
	args FileWriteArgs
	rel  string
}

func (c *fileWriteCall) Args() any       { return c.args }
func (c *fileWriteCall) Writes() []Write { return []Write{{Path: c.rel, Whole: true}} }

func (c *fileWriteCall) Execute(ctx context.Context) (Result, error) {
	if err := ctx.Err(); err != nil {
		return Result{}, ctxError(err, "file_write")
	}
	created, err := c.ws.writeFile(c.rel, []byte(c.args.Content), nil)
	if err != nil {
		return Result{}, err
	}
	verb := "replaced"
	if created {
		verb = "created"
	}
	return Result{
		Text: fmt.Sprintf("wrote %d bytes to %s (%s)\n", len(c.args.Content), c.rel, verb),
		Meta: map[string]any{"path": c.rel, "bytes": len(c.args.Content), "created": created},
	}, nil
}

// writeFile replaces canonical rel with data atomically. check, when not
// nil, sees the target's current state (exists false: no entry) just
// before the temporary file is created, and may refuse.
func (w *Workspace) writeFile(rel string, data []byte, check func(st *unix.Stat_t, exists bool) error) (created bool, err error) {
	err = w.withRoot(func(root int) error {
		dirRel, base := splitRel(rel)
		dfd, err := mkdirAllBeneath(root, dirRel)
		if err != nil {
			return err
		}
		defer unix.Close(dfd)
		var st unix.Stat_t
		exists := true
		if err := unix.Fstatat(dfd, base, &st, unix.AT_SYMLINK_NOFOLLOW); err == unix.ENOENT {
			exists = false
		} else if err != nil {
			return fsError(rel, "stat", err)
		}
		mode := uint32(0o644)
		if exists {
			switch st.Mode & unix.S_IFMT {
			case unix.S_IFREG:
				mode = st.Mode & 0o777
			case unix.S_IFLNK:
				return Errorf(ReasonDeniedPath, nil, "%q: refused: a symbolic link appeared at the target after it was checked", rel)
			case unix.S_IFDIR:
				return Errorf(ReasonToolError, nil, "%q is a directory", rel)
			default:
				return Errorf(ReasonToolError, nil, "%q is not a regular file", rel)
			}
		}
		if check != nil {
			if err := check(&st, exists); err != nil {
				return err
			}
		}
		owner := noOwner
		if asRoot {
			if exists {
				owner = fileOwner{int(st.Uid), int(st.Gid)}
			} else if owner, err = dirOwner(dfd); err != nil {
				return fsError(dirRel, "stat directory", err)
			}
		}
		tmp, err := writeTemp(dfd, rel, data, mode, owner)
		if err != nil {
			return err
		}
		// The target's entry is replaced, whatever it is now; a link that
		// appeared in the meantime is refused rather than replaced
		// silently, and in no case written through.
		if err := unix.Fstatat(dfd, base, &st, unix.AT_SYMLINK_NOFOLLOW); err == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
			unix.Unlinkat(dfd, tmp, 0)
			return Errorf(ReasonDeniedPath, nil, "%q: refused: a symbolic link appeared at the target during the write", rel)
		}
		if err := unix.Renameat(dfd, tmp, dfd, base); err != nil {
			unix.Unlinkat(dfd, tmp, 0)
			return fsError(rel, "rename", err)
		}
		if err := fsyncRetry(dfd); err != nil {
			return fsError(dirRel, "fsync directory", err)
		}
		created = !exists
		return nil
	})
	return created, err
}

// mkdirAllBeneath opens canonical directory rel (O_RDONLY, for fsync and
// as a directory descriptor), creating missing components with mode 0755,
// each created entry made durable by an fsync of its parent. Every open
// is made with the beneath resolve set from the previous component.
func mkdirAllBeneath(root int, rel string) (int, error) {
	fd, err := openBeneath(root, rel, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != unix.ENOENT {
		if err != nil {
			return -1, fsError(rel, "open directory", err)
		}
		return fd, nil
	}
	cur, err := openBeneath(root, ".", unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return -1, fsError(".", "open directory", err)
	}
	done := "."
	for c := range strings.SplitSeq(rel, "/") {
		done = childRel(done, c)
		fd, err := openBeneath(cur, c, unix.O_RDONLY|unix.O_DIRECTORY, 0)
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
					if nfd, merr = openBeneath(cur, c, unix.O_RDONLY|unix.O_DIRECTORY, 0); merr == nil {
						merr = unix.Fchown(nfd, o.uid, o.gid)
						unix.Close(nfd)
					}
				}
			}
			if merr != nil && merr != unix.EEXIST {
				unix.Close(cur)
				return -1, fsError(done, "mkdir", merr)
			}
			if err := fsyncRetry(cur); err != nil {
				unix.Close(cur)
				return -1, fsError(done, "fsync directory", err)
			}
			fd, err = openBeneath(cur, c, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		}
		unix.Close(cur)
		if err != nil {
			return -1, fsError(done, "open directory", err)
		}
		cur = fd
	}
	return cur, nil
}

// writeTemp writes data to a new temporary file in dfd, fsyncs it and
// returns its name. It prefers an unnamed O_TMPFILE file, named (linked)
// only once complete; where the file system lacks O_TMPFILE it creates the
// named file exclusively and removes it on failure.
func writeTemp(dfd int, rel string, data []byte, mode uint32, owner fileOwner) (string, error) {
	fd, err := -1, error(unix.EOPNOTSUPP)
	if !noTmpfile {
		fd, err = openBeneath(dfd, ".", unix.O_TMPFILE|unix.O_WRONLY, 0o600)
	}
	anon := err == nil
	var name string
	if !anon {
		for i := 0; ; i++ {
			name = tempName()
			fd, err = openBeneath(dfd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL, 0o600)
			if err != unix.EEXIST || i == 8 {
				break
			}
		}
		if err != nil {
			return "", fsError(rel, "create temporary file", err)
		}
	}
	fail := func(op string, err error) (string, error) {
		unix.Close(fd)
		if !anon {
			unix.Unlinkat(dfd, name, 0)
		}
		return "", fsError(rel, op, err)
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
			return fail("chown", err)
		}
	}
	if err := unix.Fchmod(fd, mode); err != nil {
		return fail("chmod", err)
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
			return "", fsError(rel, "link temporary file", err)
		}
	}
	if err := unix.Close(fd); err != nil {
		unix.Unlinkat(dfd, name, 0)
		return "", fsError(rel, "close", err)
	}
	return name, nil
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

func tempName() string {
	var b [8]byte
	rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return TempPrefix + hex.EncodeToString(b[:]) + TempSuffix
}

func fsyncRetry(fd int) error {
	for {
		err := unix.Fsync(fd)
		if err != unix.EINTR {
			return err
		}
	}
}
