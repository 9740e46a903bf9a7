package session

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/b10x/harness/internal/setting"
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

// TestUserDefaultsRefusedInsideWorkspace: a user defaults file a model
// could have written, one inside the workspace, is refused by
// UseUserDefaults and again by Open, whether it is named by its real path,
// by a link from outside to it, under a link from outside to a directory
// of the workspace, or the workspace by a link to it; the refusal names
// the way to skip the file through the namer. One outside is taken; one
// whose place can no longer be judged is refused.
func TestUserDefaultsRefusedInsideWorkspace(t *testing.T) {
	root := t.TempDir()
	ws := filepath.Join(root, "ws")
	home := filepath.Join(root, "home")
	mkdir := func(d string) string {
		t.Helper()
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	write := func(p string) string {
		t.Helper()
		mkdir(filepath.Dir(p))
		if err := os.WriteFile(p, []byte("max_calls = 1\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	link := func(target, p string) string {
		t.Helper()
		mkdir(filepath.Dir(p))
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	load := func(p string) *LoadedFile {
		t.Helper()
		lf, err := LoadUserDefaults(p)
		if err != nil || lf == nil {
			t.Fatalf("LoadUserDefaults(%s): %v, %v", p, lf, err)
		}
		return lf
	}
	// What a model writes in the workspace: a policy for the next session.
	inWS := write(filepath.Join(ws, ".config", "b10x-harness", "policy.toml"))
	fileLink := link(inWS, filepath.Join(home, ".config", "b10x-harness", "policy.toml"))
	dirLink := link(filepath.Join(ws, ".config"), filepath.Join(root, "xdg"))
	wsLink := link(ws, filepath.Join(root, "ws-link"))
	outside := write(filepath.Join(home, "cfg", "policy.toml"))

	const why = ", where a model could write it and so choose the next session's policy; move it out of the workspace, or give --no-user-defaults"
	for _, c := range []struct {
		what, file, ws, want string
	}{
		{"its real path", inWS, ws, "user defaults " + inWS + ": refused: it lies inside the workspace " + ws + why},
		{"a link to it", fileLink, ws, "user defaults " + fileLink + ": refused: it lies inside the workspace " + ws + " (its real path is " + inWS + ")" + why},
		{"under a link to the workspace's directory", filepath.Join(dirLink, "b10x-harness", "policy.toml"), ws,
			"user defaults " + filepath.Join(dirLink, "b10x-harness", "policy.toml") + ": refused: it lies inside the workspace " + ws + " (its real path is " + inWS + ")" + why},
		{"the workspace named by a link", inWS, wsLink, "user defaults " + inWS + ": refused: it lies inside the workspace " + wsLink + why},
	} {
		lf := load(c.file)
		p := Defaults()
		p.Workspace = c.ws
		err := p.UseUserDefaults(lf, setting.Flag)
		var e *Error
		if !errors.As(err, &e) || !e.Usage || e.Pos != "user defaults "+c.file || err.Error() != c.want {
			t.Errorf("%s: UseUserDefaults: %v, want a usage *Error %q", c.what, err, c.want)
		}
		if p.UserDefaults != nil {
			t.Errorf("%s: the refused file is still the policy's: %v", c.what, p.UserDefaults)
		}
		// Without a namer, the key.
		if err := p.UseUserDefaults(lf, nil); err == nil || err.Error() != strings.TrimSuffix(c.want, "--no-user-defaults")+"no_user_defaults" {
			t.Errorf("%s: without a namer: %v", c.what, err)
		}
		// Taken with the workspace elsewhere, it is refused by Open once
		// the workspace is the one that holds it: nothing is opened.
		p.Workspace = home
		if err := p.UseUserDefaults(lf, setting.Flag); err != nil {
			t.Fatalf("%s: with the workspace %s: %v", c.what, home, err)
		}
		p.Workspace = c.ws
		// Were it not refused, Open would stop at this hook, before it
		// confines the test's own process.
		p.Hooks = []string{filepath.Join(root, "no-such-hook")}
		if s, err := Open(context.Background(), p, Options{Name: setting.Flag}); err == nil || err.Error() != c.want || !IsUsage(err) {
			if s != nil {
				s.End("completed")
			}
			t.Errorf("%s: Open: %v, want %q", c.what, err, c.want)
		}
	}

	// Outside the workspace: taken, and named by the policy.
	p := Defaults()
	p.Workspace = ws
	lf := load(outside)
	if err := p.UseUserDefaults(lf, setting.Flag); err != nil || p.UserDefaults == nil || *p.UserDefaults != lf.Ref {
		t.Errorf("outside: %v, %v", err, p.UserDefaults)
	}
	if err := p.UseUserDefaults(nil, setting.Flag); err != nil || p.UserDefaults != nil || p.userDefaults != nil {
		t.Errorf("none: %v, %v", err, p.UserDefaults)
	}
	// Its directory gone since it was read: where it lies cannot be
	// told, and it is refused (fail closed).
	gone := load(write(filepath.Join(home, "gone", "policy.toml")))
	if err := os.RemoveAll(filepath.Join(home, "gone")); err != nil {
		t.Fatal(err)
	}
	err := p.UseUserDefaults(gone, setting.Flag)
	want := "user defaults " + gone.Ref.Path + ": cannot tell whether it lies inside the workspace " + ws + ": stat " + filepath.Join(home, "gone") + ": no such file or directory"
	if !IsUsage(err) || err.Error() != want {
		t.Errorf("gone: %v, want %q", err, want)
	}
}
