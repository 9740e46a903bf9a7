package proc

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/b10x/harness/internal/reexec"
)

func TestMain(m *testing.M) {
	reexec.Init()
	os.Exit(m.Run())
}

// TestRemover: the remover removes its path once Done is called (a tree
// with its contents), never an entry put in its place since it started,
// and refuses a relative path.
func TestRemover(t *testing.T) {
	dir := t.TempDir()
	tree := filepath.Join(dir, "tree")
	if err := os.MkdirAll(filepath.Join(tree, "a", "b"), 0o755); err != nil {
		t.Fatal(err)
	}
	rm, err := StartRemover(tree, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tree, "a", "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(tree); err != nil {
		t.Fatalf("removed before Done: %v", err)
	}
	if err := rm.Done(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(tree); !os.IsNotExist(err) {
		t.Fatalf("%s after Done: %v, want it gone", tree, err)
	}

	file := filepath.Join(dir, "sock")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	rm, err = StartRemover(file, false)
	if err != nil {
		t.Fatal(err)
	}
	// Swapped for another file: not the remover's to remove.
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte("someone else's"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := rm.Done(); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(file); err != nil || string(b) != "someone else's" {
		t.Fatalf("the file put in its place: %q, %v; want it kept", b, err)
	}

	if _, err := StartRemover("relative/path", true); err == nil {
		t.Fatal("a relative path was accepted")
	}
}
