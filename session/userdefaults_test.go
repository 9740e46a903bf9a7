package session

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestUserDefaultsInside: a user defaults file is inside a workspace when
// the workspace holds its real path, however either is named: directly,
// through a link from outside into the workspace, through a link to the
// workspace; one outside is not, nor is one beside a workspace that does
// not exist.
func TestUserDefaultsInside(t *testing.T) {
	root := t.TempDir()
	ws := filepath.Join(root, "ws")
	home := filepath.Join(root, "home")
	for _, d := range []string{filepath.Join(ws, "cfg"), home} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(p string) string {
		t.Helper()
		if err := os.WriteFile(p, []byte("max_calls = 3\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	link := func(target, p string) string {
		t.Helper()
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	inWS := write(filepath.Join(ws, "cfg", "policy.toml"))
	outside := write(filepath.Join(home, "policy.toml"))
	intoWS := link(inWS, filepath.Join(home, "linked.toml"))                // a file outside that is the workspace's
	dirIntoWS := link(filepath.Join(ws, "cfg"), filepath.Join(home, "cfg")) // a directory outside that is the workspace's
	wsLink := link(ws, filepath.Join(root, "ws-link"))

	for _, c := range []struct {
		name, file, ws string
		want           bool
	}{
		{"in the workspace", inWS, ws, true},
		{"in the workspace, named by a link", inWS, wsLink, true},
		{"in a directory of the workspace", inWS, filepath.Join(ws, "cfg"), true},
		{"a link into the workspace", intoWS, ws, true},
		{"under a linked directory", filepath.Join(dirIntoWS, "policy.toml"), ws, true},
		{"the workspace is the root", outside, "/", true},
		{"outside", outside, ws, false},
		{"beside it", outside, filepath.Join(root, "home2"), false},
		{"a workspace that does not exist", outside, filepath.Join(home, "nothing"), false},
	} {
		lf, err := LoadUserDefaults(c.file)
		if err != nil || lf == nil {
			t.Fatalf("%s: LoadUserDefaults: %v, %v", c.name, lf, err)
		}
		got, err := lf.Inside(c.ws)
		if err != nil || got != c.want {
			t.Errorf("%s: Inside(%s) = %v, %v; want %v", c.name, c.ws, got, err, c.want)
		}
	}

	// The real path is the one read, links resolved.
	lf, err := LoadUserDefaults(intoWS)
	if err != nil {
		t.Fatal(err)
	}
	if real, err := lf.RealPath(); err != nil || real != inWS {
		t.Errorf("RealPath = %q, %v; want %q", real, err, inWS)
	}
	// Nothing there: no file, no error.
	if lf, err := LoadUserDefaults(filepath.Join(home, "none.toml")); lf != nil || err != nil {
		t.Errorf("missing: %v, %v", lf, err)
	}
	// A bad key: the file's position and the key, a usage error.
	bad := filepath.Join(home, "bad.toml")
	if err := os.WriteFile(bad, []byte("\nwrite_scope = [\"a=b\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadUserDefaults(bad); !IsUsage(err) || !strings.HasPrefix(err.Error(), "user defaults "+bad+":2:1: write_scope: write-scope rule \"a=b\"") {
		t.Errorf("bad: %v", err)
	}
}
