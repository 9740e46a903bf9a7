package workspace

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/b10x/harness/internal/reexec"
	"github.com/b10x/harness/internal/testenv"
)

// write is a Change that replaces the whole content of path by data, as
// file_write makes it.
func write(path string, data []byte) Change {
	return Change{Path: path, Build: func([]byte) ([]byte, error) { return data, nil }}
}

// edit is a Change that replaces the one occurrence of old in path by
// repl, as file_edit makes it.
func edit(path, old, repl string) Change {
	return Change{Path: path,
		Read: func(fd int, size int64) ([]byte, error) { return ReadAll(fd, size, 64<<20) },
		Build: func(data []byte) ([]byte, error) {
			if n := bytes.Count(data, []byte(old)); n != 1 {
				return nil, fmt.Errorf("%q occurs %d times", old, n)
			}
			return bytes.Replace(data, []byte(old), []byte(repl), 1), nil
		}}
}

func init() {
	// The appender: n edits of one file, each putting a token of its own
	// before the END marker.
	reexec.Register("workspace-appender", func() {
		dir, id := os.Args[1], os.Args[2]
		n, _ := strconv.Atoi(os.Args[3])
		ws, err := Open(dir)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		if err := appendTokens(ws, id, n); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(3)
		}
		os.Exit(0)
	})
	// The crash writer: writes of several MB to one target, forever,
	// alternating two contents, until killed.
	reexec.Register("workspace-crash-writer", func() {
		dir, mode := os.Args[1], os.Args[2]
		noTmpfile = mode == "named"
		ws, err := Open(dir)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		// Start with the version the target does not hold: every round
		// then chooses between a real old and a real new content.
		cur, _ := os.ReadFile(filepath.Join(dir, "target.txt"))
		first := 0
		if len(cur) > 0 && cur[0] == 'A' {
			first = 1
		}
		os.Stdout.WriteString("ready\n")
		for i := first; ; i++ {
			if _, err := ws.Commit(context.Background(), write("target.txt", []byte(crashContent(i%2)))); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(3)
			}
		}
	})
}

func appendTokens(ws *Workspace, id string, n int) error {
	for i := range n {
		if _, err := ws.Commit(context.Background(), edit("shared.txt", "END\n", fmt.Sprintf("tok-%s-%d\nEND\n", id, i))); err != nil {
			return fmt.Errorf("appender %s, edit %d: %w", id, i, err)
		}
	}
	return nil
}

