package workspace

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// FuzzResolve: for any input, Resolve and ResolveForWrite either refuse
// with a known kind, or return a canonical path that the kernel confirms
// is inside the root: opening it from the root descriptor with
// RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS|RESOLVE_NO_MAGICLINKS succeeds,
// /proc/self/fd names a place beneath the root, and the inode is the one
// the host path names. And wherever the kernel itself resolves the input
// beneath the root (openat2 RESOLVE_BENEATH), Resolve finds the same file.
func FuzzResolve(f *testing.F) {
	fx := newFixture(f)
	// The attack corpus, with the fixture's absolute paths.
	for _, tc := range readCases(fx) {
		f.Add(tc.path)
	}
	for _, s := range []string{"dangling_out", "dangling_in", "dirout/x", "newdir/../x", "x/", "in/..", "dirin/../..", "loop1/x",
		"procroot", "/proc/self/fd/3", "sub/up/..", fx.root + "/../data/file.txt", fx.base, "//", "/", "./././.", "%2e%2e/%2e%2e",
		"caf\u00e9/../cafe\u0301", strings.Repeat("../", 20), "sub/upout/x",
		// Quoted spellings (names in results): whole path, per component,
		// quoted dot-dots and slashes.
		`"sub/inner.txt"`, `sub/"inner.txt"`, `".."/x`, `"../secret.txt"`, `sub/"..\x2f.."`, `"\x2e\x2e"/"\x2e\x2e"`, `"dirout"/secret2.txt`, `"sub/"`, `"`, `""`} {
		f.Add(s)
	}
	ws := fx.ws
	rootAbs := ws.Dir()
	f.Fuzz(func(t *testing.T, p string) {
		for _, write := range []bool{false, true} {
			var rel string
			var err error
			if write {
				rel, err = ws.ResolveForWrite(p)
			} else {
				rel, err = ws.Resolve(p)
			}
			if err != nil {
				var e *Error
				if !errors.As(err, &e) {
					t.Fatalf("%q: error is not *Error: %v", p, err)
				}
				switch e.Kind {
				case Invalid, Denied, Failed:
				default:
					t.Fatalf("%q: kind %q", p, e.Kind)
				}
				if e.Public == "" {
					t.Fatalf("%q: empty public message", p)
				}
				if !write {
					kernelAgrees(t, ws, p, "")
				}
				continue
			}
			if rel == "" || strings.HasPrefix(rel, "/") || rel != "." && (strings.Contains("/"+rel+"/", "/../") || strings.Contains("/"+rel+"/", "/./") || strings.Contains(rel, "//")) {
				t.Fatalf("%q: not canonical: %q", p, rel)
			}
			if write {
				checkWritePath(t, ws, p, rel)
				continue
			}
			checkInside(t, ws, rootAbs, p, rel)
			kernelAgrees(t, ws, p, rel)
		}
	})
}

// checkInside confirms with the kernel that rel is beneath the root.
func checkInside(t *testing.T, ws *Workspace, rootAbs, p, rel string) {
	t.Helper()
	err := ws.WithRoot(func(root int) error {
		fd, err := openat2(root, rel, unix.O_PATH, 0, beneath)
		if err != nil {
			t.Fatalf("%q resolved to %q, which the kernel will not open beneath the root: %v", p, rel, err)
		}
		defer unix.Close(fd)
		where, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
		if err != nil {
			t.Fatal(err)
		}
		if where != rootAbs && !strings.HasPrefix(where, rootAbs+"/") {
			t.Fatalf("%q resolved to %q, which is %q: outside the root", p, rel, where)
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			t.Fatal(err)
		}
		var host unix.Stat_t
		if err := unix.Lstat(filepath.Join(rootAbs, rel), &host); err != nil {
			t.Fatal(err)
		}
		if st.Dev != host.Dev || st.Ino != host.Ino {
			t.Fatalf("%q resolved to %q: inode differs from the host path's", p, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// kernelAgrees: where the kernel resolves a relative input beneath the
// root by itself, Resolve must have found the same file (rel != "").
func kernelAgrees(t *testing.T, ws *Workspace, p, rel string) {
	t.Helper()
	// A path with '"' may be a quoted spelling, whose bytes differ from
	// what the kernel would be given.
	if _, err := checkPathArg(p); p == "" || strings.HasPrefix(p, "/") || strings.Contains(p, `"`) || err != nil {
		return
	}
	ws.WithRoot(func(root int) error {
		fd, err := openat2(root, p, unix.O_PATH, 0, unix.RESOLVE_BENEATH|unix.RESOLVE_NO_MAGICLINKS)
		if err != nil {
			return nil
		}
		defer unix.Close(fd)
		if rel == "" {
			t.Fatalf("%q: the kernel resolves it beneath the root, Resolve refused it", p)
		}
		var a, b unix.Stat_t
		unix.Fstat(fd, &a)
		fd2, err := openat2(root, rel, unix.O_PATH, 0, beneath)
		if err != nil {
			t.Fatalf("%q: %v", p, err)
		}
		defer unix.Close(fd2)
		unix.Fstat(fd2, &b)
		if a.Dev != b.Dev || a.Ino != b.Ino {
			t.Fatalf("%q: the kernel finds another file than Resolve's %q", p, rel)
		}
		return nil
	})
}

// checkWritePath confirms that the deepest existing directory of a write
// path is beneath the root, and that nothing on it is a link.
func checkWritePath(t *testing.T, ws *Workspace, p, rel string) {
	t.Helper()
	ws.WithRoot(func(root int) error {
		dir := rel
		for {
			fd, err := openat2(root, dir, unix.O_PATH, 0, beneath)
			if err == nil {
				unix.Close(fd)
				return nil
			}
			if err != unix.ENOENT {
				t.Fatalf("%q for write resolved to %q; the kernel refuses %q beneath the root: %v", p, rel, dir, err)
			}
			if dir == "." {
				t.Fatalf("%q: the root vanished", p)
			}
			dir, _ = Split(dir)
		}
	})
}
