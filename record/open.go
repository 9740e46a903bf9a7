package record

import (
	"bytes"
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// NotRegularError is Open's error for a path that is not a regular file.
type NotRegularError struct {
	Path string
	Kind string // "a FIFO", "a character device", ...
}

func (e *NotRegularError) Error() string {
	return fmt.Sprintf("%s: not a regular file (%s); the record must be a regular file", e.Path, e.Kind)
}

// Open opens (creating it when missing, mode 0600) the record file at path
// for appending. It refuses anything but a regular file with a
// *NotRegularError: a FIFO would block the harness at start or at its first
// line, a device would swallow the record. A FIFO without a reader cannot
// block Open (it opens without waiting, then checks).
//
// When the file ends in a torn line (a write cut short: a full disk), Open
// appends a newline so that the caller's lines start fresh, and returns the
// torn line's length (0: none). It never truncates: another process may be
// appending to the same file.
func Open(path string) (f *os.File, torn int64, err error) {
	f, err = os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND|syscall.O_NONBLOCK, 0o600)
	if err != nil {
		return nil, 0, err
	}
	defer func() {
		if err != nil {
			f.Close()
			f = nil
		}
	}()
	fi, err := f.Stat()
	if err != nil {
		return nil, 0, err
	}
	if !fi.Mode().IsRegular() {
		return nil, 0, &NotRegularError{Path: path, Kind: fileKind(fi.Mode())}
	}
	if err := unix.SetNonblock(int(f.Fd()), false); err != nil {
		return nil, 0, fmt.Errorf("%s: %w", path, err)
	}
	torn, err = tornTail(f, fi.Size())
	if err != nil {
		return nil, 0, fmt.Errorf("%s: reading its end: %w", path, err)
	}
	if torn > 0 {
		if _, err := f.Write([]byte("\n")); err != nil {
			return nil, 0, fmt.Errorf("%s ends in a torn line of %d bytes and a newline could not be added after it: %w", path, torn, err)
		}
	}
	return f, torn, nil
}

// tornTail returns the number of bytes after the last newline of the first
// size bytes of f.
func tornTail(f *os.File, size int64) (int64, error) {
	buf := make([]byte, 64<<10)
	for off := size; off > 0; {
		n := min(int64(len(buf)), off)
		off -= n
		if _, err := f.ReadAt(buf[:n], off); err != nil {
			return 0, err
		}
		if i := bytes.LastIndexByte(buf[:n], '\n'); i >= 0 {
			return size - (off + int64(i) + 1), nil
		}
	}
	return size, nil
}

func fileKind(m os.FileMode) string {
	switch {
	case m&os.ModeNamedPipe != 0:
		return "a FIFO"
	case m&os.ModeCharDevice != 0:
		return "a character device"
	case m&os.ModeDevice != 0:
		return "a block device"
	case m&os.ModeSocket != 0:
		return "a socket"
	case m.IsDir():
		return "a directory"
	}
	return "mode " + m.String()
}
