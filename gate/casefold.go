package gate

import (
	"errors"
	"fmt"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/b10x/harness/internal/dirent"
	"github.com/b10x/harness/record"
)

// Casing is what DetectCase found out about how a directory looks names
// up. The zero value is CaseUnknown.
type Casing int

// DetectCase's three outcomes.
const (
	CaseUnknown     Casing = iota // could not tell
	CaseSensitive                 // names that differ in case are different names
	CaseInsensitive               // names that differ in case are the same name
)

func (c Casing) String() string {
	switch c {
	case CaseUnknown:
		return "unknown"
	case CaseSensitive:
		return "case-sensitive"
	case CaseInsensitive:
		return "case-insensitive"
	}
	return fmt.Sprintf("casing(%d)", int(c))
}

// CaseReport is DetectCase's answer for one directory. A plain value.
type CaseReport struct {
	Dir    string // the directory as given
	Casing Casing
	FS     string // the filesystem by its statfs type ("ext4", "tmpfs", "vfat", ... or the magic number in hex)
	Why    string // the evidence, for a person and the record
	// ShortNames is true on filesystems that may also give a name an 8.3
	// short alias (vfat; NTFS and SMB shares of Windows volumes), by which
	// it can be opened: a second spelling the gate matches for .git and
	// .b10x only.
	ShortNames bool
}

// Record is r as run_start records it (record.RunStart.WorkspaceCase).
func (r CaseReport) Record() *record.WorkspaceCase {
	return &record.WorkspaceCase{Casing: r.Casing.String(), FS: r.FS, Why: r.Why, ShortNames: r.ShortNames}
}

// fsCasefoldFL is FS_CASEFOLD_FL, the casefold inode attribute (chattr +F)
// that ext4, f2fs, tmpfs and bcachefs report through FS_IOC_GETFLAGS.
const fsCasefoldFL = 0x40000000

// Filesystem magic numbers x/sys/unix does not name.
const (
	ntfs3Magic = 0x7366746e // ntfs3
	ntfsMagic  = 0x5346544e // the older ntfs driver
	zfsMagic   = 0x2fc12fc1
)

// fsKinds names the filesystems DetectCase knows. always: every directory
// folds case; flagged: a directory folds case exactly when it has the
// casefold attribute, so the attribute's absence is an answer; short: 8.3
// short names may exist.
var fsKinds = map[uint32]struct {
	name                   string
	always, flagged, short bool
}{
	unix.EXT4_SUPER_MAGIC:      {name: "ext4", flagged: true},
	unix.F2FS_SUPER_MAGIC:      {name: "f2fs", flagged: true},
	unix.TMPFS_MAGIC:           {name: "tmpfs", flagged: true},
	unix.BCACHEFS_SUPER_MAGIC:  {name: "bcachefs", flagged: true},
	unix.BTRFS_SUPER_MAGIC:     {name: "btrfs", flagged: true},
	unix.MSDOS_SUPER_MAGIC:     {name: "vfat", always: true, short: true},
	unix.EXFAT_SUPER_MAGIC:     {name: "exfat", always: true},
	ntfs3Magic:                 {name: "ntfs3", short: true},
	ntfsMagic:                  {name: "ntfs", short: true},
	unix.CIFS_SUPER_MAGIC:      {name: "cifs", short: true},
	unix.SMB2_SUPER_MAGIC:      {name: "smb2", short: true},
	unix.XFS_SUPER_MAGIC:       {name: "xfs"}, // ASCII case-insensitive when made with -n version=ci
	unix.FUSE_SUPER_MAGIC:      {name: "fuse"},
	unix.NFS_SUPER_MAGIC:       {name: "nfs"},
	unix.OVERLAYFS_SUPER_MAGIC: {name: "overlay"},
	zfsMagic:                   {name: "zfs"}, // casesensitivity=insensitive|mixed
}

// DetectCase finds out whether the directory dir looks names up without
// regard to case, as the session wants to say at start and record (the
// gate itself folds case on every filesystem, fold.go). In order:
//
//   - the casefold attribute (FS_IOC_GETFLAGS with FS_CASEFOLD_FL) set on
//     dir: CaseInsensitive;
//   - a filesystem that always folds case (statfs type vfat or exFAT):
//     CaseInsensitive;
//   - a filesystem where only the attribute folds case (ext4, f2fs, tmpfs,
//     bcachefs, btrfs), whose attribute could be read and is not set:
//     CaseSensitive;
//   - otherwise (NTFS, SMB, xfs, FUSE, NFS, overlay, zfs, anything else) a
//     lookup: a name of dir that holds ASCII letters is looked up with
//     their case swapped, without following links. The same file:
//     CaseInsensitive; no such name, another file, or both spellings
//     listed: CaseSensitive;
//   - no such name to look up: CaseUnknown.
//
// It reads and never writes. Only dir itself is examined: a directory
// beneath it may fold case where dir does not (ext4's attribute is per
// directory, a mount may lie beneath). The lookup swaps ASCII letters only,
// so a directory that folds only beyond ASCII is not seen.
//
// Errors: dir cannot be opened as a directory, or statfs fails (the
// error names the operation and dir, and wraps the errno). An answer that
// is only inconclusive is not an error. Safe for concurrent use.
func DetectCase(dir string) (CaseReport, error) {
	r := CaseReport{Dir: dir}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return r, fmt.Errorf("detect case: open %s: %w", dir, err)
	}
	defer unix.Close(fd)
	var sfs unix.Statfs_t
	if err := unix.Fstatfs(fd, &sfs); err != nil {
		return r, fmt.Errorf("detect case: statfs %s: %w", dir, err)
	}
	magic := uint32(sfs.Type)
	flags, ferr := unix.IoctlGetUint32(fd, unix.FS_IOC_GETFLAGS)
	r.Casing, r.Why = classifyCase(magic, flags, ferr == nil, func() (Casing, string) { return lookupCase(fd) })
	r.FS = fsName(magic)
	r.ShortNames = fsKinds[magic].short
	return r, nil
}

