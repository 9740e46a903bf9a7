package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/b10x/harness/internal/testenv"
	"github.com/b10x/harness/workspace"
)

func readFile(t testing.TB, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// outsideUnchanged checks that nothing outside the workspace root was
// created or changed by a write attack.
func outsideUnchanged(t *testing.T, fx *fixture) {
	t.Helper()
	if got := readFile(t, filepath.Join(fx.base, "secret.txt")); got != outsideSecret {
		t.Fatalf("secret.txt changed: %q", got)
	}
	if got := readFile(t, filepath.Join(fx.base, "outside/secret2.txt")); got != outsideSecret {
		t.Fatalf("outside/secret2.txt changed: %q", got)
	}
	ents, _ := os.ReadDir(filepath.Join(fx.base, "outside"))
	if len(ents) != 1 {
		t.Fatalf("outside/ holds %d entries", len(ents))
	}
	if _, err := os.Lstat(filepath.Join(fx.base, "created-outside.txt")); !os.IsNotExist(err) {
		t.Fatalf("created-outside.txt exists: %v", err)
	}
	ents, _ = os.ReadDir(fx.base)
	if len(ents) != 7 { // secret.txt outside data data-archived data2 data_backup data.bak
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Fatalf("the parent of the root changed: %v", names)
	}
}

func TestFileWrite(t *testing.T) {
	fx := newFixture(t)
	r := mustCall(t, fx.ws, FileWrite{}, `{"path":"new/dir/x.txt","content":"one\n"}`)
	if got := readFile(t, filepath.Join(fx.root, "new/dir/x.txt")); got != "one\n" {
		t.Fatalf("content %q", got)
	}
	if r.Text != "wrote new/dir/x.txt (created): 4 bytes, 1 line(s), mode 0644; sha256 2c8b08da5ce60398e1f19af0e5dccc744df274b826abe585eaba68c525434806\n" || r.Meta["created"] != true || r.Meta["effect"] != r.Text {
		t.Fatalf("result %q %v", r.Text, r.Meta)
	}
	// Replace keeps the mode (minus setuid/setgid).
	p := filepath.Join(fx.root, "file.txt")
	if err := syscall.Chmod(p, 0o4751); err != nil { // os.Chmod would drop the raw set-id bit
		t.Fatal(err)
	}
	r = mustCall(t, fx.ws, FileWrite{}, `{"path":"file.txt","content":""}`)
	if r.Text != "wrote file.txt (replaced): 6 -> 0 bytes, 0 line(s), mode 0751; sha256 e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\n"+
		"note: mode 0751 kept without its setuid, setgid and sticky bits (was 4751)\n" || readFile(t, p) != "" {
		t.Fatalf("replace: %q", r.Text)
	}
	if st, _ := os.Stat(p); st.Mode() != 0o751 {
		t.Fatalf("mode %v", st.Mode())
	}
	if st, _ := os.Stat(filepath.Join(fx.root, "new/dir/x.txt")); st.Mode() != 0o644 {
		t.Fatalf("new file mode %v", st.Mode())
	}
	// Writes, the Writes() report and failures.
	for _, tc := range []struct {
		args   string
		path   string // Writes()[0].Path when prepared
		reason Reason // of Execute
	}{
		{`{"path":"in","content":"via link\n"}`, "sub/inner.txt", ""},
		{`{"path":"dangling_in","content":"new target\n"}`, "newtarget.txt", ""},
		{`{"path":"dirin/made.txt","content":"x"}`, "sub/made.txt", ""},
		{`{"path":"` + fx.root + `/abs.txt","content":"x"}`, "abs.txt", ""},
		{`{"path":"sub","content":"x"}`, "sub", ReasonToolError},
		{`{"path":"file.txt/x","content":"x"}`, "", ReasonToolError},
	} {
		p, err := FileWrite{}.Prepare(fx.ws, json.RawMessage(tc.args))
		if tc.path == "" {
			if reasonOf(err) != tc.reason {
				t.Errorf("%s: prepare %v", tc.args, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.args, err)
		}
		if w := p.Writes(); len(w) != 1 || w[0] != (Write{Path: tc.path, Whole: true}) {
			t.Errorf("%s: Writes() = %v", tc.args, w)
		}
		if _, err := p.Execute(context.Background(), Report{}); reasonOf(err) != tc.reason {
			t.Errorf("%s: execute %v, want %q", tc.args, err, tc.reason)
		}
	}
	if readFile(t, filepath.Join(fx.root, "sub/inner.txt")) != "via link\n" || readFile(t, filepath.Join(fx.root, "newtarget.txt")) != "new target\n" {
		t.Fatal("in-root links were not written to their targets")
	}
	if fi, err := os.Lstat(filepath.Join(fx.root, "in")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatal("the link itself was replaced")
	}
	assertNoTemps(t, fx.root)
	outsideUnchanged(t, fx)
}

// The write attacks, except the gate's (write scope, protected files).
func TestWriteAttacks(t *testing.T) {
	fx := newFixture(t)
	refusedAtPrepare := []string{
		"dangling_out",       // dangling link to outside: must not create the target
		"out",                // live link to an outside file
		"outabs",             // absolute link to an outside file
		"link1",              // chain to outside
		"dirout/new.txt",     // directory link to outside
		"dirout/secret2.txt", // ... to an existing outside file
		"../x.txt", "../data2/x", fx.base + "/data.bak", "/tmp/x.txt",
		"procroot" + fx.base + "/secret.txt", "/proc/self/root" + fx.root + "/x", "/proc/self/cwd/x", "/dev/fd/3/x",
		"sub/upout",
	}
	for _, path := range refusedAtPrepare {
		for _, tool := range WriteTools() {
			args := jsonArgs(map[string]any{"path": path, "content": "PWNED"})
			if tool.Name() == "file_edit" {
				args = jsonArgs(map[string]any{"path": path, "old_string": outsideSecret, "new_string": "PWNED"})
			}
			_, err := tool.Prepare(fx.ws, json.RawMessage(args))
			if reasonOf(err) != ReasonDeniedPath {
				t.Errorf("%s %q: %v; want denied_path", tool.Name(), path, err)
			}
		}
	}
	outsideUnchanged(t, fx)

	// A link planted at a not-yet-existing target after Prepare: refused,
	// nothing written through it.
	p, err := FileWrite{}.Prepare(fx.ws, json.RawMessage(`{"path":"planted.txt","content":"PWNED"}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(fx.base, "secret.txt"), filepath.Join(fx.root, "planted.txt")); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Execute(context.Background(), Report{}); reasonOf(err) != ReasonDeniedPath {
		t.Fatalf("planted link: %v", err)
	}
	// The same with a dangling link to a place outside.
	p, err = FileWrite{}.Prepare(fx.ws, json.RawMessage(`{"path":"planted2.txt","content":"PWNED"}`))
	if err != nil {
		t.Fatal(err)
	}
	os.Symlink(filepath.Join(fx.base, "created-outside.txt"), filepath.Join(fx.root, "planted2.txt"))
	if _, err := p.Execute(context.Background(), Report{}); reasonOf(err) != ReasonDeniedPath {
		t.Fatalf("planted dangling link: %v", err)
	}
	// A parent directory swapped for a link to outside after Prepare.
	os.Mkdir(filepath.Join(fx.root, "swapdir"), 0o755)
	for _, tool := range WriteTools() {
		os.WriteFile(filepath.Join(fx.root, "swapdir/secret2.txt"), []byte(outsideSecret), 0o644)
		args := `{"path":"swapdir/secret2.txt","content":"PWNED"}`
		if tool.Name() == "file_edit" {
			args = `{"path":"swapdir/secret2.txt","old_string":"` + outsideSecret + `","new_string":"PWNED"}`
		}
		p, err := tool.Prepare(fx.ws, json.RawMessage(args))
		if err != nil {
			t.Fatal(err)
		}
		os.Rename(filepath.Join(fx.root, "swapdir"), filepath.Join(fx.root, "swapdir.moved"))
		os.Symlink("../outside", filepath.Join(fx.root, "swapdir"))
		if _, err := p.Execute(context.Background(), Report{}); reasonOf(err) != ReasonDeniedPath {
			t.Fatalf("%s through a swapped directory: %v", tool.Name(), err)
		}
		os.Remove(filepath.Join(fx.root, "swapdir"))
		os.RemoveAll(filepath.Join(fx.root, "swapdir.moved"))
		os.Mkdir(filepath.Join(fx.root, "swapdir"), 0o755)
	}
	outsideUnchanged(t, fx)
	assertNoTemps(t, fx.root)
}

func assertNoTemps(t *testing.T, root string) {
	t.Helper()
	filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && workspace.IsTempName(d.Name()) {
			t.Errorf("temporary file left behind: %s", p)
		}
		return nil
	})
}

func TestFileEdit(t *testing.T) {
	fx := newFixture(t)
	p := filepath.Join(fx.root, "code.txt")
	os.WriteFile(p, []byte("a\nb\nfoo\nc\nfoo bar foo\nd\n"), 0o640)
	cases := []struct {
		args   string
		reason Reason
		msg    string // in the public message
		text   string // resulting file
	}{
		{`{"path":"code.txt","old_string":"foo","new_string":"x"}`, ReasonToolError, "occurs 3 times", ""},
		{`{"path":"code.txt","old_string":"zzz","new_string":"x"}`, ReasonToolError, "0 occurrences", ""},
		{`{"path":"code.txt","old_string":"b\nfoo","new_string":"B\nFOO"}`, "", "", "a\nB\nFOO\nc\nfoo bar foo\nd\n"},
		{`{"path":"code.txt","old_string":"foo","new_string":"baz","replace_all":true}`, "", "", "a\nB\nFOO\nc\nbaz bar baz\nd\n"},
		{`{"path":"bin.dat","old_string":"abc","new_string":"x"}`, ReasonToolError, "binary", ""},
		{`{"path":"sub","old_string":"abc","new_string":"x"}`, ReasonToolError, "directory", ""},
	}
	for _, tc := range cases {
		r, err := call(t, fx.ws, FileEdit{}, tc.args)
		if reasonOf(err) != tc.reason {
			t.Fatalf("%s: %v", tc.args, err)
		}
		if err != nil {
			if !strings.Contains(err.(*Error).Public, tc.msg) {
				t.Errorf("%s: message %q lacks %q", tc.args, err.(*Error).Public, tc.msg)
			}
			continue
		}
		if got := readFile(t, p); got != tc.text {
			t.Fatalf("%s: file %q, want %q", tc.args, got, tc.text)
		}
		if !strings.Contains(r.Text, "--- a/code.txt\n+++ b/code.txt\n@@ ") {
			t.Errorf("no diff: %q", r.Text)
		}
	}
	if st, _ := os.Stat(p); st.Mode() != 0o640 {
		t.Fatalf("mode %v", st.Mode())
	}
	// Through an in-root link: the target is edited, Writes names it.
	pr, err := FileEdit{}.Prepare(fx.ws, json.RawMessage(`{"path":"in","old_string":"inner","new_string":"outer"}`))
	if err != nil {
		t.Fatal(err)
	}
	if w := pr.Writes(); len(w) != 1 || w[0] != (Write{Path: "sub/inner.txt", Whole: false}) {
		t.Fatalf("Writes() = %v", w)
	}
	pv := pr.(Previewer).Preview()
	r, err := pr.Execute(context.Background(), Report{})
	if err != nil {
		t.Fatal(err)
	}
	// The approver is shown, before the call, the diff the result shows after it.
	if wantDiff := strings.TrimPrefix(r.Text, r.Meta["effect"].(string)); pv.Diff != wantDiff || pv.DiffErr != "" {
		t.Errorf("Preview() = %+v, want the diff %q", pv, wantDiff)
	}
	if pv := pr.(Previewer).Preview(); pv.Diff != "" || !strings.Contains(pv.DiffErr, "not found") {
		t.Errorf("after the edit, Preview() = %+v, want old_string not found", pv)
	}
	want := "edited sub/inner.txt: 1 replacement(s); 1 line(s) removed, 1 added; 11 -> 11 bytes; sha256 637aeaec9d930df4673f8a21dab2bfb8fe611436b73ad17f6da81d618d32fe5c (was da52bb6578e33c78b9d4802f53de5dceafc57eb6b19ccd55348310cb46526e6b)\n" +
		"--- a/sub/inner.txt\n+++ b/sub/inner.txt\n@@ -1,1 +1,1 @@\n-inner text\n+outer text\n"
	if r.Text != want {
		t.Fatalf("result %q\nwant %q", r.Text, want)
	}
	// A file changed by someone else (who does not take the lock)
	// between file_edit's read and its rename is not clobbered: the edit
	// is made again on the fresh content.
	os.WriteFile(p, []byte("one two\n"), 0o644)
	changes := 0
	testHookAfterEditRead = func() {
		if changes == 0 {
			os.WriteFile(p, []byte("one two three\n"), 0o644)
		}
		changes++
	}
	r, err = call(t, fx.ws, FileEdit{}, `{"path":"code.txt","old_string":"one","new_string":"1"}`)
	testHookAfterEditRead = nil
	if err != nil || r.Meta["attempts"] != 2 {
		t.Fatalf("concurrent change: %v %v", err, r.Meta)
	}
	if got := readFile(t, p); got != "1 two three\n" {
		t.Fatalf("the other change was lost: %q", got)
	}
	// Changed at every attempt: refused with conflict, the other
	// writer's content kept.
	testHookAfterEditRead = func() {
		changes++
		os.WriteFile(p, []byte(fmt.Sprintf("1 two %d\n", changes)), 0o644)
	}
	_, err = call(t, fx.ws, FileEdit{}, `{"path":"code.txt","old_string":"two","new_string":"2"}`)
	testHookAfterEditRead = nil
	if e, ok := err.(*Error); !ok || e.Reason != ReasonConflict || !strings.Contains(e.Public, "kept changing") {
		t.Fatalf("changed at every attempt: %v", err)
	}
	if got := readFile(t, p); got != fmt.Sprintf("1 two %d\n", changes) {
		t.Fatalf("the other change was lost: %q", got)
	}
	assertNoTemps(t, fx.root)
	outsideUnchanged(t, fx)
}

// The diff applies: for random texts and edits, applying editDiff's output
// to the old text gives the new text.
func TestEditDiffApplies(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	words := []string{"a", "b", "foo", "\n", "\n", "x y", "foo\n", ""}
	applied := 0
	defer func() {
		if applied < 1000 {
			t.Errorf("only %d diffs applied", applied)
		}
	}()
	for i := range 3000 {
		var tb strings.Builder
		for range rng.IntN(40) {
			tb.WriteString(words[rng.IntN(len(words))])
		}
		text := tb.String()
		old := []string{"foo", "\n", "a\nb", "foo\n", "b", "\nx"}[rng.IntN(6)]
		repl := []string{"", "Z", "\n", "Q\nR", "foo", "\n\n"}[rng.IntN(6)]
		if old == repl {
			continue
		}
		var offs []int
		for pos := 0; ; {
			j := strings.Index(text[pos:], old)
			if j < 0 {
				break
			}
			offs = append(offs, pos+j)
			pos += j + len(old)
		}
		if len(offs) == 0 {
			continue
		}
		updated := strings.ReplaceAll(text, old, repl)
		d, _ := editDiff("f", text, old, repl, offs, 0)
		got, err := applyUnified(text, d)
		applied++
		if err != nil || got != updated {
			t.Fatalf("case %d: text %q old %q new %q\ndiff:\n%s\napplied %q (%v)\nwant %q", i, text, old, repl, d, got, err, updated)
		}
	}
}

// applyUnified applies a unified diff to text, checking every context and
// removed line and every hunk header count.
func applyUnified(text, diff string) (string, error) {
	lines := splitLines(text)
	dl := strings.Split(diff, "\n")
	if len(dl) < 2 || !strings.HasPrefix(dl[0], "--- ") || !strings.HasPrefix(dl[1], "+++ ") {
		return "", fmt.Errorf("no header")
	}
	var out []string
	next := 0 // next old line to copy
	i := 2
	for i < len(dl) && dl[i] != "" {
		var os1, oc, ns, nc int
		if _, err := fmt.Sscanf(dl[i], "@@ -%d,%d +%d,%d @@", &os1, &oc, &ns, &nc); err != nil {
			return "", fmt.Errorf("hunk header %q: %v", dl[i], err)
		}
		start := os1 - 1
		if oc == 0 {
			start = os1
		}
		if start < next {
			return "", fmt.Errorf("hunks overlap")
		}
		out = append(out, lines[next:start]...)
		if want := len(out) + boolInt(nc > 0); ns != want {
			return "", fmt.Errorf("hunk %q: new start %d, want %d", dl[i], ns, want)
		}
		next = start
		i++
		gotO, gotN := 0, 0
		for i < len(dl) && dl[i] != "" && !strings.HasPrefix(dl[i], "@@") {
			l := dl[i][1:] + "\n"
			if i+1 < len(dl) && dl[i+1] == `\ No newline at end of file` {
				l = dl[i][1:]
			}
			switch dl[i][0] {
			case ' ', '-':
				if next >= len(lines) || lines[next] != l {
					return "", fmt.Errorf("line %d: %q does not match %q", next+1, l, safeIndex(lines, next))
				}
				if dl[i][0] == ' ' {
					out = append(out, l)
					gotN++
				}
				next++
				gotO++
			case '+':
				out = append(out, l)
				gotN++
			default:
				return "", fmt.Errorf("bad line %q", dl[i])
			}
			i++
			if i < len(dl) && dl[i] == `\ No newline at end of file` {
				i++
			}
		}
		if gotO != oc || gotN != nc {
			return "", fmt.Errorf("hunk counts %d,%d; header says %d,%d", gotO, gotN, oc, nc)
		}
	}
	out = append(out, lines[next:]...)
	return strings.Join(out, ""), nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func safeIndex(ls []string, i int) string {
	if i < len(ls) {
		return ls[i]
	}
	return "<end of file>"
}

// Concurrent writers to one file: every result is one writer's whole
// content, and nothing is left behind.
func TestFileWriteConcurrent(t *testing.T) {
	fx := newFixture(t)
	done := make(chan error)
	for w := range 4 {
		go func() {
			var err error
			for i := range 25 {
				content := strings.Repeat(strconv.Itoa(w), 1000+i)
				if _, e := call(t, fx.ws, FileWrite{}, jsonArgs(map[string]any{"path": "c/shared.txt", "content": content})); e != nil {
					err = e
				}
			}
			done <- err
		}()
	}
	for range 4 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	got := readFile(t, filepath.Join(fx.root, "c/shared.txt"))
	if len(got) < 1000 || strings.Count(got, got[:1]) != len(got) {
		t.Fatalf("mixed content: %d bytes", len(got))
	}
	assertNoTemps(t, fx.root)
}

// TestFileWriteOwnership: a harness running as root writes files a run
// child (the workspace's owner, never root) can change: a replaced file
// keeps its owner, a new file or directory takes its directory's.
func TestFileWriteOwnership(t *testing.T) {
	testenv.Require(t, os.Geteuid() == 0, "running as root", testenv.ShapeNoUserns)
	fx := newFixture(t)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Chown(fx.root, 1000, 1001))
	must(os.Chown(filepath.Join(fx.root, "file.txt"), 1002, 1003))
	mustCall(t, fx.ws, FileWrite{}, `{"path":"made/deep/x.txt","content":"x"}`)
	mustCall(t, fx.ws, FileWrite{}, `{"path":"file.txt","content":"y"}`)
	mustCall(t, fx.ws, FileEdit{}, `{"path":"file.txt","old_string":"y","new_string":"z"}`)
	for p, want := range map[string][2]uint32{
		"made": {1000, 1001}, "made/deep": {1000, 1001}, "made/deep/x.txt": {1000, 1001}, "file.txt": {1002, 1003},
	} {
		fi, err := os.Lstat(filepath.Join(fx.root, p))
		must(err)
		st := fi.Sys().(*syscall.Stat_t)
		if st.Uid != want[0] || st.Gid != want[1] {
			t.Errorf("%s: owned by %d:%d, want %d:%d", p, st.Uid, st.Gid, want[0], want[1])
		}
	}
}
