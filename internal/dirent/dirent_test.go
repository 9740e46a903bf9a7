package dirent

import (
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