// Two processes and two goroutines edit one 1 MB file at the same time,
// each adding tokens of its own: every edit reported done is in the file
// (the compare and swap at the rename, and the directory's lock, lose
// none). tools' TestEditNoLostUpdates does the same through file_edit.
func TestCommitNoLostUpdates(t *testing.T) {
	testenv.KernelIndependent(t, "concurrent edits of one file lose none")
	fx := newFixture(t)
	p := filepath.Join(fx.root, "shared.txt")
	filler := strings.Repeat("filler line of the shared file\n", (1<<20)/31)
	if err := os.WriteFile(p, []byte(filler+"END\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	const each = 20
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for _, id := range []string{"p1", "p2"} {
		cmd := reexec.Command("workspace-appender", fx.root, id, strconv.Itoa(each))
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := cmd.Wait(); err != nil {
				errs <- fmt.Errorf("process %s: %v: %s", id, err, stderr.String())
			}
		}()
	}
	for _, id := range []string{"g1", "g2"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := appendTokens(fx.ws, id, each); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	got := readFile(t, p)
	if !strings.HasPrefix(got, filler) || !strings.HasSuffix(got, "END\n") {
		t.Fatalf("the file lost its frame: %d bytes", len(got))
	}
	lost := 0
	for _, id := range []string{"p1", "p2", "g1", "g2"} {
		for i := range each {
			if n := strings.Count(got, fmt.Sprintf("tok-%s-%d\n", id, i)); n != 1 {
				t.Errorf("token %s-%d is in the file %d times", id, i, n)
				lost++
			}
		}
	}
	if lost > 0 {
		t.Fatalf("%d of %d edits lost or doubled", lost, 4*each)
	}
	assertNoTemps(t, fx.root)
}

// A directory locked by another process past the wait: conflict, nothing
// written; the context's deadline while waiting: timeout; cancelled while
// waiting: cancelled.
func TestWriteLockWait(t *testing.T) {
	fx := newFixture(t)
	d, err := os.Open(fx.root)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := unix.Flock(int(d.Fd()), unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	saved := lockWait
	lockWait = 200 * time.Millisecond
	defer func() { lockWait = saved }()
	_, err = fx.ws.Commit(context.Background(), write("file.txt", []byte("x")))
	if e, ok := err.(*Error); !ok || e.Kind != Conflict || !strings.Contains(e.Public, "locked") {
		t.Fatalf("locked directory: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := fx.ws.Commit(ctx, write("file.txt", []byte("x"))); kindOf(err) != Timeout {
		t.Fatalf("deadline while waiting: %v", err)
	}
	ctx, cancel = context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	if _, err := fx.ws.Commit(ctx, write("file.txt", []byte("x"))); kindOf(err) != Cancelled {
		t.Fatalf("cancelled while waiting: %v", err)
	}
	unix.Flock(int(d.Fd()), unix.LOCK_UN)
	if got := readFile(t, filepath.Join(fx.root, "file.txt")); got != "hello\n" {
		t.Fatalf("written while locked: %q", got)
	}
	if _, err := fx.ws.Commit(context.Background(), write("file.txt", []byte("x"))); err != nil {
		t.Fatal(err)
	}
}

// Temporary files a killed write left behind: removed by a later write in
// the same directory when stale (old, one link, not locked); anything else
// is left alone (issue 20, item 11). tools' TestTempsHidden checks that
// the read tools never show them.
func TestStaleTemps(t *testing.T) {
	fx := newFixture(t)
	dir := filepath.Join(fx.root, "sub")
	old := time.Now().Add(-2 * staleTempAge)
	mk := func(name string, stale bool) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("partial"), 0o600); err != nil {
			t.Fatal(err)
		}
		if stale {
			os.Chtimes(p, old, old)
		}
		return p
	}
	gone := mk(TempPrefix+"0123456789abcdef"+TempSuffix, true)
	fresh := mk(TempPrefix+"1123456789abcdef"+TempSuffix, false)
	locked := mk(TempPrefix+"2123456789abcdef"+TempSuffix, true)
	linked := mk(TempPrefix+"3123456789abcdef"+TempSuffix, true)
	other := mk(TempPrefix+"0123456789abcdeg"+TempSuffix, true) // not hex: not ours
	if err := os.Link(linked, filepath.Join(dir, "keep-link")); err != nil {
		t.Fatal(err)
	}
	os.Chtimes(linked, old, old)
	lf, err := os.Open(locked)
	if err != nil {
		t.Fatal(err)
	}
	defer lf.Close()
	if err := unix.Flock(int(lf.Fd()), unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}

	tempsCleaned.Clear() // other tests' writes in the same directory do not count
	if _, err := fx.ws.Commit(context.Background(), write("sub/new.txt", []byte("x"))); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(gone); !os.IsNotExist(err) {
		t.Errorf("the stale temporary file is still there: %v", err)
	}
	for _, p := range []string{fresh, locked, linked, other} {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("%s was removed: %v", filepath.Base(p), err)
		}
	}
}

func TestIsTempName(t *testing.T) {
	if n := tempName(); !IsTempName(n) {
		t.Fatalf("%q not recognised", n)
	}
	for _, n := range []string{".b10x-write-0123456789abcdef.tm", ".b10x-write-0123456789abcdeg.tmp", "b10x-write-0123456789abcdef.tmp", ".b10x-write-.tmp"} {
		if IsTempName(n) {
			t.Errorf("%q recognised", n)
		}
	}
}

// Without O_TMPFILE the named temporary file is used and removed.
func TestCommitNamedTemp(t *testing.T) {
	fx := newFixture(t)
	noTmpfile = true
	defer func() { noTmpfile = false }()
	if _, err := fx.ws.Commit(context.Background(), write("sub/n.txt", []byte("named"))); err != nil {
		t.Fatal(err)
	}
	if readFile(t, filepath.Join(fx.root, "sub/n.txt")) != "named" {
		t.Fatal("content")
	}
	assertNoTemps(t, fx.root)
}

// crashContent is the content the crash writer alternates between: two
// versions, of different sizes, each made of one repeated
// byte so a mix is detectable.
func crashContent(v int) string {
	return strings.Repeat(string(rune('A'+v)), (3<<20)+v*(1<<20))
}

// A writer SIGKILLed at random moments during writes of large content: the
// target always holds exactly the old or the new content; stray temporary
// files, if any, carry the recognisable name and do not stop a later
// write. (This was tools' TestFileWriteCrash, through file_write.)
func TestCommitCrash(t *testing.T) {
	testenv.KernelIndependent(t, "a write killed at any point leaves the old file or the new")
	for _, mode := range []string{"tmpfile", "named"} {
		t.Run(mode, func(t *testing.T) {
			dir := t.TempDir()
			target := filepath.Join(dir, "target.txt")
			if err := os.WriteFile(target, []byte(crashContent(0)), 0o644); err != nil {
				t.Fatal(err)
			}
			want := [2]string{crashContent(0), crashContent(1)}
			rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
			seen := map[string]int{}
			strays := map[string]bool{} // each stray once, however many rounds it stays
			for round := range 15 {
				before, err := os.ReadFile(target)
				if err != nil {
					t.Fatal(err)
				}
				cmd := reexec.Command("workspace-crash-writer", dir, mode)
				var stderr bytes.Buffer
				cmd.Stderr = &stderr
				out, err := cmd.StdoutPipe()
				if err != nil {
					t.Fatal(err)
				}
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				buf := make([]byte, 6)
				if _, err := out.Read(buf); err != nil || string(buf) != "ready\n" {
					cmd.Process.Kill()
					cmd.Wait()
					t.Fatalf("round %d: writer did not start: %q %v %s", round, buf, err, stderr.String())
				}
				// One write takes tens to hundreds of milliseconds here
				// (mostly fsync): kill anywhere across several writes.
				time.Sleep(time.Duration(rng.IntN(500_000)) * time.Microsecond)
				cmd.Process.Signal(syscall.SIGKILL)
				err = cmd.Wait()
				if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
					t.Fatalf("round %d: writer ended on its own: %v %s", round, err, stderr.String())
				}
				got, err := os.ReadFile(target)
				if err != nil {
					t.Fatalf("round %d: %v", round, err)
				}
				switch {
				case string(got) == string(before):
					seen["old"]++
				case string(got) == want[0] || string(got) == want[1]:
					seen["new"]++
				default:
					t.Fatalf("round %d: target holds %d bytes that are neither version (first %q)", round, len(got), got[:min(len(got), 16)])
				}
				ents, _ := os.ReadDir(dir)
				for _, e := range ents {
					switch {
					case e.Name() == "target.txt":
					case IsTempName(e.Name()):
						strays[e.Name()] = true
					default:
						t.Fatalf("round %d: unexpected file %q", round, e.Name())
					}
				}
			}
			t.Logf("%s: old content %d times, new %d times; %d stray temporary files", mode, seen["old"], seen["new"], len(strays))
			if mode == "tmpfile" && len(strays) > 3 {
				t.Errorf("O_TMPFILE writes left %d stray files in 15 kills; the window should be tiny", len(strays))
			}
			// A later write is not disturbed by strays.
			ws, err := Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer ws.Close()
			if _, err := ws.Commit(context.Background(), write("target.txt", []byte("final"))); err != nil {
				t.Fatal(err)
			}
			if readFile(t, target) != "final" {
				t.Fatal("final write")
			}
		})
	}
}
