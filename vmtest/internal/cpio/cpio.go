// Package cpio writes archives in the "newc" format (SVR4 portable ASCII
// without checksums), the format the Linux kernel unpacks as an initramfs.
//
// Only what an initramfs needs is supported: directories, regular files,
// symbolic links and device nodes, each entry named once, every parent
// directory written before what it contains. Hard links are not written
// (every entry has its own inode number). The reader in this package exists
// to check archives; it accepts exactly the newc subset the writer produces.
package cpio

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"path"
	"strconv"
	"strings"
	"time"
)

const (
	magic    = "070701"
	hdrLen   = 110
	trailer  = "TRAILER!!!"
	maxField = math.MaxUint32
)

// Unix file type and permission bits as the newc mode field stores them.
const (
	modeDir     = 0o040000
	modeReg     = 0o100000
	modeSymlink = 0o120000
	modeChar    = 0o020000
	modeBlock   = 0o060000
	modeFIFO    = 0o010000
	modeType    = 0o170000
	modeSetuid  = 0o4000
	modeSetgid  = 0o2000
	modeSticky  = 0o1000
)

// Header describes one entry. The zero value is not a valid entry: Name and
// a Mode type (fs.ModeDir, 0 for a regular file, fs.ModeSymlink,
// fs.ModeDevice, fs.ModeDevice|fs.ModeCharDevice, fs.ModeNamedPipe) are needed.
type Header struct {
	Name     string      // slash-separated, relative ("bin/sh"), clean, no ".." element
	Mode     fs.FileMode // type and permission bits (setuid, setgid and sticky kept)
	UID, GID int
	ModTime  time.Time // zero means the Unix epoch
	Size     int64     // regular files: the number of bytes the body supplies
	Linkname string    // symbolic links: the target, stored as the entry's data
	Major    uint32    // device nodes: the device's major number
	Minor    uint32    // device nodes: the device's minor number
}

// Writer writes a newc archive. Entries must come parents first. A Writer is
// not safe for concurrent use; after the first error every call returns it.
type Writer struct {
	w      *bufio.Writer
	ino    uint32
	seen   map[string]fs.FileMode
	err    error
	closed bool
}

// NewWriter returns a Writer that writes to w. Call Close to write the
// trailer; the archive is incomplete without it.
func NewWriter(w io.Writer) *Writer {
	return &Writer{w: bufio.NewWriterSize(w, 1<<20), seen: map[string]fs.FileMode{}}
}

// Written reports whether name was written, and its mode.
func (w *Writer) Written(name string) (fs.FileMode, bool) {
	m, ok := w.seen[name]
	return m, ok
}

// Add writes one entry. For a regular file, body must supply exactly h.Size
// bytes (it is read to its end to check); for other types body is ignored and
// may be nil. It fails on an invalid or duplicate name, a name whose parent
// directory was not written first, a size over 4 GiB, or a write error.
func (w *Writer) Add(h Header, body io.Reader) error {
	if w.err != nil {
		return w.err
	}
	if w.closed {
		return errors.New("cpio: Add after Close")
	}
	if err := w.add(h, body); err != nil {
		w.err = err
		return err
	}
	return nil
}

