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
// What a replaced file keeps (docs/decisions/0049-what-an-edit-preserves.md):
// its permission bits (setuid, setgid and sticky bits are dropped, and the
// result says so), its owner and group (a harness running as root gives
// them; otherwise the harness must own the file, and a group it belongs
// to is kept), and its extended attributes (security.capability is
// dropped, and the result says so). A file with more than one hard link
// and a read-only file (no write bit at all) are refused with
// ReasonToolError, unchanged. A new file gets 0644 and new directories
// 0755; a harness running as root gives them the owner of the directory
// they are made in, so a run child (the workspace's owner, never root) can
// change what the file tools wrote.
//
// Writes of the harness in one directory are serialised by a lock on the
// directory (flock), across processes; content over MaxWriteBytes is
// ReasonInvalidArgument. The result's first line says what was done:
//
//	wrote PATH (created): N bytes, L line(s), mode 0644; sha256 HEX
//	wrote PATH (replaced): OLD -> N bytes, L line(s), mode 0640; sha256 HEX
//
// followed by a "note: ..." line per metadata change; Meta["effect"] holds
// that text. The zero value is ready to use; it holds no state and is
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

func (c *fileWriteCall) Execute(ctx context.Context, rep Report) (Result, error) {
	if err := ctx.Err(); err != nil {
		return Result{}, ctxError(err, "file_write")
	}
	data := []byte(c.args.Content)
	eff, err := c.ws.commit(ctx, writeReq{rel: c.rel, build: func([]byte) ([]byte, error) { return data, nil }})
	if err != nil {
		return Result{}, err
	}
	var effect string
	if eff.created {
		effect = fmt.Sprintf("wrote %s (created): %d bytes, %d line(s), mode %04o; sha256 %s\n", showPath(c.rel), len(data), countLines(data), eff.mode, shaHex(data))
	} else {
		effect = fmt.Sprintf("wrote %s (replaced): %d -> %d bytes, %d line(s), mode %04o; sha256 %s\n", showPath(c.rel), eff.sizeBefore, len(data), countLines(data), eff.mode, shaHex(data))
	}
	effect += notesText(eff.notes)
	return Result{
		Text: effect,
		Meta: map[string]any{
			"path":         c.rel,
			"effect":       effect,
			"bytes":        len(data),
			"bytes_before": eff.sizeBefore,
			"created":      eff.created,
			"lines":        countLines(data),
			"sha256":       shaHex(data),
			"mode":         fmt.Sprintf("%04o", eff.mode),
			"attempts":     eff.attempts,
		},
	}, nil
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
			return "", -1, nil, fsError(rel, "create temporary file", err)
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
		return "", -1, nil, fsError(rel, op, err)
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
				return fail("chown", Errorf(ReasonToolError, fmt.Errorf("fchown group %d: %w", owner.gid, err),
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
			return "", -1, nil, fsError(rel, "link temporary file", err)
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
