package tools

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/b10x/harness/internal/pathattack"
)

// resolveCase is one attack or ordinary path. want is the canonical
// result when reason is "".
type resolveCase struct {
	name   string
	path   string
	want   string
	reason Reason
}

// readCases are pathattack's read attacks for fx.
func readCases(fx *fixture) []resolveCase {
	var cs []resolveCase
	for _, c := range pathattack.ReadCases(fx.base, fx.root) {
		cs = append(cs, resolveCase{c.Name, c.Path, c.Want, Reason(c.Reason)})
	}
	return cs
}

func TestResolveAttacks(t *testing.T) {
	fx := newFixture(t)
	for _, tc := range readCases(fx) {
		t.Run(tc.name, func(t *testing.T) {
			got, err := fx.ws.Resolve(tc.path)
			if r := reasonOf(err); r != tc.reason {
				t.Fatalf("Resolve(%.80q) = %q, %v; want reason %q", tc.path, got, err, tc.reason)
			}
			if tc.reason == "" && got != tc.want {
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
		{"dangling link to outside", "dangling_out", "", ReasonDeniedPath},
		{"live link to outside", "out", "", ReasonDeniedPath},
		{"chain to outside", "link1", "", ReasonDeniedPath},
		{"dir link to outside", "dirout/new.txt", "", ReasonDeniedPath},
		{"dir link inside", "dirin/new.txt", "sub/new.txt", ""},
		{"new under missing then ..", "newdir/../x", "", ReasonInvalidArgument},
		{"existing then ..", "sub/../y", "y", ""},
		{"trailing slash", "x/", "", ReasonInvalidArgument},
		{"escape", "../data2/x", "", ReasonDeniedPath},
		{"escape prefix sibling", fx.base + "/data.bak", "", ReasonDeniedPath},
		{"NUL", "a\x00", "", ReasonInvalidArgument},
		{"under a file", "file.txt/x", "", ReasonToolError},
		{"procroot", "procroot/tmp/x", "", ReasonDeniedPath},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := fx.ws.ResolveForWrite(tc.path)
			if r := reasonOf(err); r != tc.reason {
				t.Fatalf("ResolveForWrite(%q) = %q, %v; want reason %q", tc.path, got, err, tc.reason)
			}
			if tc.reason == "" && got != tc.want {
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

func TestOpenWorkspace(t *testing.T) {
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
	ws, err := OpenWorkspace(alias)
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
		if ws, err := OpenWorkspace(bad); err == nil {
			ws.Close()
			t.Errorf("OpenWorkspace(%q) succeeded", bad)
		}
	}
	// After Close, calls fail cleanly.
	ws2, err := OpenWorkspace(fx.root)
	if err != nil {
		t.Fatal(err)
	}
	ws2.Close()
	if _, err := ws2.Resolve("file.txt"); reasonOf(err) != ReasonToolError {
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
			if reasonOf(err) != ReasonToolError {
				t.Errorf("Resolve(%q) = %q, %v; want tool_error", s, got, err)
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
	ws, err := OpenWorkspace(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	if got, err := ws.Resolve("l2"); err != nil || got != "l42" {
		t.Errorf("40 links: %q, %v", got, err)
	}
	if _, err := ws.Resolve("l1"); reasonOf(err) != ReasonToolError {
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
	if _, err := ws.Resolve("long0"); reasonOf(err) != ReasonToolError {
		t.Errorf("10 long links: %v", err)
	}
}