func (w *Writer) add(h Header, body io.Reader) error {
	if err := checkName(h.Name); err != nil {
		return err
	}
	if _, dup := w.seen[h.Name]; dup {
		return fmt.Errorf("cpio: %q written twice", h.Name)
	}
	if dir := path.Dir(h.Name); dir != "." {
		if m, ok := w.seen[dir]; !ok || !m.IsDir() {
			return fmt.Errorf("cpio: %q: parent directory %q not written before it", h.Name, dir)
		}
	}
	mode, err := unixMode(h.Mode)
	if err != nil {
		return fmt.Errorf("cpio: %q: %w", h.Name, err)
	}
	var data io.Reader
	var size int64
	nlink := uint32(1)
	switch mode & modeType {
	case modeReg:
		if h.Size < 0 || h.Size > maxField {
			return fmt.Errorf("cpio: %q: size %d out of range", h.Name, h.Size)
		}
		if body == nil && h.Size > 0 {
			return fmt.Errorf("cpio: %q: no body for %d bytes", h.Name, h.Size)
		}
		data, size = body, h.Size
	case modeSymlink:
		if h.Linkname == "" || strings.IndexByte(h.Linkname, 0) >= 0 {
			return fmt.Errorf("cpio: %q: symlink target %q is empty or has a NUL byte", h.Name, h.Linkname)
		}
		data, size = strings.NewReader(h.Linkname), int64(len(h.Linkname))
	case modeDir:
		nlink = 2
	}
	if h.UID < 0 || h.GID < 0 || int64(h.UID) > maxField || int64(h.GID) > maxField {
		return fmt.Errorf("cpio: %q: uid %d or gid %d out of range", h.Name, h.UID, h.GID)
	}
	var mtime int64
	if !h.ModTime.IsZero() {
		mtime = h.ModTime.Unix()
	}
	if mtime < 0 || mtime > maxField {
		return fmt.Errorf("cpio: %q: modification time %v out of range", h.Name, h.ModTime)
	}
	w.ino++
	var rmaj, rmin uint32
	if t := mode & modeType; t == modeChar || t == modeBlock {
		rmaj, rmin = h.Major, h.Minor
	}
	if err := w.header(h.Name, w.ino, mode, uint32(h.UID), uint32(h.GID), nlink, uint32(mtime), uint32(size), rmaj, rmin); err != nil {
		return err
	}
	if size > 0 {
		n, err := io.Copy(w.w, io.LimitReader(data, size))
		if err != nil {
			return fmt.Errorf("cpio: %q: %w", h.Name, err)
		}
		if n != size {
			return fmt.Errorf("cpio: %q: body has %d bytes, header says %d", h.Name, n, size)
		}
		if extra, _ := io.CopyN(io.Discard, data, 1); extra != 0 {
			return fmt.Errorf("cpio: %q: body longer than the %d bytes the header says", h.Name, size)
		}
	}
	if err := w.pad(size); err != nil {
		return err
	}
	w.seen[h.Name] = h.Mode
	return nil
}

func (w *Writer) header(name string, ino, mode, uid, gid, nlink, mtime, size, rmaj, rmin uint32) error {
	namesize := uint32(len(name) + 1)
	_, err := fmt.Fprintf(w.w, "%s%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%s\x00",
		magic, ino, mode, uid, gid, nlink, mtime, size, 0, 0, rmaj, rmin, namesize, 0, name)
	if err != nil {
		return fmt.Errorf("cpio: header of %q: %w", name, err)
	}
	return w.pad(int64(hdrLen) + int64(namesize))
}

// pad writes zero bytes so that n written bytes end on a 4-byte boundary.
func (w *Writer) pad(n int64) error {
	if p := (4 - n%4) % 4; p > 0 {
		if _, err := w.w.Write(make([]byte, p)); err != nil {
			return fmt.Errorf("cpio: padding: %w", err)
		}
	}
	return nil
}

// Close writes the trailer entry and flushes. It does not close the
// underlying writer. Closing twice is an error.
func (w *Writer) Close() error {
	if w.err != nil {
		return w.err
	}
	if w.closed {
		return errors.New("cpio: Close called twice")
	}
	w.closed = true
	if err := w.header(trailer, 0, 0, 0, 0, 1, 0, 0, 0, 0); err != nil {
		w.err = err
		return err
	}
	if err := w.w.Flush(); err != nil {
		w.err = fmt.Errorf("cpio: flush: %w", err)
		return w.err
	}
	return nil
}

func checkName(name string) error {
	switch {
	case name == "" || name == ".":
		return fmt.Errorf("cpio: empty entry name %q", name)
	case strings.IndexByte(name, 0) >= 0:
		return fmt.Errorf("cpio: entry name %q has a NUL byte", name)
	case strings.HasPrefix(name, "/"):
		return fmt.Errorf("cpio: entry name %q is absolute; names are relative to the archive root", name)
	case path.Clean(name) != name:
		return fmt.Errorf("cpio: entry name %q is not clean (want %q)", name, path.Clean(name))
	case name == ".." || strings.HasPrefix(name, "../"):
		return fmt.Errorf("cpio: entry name %q leaves the archive root", name)
	case name == trailer:
		return fmt.Errorf("cpio: entry name %q is reserved for the trailer", name)
	}
	return nil
}

