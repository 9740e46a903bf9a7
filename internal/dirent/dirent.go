// Package dirent reads directory entries with getdents64 from an open
// directory descriptor: no os.File, no poller registration, no lstat per
// name. The tools' walks and the spawn view's scan of /etc share it.
package dirent

import (
	"encoding/binary"
	"errors"
	"slices"

	"golang.org/x/sys/unix"
)

// Entry is one name read from a directory, with the type the kernel
// reported (unix.DT_UNKNOWN on file systems that do not say).
type Entry struct {
	Name string
	Type uint8
}

// ErrMalformed is returned for a getdents record that does not parse.
var ErrMalformed = errors.New("getdents: malformed record")

// Read reads every entry but "." and ".." of the directory open (not
// O_PATH) at fd, in the order the kernel returns them, using buf as the
// read buffer. It retries on EINTR; any other error is returned as is.
func Read(fd int, buf []byte) ([]Entry, error) {
	var out []Entry
	err := Each(fd, buf, func(name []byte, typ uint8) {
		out = append(out, Entry{Name: string(name), Type: typ})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Each calls fn for every entry but "." and ".." of the directory open
// (not O_PATH) at fd, in the order the kernel returns them, reading
// through buf. name is the entry's name without its terminating NUL, a
// slice of buf valid only until fn returns; typ is the type the kernel
// reported (unix.DT_UNKNOWN on file systems that do not say). Unlike Read
// it copies no name: a caller keeps only the names it needs (the spawn
// view's scan of /etc skips its many links without a copy of theirs). It
// retries on EINTR; any other error, or a record that does not parse
// (ErrMalformed), is returned as is, after fn has seen the entries read
// before it.
func Each(fd int, buf []byte, fn func(name []byte, typ uint8)) error {
	for {
		n, err := unix.Getdents(fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		if n <= 0 {
			return nil
		}
		// struct linux_dirent64 { u64 ino; s64 off; u16 reclen; u8 type; char name[]; }
		for off := 0; off < n; {
			if off+19 > n {
				return ErrMalformed
			}
			reclen := int(binary.NativeEndian.Uint16(buf[off+16:]))
			if reclen < 19 || off+reclen > n {
				return ErrMalformed
			}
			name := buf[off+19 : off+reclen]
			if i := slices.Index(name, 0); i >= 0 {
				name = name[:i]
			}
			typ := buf[off+18]
			off += reclen
			if !isDots(name) {
				fn(name, typ)
			}
		}
	}
}

// isDots reports whether name is "." or "..".
func isDots(name []byte) bool {
	return len(name) == 1 && name[0] == '.' || len(name) == 2 && name[0] == '.' && name[1] == '.'
}

// Type returns e's type, asking the file system (fstatat, without
// following a link) when the kernel reported unix.DT_UNKNOWN; it is
// unix.DT_UNKNOWN when that fails. e was read from the directory open at
// dirfd.
func Type(dirfd int, e Entry) uint8 {
	if e.Type != unix.DT_UNKNOWN {
		return e.Type
	}
	var st unix.Stat_t
	if err := unix.Fstatat(dirfd, e.Name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return unix.DT_UNKNOWN
	}
	return ModeType(st.Mode)
}

// ModeType maps st_mode's file type to a d_type value.
func ModeType(mode uint32) uint8 {
	switch mode & unix.S_IFMT {
	case unix.S_IFREG:
		return unix.DT_REG
	case unix.S_IFDIR:
		return unix.DT_DIR
	case unix.S_IFLNK:
		return unix.DT_LNK
	case unix.S_IFIFO:
		return unix.DT_FIFO
	case unix.S_IFSOCK:
		return unix.DT_SOCK
	case unix.S_IFCHR:
		return unix.DT_CHR
	case unix.S_IFBLK:
		return unix.DT_BLK
	}
	return unix.DT_UNKNOWN
}