func fsName(magic uint32) string {
	if k, ok := fsKinds[magic]; ok {
		return k.name
	}
	return fmt.Sprintf("%#x", magic)
}

// classifyCase is DetectCase's decision from what it read: the statfs
// magic, the inode flags (flagsOK: FS_IOC_GETFLAGS answered) and, when
// needed, a lookup.
func classifyCase(magic, flags uint32, flagsOK bool, lookup func() (Casing, string)) (Casing, string) {
	k, known := fsKinds[magic]
	name := fsName(magic)
	switch {
	case flagsOK && flags&fsCasefoldFL != 0:
		return CaseInsensitive, "the directory has the casefold attribute (FS_CASEFOLD_FL, chattr +F) on " + name
	case k.always:
		return CaseInsensitive, name + " looks every name up without regard to case"
	case k.flagged && flagsOK:
		return CaseSensitive, name + " folds case only in directories with the casefold attribute, and this one has none"
	}
	if c, why := lookup(); c != CaseUnknown {
		return c, why + " (on " + name + ")"
	}
	why := "no name in the directory to look up in another case"
	switch {
	case k.flagged:
		why += ", and its attributes could not be read"
	case known:
		why += ", and " + name + " may fold case without saying so"
	default:
		why += ", on a filesystem of unknown kind"
	}
	return CaseUnknown, why
}

// swapCase swaps the case of the ASCII letters of s.
func swapCase(s string) string {
	b := []byte(s)
	for i, c := range b {
		switch {
		case 'a' <= c && c <= 'z':
			b[i] = c - ('a' - 'A')
		case 'A' <= c && c <= 'Z':
			b[i] = c + ('a' - 'A')
		}
	}
	return string(b)
}

// isASCIICaseVariant reports whether a and b differ, and only in the case
// of ASCII letters.
func isASCIICaseVariant(a, b string) bool {
	if a == b || len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if x != y && (x|0x20 != y|0x20 || x|0x20 < 'a' || x|0x20 > 'z') {
			return false
		}
	}
	return true
}

// maxCaseLookups bounds the names lookupCase tries.
const maxCaseLookups = 16

// lookupCase looks names of the directory at fd up with their ASCII case
// swapped: the first conclusive answer is returned, with its evidence.
func lookupCase(fd int) (Casing, string) {
	// A descriptor of its own: reading entries moves the offset.
	rfd, err := unix.Openat(fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return CaseUnknown, ""
	}
	defer unix.Close(rfd)
	ents, err := dirent.Read(rfd, make([]byte, 32<<10))
	if err != nil {
		return CaseUnknown, ""
	}
	// Two names that differ only in ASCII case prove it without a lookup.
	lower := make(map[string]string, len(ents))
	for _, e := range ents {
		l := strings.ToLower(e.Name)
		if o, dup := lower[l]; dup && isASCIICaseVariant(o, e.Name) {
			return CaseSensitive, fmt.Sprintf("both %q and %q are names in the directory", o, e.Name)
		}
		lower[l] = e.Name
	}
	tried := 0
	for _, e := range ents {
		other := swapCase(e.Name)
		if other == e.Name {
			continue
		}
		if tried++; tried > maxCaseLookups {
			break
		}
		var a, b unix.Stat_t
		if err := unix.Fstatat(fd, e.Name, &a, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			continue // gone meanwhile
		}
		err := unix.Fstatat(fd, other, &b, unix.AT_SYMLINK_NOFOLLOW)
		switch {
		case errors.Is(err, unix.ENOENT):
			return CaseSensitive, fmt.Sprintf("%q is a name in the directory and %q is not", e.Name, other)
		case err != nil:
			continue
		case a.Dev == b.Dev && a.Ino == b.Ino:
			return CaseInsensitive, fmt.Sprintf("looking %q up finds %q", other, e.Name)
		default:
			return CaseSensitive, fmt.Sprintf("%q and %q are different files", e.Name, other)
		}
	}
	return CaseUnknown, ""
}
