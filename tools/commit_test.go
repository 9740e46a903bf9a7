package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/b10x/harness/internal/reexec"
	"github.com/b10x/harness/internal/testenv"
	"github.com/b10x/harness/workspace"
)

func init() {
	// The appender: n file_edits of one file, each putting a token of its
	// own before the END marker.
	reexec.Register("tools-appender", func() {
		dir, id := os.Args[1], os.Args[2]
		n, _ := strconv.Atoi(os.Args[3])
		ws, err := workspace.Open(dir)
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
}

func appendTokens(ws *workspace.Workspace, id string, n int) error {
	for i := range n {
		args, _ := json.Marshal(FileEditArgs{Path: "shared.txt", OldString: "END\n", NewString: fmt.Sprintf("tok-%s-%d\nEND\n", id, i)})
		p, err := FileEdit{}.Prepare(ws, args)
		if err == nil {
			_, err = p.Execute(context.Background(), Report{})
		}
		if err != nil {
			return fmt.Errorf("appender %s, edit %d: %w", id, i, err)
		}
	}
	return nil
}

// Two processes and two goroutines append tokens to one 1 MB file with
// file_edit at the same time: every edit reported done is in the file
// (issue 20, item 3: 14 of 71 were lost when the check ran before the
// temporary file was written and nothing checked again at the rename).
func TestEditNoLostUpdates(t *testing.T) {
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
		cmd := reexec.Command("tools-appender", fx.root, id, strconv.Itoa(each))
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

// A directory locked by another process: a write whose deadline passes
// while it waits for the lock is timeout, one cancelled meanwhile
// cancelled, and nothing is written (the workspace package's
// TestWriteLockWait tests the wait itself, and its conflict).
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
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	pr, _ := FileWrite{}.Prepare(fx.ws, json.RawMessage(`{"path":"file.txt","content":"x"}`))
	if _, err := pr.Execute(ctx, Report{}); reasonOf(err) != ReasonTimeout {
		t.Fatalf("deadline while waiting: %v", err)
	}
	ctx, cancel = context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	pr, _ = FileEdit{}.Prepare(fx.ws, json.RawMessage(`{"path":"file.txt","old_string":"hello","new_string":"x"}`))
	if _, err := pr.Execute(ctx, Report{}); reasonOf(err) != ReasonCancelled {
		t.Fatalf("cancelled while waiting: %v", err)
	}
	unix.Flock(int(d.Fd()), unix.LOCK_UN)
	if got := readFile(t, filepath.Join(fx.root, "file.txt")); got != "hello\n" {
		t.Fatalf("written while locked: %q", got)
	}
	mustCall(t, fx.ws, FileWrite{}, `{"path":"file.txt","content":"x"}`)
}

// replace_all's new size is computed before anything is built: a 2 MB
// file of "a" with every "a" replaced by 1,000 bytes (2 GB) is too_large,
// fast and without allocating it (issue 20, item 1: the harness died out
// of memory).
func TestEditTooLarge(t *testing.T) {
	fx := newFixture(t)
	p := filepath.Join(fx.root, "a.txt")
	orig := strings.Repeat("a", 2<<20)
	os.WriteFile(p, []byte(orig), 0o644)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	_, err := call(t, fx.ws, FileEdit{}, jsonArgs(map[string]any{"path": "a.txt", "old_string": "a", "new_string": strings.Repeat("b", 1000), "replace_all": true}))
	took := time.Since(start)
	runtime.ReadMemStats(&after)
	e, ok := err.(*Error)
	if !ok || e.Reason != ReasonTooLarge {
		t.Fatalf("%v", err)
	}
	want := fmt.Sprintf("the edit would make \"a.txt\" %d bytes (%d replacement(s) of 1 bytes by 1000 bytes in %d bytes); the limit is %d bytes; nothing was written",
		int64(2<<20)*1000, 2<<20, 2<<20, MaxWriteBytes)
	if e.Public != want {
		t.Errorf("message %q\nwant %q", e.Public, want)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 200<<20 {
		t.Errorf("the refusal allocated %d MB", alloc>>20)
	}
	if took > 3*time.Second {
		t.Errorf("the refusal took %v", took)
	}
	if readFile(t, p) != orig {
		t.Fatal("the file changed")
	}
	// More replacements than the offsets kept for the diff: too_large too.
	_, err = call(t, fx.ws, FileEdit{}, jsonArgs(map[string]any{"path": "a.txt", "old_string": "a", "new_string": "b", "replace_all": true}))
	if e, ok := err.(*Error); !ok || e.Reason != ReasonTooLarge || !strings.Contains(e.Public, "limited to 1048576 replacements") {
		t.Fatalf("%v", err)
	}
	assertNoTemps(t, fx.root)
}

// A write's result begins with what happened to the file (path, sizes,
// lines, sha256, and any metadata note), short whatever the diff's size,
// so a gate that shortens the result keeps it (issue 20, item 2).
func TestWriteResultStatesEffectFirst(t *testing.T) {
	fx := newFixture(t)
	p := filepath.Join(fx.root, "dbl")
	os.WriteFile(p, []byte(strings.Repeat("x\n", 300000)), 0o644)
	r := mustCall(t, fx.ws, FileEdit{}, `{"path":"dbl","old_string":"x\n","new_string":"x\ny\n","replace_all":true}`)
	effect, _ := r.Meta["effect"].(string)
	newContent := strings.Repeat("x\ny\n", 300000)
	want := fmt.Sprintf("edited dbl: 300000 replacement(s); 300000 line(s) removed, 600000 added; 600000 -> 1200000 bytes; sha256 %s (was %s)\n",
		shaHex([]byte(newContent)), shaHex([]byte(strings.Repeat("x\n", 300000))))
	if effect != want || !strings.HasPrefix(r.Text, effect) {
		t.Fatalf("effect %q\nwant %q", effect, want)
	}
	if !strings.HasPrefix(r.Text[len(effect):], "--- a/dbl\n+++ b/dbl\n@@ ") {
		t.Fatalf("no diff after the effect: %.200q", r.Text[len(effect):])
	}
	if !strings.Contains(r.Text, "[diff stopped past 1048576 bytes; ") || len(r.Text) > maxDiffBytes+64<<10 {
		t.Fatalf("the diff was not bounded: %d bytes", len(r.Text))
	}
	if readFile(t, p) != newContent {
		t.Fatal("content")
	}
	if r.Meta["sha256"] != shaHex([]byte(newContent)) || r.Meta["bytes_after"] != 1200000 || r.Meta["lines_added"] != 600000 {
		t.Fatalf("meta %v", r.Meta)
	}
}

// What an edit keeps (docs/decisions/0049-what-an-edit-preserves.md):
// owner, group, permission bits, extended attributes; not the set-id bits
// nor file capabilities (said in the result); a file with several hard
// links and a read-only file are refused, unchanged.
func TestEditPreservesMetadata(t *testing.T) {
	fx := newFixture(t)
	p := filepath.Join(fx.root, "meta.txt")
	os.WriteFile(p, []byte("one\n"), 0o644)
	root := os.Geteuid() == 0
	// user.* attributes exist on tmpfs only from Linux 6.6 (the VM shapes
	// run 6.1 with TMPDIR on tmpfs); trusted.* has long been there, for root.
	xattr := "user.note"
	err := unix.Setxattr(p, xattr, []byte("kept"), 0)
	if (err == unix.ENOTSUP || err == unix.EOPNOTSUPP) && root {
		xattr = "trusted.note"
		err = unix.Setxattr(p, xattr, []byte("kept"), 0)
	}
	if err != nil {
		testenv.Require(t, false, "extended attributes on the test file system ("+err.Error()+")",
			testenv.ShapeDebian61, testenv.ShapeNoLandlock, testenv.ShapeNoUserns, testenv.ShapeCgroupV1)
	}
	if root {
		if err := os.Chown(p, 1234, 5678); err != nil {
			t.Fatal(err)
		}
		// A capability set on the old file must not reach the new one.
		capV2 := []byte{0, 0, 0, 2, 0, 0x20, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
		if err := unix.Setxattr(p, "security.capability", capV2, 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Chmod(p, 0o6751); err != nil {
		t.Fatal(err)
	}
	r := mustCall(t, fx.ws, FileEdit{}, `{"path":"meta.txt","old_string":"one","new_string":"two"}`)
	if readFile(t, p) != "two\n" {
		t.Fatal("content")
	}
	var st unix.Stat_t
	if err := unix.Stat(p, &st); err != nil {
		t.Fatal(err)
	}
	if st.Mode&0o7777 != 0o751 {
		t.Errorf("mode %04o, want 0751", st.Mode&0o7777)
	}
	if !strings.Contains(r.Text, "note: mode 0751 kept without its setuid, setgid and sticky bits (was 6751)\n") {
		t.Errorf("result does not say the set-id bits were dropped:\n%s", r.Text)
	}
	buf := make([]byte, 64)
	if n, err := unix.Getxattr(p, xattr, buf); err != nil || string(buf[:n]) != "kept" {
		t.Errorf("%s: %q %v", xattr, buf[:max(n, 0)], err)
	}
	if root {
		if st.Uid != 1234 || st.Gid != 5678 {
			t.Errorf("owner %d:%d, want 1234:5678", st.Uid, st.Gid)
		}
		if _, err := unix.Getxattr(p, "security.capability", buf); err != unix.ENODATA {
			t.Errorf("security.capability kept: %v", err)
		}
		if !strings.Contains(r.Text, "note: file capabilities (security.capability) dropped\n") {
			t.Errorf("result does not say capabilities were dropped:\n%s", r.Text)
		}
	}

	// Hard links: refused, both names unchanged.
	h := filepath.Join(fx.root, "linked.txt")
	os.WriteFile(h, []byte("shared\n"), 0o644)
	if err := os.Link(h, filepath.Join(fx.root, "other-name.txt")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		tool Tool
		args string
	}{
		{FileEdit{}, `{"path":"linked.txt","old_string":"shared","new_string":"split"}`},
		{FileWrite{}, `{"path":"linked.txt","content":"split"}`},
	} {
		_, err := call(t, fx.ws, tc.tool, tc.args)
		if e, ok := err.(*Error); !ok || e.Reason != ReasonToolError || !strings.Contains(e.Public, "has 2 hard links") {
			t.Errorf("%s of a file with 2 links: %v", tc.tool.Name(), err)
		}
	}
	if readFile(t, h) != "shared\n" || readFile(t, filepath.Join(fx.root, "other-name.txt")) != "shared\n" {
		t.Fatal("a linked file changed")
	}

	// Read-only: refused, unchanged.
	ro := filepath.Join(fx.root, "ro.txt")
	os.WriteFile(ro, []byte("fixed\n"), 0o644)
	os.Chmod(ro, 0o444)
	for _, tc := range []struct {
		tool Tool
		args string
	}{
		{FileEdit{}, `{"path":"ro.txt","old_string":"fixed","new_string":"moved"}`},
		{FileWrite{}, `{"path":"ro.txt","content":"moved"}`},
	} {
		_, err := call(t, fx.ws, tc.tool, tc.args)
		if e, ok := err.(*Error); !ok || e.Reason != ReasonToolError || e.Public != `"ro.txt" is read-only (mode 0444); nothing was written; make it writable first if it is meant to change` {
			t.Errorf("%s of a 0444 file: %v", tc.tool.Name(), err)
		}
	}
	if readFile(t, ro) != "fixed\n" {
		t.Fatal("the read-only file changed")
	}
	assertNoTemps(t, fx.root)
}

// Temporary files a killed write left behind are never shown by the read
// tools (issue 20, item 11; the workspace package's TestStaleTemps tests
// their removal).
func TestTempsHidden(t *testing.T) {
	fx := newFixture(t)
	dir := filepath.Join(fx.root, "sub")
	for _, name := range []string{workspace.TempPrefix + "0123456789abcdef" + workspace.TempSuffix, workspace.TempPrefix + "1123456789abcdef" + workspace.TempSuffix} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("partial"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		tool Tool
		args string
	}{{DirList{}, `{"path":"sub"}`}, {Find{}, `{"pattern":"*"}`}, {Search{}, `{"pattern":"partial"}`}} {
		r := mustCall(t, fx.ws, tc.tool, tc.args)
		if strings.Contains(r.Text, "0123456789abcdef") || strings.Contains(r.Text, "1123456789abcdef") {
			t.Errorf("%s shows a temporary file:\n%s", tc.tool.Name(), r.Text)
		}
	}
}

func init() {
	// The non-owner editor: one file_edit, as whatever user it was started
	// as; prints "reason\tmessage" (empty reason: done).
	reexec.Register("tools-edit-once", func() {
		ws, err := workspace.Open(os.Args[1])
		if err != nil {
			fmt.Println("open\t" + err.Error())
			os.Exit(0)
		}
		p, err := FileEdit{}.Prepare(ws, json.RawMessage(os.Args[2]))
		if err == nil {
			_, err = p.Execute(context.Background(), Report{})
		}
		if err != nil {
			e, _ := err.(*Error)
			fmt.Printf("%s\t%s\n", reasonOf(err), e.Public)
		} else {
			fmt.Println("\tdone")
		}
		os.Exit(0)
	})
}

// A harness that is not root cannot give a replaced file another owner,
// or a group it is not in: the edit is refused, the file unchanged; with
// its own file and group, the edit keeps both.
func TestEditAsNonOwner(t *testing.T) {
	testenv.Require(t, os.Geteuid() == 0, "running as root (to start a child as another user)", testenv.ShapeNoUserns)
	base := t.TempDir()
	dir := filepath.Join(base, "ws")
	if err := os.Mkdir(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	// The test's temporary directories are 0700: let the child reach the
	// workspace.
	for d := base; d != "/" && d != os.TempDir(); d = filepath.Dir(d) {
		os.Chmod(d, 0o755)
	}
	os.Chmod(dir, 0o777)
	const nobody = 65534
	for _, tc := range []struct {
		name     string
		uid, gid int
		want     string
	}{
		{"root-owned.txt", 0, 0, "tool_error\t\"root-owned.txt\" is owned by uid 0; the harness (uid 65534) cannot give the new file that owner; nothing was written"},
		{"root-group.txt", nobody, 0, "tool_error\t\"root-group.txt\" belongs to group 0; the harness (uid 65534) is not a member and cannot give the new file that group; nothing was written"},
		{"own.txt", nobody, nobody, "\tdone"},
	} {
		p := filepath.Join(dir, tc.name)
		if err := os.WriteFile(p, []byte("one\n"), 0o666); err != nil {
			t.Fatal(err)
		}
		os.Chmod(p, 0o666)
		if err := os.Chown(p, tc.uid, tc.gid); err != nil {
			t.Fatal(err)
		}
		cmd := reexec.Command("tools-edit-once", dir, fmt.Sprintf(`{"path":%q,"old_string":"one","new_string":"two"}`, tc.name))
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := strings.TrimSuffix(string(out), "\n"); got != tc.want {
			t.Errorf("%s:\n got %q\nwant %q", tc.name, got, tc.want)
		}
		var st unix.Stat_t
		unix.Stat(p, &st)
		wantContent := "one\n"
		if tc.want == "\tdone" {
			wantContent = "two\n"
		}
		if readFile(t, p) != wantContent || int(st.Uid) != tc.uid || int(st.Gid) != tc.gid || st.Mode&0o777 != 0o666 {
			t.Errorf("%s: %q, %d:%d %04o after the edit", tc.name, readFile(t, p), st.Uid, st.Gid, st.Mode&0o777)
		}
	}
}
