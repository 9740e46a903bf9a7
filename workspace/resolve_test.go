package workspace

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/b10x/harness/internal/pathattack"
)

// resolveCase is one attack or ordinary path. want is the canonical
// result when kind is "".
type resolveCase struct {
	name string
	path string
	want string
	kind Kind
}

// readCases are pathattack's read attacks for fx.
func readCases(fx *fixture) []resolveCase {
	var cs []resolveCase
	for _, c := range pathattack.ReadCases(fx.base, fx.root) {
		cs = append(cs, resolveCase{c.Name, c.Path, c.Want, Kind(c.Reason)})
	}
	return cs
}

func TestResolveAttacks(t *testing.T) {
	fx := newFixture(t)
	for _, tc := range readCases(fx) {
		t.Run(tc.name, func(t *testing.T) {
			got, err := fx.ws.Resolve(tc.path)
			if r := kindOf(err); r != tc.kind {
				t.Fatalf("Resolve(%.80q) = %q, %v; want kind %q", tc.path, got, err, tc.kind)
			}
			if tc.kind == "" && got != tc.want {
				t.Fatalf("Resolve(%.80q) = %q, want %q", tc.path, got, tc.want)
			}
		})
	}
}

func TestResolveForWrite(t *testing.T) {
	fx := newFixture(t)
	cases := []resolveCase{
		{"new file", "new.txt", "new.txt", ""},
		{"new nested", "newdir/deeper/x.txt", "newdir/deeper/x.txt", ""},
		{"existing", "file.txt", "file.txt", ""},
		{"absolute new inside", fx.root + "/n.txt", "n.txt", ""},
		{"in-root link to existing", "in", "sub/inner.txt", ""},
		{"dangling in-root link", "dangling_in", "newtarget.txt", ""},
		{"dangling link to outside", "dangling_out", "", Denied},
		{"live link to outside", "out", "", Denied},
		{"chain to outside", "link1", "", Denied},
		{"dir link to outside", "dirout/new.txt", "", Denied},
		{"dir link inside", "dirin/new.txt", "sub/new.txt", ""},
		{"new under missing then ..", "newdir/../x", "", Invalid},
		{"existing then ..", "sub/../y", "y", ""},
		{"trailing slash", "x/", "", Invalid},
		{"escape", "../data2/x", "", Denied},
		{"escape prefix sibling", fx.base + "/data.bak", "", Denied},
		{"NUL", "a\x00", "", Invalid},
		{"under a file", "file.txt/x", "", Failed},
		{"procroot", "procroot/tmp/x", "", Denied},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := fx.ws.ResolveForWrite(tc.path)
			if r := kindOf(err); r != tc.kind {
				t.Fatalf("ResolveForWrite(%q) = %q, %v; want kind %q", tc.path, got, err, tc.kind)
			}
			if tc.kind == "" && got != tc.want {
				t.Fatalf("ResolveForWrite(%q) = %q, want %q", tc.path, got, tc.want)
			}
		})
	}
	if _, err := os.Lstat(filepath.Join(fx.base, "created-outside.txt")); !os.IsNotExist(err) {
		t.Fatalf("resolving created something outside: %v", err)
	}
}

// The refusal message names the path the model gave, never the host path a
// link points to.
func TestResolveDoesNotLeakLinkTargets(t *testing.T) {
	fx := newFixture(t)
	for _, p := range []string{"out", "outabs", "link1", "dirout/secret2.txt", "dangling_out"} {
		_, err := fx.ws.ResolveForWrite(p)
		e, ok := err.(*Error)
		if !ok {
			t.Fatalf("%s: %v", p, err)
		}
		if strings.Contains(e.Public, fx.base) || strings.Contains(e.Public, "outside/") {
			t.Errorf("%s: public message leaks the target: %q", p, e.Public)
		}
	}
}

func TestOpen(t *testing.T) {
	fx := newFixture(t)
	if fx.ws.Dir() != fx.root {
		t.Fatalf("Dir() = %q, want %q", fx.ws.Dir(), fx.root)
	}
	// Through a symlinked spelling: Dir is canonical, both spellings work
	// for absolute paths.
	alias := filepath.Join(t.TempDir(), "alias")
	if err := os.Symlink(fx.root, alias); err != nil {
		t.Fatal(err)
	}
	ws, err := Open(alias)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	if ws.Dir() != fx.root {
		t.Fatalf("Dir() via alias = %q, want %q", ws.Dir(), fx.root)
	}
	for _, p := range []string{alias + "/file.txt", fx.root + "/file.txt"} {
		if got, err := ws.Resolve(p); err != nil || got != "file.txt" {
			t.Fatalf("Resolve(%q) = %q, %v", p, got, err)
		}
	}
	for _, bad := range []string{"", filepath.Join(fx.root, "file.txt"), filepath.Join(fx.base, "nope")} {
		if ws, err := Open(bad); err == nil {
			ws.Close()
			t.Errorf("Open(%q) succeeded", bad)
		}
	}
	// After Close, calls fail cleanly.
	ws2, err := Open(fx.root)
	if err != nil {
		t.Fatal(err)
	}
	ws2.Close()
	if _, err := ws2.Resolve("file.txt"); kindOf(err) != Failed {
		t.Fatalf("Resolve after Close: %v", err)
	}
}

// A path whose canonical form is the same file is resolved identically by
// every spelling.
func TestResolveSpellings(t *testing.T) {
	fx := newFixture(t)
	spellings := []string{"sub/inner.txt", "./sub/inner.txt", "sub/./inner.txt", "dirin/inner.txt",
		"in", "inabs", fx.root + "/in", "sub/up/../sub/inner.txt"}
	for _, s := range spellings {
		got, err := fx.ws.Resolve(s)
		if s == "sub/up/../sub/inner.txt" {
			// sub/up is a file link: a file is not a directory.
			if kindOf(err) != Failed {
				t.Errorf("Resolve(%q) = %q, %v; want Failed", s, got, err)
			}
			continue
		}
		if err != nil || got != "sub/inner.txt" {
			t.Errorf("Resolve(%q) = %q, %v", s, got, err)
		}
	}
	// 40 links are followed, 41 are too many.
	dir := t.TempDir()
	for i := range 42 {
		if err := os.Symlink("l"+strconv.Itoa(i+1), filepath.Join(dir, "l"+strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(dir, "l42"), []byte("end"), 0o644)
	ws, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	if got, err := ws.Resolve("l2"); err != nil || got != "l42" {
		t.Errorf("40 links: %q, %v", got, err)
	}
	if _, err := ws.Resolve("l1"); kindOf(err) != Failed {
		t.Errorf("41 links: %v", err)
	}
	// Links with long targets: the work per resolution is bounded.
	for i := range 10 {
		target := strings.Repeat("./", 2000) + "long" + strconv.Itoa(i+1)
		if err := os.Symlink(target, filepath.Join(dir, "long"+strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(dir, "long10"), nil, 0o644)
	if got, err := ws.Resolve("long5"); err != nil || got != "long10" {
		t.Errorf("5 long links: %q, %v", got, err)
	}
	if _, err := ws.Resolve("long0"); kindOf(err) != Failed {
		t.Errorf("10 long links: %v", err)
	}
}
