package workspace

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Deterministic form of the swap race: the walker's own visit swaps a
// directory for a link to outside at the last moment before the walker
// enters it. The walker must skip it and say so, never list what the link
// leads to. (tools' TestWalkRechecksEveryStep does the same for a file
// search opens.)
func TestWalkRechecksEveryStep(t *testing.T) {
	fx := newFixture(t)
	for _, d := range []string{"w/d", "w/e"} {
		os.MkdirAll(filepath.Join(fx.root, d), 0o755)
		os.WriteFile(filepath.Join(fx.root, d, "inside.txt"), []byte("INSIDE\n"), 0o644)
	}
	swap := func(rel, target string) {
		p := filepath.Join(fx.root, rel)
		if err := os.RemoveAll(p); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
	}
	var seen, skipped []string
	wk := Walker{
		Visit: func(e Entry) {
			seen = append(seen, e.Rel)
			if e.Rel == "w/d" {
				swap("w/d", filepath.Join(fx.base, "outside"))
			}
		},
		Skip: func(rel, why string) { skipped = append(skipped, rel+": "+why) },
	}
	err := fx.ws.WithRoot(func(root int) error { return wk.Walk(context.Background(), root, "w") })
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"w/d", "w/e", "w/e/inside.txt"}
	if strings.Join(seen, ",") != strings.Join(want, ",") {
		t.Fatalf("visited %v, want %v", seen, want)
	}
	if len(skipped) != 1 || skipped[0] != "w/d: changed into a symbolic link during the walk; not followed" {
		t.Fatalf("skipped: %q", skipped)
	}
}

// A walk hides writes' temporary files, visits .git without entering it,
// stops when Stop says so, and a start that is not a directory is its
// errno.
func TestWalkerSkips(t *testing.T) {
	fx := newFixture(t)
	for _, p := range []string{"w/.git/HEAD", "w/a.txt", "w/" + TempPrefix + "0123456789abcdef" + TempSuffix, "w/z/b.txt"} {
		os.MkdirAll(filepath.Join(fx.root, filepath.Dir(p)), 0o755)
		os.WriteFile(filepath.Join(fx.root, p), []byte("x\n"), 0o644)
	}
	walk := func(start string, stopAfter int) ([]string, error) {
		var seen []string
		wk := Walker{
			Visit: func(e Entry) { seen = append(seen, e.Rel) },
			Stop:  func() bool { return stopAfter > 0 && len(seen) >= stopAfter },
		}
		err := fx.ws.WithRoot(func(root int) error { return wk.Walk(context.Background(), root, start) })
		return seen, err
	}
	seen, err := walk("w", 0)
	if err != nil || strings.Join(seen, ",") != "w/.git,w/a.txt,w/z,w/z/b.txt" {
		t.Fatalf("walk: %v %v", seen, err)
	}
	if seen, err := walk("w", 2); err != nil || strings.Join(seen, ",") != "w/.git,w/a.txt" {
		t.Fatalf("stopped walk: %v %v", seen, err)
	}
	if _, err := walk("w/a.txt", 0); err == nil || err.Error() != "not a directory" {
		t.Fatalf("walk of a file: %v", err)
	}
}
