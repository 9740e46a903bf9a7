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
	for {
		n, err := unix.Getdents(fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, err
		}
		if n <= 0 {
			return out, nil
		}
		// struct linux_dirent64 { u64 ino; s64 off; u16 reclen; u8 type; char name[]; }
		for off := 0; off < n; {
			if off+19 > n {
				return nil, ErrMalformed
			}
			reclen := int(binary.NativeEndian.Uint16(buf[off+16:]))
			if reclen < 19 || off+reclen > n {
				return nil, ErrMalformed
			}
			name := buf[off+19 : off+reclen]
			if i := slices.Index(name, 0); i >= 0 {
				name = name[:i]
			}
			typ := buf[off+18]
			off += reclen
			if s := string(name); s != "." && s != ".." {
				out = append(out, Entry{Name: s, Type: typ})
			}
		}
	}
}
