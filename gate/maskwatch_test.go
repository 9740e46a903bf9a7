package gate

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/b10x/harness/internal/testenv"
)

// watchedTree makes dir's files, lets their directories' listings be kept
// and watched (two walks past the margin), and returns the gate; every
// directory but the root is taken unopened by the third walk.
func watchedTree(t *testing.T, dir string, rels ...string) *Gate {
	t.Helper()
	var fs unix.Statfs_t
	if err := unix.Statfs(dir, &fs); err != nil {
		t.Fatal(err)
	}
	testenv.Require(t, watchedFS[int64(fs.Type)], "a temporary directory on ext4, xfs or tmpfs (a watched file system)")
	withMargin(t, 20*time.Millisecond)
	mkfiles(t, dir, rels...)
	time.Sleep(60 * time.Millisecond)
	g := maskGate(t, dir)
	masksNow(t, g) // kept
	masksNow(t, g) // watched
	settled(t, g)
	return g
}

// settled walks once more and fails unless every kept directory but the
// root was taken without being opened.
func settled(t *testing.T, g *Gate) {
	t.Helper()
	before := g.masks.unopened
	masksNow(t, g)
	g.masks.mu.Lock()
	n := len(g.masks.dirs)
	g.masks.mu.Unlock()
	if got := g.masks.unopened - before; got != n-1 {
		t.Fatalf("%d of %d kept directories (the root aside) taken unopened", got, n-1)
	}
}

// TestMaskWatchSeesChanges: once every directory is watched and taken
// unopened, each change a run child (or anyone) can make to the names of
// the tree is found at the next walk, which matches a whole walk: files
// created, removed, hard-linked in, directories renamed in from outside,
// exchanged (RENAME_EXCHANGE: neither directory's own watch has an event,
// only their parents'), replaced by a new one of the same name, moved
// deep, replaced by a symbolic link, and a directory's mtime set back.
func TestMaskWatchSeesChanges(t *testing.T) {
	dir := t.TempDir()
	outside := t.TempDir()
	g := watchedTree(t, dir, ".env", "a/b/c/code.go", "a/x/readme.md", "b/x/.env", "d/e/f/g/code.go", "old/s.txt")
	mkfiles(t, outside, "keys/id_ed25519", "plain.txt", "lnk/.netrc")
	at := func(rel string) string { return filepath.Join(dir, rel) }
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	steps := []struct {
		name   string
		change func()
		has    string // a secret the walk must now mask ("": none new)
	}{
		{"created deep", func() { mkfiles(t, dir, "a/b/c/new.pem") }, "a/b/c/new.pem"},
		{"removed", func() { must(os.Remove(at("a/b/c/new.pem"))) }, ""},
		{"renamed in from outside", func() { must(os.Rename(filepath.Join(outside, "keys"), at("d/e/f/keys"))) }, "d/e/f/keys/id_ed25519"},
		{"hard link made", func() { must(os.Link(filepath.Join(outside, "plain.txt"), at("a/b/c/.env"))) }, "a/b/c/.env"},
		{"exchanged", func() { must(unix.Renameat2(unix.AT_FDCWD, at("a/x"), unix.AT_FDCWD, at("b/x"), unix.RENAME_EXCHANGE)) }, "a/x/.env"},
		{"replaced by a new directory", func() {
			must(os.RemoveAll(at("d/e")))
			mkfiles(t, dir, "d/e/f/g/server.key")
		}, "d/e/f/g/server.key"},
		{"moved deep", func() { must(os.Rename(at("a/x"), at("old/deeper"))) }, "old/deeper/.env"},
		{"replaced by a link", func() {
			must(os.Symlink(filepath.Join(outside, "lnk"), at("old/tmp")))
			must(unix.Renameat2(unix.AT_FDCWD, at("old/tmp"), unix.AT_FDCWD, at("b/x"), unix.RENAME_EXCHANGE))
		}, ""},
		{"mtime set back", func() {
			mkfiles(t, dir, "a/b/.netrc")
			then := time.Now().Add(-time.Hour)
			must(os.Chtimes(at("a/b"), then, then))
		}, "a/b/.netrc"},
	}
	for _, s := range steps {
		time.Sleep(60 * time.Millisecond)
		masksNow(t, g) // the change before made listings fresh: kept and checked again
		masksNow(t, g)
		settled(t, g)
		s.change()
		got, want := masksNow(t, g), masksByWalk(t, g)
		if !slices.Equal(got, want) {
			t.Errorf("%s: masks %q, a whole walk finds %q", s.name, got, want)
		}
		if s.has != "" && !slices.Contains(got, s.has) {
			t.Errorf("%s: %s not masked: %q", s.name, s.has, got)
		}
	}
}

