package gate

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/b10x/harness/internal/reexec"
	"github.com/b10x/harness/internal/testenv"
	"github.com/b10x/harness/tools"
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
	g := &Gate{cfg: Config{Workspace: ws, Protected: []string{"hooks/check.sh"}}, reads: readScope{newScope(rules)}}
	t.Cleanup(g.Close)
	return g
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

// TestMaskWalkRefusesUnwalked: a run call is refused, naming the
// directory, when the masks' walk cannot enter one (here: deeper than
// MaxWalkDepth, where a child can move a directory of secrets); the
// child never runs. Before, the directory was counted and the call ran
// with the secrets beneath it unmasked.
func TestMaskWalkRefusesUnwalked(t *testing.T) {
	dir := t.TempDir()
	deep := "x" + strings.Repeat("/x", workspace.MaxWalkDepth)
	mkfiles(t, dir, deep+"/keys/prod.pem", "a.go")
	ran := false
	g, _ := runGate(t, dir, nil, nil, func(string) { ran = true })
	rules, _ := ReadScopeRules(nil)
	g.reads = readScope{newScope(rules)}
	o := call(g, "run", `{}`)
	if o.Status != Failed || o.Reason != tools.ReasonDeniedPath || !strings.Contains(o.Message, "read_scope could not be checked beneath x/x/") ||
		!strings.Contains(o.Message, "more than 256 directories deep") || ran {
		t.Fatalf("run with a tree deeper than the walk: ran %v, %+v", ran, o)
	}
	// The same with a restricting write-scope rule (the whole walk).
	ran = false
	g, _ = runGate(t, dir, []string{"secrets/**=denied"}, nil, func(string) { ran = true })
	g.reads = readScope{newScope(rules)}
	if o := call(g, "run", `{}`); o.Status != Failed || o.Reason != tools.ReasonDeniedPath || ran {
		t.Fatalf("with a write-scope rule: ran %v, %+v", ran, o)
	}
	// Without a read scope nothing is masked: the call runs.
	ran = false
	g, _ = runGate(t, dir, nil, nil, func(string) { ran = true })
	if o := call(g, "run", `{}`); o.Status != Executed || !ran {
		t.Fatalf("without a read scope: ran %v, %+v", ran, o)
	}
}

func init() {
	// The masks' walk of the workspace os.Args[1], as whatever user it was
	// started as: prints the masked files, then how many directories it
	// could not walk and the first of them.
	reexec.Register("gate-masks-once", func() {
		ws, err := workspace.Open(os.Args[1])
		if err != nil {
			fmt.Println("open: " + err.Error())
			os.Exit(0)
		}
		rules, _ := ReadScopeRules(nil)
		g := &Gate{cfg: Config{Workspace: ws}, reads: readScope{newScope(rules)}}
		h, err := g.holdBefore()
		if err != nil {
			fmt.Println("hold: " + err.Error())
			os.Exit(0)
		}
		fmt.Printf("%s\n%d %s\n", strings.Join(h.hold.Masked, " "), h.skipped, h.unwalked)
		os.Exit(0)
	})
}

// TestMaskWalkUnsearchable: as a user who may list a directory but not
// search it (mode r--) or search it but not list it (--x), the masks'
// walk counts both as not walked, so the run call is refused (holdFor):
// the files beneath them are not known. An earlier walk listed an r--
// directory from its parent's descriptor and silently left out the
// secret it could not stat there.
func TestMaskWalkUnsearchable(t *testing.T) {
	testenv.Require(t, os.Geteuid() == 0, "running as root (to start a child as another user)", testenv.ShapeNoUserns)
	base := t.TempDir()
	dir := filepath.Join(base, "ws")
	mkfiles(t, dir, "ronly/.env", "xonly/.env", "ok/.env")
	for d := base; d != "/" && d != os.TempDir(); d = filepath.Dir(d) {
		os.Chmod(d, 0o755)
	}
	for rel, mode := range map[string]os.FileMode{"ronly": 0o644, "xonly": 0o311} {
		if err := os.Chmod(filepath.Join(dir, rel), mode); err != nil {
			t.Fatal(err)
		}
	}
	const nobody = 65534
	cmd := reexec.Command("gate-masks-once", dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("walk as uid %d: %v", nobody, err)
	}
	if got, want := string(out), "ok/.env\n2 ronly (permission denied)\n"; got != want {
		t.Fatalf("the walk as uid %d:\n got %q\nwant %q (ok/.env masked; ronly and xonly not walked)", nobody, got, want)
	}
}

