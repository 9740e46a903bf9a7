package spawn

import (
	"errors"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// heldTree makes a workspace with a hook file, a .git directory and a
// directory to anchor, all owned as the workspace's owner makes them.
func heldTree(t *testing.T) (ws string, files map[string]string) {
	t.Helper()
	ws = workspace(t)
	files = map[string]string{
		".hooks/guard.sh": "#!/bin/sh\nexit 2\n",
		".git/config":     "[core]\n",
		".git/HEAD":       "ref: refs/heads/main\n",
		"keep/k.txt":      "keep\n",
		"src/a.txt":       "a\n",
	}
	for rel, body := range files {
		p := filepath.Join(ws, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
		own(t, filepath.Dir(p))
		own(t, p)
	}
	return ws, files
}

// TestHeldPaths is issue 12's first item at the spawn level, under every
// runner: the read-only paths cannot be written, appended to, chmod-ed,
// removed, renamed, linked away or replaced through a parent; an anchored
// directory stays writable but cannot be moved or removed; the rest of
// the workspace is as writable as ever.
func TestHeldPaths(t *testing.T) {
	for name, r := range runners(t) {
		ws, files := heldTree(t)
		script := `
try() { n=$1; shift; if ( "$@" ) 2>/dev/null; then echo "$n=done"; else echo "$n=refused"; fi; }
try write sh -c 'echo pwned > .hooks/guard.sh'
try append sh -c 'echo pwned >> .hooks/guard.sh'
try chmod chmod 777 .hooks/guard.sh
try rm rm -f .hooks/guard.sh
try mvfile mv .hooks/guard.sh .hooks/old.sh
try link ln .hooks/guard.sh linked
try mvparent mv .hooks .hooks2
try gitconfig sh -c 'echo "[core] hooksPath=/tmp" >> .git/config'
try githook sh -c 'mkdir -p .git/hooks && echo pwned > .git/hooks/post-checkout'
try mvgit sh -c 'mv .git .git2 && mkdir .git'
try rmgit rm -rf .git
try mvkeep mv keep keep2
try rmkeep rm -rf keep
try keepnew sh -c 'echo new > keep/new.txt'
try hooksnew sh -c 'echo new > .hooks/other.sh'
try srcwrite sh -c 'echo b > src/a.txt'
try mvsrc mv src src2
`
		s := shSpec(t, ws, script)
		s.ReadOnly = []string{ws + "/.hooks/guard.sh", ws + "/.git"}
		s.Anchored = []string{ws + "/keep"}
		res, o, err := run(t, r, s)
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("%s: %v %+v\n%s", name, err, res, o)
		}
		got := probes(o)
		want := map[string]string{
			"write": "refused", "append": "refused", "chmod": "refused", "rm": "refused", "mvfile": "refused",
			"link": "refused", "mvparent": "refused", "gitconfig": "refused", "githook": "refused", "mvgit": "refused",
			"rmgit": "refused", "mvkeep": "refused", "rmkeep": "refused",
			"keepnew": "done", "hooksnew": "done", "srcwrite": "done", "mvsrc": "done",
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s: %s: %q, want %q\n%s", name, k, got[k], v, o)
			}
		}
		for rel, body := range files {
			if strings.HasPrefix(rel, "src/") || strings.HasPrefix(rel, "keep/") {
				continue
			}
			b, err := os.ReadFile(filepath.Join(ws, rel))
			if err != nil || string(b) != body {
				t.Errorf("%s: %s after the call: %q, %v; want it unchanged", name, rel, b, err)
			}
		}
		if st, err := os.Stat(filepath.Join(ws, "keep")); err != nil || !st.IsDir() {
			t.Errorf("%s: the anchored keep/ after the call: %v", name, err)
		}
		for _, rel := range []string{".git2", ".hooks2", "keep2", ".git/hooks", "linked", ".hooks/old.sh"} {
			if _, err := os.Lstat(filepath.Join(ws, rel)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s: %s exists after the call (%v)", name, rel, err)
			}
		}
		if st, err := os.Stat(filepath.Join(ws, ".hooks/guard.sh")); err != nil || st.Mode().Perm() != 0o755 {
			t.Errorf("%s: guard.sh mode after the call: %v %v", name, st.Mode(), err)
		}
	}
}