// TestMaskWatchOverflow: when more events come than the kernel queues
// (fs.inotify.max_queued_events, 16384 by default), the ones past it are
// lost and the queue says so once; the next walk then checks every
// directory. Here the secret is created after the queue is full, so its
// directory's event is one of those lost.
func TestMaskWatchOverflow(t *testing.T) {
	dir := t.TempDir()
	g := watchedTree(t, dir, "junk/x", "a/code.go")
	limit := 16384
	if b, err := os.ReadFile("/proc/sys/fs/inotify/max_queued_events"); err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			limit = n
		}
	}
	jd, err := unix.Open(filepath.Join(dir, "junk"), unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(jd)
	for i := 0; i <= limit; i++ {
		fd, err := unix.Openat(jd, "f"+strconv.Itoa(i), unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		unix.Close(fd)
	}
	mkfiles(t, dir, "a/prod.pem")
	before := g.masks.unopened
	got := masksNow(t, g)
	if !slices.Contains(got, "a/prod.pem") {
		t.Fatalf("a secret created past a full event queue not masked: %q", got)
	}
	if g.masks.unopened != before {
		t.Fatalf("%d directories taken unopened after the queue overflowed", g.masks.unopened-before)
	}
}

// TestMaskWatchClosed: a closed gate's walks check every directory again
// (and are right), and its inotify instance is gone from the process.
func TestMaskWatchClosed(t *testing.T) {
	dir := t.TempDir()
	count := func() int {
		n := 0
		ents, _ := os.ReadDir("/proc/self/fd")
		for _, e := range ents {
			if l, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err == nil && l == "anon_inode:inotify" {
				n++
			}
		}
		return n
	}
	before := count()
	g := watchedTree(t, dir, "a/b/code.go", "c/.env")
	if count() != before+1 {
		t.Fatalf("%d inotify instances, want %d while the gate watches", count(), before+1)
	}
	g.Close()
	if count() != before {
		t.Fatalf("%d inotify instances after Close, want %d", count(), before)
	}
	mkfiles(t, dir, "a/b/new.pem")
	u := g.masks.unopened
	if got := masksNow(t, g); !slices.Equal(got, []string{"a/b/new.pem", "c/.env"}) || g.masks.unopened != u {
		t.Fatalf("after Close: masks %q, %d taken unopened", got, g.masks.unopened-u)
	}
}

// TestMaskWatchBindAlias: one directory under two names (bound at the
// second, in a mount namespace of the test's own) has one watch, which an
// event reports under the name it was last opened by. Neither name's
// listing may then be taken unopened on the strength of that watch: a
// secret created through either name is masked at both, and after the
// bind is gone at its first name.
func TestMaskWatchBindAlias(t *testing.T) {
	if os.Getenv("B10X_BIND_CHILD") == "" {
		testenv.Require(t, os.Geteuid() == 0, "root, to bind a directory in a mount namespace of the test's own", testenv.ShapeNoUserns)
		cmd := exec.Command("unshare", "--mount", "--propagation", "private", os.Args[0], "-test.run", "^TestMaskWatchBindAlias$", "-test.v")
		cmd.Env = append(os.Environ(), "B10X_BIND_CHILD=1")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "--- PASS") {
			t.Fatalf("the child in its own mount namespace: %v\n%s", err, out)
		}
		return
	}
	dir := t.TempDir()
	g := watchedTree(t, dir, "a/d/code.go", "b/m/keep.txt")
	at := func(rel string) string { return filepath.Join(dir, rel) }
	if err := unix.Mount(at("a/d"), at("b/m"), "", unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Unmount(at("b/m"), unix.MNT_DETACH) })
	// b read again, so that b/m (a/d's inode now) is opened as b/m.
	mkfiles(t, dir, "b/tick")
	if err := os.Remove(at("b/tick")); err != nil {
		t.Fatal(err)
	}
	check := func(step string, want ...string) {
		t.Helper()
		for i := 0; i < 3; i++ {
			time.Sleep(30 * time.Millisecond)
			masksNow(t, g)
		}
		mkfiles(t, dir, want[0])
		got, whole := masksNow(t, g), masksByWalk(t, g)
		if !slices.Equal(got, whole) {
			t.Fatalf("%s: masks %q, a whole walk finds %q", step, got, whole)
		}
		for _, w := range want {
			if !slices.Contains(got, w) {
				t.Fatalf("%s: %s not masked: %q", step, w, got)
			}
		}
	}
	check("bound", "a/d/one.pem", "b/m/one.pem")
	if err := unix.Unmount(at("b/m"), 0); err != nil {
		t.Fatal(err)
	}
	check("unbound", "a/d/two.pem")
}