func unixMode(m fs.FileMode) (uint32, error) {
	bits := uint32(m.Perm())
	if m&fs.ModeSetuid != 0 {
		bits |= modeSetuid
	}
	if m&fs.ModeSetgid != 0 {
		bits |= modeSetgid
	}
	if m&fs.ModeSticky != 0 {
		bits |= modeSticky
	}
	switch t := m.Type(); t {
	case 0:
		return bits | modeReg, nil
	case fs.ModeDir:
		return bits | modeDir, nil
	case fs.ModeSymlink:
		return bits | modeSymlink, nil
	case fs.ModeDevice | fs.ModeCharDevice:
		return bits | modeChar, nil
	case fs.ModeDevice:
		return bits | modeBlock, nil
	case fs.ModeNamedPipe:
		return bits | modeFIFO, nil
	default:
		return 0, fmt.Errorf("file type %v cannot be archived", t)
	}
}

func fileMode(u uint32) (fs.FileMode, error) {
	m := fs.FileMode(u & 0o777)
	if u&modeSetuid != 0 {
		m |= fs.ModeSetuid
	}
	if u&modeSetgid != 0 {
		m |= fs.ModeSetgid
	}
	if u&modeSticky != 0 {
		m |= fs.ModeSticky
	}
	switch u & modeType {
	case modeReg:
	case modeDir:
		m |= fs.ModeDir
	case modeSymlink:
		m |= fs.ModeSymlink
	case modeChar:
		m |= fs.ModeDevice | fs.ModeCharDevice
	case modeBlock:
		m |= fs.ModeDevice
	case modeFIFO:
		m |= fs.ModeNamedPipe
	default:
		return 0, fmt.Errorf("unknown file type in mode %#o", u)
	}
	return m, nil
}

// Entry is one entry read back by Reader: its header and, for regular files,
// its contents.
type Entry struct {
	Header
	Ino   uint32
	NLink uint32
	Data  []byte
}

// ReadAll parses a whole newc archive up to and including its trailer. It is
// meant for checking archives in tests and tools, so it reads file bodies
// into memory. It fails on a bad magic, a malformed field, a short archive or
// a missing trailer.
func ReadAll(r io.Reader) ([]Entry, error) {
	br := bufio.NewReader(r)
	var out []Entry
	var off int64
	for {
		var hdr [hdrLen]byte
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			return nil, fmt.Errorf("cpio: header at offset %d: %w", off, err)
		}
		if string(hdr[:6]) != magic {
			return nil, fmt.Errorf("cpio: bad magic %q at offset %d", hdr[:6], off)
		}
		var f [13]uint32
		for i := range f {
			v, err := strconv.ParseUint(string(hdr[6+8*i:14+8*i]), 16, 32)
			if err != nil {
				return nil, fmt.Errorf("cpio: header field %d at offset %d: %w", i, off, err)
			}
			f[i] = uint32(v)
		}
		ino, mode, uid, gid, nlink, mtime, size, rmaj, rmin, namesize := f[0], f[1], f[2], f[3], f[4], f[5], f[6], f[9], f[10], f[11]
		if namesize == 0 || namesize > 4096 {
			return nil, fmt.Errorf("cpio: name size %d at offset %d", namesize, off)
		}
		nameBuf := make([]byte, namesize+uint32(pad4(int64(hdrLen)+int64(namesize))))
		if _, err := io.ReadFull(br, nameBuf); err != nil {
			return nil, fmt.Errorf("cpio: name at offset %d: %w", off, err)
		}
		if nameBuf[namesize-1] != 0 {
			return nil, fmt.Errorf("cpio: name at offset %d is not NUL-terminated", off)
		}
		name := string(nameBuf[:namesize-1])
		off += int64(hdrLen) + int64(len(nameBuf))
		if name == trailer {
			return out, nil
		}
		data := make([]byte, int64(size)+pad4(int64(size)))
		if _, err := io.ReadFull(br, data); err != nil {
			return nil, fmt.Errorf("cpio: data of %q: %w", name, err)
		}
		off += int64(len(data))
		fm, err := fileMode(mode)
		if err != nil {
			return nil, fmt.Errorf("cpio: %q: %w", name, err)
		}
		e := Entry{Header: Header{Name: name, Mode: fm, UID: int(uid), GID: int(gid), ModTime: time.Unix(int64(mtime), 0), Major: rmaj, Minor: rmin}, Ino: ino, NLink: nlink}
		switch {
		case fm.Type() == fs.ModeSymlink:
			e.Linkname = string(data[:size])
		case fm.IsRegular():
			e.Size = int64(size)
			e.Data = data[:size]
		}
		out = append(out, e)
	}
}

func pad4(n int64) int64 { return (4 - n%4) % 4 }