// TestMaskListingsSwept: listings of directories a walk no longer reaches
// (renamed, removed) are dropped at its end: a child that renames a large
// directory at every call does not grow what the gate keeps.
func TestMaskListingsSwept(t *testing.T) {
	withMargin(t, 20*time.Millisecond)
	dir := t.TempDir()
	for i := 0; i < 50; i++ {
		mkfiles(t, dir, "top/d"+strconv.Itoa(i)+"/code.go")
	}
	time.Sleep(60 * time.Millisecond)
	g := maskGate(t, dir)
	kept := func() (int, int) {
		g.masks.mu.Lock()
		defer g.masks.mu.Unlock()
		return len(g.masks.dirs), g.masks.items
	}
	prev := "top"
	for i := 0; i < 5; i++ {
		masksNow(t, g)
		if n, items := kept(); n > 52 || items > 51 {
			t.Fatalf("after %d renames: %d listings, %d items kept for a tree of 52 directories and 51 entries", i, n, items)
		}
		next := "top" + strconv.Itoa(i)
		if err := os.Rename(filepath.Join(dir, prev), filepath.Join(dir, next)); err != nil {
			t.Fatal(err)
		}
		prev = next
		time.Sleep(30 * time.Millisecond)
	}
}

// TestMaskListingsClockStep: a realtime clock set back since the last walk
// drops every listing (a change after the step could take a ctime already
// kept). The step is made by moving the kept offset, not the host's clock.
func TestMaskListingsClockStep(t *testing.T) {
	withMargin(t, 20*time.Millisecond)
	dir := t.TempDir()
	mkfiles(t, dir, "a/code.go")
	time.Sleep(60 * time.Millisecond)
	g := maskGate(t, dir)
	masksNow(t, g)
	hits := g.masks.hits
	masksNow(t, g)
	if g.masks.hits == hits {
		t.Fatal("no listing taken before the step")
	}
	g.masks.mu.Lock()
	g.masks.offset += time.Second // as if the clock was a second ahead then
	g.masks.mu.Unlock()
	hits = g.masks.hits
	masksNow(t, g)
	if g.masks.hits != hits {
		t.Fatalf("%d listings taken after the realtime clock stepped back", g.masks.hits-hits)
	}
}

// TestMaskListingsOverlayLowerChange: on overlayfs a merged directory
// shows its upper layer's ctime, so a file put in a lower layer changes
// nothing the walk sees of it: overlayfs is not trusted, and the secret is
// masked at the next walk. The overlay is mounted by a re-run of this test
// binary in a mount namespace of its own (unshare), not on the host.
func TestMaskListingsOverlayLowerChange(t *testing.T) {
	if os.Getenv("B10X_OVERLAY_CHILD") == "" {
		if os.Geteuid() != 0 {
			testenv.Require(t, false, "root, to mount an overlay in a mount namespace of the test's own", testenv.ShapeNoUserns)
		}
		cmd := exec.Command("unshare", "--mount", "--propagation", "private", os.Args[0], "-test.run", "^TestMaskListingsOverlayLowerChange$", "-test.v")
		cmd.Env = append(os.Environ(), "B10X_OVERLAY_CHILD=1")
		out, err := cmd.CombinedOutput()
		// The VM shapes' kernels boot without the overlay module.
		testenv.Require(t, !strings.Contains(string(out), "mount overlay: no such device"), "overlayfs", testenv.InGuest()...)
		if err != nil || !strings.Contains(string(out), "--- PASS") {
			t.Fatalf("the child in its own mount namespace: %v\n%s", err, out)
		}
		return
	}
	withMargin(t, 20*time.Millisecond)
	base := t.TempDir()
	for _, d := range []string{"lower/a", "upper/a", "work", "merged"} {
		if err := os.MkdirAll(filepath.Join(base, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	mkfiles(t, base, "lower/a/code.go", "upper/a/notes.txt")
	if err := unix.Mount("overlay", base+"/merged", "overlay", 0, "lowerdir="+base+"/lower,upperdir="+base+"/upper,workdir="+base+"/work"); err != nil {
		t.Fatalf("mount overlay: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(base+"/merged", unix.MNT_DETACH) })
	time.Sleep(60 * time.Millisecond)
	g := maskGate(t, base+"/merged")
	// The first look at a merged directory may set xattrs on its upper
	// one (a ctime of now): let that age past the margin too.
	masksNow(t, g)
	time.Sleep(60 * time.Millisecond)
	masksNow(t, g)
	masksNow(t, g)
	t.Logf("%d directories taken from the listings", g.masks.hits)
	// Beside the overlay, as the host may change a layer.
	mkfiles(t, base, "lower/a/.env")
	if got := masksNow(t, g); !slices.Equal(got, []string{"a/.env"}) {
		t.Fatalf("after a secret appeared in the lower layer: masks %q, want a/.env", got)
	}
}
