package spawn

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestSystemReadPaths: what the harness grants its hooks of /etc covers
// every entry of /etc that every user may read, and nothing that a run
// child's view masks (/etc/shadow and the like), judged by the modes on
// disk, not by the scan the function uses.
func TestSystemReadPaths(t *testing.T) {
	paths, err := SystemReadPaths()
	if err != nil {
		t.Fatal(err)
	}
	covered := func(p string) bool {
		return slices.ContainsFunc(paths, func(g string) bool { return p == g || strings.HasPrefix(p, g+"/") })
	}
	for _, p := range paths {
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			t.Errorf("%s is a symbolic link: its grant would land on whatever it points to", p)
		}
	}
	for _, d := range []string{"/usr", "/bin", "/lib"} {
		if fi, err := os.Lstat(d); err == nil && fi.IsDir() && !slices.Contains(paths, d) {
			t.Errorf("%s is a directory here but not granted", d)
		}
	}
	var readable, hidden int
	err = filepath.WalkDir("/etc", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // unreadable to the test: the scan hides it
		}
		fi, err := d.Info()
		if err != nil || d.Type()&fs.ModeSymlink != 0 {
			return nil
		}
		// Readable by everyone: the entry and every directory above it.
		open := true
		for q := p; q != "/"; q = filepath.Dir(q) {
			qi, err := os.Lstat(q)
			if err != nil {
				return nil
			}
			need := fs.FileMode(0o004)
			if qi.IsDir() {
				need = 0o005
			}
			if qi.Mode().Perm()&need != need {
				open = false
				break
			}
		}
		switch {
		case open && !fi.IsDir() && !covered(p):
			// (A directory that holds a hidden entry is not granted as a
			// whole, so it cannot be listed; its open entries are.)
			t.Errorf("%s (mode %v) is readable by every user but not granted", p, fi.Mode())
		case !open && covered(p):
			t.Errorf("%s (mode %v) is not readable by every user, yet granted", p, fi.Mode())
		case open:
			readable++
		default:
			hidden++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if readable == 0 {
		t.Fatal("no entry of /etc was found readable: the walk proves nothing")
	}
	if _, err := os.Stat("/etc/shadow"); err == nil && covered("/etc/shadow") {
		t.Error("/etc/shadow is granted")
	}
	t.Logf("%d grants; /etc: %d entries readable by all, %d hidden", len(paths), readable, hidden)
}
