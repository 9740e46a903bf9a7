package helper

import (
	"os"
	"path/filepath"
	"reflect"
	"syscall"
	"testing"
)

// maskFilesAt makes n fresh empty files as makeMasks makes its masks'
// (0444, times at the epoch), each standing for the mount at the same
// index, and keeps a descriptor of each.
func maskFilesAt(t *testing.T, n int) (*maskFiles, []string) {
	t.Helper()
	w := &maskFiles{}
	t.Cleanup(w.close)
	var paths []string
	for range n {
		p := filepath.Join(t.TempDir(), "mask")
		if err := os.WriteFile(p, nil, 0o444); err != nil {
			t.Fatal(err)
		}
		if err := syscall.UtimesNano(p, []syscall.Timespec{{}, {}}); err != nil {
			t.Fatal(err)
		}
		fd, err := syscall.Open(p, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		w.fds = append(w.fds, fd)
		paths = append(paths, p)
	}
	return w, paths
}

// TestMaskFilesRead: the files read are told once each, in the mounts'
// order, whatever order and however often they were read (100,000 reads
// of one make a message of one index); an open without a read, an O_PATH
// open, a stat and a refused open tell nothing; the message decodes to
// what was read.
func TestMaskFilesRead(t *testing.T) {
	w, paths := maskFilesAt(t, 5)
	read := func(p string) {
		fd, err := syscall.Open(p, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		var b [1]byte
		if n, err := syscall.Read(fd, b[:]); n != 0 || err != nil {
			t.Fatalf("read %s: %d, %v; want the end of an empty file", p, n, err)
		}
		syscall.Close(fd)
	}
	open := func(p string, flags int) error {
		fd, err := syscall.Open(p, flags|syscall.O_CLOEXEC, 0)
		if err == nil {
			syscall.Close(fd)
		}
		return err
	}
	for range 100000 {
		read(paths[2])
	}
	read(paths[0])
	if err := open(paths[1], oPath); err != nil {
		t.Fatal(err)
	}
	if err := open(paths[4], syscall.O_RDONLY); err != nil {
		t.Fatal(err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(paths[3], &st); err != nil {
		t.Fatal(err)
	}
	if err := open(paths[3], syscall.O_RDONLY|syscall.O_DIRECTORY); err != syscall.ENOTDIR {
		t.Fatalf("a refused open: %v, want ENOTDIR", err)
	}
	var e Encoder
	w.encode(&e)
	if len(e.B) != 1+4+2*4 {
		t.Errorf("the message is %d bytes, want %d (two indexes)", len(e.B), 1+4+2*4)
	}
	d := Decoder{B: e.B}
	if tag := d.U8(); tag != StatusMasked {
		t.Fatalf("tag %q, want %q", tag, StatusMasked)
	}
	idx := DecodeMasked(&d)
	if err := d.End(); err != nil || !reflect.DeepEqual(idx, []int{0, 2}) {
		t.Errorf("decoded %v (%v), want [0 2]", idx, err)
	}
}

// TestMaskFilesNothing: a plan that masks no file tells an empty list
// (the reads are known: there are none), and a file that cannot be
// examined makes the init tell nothing at all.
func TestMaskFilesNothing(t *testing.T) {
	var e Encoder
	(&maskFiles{fds: []int{-1, -1}}).encode(&e)
	if string(e.B) != string([]byte{StatusMasked, 0, 0, 0, 0}) {
		t.Errorf("no mask: %v", e.B)
	}
	e = Encoder{}
	(&maskFiles{fds: []int{1 << 20}}).encode(&e) // not a descriptor: fstat fails
	if len(e.B) != 0 {
		t.Errorf("a mask that could not be examined told %v", e.B)
	}
}

// FuzzDecodeMasked: a malformed StatusMasked message is an error, never a
// panic, and never more indexes than its bytes hold.
func FuzzDecodeMasked(f *testing.F) {
	var e Encoder
	(&maskFiles{}).encode(&e)
	f.Add(e.B[1:])
	f.Add([]byte{2, 0, 0, 0, 7, 0, 0, 0, 9, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		d := Decoder{B: b}
		idx := DecodeMasked(&d)
		if len(idx)*4 > len(b) {
			t.Errorf("%d indexes from %d bytes", len(idx), len(b))
		}
	})
}