// TestHeldPathsRefused: a held path that is missing, reached through a
// symbolic link, or not a file or directory fails the call at its step,
// naming the path; the program never runs. Bad input is refused before
// anything starts.
func TestHeldPathsRefused(t *testing.T) {
	for name, r := range runners(t) {
		ws, _ := heldTree(t)
		outside := workspace(t)
		if err := os.Symlink(outside, filepath.Join(ws, "out")); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("guard.sh", filepath.Join(ws, ".hooks", "link.sh")); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Mkfifo(filepath.Join(ws, "fifo"), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			path, why, step string
			ro              bool
		}{
			{ws + "/missing", "removed", "hold read-only " + ws + "/missing", true},
			// The link is a parent: its anchor fails first.
			{ws + "/out/x", "symbolic link", "hold in place " + ws + "/out", true},
			{ws + "/.hooks/link.sh", "symbolic link", "hold read-only " + ws + "/.hooks/link.sh", true},
			{ws + "/fifo", "regular file or a directory", "hold read-only " + ws + "/fifo", true},
			{ws + "/out", "symbolic link", "hold in place " + ws + "/out", false},
		} {
			s := shSpec(t, ws, "echo ran > ran.txt")
			step := c.step
			if c.ro {
				s.ReadOnly = []string{c.path}
			} else {
				s.Anchored = []string{c.path}
			}
			_, o, err := run(t, r, s)
			var se *SetupError
			if !errors.As(err, &se) || se.Step != step || !strings.Contains(err.Error(), c.why) {
				t.Errorf("%s: %s: %v, want a *SetupError at %q saying %q\n%s", name, c.path, err, step, c.why, o)
			}
			if _, err := os.Stat(filepath.Join(ws, "ran.txt")); err == nil {
				t.Errorf("%s: %s: the program ran", name, c.path)
			}
		}
		for _, bad := range []string{ws, filepath.Dir(ws), ws + "/a/../b", "rel", ws + "/x\x00"} {
			s := shSpec(t, ws, "true")
			s.ReadOnly = []string{bad}
			if _, _, err := run(t, r, s); err == nil || errors.As(err, new(*SetupError)) {
				t.Errorf("%s: ReadOnly %q: %v, want a bad-input error", name, bad, err)
			}
		}
	}
}

func TestHeldMounts(t *testing.T) {
	s := Spec{Workspace: Pinned{Path: "/w"},
		ReadOnly: []string{"/w/a/b/c", "/w/.git", "/w/.git/config", "/w/a/b/c/d"},
		Anchored: []string{"/w/a/x", "/w/.git/hooks", "/w/a/b/c"}}
	var got []string
	for _, m := range s.held() {
		got = append(got, m.Dst+map[bool]string{true: " ro", false: " rw"}[m.RO])
	}
	want := "/w/.git ro,/w/a rw,/w/a/b rw,/w/a/x rw,/w/a/b/c ro"
	if strings.Join(got, ",") != want {
		t.Errorf("held: %s\nwant %s", strings.Join(got, ","), want)
	}
}

// TestHeldIdentities: a held or masked path whose identity (Spec.HeldIDs)
// is not the file found there when the view is built (it was replaced
// after the caller read it) fails the call at its step with ESTALE, and
// the program never runs; with the identity of the file there, it runs,
// and the masked file reads empty. Under every runner, pre-started ones
// included.
func TestHeldIdentities(t *testing.T) {
	for name, r := range runners(t) {
		ws, _ := heldTree(t)
		secret := filepath.Join(ws, "src", ".env")
		if err := os.WriteFile(secret, []byte("API_KEY=sk-live-id\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		own(t, secret)
		id := func(p string) FileID {
			var st syscall.Stat_t
			if err := syscall.Lstat(p, &st); err != nil {
				t.Fatal(err)
			}
			return FileID{Dev: st.Dev, Ino: st.Ino}
		}
		git := filepath.Join(ws, ".git")
		good := map[string]FileID{secret: id(secret), git: id(git)}
		s := shSpec(t, ws, "cat src/.env; echo ran")
		s.ReadOnly, s.Masked, s.HeldIDs = []string{git}, []string{secret}, good
		if res, o, err := run(t, r, s); err != nil || res.ExitCode != 0 || strings.Contains(o.String(), "sk-live") || !strings.Contains(o.String(), "ran") {
			t.Fatalf("%s: with the identities of the files there: %v %+v\n%s", name, err, res, o)
		}
		for _, c := range []struct {
			path, step string
		}{
			{secret, "mask " + secret},
			{git, "hold read-only " + git},
		} {
			ids := maps.Clone(good)
			ids[c.path] = FileID{Dev: good[c.path].Dev, Ino: good[c.path].Ino + 1}
			s := shSpec(t, ws, "echo ran > ran.txt")
			s.ReadOnly, s.Masked, s.HeldIDs = []string{git}, []string{secret}, ids
			_, o, err := run(t, r, s)
			var se *SetupError
			if !errors.As(err, &se) || se.Step != c.step || !errors.Is(err, syscall.ESTALE) || !strings.Contains(err.Error(), "no longer the file") {
				t.Errorf("%s: %s read as another file: %v, want a *SetupError at %q (ESTALE)\n%s", name, c.path, err, c.step, o)
			}
			if _, err := os.Stat(filepath.Join(ws, "ran.txt")); err == nil {
				t.Fatalf("%s: %s: the program ran", name, c.path)
			}
		}
	}
}