// TestMaskWatchCloseDuringWalk: a Close that comes while a walk runs
// leaves nothing trusted on the strength of the closed instance: a secret
// created after it is masked by the next walks.
func TestMaskWatchCloseDuringWalk(t *testing.T) {
	const n = 300
	var rels []string
	for i := 0; i < n; i++ {
		rels = append(rels, "d"+strconv.Itoa(i)+"/x.txt")
	}
	for round := 0; round < 12; round++ {
		dir := t.TempDir()
		g := watchedTree(t, dir, rels...)
		// The root read again, so that the walk opens every directory;
		// past the margin, so that the walk keeps it and the next one
		// takes its subdirectories as they are.
		mkfiles(t, dir, "root"+strconv.Itoa(round)+".txt")
		time.Sleep(30 * time.Millisecond)
		done := make(chan struct{})
		go func() {
			defer close(done)
			_, _ = g.holdBefore()
		}()
		time.Sleep(time.Duration(50*(round%6+1)) * time.Microsecond)
		g.Close()
		<-done
		masksNow(t, g)
		// A secret in every directory: the one a racing check left
		// trusted, if any, among them.
		secret := "/after" + strconv.Itoa(round) + ".pem"
		for i := 0; i < n; i++ {
			mkfiles(t, dir, "d"+strconv.Itoa(i)+secret)
		}
		got := masksNow(t, g)
		for i := 0; i < n; i++ {
			if rel := "d" + strconv.Itoa(i) + secret; !slices.Contains(got, rel) {
				t.Fatalf("round %d: %s, created after Close, not masked", round, rel)
			}
		}
	}
}

// TestMaskWatchOnlyKept: a directory whose listing is not kept (changed
// within the margin) keeps no watch: one moved out of the workspace
// afterwards pins nothing, and watches never outnumber the listings.
func TestMaskWatchOnlyKept(t *testing.T) {
	dir, out := t.TempDir(), t.TempDir()
	g := watchedTree(t, dir, "a/x.txt")
	for i := 0; i < 50; i++ {
		n := "n" + strconv.Itoa(i)
		mkfiles(t, dir, n+"/y.txt")
		masksNow(t, g) // opened and watched while checked; not kept
		if err := os.Rename(filepath.Join(dir, n), filepath.Join(out, n)); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(60 * time.Millisecond)
	masksNow(t, g)
	masksNow(t, g)
	g.masks.mu.Lock()
	listings, watches := len(g.masks.dirs), len(g.masks.watch.wds)
	g.masks.mu.Unlock()
	if watches > listings {
		t.Fatalf("%d watches for %d kept listings", watches, listings)
	}
}
