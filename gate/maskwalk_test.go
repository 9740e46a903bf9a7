package gate

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/b10x/harness/workspace"
)

// maskGate is a gate on a new workspace at dir with the default read scope
// and the protected paths of every session.
func maskGate(t *testing.T, dir string) *Gate {
	t.Helper()
	ws, err := workspace.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	rules, err := ReadScopeRules(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &Gate{cfg: Config{Workspace: ws, Protected: []string{"hooks/check.sh"}}, reads: readScope{newScope(rules)}}
}

// masksByWalk is what a run call's masks were before the gate kept
// listings: one Workspace.Walk, every name matched.
func masksByWalk(t *testing.T, g *Gate) []string {
	t.Helper()
	h := &runHold{ws: g.cfg.Workspace}
	for _, p := range g.runProtected() {
		h.prot = append(h.prot, &holdEntry{rel: p})
	}
	verdict := g.reads.verdict
	var out []string
	if _, err := h.ws.Walk(func(rel string, typ uint8, stat func() workspace.EntryState) bool {
		if h.protectedCovers(rel) {
			return false
		}
		if typ == unix.DT_REG || typ == unix.DT_UNKNOWN {
			if _, denied := verdict(rel); denied && (typ == unix.DT_REG || stat().IsRegular()) {
				out = append(out, rel)
			}
		}
		return typ == unix.DT_DIR
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

func masksNow(t *testing.T, g *Gate) []string {
	t.Helper()
	h, err := g.holdBefore()
	if err != nil {
		t.Fatal(err)
	}
	if h.walked {
		t.Fatal("the hold walked for the write scope: no write-scope rule was given")
	}
	return h.hold.Masked
}

// mkfiles creates each file (and its directories) beneath dir.
func mkfiles(t *testing.T, dir string, rels ...string) {
	t.Helper()
	for _, rel := range rels {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("secret\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestMaskWalkAsWalk: the masks' walk finds what a whole walk finds, in
// the same order: denied files at every depth, a denied directory's files,
// nothing beneath a protected path, no link followed.
func TestMaskWalkAsWalk(t *testing.T) {
	dir := t.TempDir()
	mkfiles(t, dir, ".env", "a/.env.local", "a/b/c/key.pem", "a/b/code.go", "a/z.key", "b/id_rsa", "b/id_rsa.pub",
		".git/.env", "hooks/check.sh", "c/.env/inner.txt", "c/.ENV/x", "d/e/f/g/h/.netrc", ".env.example", "z.pem")
	if err := os.Symlink(filepath.Join(dir, "a"), filepath.Join(dir, "link.pem")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("a", filepath.Join(dir, "linkdir")); err != nil {
		t.Fatal(err)
	}
	g := maskGate(t, dir)
	want := masksByWalk(t, g)
	for i := 0; i < 2; i++ {
		if got := masksNow(t, g); !slices.Equal(got, want) {
			t.Fatalf("walk %d: masks %q, a whole walk finds %q", i, got, want)
		}
	}
	for _, must := range []string{".env", "a/b/c/key.pem", "b/id_rsa", "c/.env/inner.txt", "c/.ENV/x", "d/e/f/g/h/.netrc", "z.pem"} {
		if !slices.Contains(want, must) {
			t.Errorf("%s is not masked: %q", must, want)
		}
	}
	for _, never := range []string{".git/.env", "b/id_rsa.pub", ".env.example", "link.pem", "linkdir/.env.local"} {
		if slices.Contains(want, never) {
			t.Errorf("%s is masked: %q", never, want)
		}
	}
}

// withMargin sets listingMargin for one test.
func withMargin(t *testing.T, d time.Duration) {
	old := listingMargin
	listingMargin = d
	t.Cleanup(func() { listingMargin = old })
}

// TestMaskListingsSeeChanges: once directories are kept, a second walk
// takes them, and every change to a directory's names (a file created,
// one removed, a directory renamed in, a file created and the directory's
// mtime set back as a run child can) is found at the next walk.
func TestMaskListingsSeeChanges(t *testing.T) {
	withMargin(t, 50*time.Millisecond)
	dir := t.TempDir()
	mkfiles(t, dir, ".env", "a/b/c/code.go", "a/x.pem", "elsewhere/k/id_ed25519", "old/s.txt")
	old := time.Now().Add(-time.Hour)
	time.Sleep(150 * time.Millisecond)
	g := maskGate(t, dir)
	first := masksNow(t, g)
	if !slices.Equal(first, []string{".env", "a/x.pem", "elsewhere/k/id_ed25519"}) {
		t.Fatalf("masks %q", first)
	}
	if got := masksNow(t, g); !slices.Equal(got, first) || g.masks.hits == 0 {
		t.Fatalf("second walk: masks %q, %d directories taken from the listings: want %q, and some taken", got, g.masks.hits, first)
	}
	steps := []struct {
		name   string
		change func()
		want   []string
	}{
		{"created", func() { mkfiles(t, dir, "a/b/c/new.pem") }, []string{".env", "a/b/c/new.pem", "a/x.pem", "elsewhere/k/id_ed25519"}},
		{"removed", func() { os.Remove(filepath.Join(dir, "a/x.pem")) }, []string{".env", "a/b/c/new.pem", "elsewhere/k/id_ed25519"}},
		{"renamed in", func() {
			if err := os.Rename(filepath.Join(dir, "elsewhere/k"), filepath.Join(dir, "a/b/k")); err != nil {
				t.Fatal(err)
			}
		}, []string{".env", "a/b/c/new.pem", "a/b/k/id_ed25519"}},
		{"mtime set back", func() {
			mkfiles(t, dir, "old/.netrc")
			if err := os.Chtimes(filepath.Join(dir, "old"), old, old); err != nil {
				t.Fatal(err)
			}
		}, []string{".env", "a/b/c/new.pem", "a/b/k/id_ed25519", "old/.netrc"}},
	}
	for _, s := range steps {
		// Let the listings be kept again, then change a kept directory.
		time.Sleep(150 * time.Millisecond)
		masksNow(t, g)
		hits := g.masks.hits
		if masksNow(t, g); g.masks.hits == hits {
			t.Fatalf("%s: no directory taken from the listings before the change", s.name)
		}
		s.change()
		if got := masksNow(t, g); !slices.Equal(got, s.want) {
			t.Errorf("%s: masks %q, want %q", s.name, got, s.want)
		}
		if got := masksByWalk(t, g); !slices.Equal(got, s.want) {
			t.Errorf("%s: a whole walk finds %q, want %q", s.name, got, s.want)
		}
	}
}

// TestMaskListingsFreshNotKept: a directory changed less than the margin
// before it was read is read again at every walk (a change in the same
// clock tick would leave its ctime as it was).
func TestMaskListingsFreshNotKept(t *testing.T) {
	dir := t.TempDir()
	mkfiles(t, dir, ".env", "a/x.pem")
	g := maskGate(t, dir)
	for i := 0; i < 3; i++ {
		masksNow(t, g)
	}
	if g.masks.hits != 0 {
		t.Fatalf("%d directories changed within %v taken from the listings", g.masks.hits, listingMargin)
	}
}

// TestMaskListingsRace: a file created right after a walk kept its
// directory (the directory changed once before, more than the margin ago)
// is found by the next walk, every time.
func TestMaskListingsRace(t *testing.T) {
	withMargin(t, 20*time.Millisecond)
	dir := t.TempDir()
	const n = 50
	for i := 0; i < n; i++ {
		mkfiles(t, dir, "d"+strconv.Itoa(i)+"/code.go")
	}
	time.Sleep(60 * time.Millisecond)
	g := maskGate(t, dir)
	masksNow(t, g)
	for i := 0; i < n; i++ {
		masksNow(t, g)
		rel := "d" + strconv.Itoa(i) + "/s.pem"
		mkfiles(t, dir, rel)
		if got := masksNow(t, g); !slices.Contains(got, rel) {
			t.Fatalf("%s, created after a walk, not masked by the next: %q", rel, got)
		}
	}
	if g.masks.hits == 0 {
		t.Fatal("no directory was taken from the listings")
	}
}

// TestWarmRunHold: a session's warm walk keeps the workspace's directories
// before the first run call, whose masks are then a whole walk's; with a
// restricting write-scope rule (every call walks the tree itself) or no
// run published, it reads nothing.
func TestWarmRunHold(t *testing.T) {
	withMargin(t, 20*time.Millisecond)
	dir := t.TempDir()
	mkfiles(t, dir, ".env", "a/b/x.pem", "a/c/code.go")
	time.Sleep(60 * time.Millisecond)
	kept := func(g *Gate) int {
		g.masks.mu.Lock()
		defer g.masks.mu.Unlock()
		return len(g.masks.dirs)
	}
	g, got := runGate(t, dir, nil, nil, func(string) {})
	rules, _ := ReadScopeRules(nil)
	g.reads = readScope{newScope(rules)}
	g.WarmRunHold()
	deadline := time.Now().Add(5 * time.Second)
	for kept(g) < 4 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if n := kept(g); n != 4 {
		t.Fatalf("%d directories kept by the warm walk, want 4 (., a, a/b, a/c)", n)
	}
	if o := call(g, "run", `{}`); o.Status != Executed {
		t.Fatalf("run: %+v", o)
	}
	if want := masksByWalk(t, g); !slices.Equal(got.Masked, want) || g.masks.hits < 4 {
		t.Fatalf("first call's masks %q (%d directories taken from the listings), a whole walk's %q", got.Masked, g.masks.hits, want)
	}

	g, _ = runGate(t, dir, []string{"a/**=denied"}, nil, func(string) {})
	g.reads = readScope{newScope(rules)}
	g.WarmRunHold()
	time.Sleep(50 * time.Millisecond)
	if n := kept(g); n != 0 {
		t.Fatalf("with a restricting write-scope rule: %d directories kept", n)
	}
}
