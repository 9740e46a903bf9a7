package tools

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"unicode/utf8"
)

// Names that would forge lines or cannot be given back raw are printed
// quoted, and the printed form reads the file back (issue 20, item 8).
func TestNamesInResults(t *testing.T) {
	fx := newFixture(t)
	files := map[string]string{
		"lnk\nfile fake (1 bytes)": "forged\n",
		"bad\xffname":              "bad utf8\n",
		`"quoted`:                  "quote first\n",
		"d\x1b[2Jx/inner.txt":      "escape dir\n",
		"sp ace":                   "plain enough\n",
	}
	for name, content := range files {
		p := filepath.Join(fx.root, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("file.txt", filepath.Join(fx.root, "lnk2\nfile fake (1 bytes)")); err != nil {
		t.Fatal(err)
	}
	r := mustCall(t, fx.ws, DirList{}, `{}`)
	for _, want := range []string{
		"file \"lnk\\nfile fake (1 bytes)\" (7 bytes)\n",
		"symlink \"lnk2\\nfile fake (1 bytes)\" -> file.txt\n",
		"file \"bad\\xffname\" (9 bytes)\n",
		"file \"\\\"quoted\" (12 bytes)\n",
		"dir \"d\\x1b[2Jx\"/\n",
		"file sp ace (13 bytes)\n",
	} {
		if !strings.Contains(r.Text, want) {
			t.Errorf("dir_list lacks %q", want)
		}
	}
	if n := strings.Count(r.Text, "\n"); n != r.Meta["entries"] {
		t.Errorf("dir_list: %d lines for %v entries", n, r.Meta["entries"])
	}
	for _, l := range strings.Split(r.Text, "\n") {
		if strings.HasPrefix(l, "file fake") || !utf8.ValidString(l) || strings.ContainsAny(l, "\x1b\r") {
			t.Errorf("dir_list line %q", l)
		}
	}
	r = mustCall(t, fx.ws, Find{}, `{"pattern":"*","max_results":100000}`)
	for _, want := range []string{"\n\"lnk\\nfile fake (1 bytes)\"\n", "\n\"bad\\xffname\"\n", "\n\"d\\x1b[2Jx\"/inner.txt\n", "\n\"lnk2\\nfile fake (1 bytes)\" (symlink)\n"} {
		if !strings.Contains(r.Text, want) {
			t.Errorf("find lacks %q", want)
		}
	}
	r = mustCall(t, fx.ws, Search{}, `{"pattern":"forged|bad utf8|escape dir|quote first"}`)
	want := "\"\\\"quoted\":1:quote first\n\"bad\\xffname\":1:bad utf8\n\"d\\x1b[2Jx\"/inner.txt:1:escape dir\n\"lnk\\nfile fake (1 bytes)\":1:forged\n"
	if !strings.HasPrefix(r.Text, want+"[1 path(s) skipped]\n") { // the fixture's 300-deep directory is the skipped one
		t.Errorf("search:\n got %q\nwant %q", r.Text, want)
	}
	// Every printed form, and the whole path quoted as error messages
	// quote it, reads the file.
	for arg, content := range map[string]string{
		`"lnk\nfile fake (1 bytes)"`:  "forged\n",
		`"bad\xffname"`:               "bad utf8\n",
		`"\"quoted"`:                  "quote first\n",
		`"d\x1b[2Jx"/inner.txt`:       "escape dir\n",
		`"d\x1b[2Jx/inner.txt"`:       "escape dir\n",
		`"sub"/"inner.txt"`:           "inner text\n",
		`"lnk2\nfile fake (1 bytes)"`: "hello\n",
		`sp ace`:                      "plain enough\n",
		fx.root + `/"bad\xffname"`:    "bad utf8\n",
	} {
		raw, _ := json.Marshal(map[string]string{"path": arg})
		r, err := call(t, fx.ws, FileRead{}, string(raw))
		if err != nil || r.Text != content {
			t.Errorf("file_read %s: %q %v", arg, r.Text, err)
		}
	}
	for _, arg := range []string{`"unterminated`, `"a/b"/x`, `sub/"a/b"`, `"a\x00b"`, `""`, `"x"y"`} {
		raw, _ := json.Marshal(map[string]string{"path": arg})
		if _, err := call(t, fx.ws, FileRead{}, string(raw)); reasonOf(err) != ReasonInvalidArgument {
			t.Errorf("file_read %s: %v, want invalid_argument", arg, err)
		}
	}
	// A write names a new file by a quoted form; the result shows it so.
	r = mustCall(t, fx.ws, FileWrite{}, `{"path":"new/\"x\\ty\"","content":"t\n"}`)
	if !strings.HasPrefix(r.Text, "wrote new/\"x\\ty\" (created): 2 bytes") || readFile(t, filepath.Join(fx.root, "new/x\ty")) != "t\n" {
		t.Errorf("write of a quoted name: %q", r.Text)
	}
	outsideUnchanged(t, fx)
}

// The smaller findings of issue 20, item 12.
func TestSmallerToolFindings(t *testing.T) {
	fx := newFixture(t)
	// find 'sub/' finds the directory sub, as it is printed (and as
	// gitignore reads a trailing '/': directories only).
	os.WriteFile(filepath.Join(fx.root, "deep/er/sub"), []byte("a file named sub\n"), 0o644)
	for args, want := range map[string]string{
		`{"pattern":"sub/"}`:                 "sub/\n",
		`{"pattern":"sub"}`:                  "deep/er/sub\nsub/\n",
		`{"pattern":"er/","path":"deep"}`:    "deep/er/\n",
		`{"pattern":"deep/*/"}`:              "deep/er/\n",
		`{"pattern":"*/","path":"deep"}`:     "deep/er/\n",
		`{"pattern":"**/er/","path":"deep"}`: "deep/er/\n",
	} {
		r := mustCall(t, fx.ws, Find{}, args)
		if got := strings.SplitN(r.Text, "[", 2)[0]; got != want {
			t.Errorf("find %s:\n got %q\nwant %q", args, got, want)
		}
	}
	if _, err := call(t, fx.ws, Find{}, `{"pattern":"/"}`); reasonOf(err) != ReasonInvalidArgument {
		t.Errorf("find '/': %v", err)
	}
	// search on a FIFO says it is not a regular file.
	if err := syscall.Mkfifo(filepath.Join(fx.root, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := call(t, fx.ws, Search{}, `{"pattern":"x","path":"fifo"}`)
	if e, ok := err.(*Error); !ok || e.Reason != ReasonToolError || e.Public != `"fifo" is not a regular file (a FIFO); search reads regular files only` {
		t.Errorf("search on a FIFO: %v", err)
	}
	// A link loop is called one.
	r := mustCall(t, fx.ws, DirList{}, `{}`)
	for _, want := range []string{"symlink loop1 -> (link loop: too many levels of symbolic links)\n", "symlink dangling_in -> (broken link)\n"} {
		if !strings.Contains(r.Text, want) {
			t.Errorf("dir_list lacks %q", want)
		}
	}
}
