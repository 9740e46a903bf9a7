package workspace_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/b10x/harness/workspace"
)

// Resolve follows a link that stays inside the root and refuses one that
// leaves it; Commit writes what was resolved.
func Example() {
	dir, err := os.MkdirTemp("", "workspace-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("one\n"), 0o644)
	os.Symlink("notes.txt", filepath.Join(dir, "inside"))
	os.Symlink("/etc/passwd", filepath.Join(dir, "outside"))

	ws, err := workspace.Open(dir)
	if err != nil {
		panic(err)
	}
	defer ws.Close()

	rel, _ := ws.Resolve("inside")
	fmt.Println(rel)
	for _, p := range []string{"outside", "../x", "sub/\x00"} {
		_, err := ws.Resolve(p)
		fmt.Println(err.(*workspace.Error).Kind)
	}

	rel, _ = ws.ResolveForWrite("new/file.txt")
	eff, err := ws.Commit(context.Background(), workspace.Change{Path: rel,
		Build: func([]byte) ([]byte, error) { return []byte("two\n"), nil }})
	fmt.Println(rel, eff.Created, err)
	// Output:
	// notes.txt
	// denied_path
	// denied_path
	// invalid_argument
	// new/file.txt true <nil>
}
