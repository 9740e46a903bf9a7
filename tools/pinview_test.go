package tools

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestResolveUnplanted: links outside the places a run child may write are
// followed as EvalSymlinks does; a link inside one is refused, naming it.
// (PinRunView itself holds descriptors for the life of the process, which
// this package's leak check would report; the cmd attack tests drive it.)
func TestResolveUnplanted(t *testing.T) {
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"ws", "shared/a", "elsewhere/real/sub"} {
		must(t, os.MkdirAll(filepath.Join(base, d), 0o755))
	}
	must(t, os.Symlink("real", filepath.Join(base, "elsewhere", "link")))
	must(t, os.Symlink("/etc", filepath.Join(base, "shared", "a", "out")))
	must(t, os.Symlink("../../elsewhere/real", filepath.Join(base, "shared", "a", "rel")))
	must(t, os.Symlink(filepath.Join(base, "elsewhere"), filepath.Join(base, "ws", "out")))
	areas := []string{filepath.Join(base, "ws"), filepath.Join(base, "shared")}

	for in, want := range map[string]string{
		"elsewhere/link/sub":       "elsewhere/real/sub",
		"elsewhere/link/../link":   "elsewhere/real",
		"shared/a/../a":            "shared/a",
		"elsewhere/./real//sub/..": "elsewhere/real",
	} {
		got, err := resolveUnplanted(filepath.Join(base, in), areas)
		if err != nil || got != filepath.Join(base, want) {
			t.Errorf("%s: %q, %v; want %s", in, got, err, want)
		}
	}
	for _, in := range []string{"shared/a/out", "shared/a/out/passwd", "shared/a/rel/sub", "ws/out/real"} {
		got, err := resolveUnplanted(filepath.Join(base, in), areas)
		if err == nil || !strings.Contains(err.Error(), "symbolic link "+base) {
			t.Errorf("%s: %q, %v; want a refusal naming the link", in, got, err)
		}
	}
	if _, err := resolveUnplanted(filepath.Join(base, "missing"), areas); !os.IsNotExist(err) {
		t.Errorf("missing: %v", err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
