package helper

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// pinOf is what the harness records for p at start.
func pinOf(t *testing.T, p string) Mount {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(p, &st); err != nil {
		t.Fatal(err)
	}
	return Mount{Kind: Bind, Src: p, Dst: p, File: st.Mode&syscall.S_IFMT != syscall.S_IFDIR, Pinned: true, PinDev: uint64(st.Dev), PinIno: uint64(st.Ino)}
}

// TestOpenPinned: the identity check accepts the pinned file and refuses
// a directory renamed away and replaced, a symbolic link put in its place
// (also in a parent component), and a file of the other kind. No mount is
// made, so it needs no privilege.
func TestOpenPinned(t *testing.T) {
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	a := filepath.Join(base, "a")
	out := filepath.Join(a, "out")
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(base, "f")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	m, fm := pinOf(t, out), pinOf(t, file)
	for _, mm := range []Mount{m, fm} {
		fd, err := openPinned(mm)
		if err != nil {
			t.Fatalf("%s, unchanged: %v", mm.Src, err)
		}
		sysClose(fd)
	}

	kind := m
	kind.File = true
	if _, err := openPinned(kind); err == nil || !strings.Contains(err.Error(), "is now a directory") {
		t.Errorf("a directory pinned as a file: %v", err)
	}

	// The attack of issue 19: the parent renamed away, a new one made, the
	// pinned name a link out.
	if err := os.Rename(a, a+".old"); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(a, 0o755); err != nil {
		t.Fatal(err)
	}
	outside := t.TempDir()
	if err := os.Symlink(outside, out); err != nil {
		t.Fatal(err)
	}
	if _, err := openPinned(m); !errors.Is(err, syscall.ELOOP) || !strings.Contains(err.Error(), out) {
		t.Errorf("pinned path now a link: %v", err)
	}
	// The same with a real directory in its place.
	if err := os.Remove(out); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(out, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := openPinned(m); err == nil || !strings.Contains(err.Error(), out+" is no longer the directory pinned at start") {
		t.Errorf("pinned path replaced by another directory: %v", err)
	}
	// A link in a parent component, pointing at the original.
	if err := os.RemoveAll(a); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("a.old", a); err != nil {
		t.Fatal(err)
	}
	if _, err := openPinned(m); !errors.Is(err, syscall.ELOOP) {
		t.Errorf("a parent of the pinned path now a link (to the pinned directory's parent): %v", err)
	}
	// Gone.
	if err := os.Remove(a); err != nil {
		t.Fatal(err)
	}
	if _, err := openPinned(m); !errors.Is(err, syscall.ENOENT) || !strings.Contains(err.Error(), "moved or removed") {
		t.Errorf("pinned path gone: %v", err)
	}
	// A file replaced by rename (as an editor or an atomic write does).
	if err := os.WriteFile(file+".new", []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(file+".new", file); err != nil {
		t.Fatal(err)
	}
	if _, err := openPinned(fm); err == nil || !strings.Contains(err.Error(), "is no longer the file pinned") {
		t.Errorf("pinned file replaced: %v", err)
	}
}
