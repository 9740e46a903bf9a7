package dirent

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestRead lists a directory of many entries of each kind through a buffer
// small enough to need several getdents calls, and compares it with the
// standard library's listing.
func TestRead(t *testing.T) {
	dir := t.TempDir()
	var want []string
	for i := range 300 {
		name := strings.Repeat("n", i%40+1) + "-" + string(rune('a'+i%26)) + "." + itoa(i)
		switch i % 3 {
		case 0:
			if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		case 1:
			if err := os.Mkdir(filepath.Join(dir, name), 0o755); err != nil {
				t.Fatal(err)
			}
		case 2:
			if err := os.Symlink("nowhere", filepath.Join(dir, name)); err != nil {
				t.Fatal(err)
			}
		}
		want = append(want, name)
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	ents, err := Read(fd, make([]byte, 1024))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range ents {
		got = append(got, e.Name)
		fi, err := os.Lstat(filepath.Join(dir, e.Name))
		if err != nil {
			t.Fatal(err)
		}
		want := map[bool]uint8{true: unix.DT_DIR}[fi.IsDir()]
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			want = unix.DT_LNK
		case fi.Mode().IsRegular():
			want = unix.DT_REG
		}
		if e.Type != unix.DT_UNKNOWN && e.Type != want {
			t.Errorf("%s: type %d, want %d", e.Name, e.Type, want)
		}
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("read %d names, want %d", len(got), len(want))
	}
}

// TestEach sees what Read returns, in the same order, through a buffer
// that needs several getdents calls, each name only while it is read.
func TestEach(t *testing.T) {
	dir := t.TempDir()
	for i := range 200 {
		if err := os.WriteFile(filepath.Join(dir, strings.Repeat("e", i%30+1)+itoa(i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	list := func(f func(fd int) []Entry) []Entry {
		fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(fd)
		return f(fd)
	}
	want := list(func(fd int) []Entry {
		ents, err := Read(fd, make([]byte, 512))
		if err != nil {
			t.Fatal(err)
		}
		return ents
	})
	got := list(func(fd int) []Entry {
		var ents []Entry
		if err := Each(fd, make([]byte, 512), func(name []byte, typ uint8) {
			ents = append(ents, Entry{Name: string(name), Type: typ})
		}); err != nil {
			t.Fatal(err)
		}
		return ents
	})
	if len(want) != 200 || !slices.Equal(got, want) {
		t.Fatalf("Each saw %d entries, Read %d, or not the same", len(got), len(want))
	}
	if err := Each(-1, make([]byte, 512), func([]byte, uint8) { t.Fatal("an entry of no directory") }); !errors.Is(err, unix.EBADF) {
		t.Fatalf("a bad descriptor: %v", err)
	}
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var b []byte
	for ; i > 0; i /= 10 {
		b = append([]byte{byte('0' + i%10)}, b...)
	}
	return string(b)
}
