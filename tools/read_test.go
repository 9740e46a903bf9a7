package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/b10x/harness/workspace"
)

// Every read attack, through every read tool that takes a path: refused
// with the resolver's reason, nothing outside shown.
func TestReadToolsRefuseAttacks(t *testing.T) {
	fx := newFixture(t)
	for _, tc := range readCases(fx) {
		for _, tool := range ReadTools() {
			// The path goes into the JSON byte for byte (invalid UTF-8
			// included), as a client could send it.
			q := rawJSONString(tc.path)
			var args string
			switch tool.Name() {
			case "file_read", "dir_list":
				args = `{"path":` + q + `}`
			case "search":
				args = `{"pattern":".","path":` + q + `}`
			case "find":
				args = `{"pattern":"**","path":` + q + `}`
			}
			if tc.path == "" && (tool.Name() != "file_read") {
				continue // optional path: empty means the root
			}
			r, err := call(t, fx.ws, tool, args)
			if tc.reason != "" {
				if got := reasonOf(err); got != tc.reason {
					t.Errorf("%s %s (%.60q): %v; want %s", tool.Name(), tc.name, tc.path, err, tc.reason)
				}
				continue
			}
			if strings.Contains(r.Text, outsideSecret) {
				t.Errorf("%s %s: outside content in result", tool.Name(), tc.name)
			}
		}
	}
}

// rawJSONString quotes s for JSON, escaping only what JSON requires and
// leaving every other byte as it is.
func rawJSONString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20:
			fmt.Fprintf(&b, "\\u%04x", c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// search, find and dir_list over the whole workspace never show what the
// outside links point to, and never descend through a link.
func TestTraversalNeverLeavesRoot(t *testing.T) {
	fx := newFixture(t)
	r := mustCall(t, fx.ws, Search{}, `{"pattern":"SECRET","max_results":100000}`)
	if strings.Contains(r.Text, outsideSecret) || r.Meta["matches"] != 0 {
		t.Fatalf("search shows outside content:\n%s", r.Text)
	}
	r = mustCall(t, fx.ws, Search{}, `{"pattern":".","max_results":100000}`)
	if strings.Contains(r.Text, outsideSecret) {
		t.Fatalf("search shows outside content")
	}
	// The in-root link target is found under its real path, once.
	if n := strings.Count(r.Text, ":inner text"); n != 1 || !strings.Contains(r.Text, "sub/inner.txt:1:inner text\n") {
		t.Fatalf("inner.txt found %d times:\n%s", n, r.Text)
	}
	r = mustCall(t, fx.ws, Find{}, `{"pattern":"**","max_results":100000}`)
	for _, line := range strings.Split(r.Text, "\n") {
		if strings.HasPrefix(line, "dirout/") || strings.HasPrefix(line, "dirin/") || strings.HasPrefix(line, "procroot/") {
			t.Fatalf("find descended through a link: %q", line)
		}
	}
	for _, want := range []string{"dirout (symlink)\n", "dirin (symlink)\n", "out (symlink)\n", "sub/\n", "sub/inner.txt\n", "%2e%2e\n"} {
		if !strings.Contains(r.Text, want) {
			t.Errorf("find output lacks %q", want)
		}
	}
	r = mustCall(t, fx.ws, DirList{}, `{}`)
	if strings.Contains(r.Text, fx.base) {
		t.Fatalf("dir_list shows a host path:\n%s", r.Text)
	}
	for _, want := range []string{
		"symlink out -> (outside the workspace; not followed)\n",
		"symlink outabs -> (outside the workspace; not followed)\n",
		"symlink link1 -> (outside the workspace; not followed)\n",
		"symlink in -> sub/inner.txt\n",
		"symlink inabs -> sub/inner.txt\n",
		"symlink dirin -> sub\n",
		"symlink dangling_in -> (broken link)\n",
		"symlink loop1 -> (link loop: too many levels of symbolic links)\n",
		"dir sub/\n",
		"file file.txt (6 bytes)\n",
	} {
		if !strings.Contains(r.Text, want) {
			t.Errorf("dir_list lacks %q:\n%s", want, r.Text)
		}
	}
	// Sorted by name, bytewise.
	var names []string
	for _, l := range strings.Split(strings.TrimSpace(r.Text), "\n") {
		names = append(names, strings.Fields(l)[1])
	}
	for i := 1; i < len(names); i++ {
		if strings.TrimSuffix(names[i-1], "/") > strings.TrimSuffix(names[i], "/") {
			t.Fatalf("dir_list not sorted: %q before %q", names[i-1], names[i])
		}
	}
}

func TestFileRead(t *testing.T) {
	fx := newFixture(t)
	lines := ""
	for i := 1; i <= 10; i++ {
		lines += "line " + strconv.Itoa(i) + "\n"
	}
	os.WriteFile(filepath.Join(fx.root, "ten.txt"), []byte(lines), 0o644)
	os.WriteFile(filepath.Join(fx.root, "nonl.txt"), []byte("a\nb"), 0o644)
	os.WriteFile(filepath.Join(fx.root, "latin1.txt"), []byte("caf\xe9\n"), 0o644)
	os.WriteFile(filepath.Join(fx.root, "empty.txt"), nil, 0o644)
	if err := syscall.Mkfifo(filepath.Join(fx.root, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		args   string
		text   string
		reason Reason
	}{
		{`{"path":"file.txt"}`, "hello\n", ""},
		{`{"path":"in"}`, "inner text\n", ""},
		{`{"path":"caf\u00e9"}`, "nfc\n", ""},
		{`{"path":"cafe\u0301"}`, "nfd\n", ""},
		{`{"path":"%2e%2e"}`, "percent-encoded name\n", ""},
		{`{"path":"ten.txt","offset":3,"limit":2}`, "line 3\nline 4\n", ""},
		{`{"path":"ten.txt","offset":10}`, "line 10\n", ""},
		{`{"path":"ten.txt","limit":1}`, "line 1\n", ""},
		{`{"path":"ten.txt","offset":9,"limit":100}`, "line 9\nline 10\n", ""},
		{`{"path":"ten.txt","offset":11}`, "", ReasonToolError},
		{`{"path":"nonl.txt","offset":2}`, "b", ""},
		{`{"path":"nonl.txt","offset":3}`, "", ReasonToolError},
		{`{"path":"empty.txt"}`, "", ""},
		{`{"path":"bin.dat"}`, "", ReasonToolError},
		{`{"path":"latin1.txt"}`, "", ReasonToolError},
		{`{"path":"sub"}`, "", ReasonToolError},
		{`{"path":"."}`, "", ReasonToolError},
		{`{"path":"fifo"}`, "", ReasonToolError},
	}
	for _, tc := range cases {
		r, err := call(t, fx.ws, FileRead{}, tc.args)
		if got := reasonOf(err); got != tc.reason {
			t.Errorf("%s: %v; want reason %q", tc.args, err, tc.reason)
			continue
		}
		if err == nil && r.Text != tc.text {
			t.Errorf("%s: text %q, want %q", tc.args, r.Text, tc.text)
		}
	}
	r := mustCall(t, fx.ws, FileRead{}, `{"path":"ten.txt","offset":3,"limit":2}`)
	if r.Meta["lines"] != 2 || r.Meta["more"] != true || r.Meta["first_line"] != 3 {
		t.Errorf("meta %v", r.Meta)
	}
	r = mustCall(t, fx.ws, FileRead{}, `{"path":"ten.txt","offset":9}`)
	if r.Meta["lines"] != 2 || r.Meta["more"] != false {
		t.Errorf("meta %v", r.Meta)
	}
}

// A large file read with offset and limit is streamed: the memory used is
// bounded by the lines returned, not by the file.
func TestFileReadStreams(t *testing.T) {
	fx := newFixture(t)
	f, err := os.Create(filepath.Join(fx.root, "big.txt"))
	if err != nil {
		t.Fatal(err)
	}
	line := []byte(strings.Repeat("x", 99) + "\n")
	chunk := bytes.Repeat(line, 10000) // 1 MB
	for range 16 {
		f.Write(chunk)
	}
	f.WriteString("the last line\n")
	f.Close()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	r := mustCall(t, fx.ws, FileRead{}, `{"path":"big.txt","offset":160001,"limit":5}`)
	runtime.ReadMemStats(&after)
	if r.Text != "the last line\n" {
		t.Fatalf("got %q", r.Text)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 4<<20 {
		t.Fatalf("reading 5 lines at the end of 16 MB allocated %d bytes", alloc)
	}
	// A section above the read limit is refused, never cut.
	defer func(l int) { readLimit = l }(readLimit)
	readLimit = 1 << 20
	_, err = call(t, fx.ws, FileRead{}, `{"path":"big.txt","offset":2}`)
	if e, ok := err.(*Error); !ok || e.Reason != ReasonToolError || !strings.Contains(e.Public, "offset and limit") {
		t.Fatalf("over the read limit: %v", err)
	}
	if r := mustCall(t, fx.ws, FileRead{}, `{"path":"big.txt","offset":2,"limit":10000}`); len(r.Text) != 10000*len(line) {
		t.Fatalf("10000 lines under the limit: %d bytes", len(r.Text))
	}
}

func TestSearch(t *testing.T) {
	fx := newFixture(t)
	write := func(name, content string) {
		p := filepath.Join(fx.root, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("s/a.go", "package s\nfunc NewA() {}\nfunc newb() {}\nfunc NewC() {}\n")
	write("s/b.txt", "func NewD in text\r\nnothing\n")
	write("s/z/c.go", "func NewE()")
	write("s/bin.go", "func NewF()\x00\n")
	write("s/late-nul.go", strings.Repeat("// filler\n", 2000)+"func NewG() \x00\n")
	write("s/long.go", "var NewH "+strings.Repeat("é", 600)+"\n")
	write("s/.git/config", "func NewHidden\n")
	write("s/bad-utf8.go", "func NewI \xff\n")
	cases := []struct {
		args string
		want string
	}{
		{`{"pattern":"func New[A-Z]","path":"s"}`,
			"s/a.go:2:func NewA() {}\ns/a.go:4:func NewC() {}\ns/b.txt:1:func NewD in text\ns/bad-utf8.go:1:func NewI \uFFFD\ns/z/c.go:1:func NewE()\n"},
		{`{"pattern":"func New[A-Z]","path":"s","glob":"*.go"}`,
			"s/a.go:2:func NewA() {}\ns/a.go:4:func NewC() {}\ns/bad-utf8.go:1:func NewI \uFFFD\ns/z/c.go:1:func NewE()\n"},
		{`{"pattern":"func New[A-Z]","path":"s","glob":"s/z/**"}`, "s/z/c.go:1:func NewE()\n"},
		{`{"pattern":"func New[A-Z]","path":"s","glob":"z/*.go"}`, "no matches\n"},
		{`{"pattern":"^func","path":"s/a.go"}`, "s/a.go:2:func NewA() {}\ns/a.go:3:func newb() {}\ns/a.go:4:func NewC() {}\n"},
		{`{"pattern":"(?i)FUNC NEWB","path":"s"}`, "s/a.go:3:func newb() {}\n"},
		{`{"pattern":"\\(\\)$","path":"s/z"}`, "s/z/c.go:1:func NewE()\n"},
		{`{"pattern":"^$","path":"s/a.go"}`, "no matches\n"},
		{`{"pattern":"\\Apackage","path":"s"}`, "s/a.go:1:package s\n"},
		{`{"pattern":"nothing$","path":"s/b.txt"}`, "s/b.txt:2:nothing\n"},
	}
	for _, tc := range cases {
		r := mustCall(t, fx.ws, Search{}, tc.args)
		if r.Text != tc.want {
			t.Errorf("%s:\n got %q\nwant %q", tc.args, r.Text, tc.want)
		}
	}
	// Long lines are shortened, with a marker, on a rune boundary.
	r := mustCall(t, fx.ws, Search{}, `{"pattern":"NewH","path":"s"}`)
	if !strings.Contains(r.Text, "more bytes]") || len(r.Text) > 700 || !strings.HasPrefix(r.Text, "s/long.go:1:var NewH é") {
		t.Errorf("long line: %q", r.Text)
	}
	// Binary files are skipped and counted.
	r = mustCall(t, fx.ws, Search{}, `{"pattern":"New[FG]","path":"s"}`)
	if r.Text != "no matches\n" || r.Meta["binary_skipped"] != 2 {
		t.Errorf("binary: %q %v", r.Text, r.Meta)
	}
	// max_results: exactly as many as exist is not truncated; fewer is,
	// and says so.
	r = mustCall(t, fx.ws, Search{}, `{"pattern":"func New[A-Z]","path":"s","max_results":5}`)
	if r.Meta["truncated"] != false || r.Meta["matches"] != 5 || strings.Contains(r.Text, "stopped") {
		t.Errorf("max=5: %q %v", r.Text, r.Meta)
	}
	r = mustCall(t, fx.ws, Search{}, `{"pattern":"func New[A-Z]","path":"s","max_results":3}`)
	if r.Meta["truncated"] != true || r.Meta["matches"] != 3 ||
		r.Text != "s/a.go:2:func NewA() {}\ns/a.go:4:func NewC() {}\ns/b.txt:1:func NewD in text\n"+
			"[search stopped after max_results=3 matching lines; there are more: narrow path, glob or pattern, or raise max_results]\n" {
		t.Errorf("max=3: %q %v", r.Text, r.Meta)
	}
	r = mustCall(t, fx.ws, Search{}, `{"pattern":"func","path":"s","max_results":1}`)
	if r.Meta["truncated"] != true || !strings.HasPrefix(r.Text, "s/a.go:2:func NewA() {}\n[search stopped") {
		t.Errorf("max=1: %q", r.Text)
	}
}

// The three matching strategies (literal prefilter, whole-buffer scan,
// line by line) agree with a plain line-by-line regexp on the same text.
func TestSearchStrategiesAgree(t *testing.T) {
	text := []byte("alpha beta\nfunc NewX()\n\nfunc newY\nx := NewZ(1)\nend")
	patterns := []string{"New[A-Z]", "func New", "^func", "^$", "a$", "(?i)NEW", "[xyz]", "\\bNew", "e.*a", "x|y", "(New)+", "^", "$", "a\nb", "(?-m)^alpha", "\\Aend", "end\\z"}
	for _, p := range patterns {
		m, err := newMatcher(p)
		if err != nil {
			t.Fatal(err)
		}
		var want []int
		for i, l := range strings.Split(string(text), "\n") {
			if m.line.MatchString(l) {
				want = append(want, i+1)
			}
		}
		// With the default bounds, and with bounds so small that every
		// bulk window is one or two lines and every line goes through the
		// context-aware reader.
		for _, bounds := range [][2]int{{m.window, m.direct}, {12, 3}, {1, 0}} {
			m.window, m.direct = bounds[0], bounds[1]
			var got []int
			m.scan(context.Background(), text, 1, func(n int, line []byte) bool { got = append(got, n); return true })
			if !slicesEqual(got, want) {
				t.Errorf("%q (lit %q, bulk %v, window %d, direct %d): lines %v, want %v", p, m.lit, m.bulk != nil, m.window, m.direct, got, want)
			}
		}
	}
}

func slicesEqual(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// A file larger than one read chunk is searched across chunk boundaries
// with correct line numbers.
func TestSearchLargeFile(t *testing.T) {
	fx := newFixture(t)
	var b bytes.Buffer
	want := ""
	for i := 1; b.Len() < 3*searchChunk; i++ {
		if i%100000 == 0 {
			b.WriteString("needle here\n")
			want += "big.txt:" + strconv.Itoa(i) + ":needle here\n"
		} else {
			b.WriteString("hay hay hay hay hay hay hay\n")
		}
	}
	os.WriteFile(filepath.Join(fx.root, "big.txt"), b.Bytes(), 0o644)
	r := mustCall(t, fx.ws, Search{}, `{"pattern":"needle","path":"big.txt"}`)
	if r.Text != want {
		t.Fatalf("got %q\nwant %q", r.Text, want)
	}
}

func TestFind(t *testing.T) {
	fx := newFixture(t)
	// The fixture's 300 nested directories go past the walk's depth bound,
	// which is said, not hidden.
	depthNote := "[1 path(s) skipped]\n  skipped " + strings.Repeat("a/", workspace.MaxWalkDepth-1) + "a: deeper than 256 levels\n"
	cases := []struct{ args, want string }{
		{`{"pattern":"*.go","path":"deep"}`, "deep/er/code.go\ndeep/er/other.go\n"},
		{`{"pattern":"deep/**/*.go","path":"deep"}`, "deep/er/code.go\ndeep/er/other.go\n"},
		{`{"pattern":"*.go","path":"deep/er"}`, "deep/er/code.go\ndeep/er/other.go\n"},
		{`{"pattern":"deep/*","path":"deep"}`, "deep/er/\ndeep/notes.md\n"},
		{`{"pattern":"{in,out}","path":"` + fx.root + `"}`, "in (symlink)\nout (symlink)\n" + depthNote},
		{`{"pattern":"*.go","max_results":1,"path":"deep"}`,
			"deep/er/code.go\n[find stopped after max_results=1 paths; there are more: narrow path or pattern, or raise max_results]\n"},
		{`{"pattern":"*.go","max_results":2,"path":"deep"}`, "deep/er/code.go\ndeep/er/other.go\n"},
		{`{"pattern":"*.none","path":"deep"}`, "no matches\n"},
	}
	for _, tc := range cases {
		r := mustCall(t, fx.ws, Find{}, tc.args)
		if r.Text != tc.want {
			t.Errorf("%s:\n got %q\nwant %q", tc.args, r.Text, tc.want)
		}
	}
	if _, err := call(t, fx.ws, Find{}, `{"pattern":"*","path":"file.txt"}`); reasonOf(err) != ReasonToolError {
		t.Errorf("find under a file: %v", err)
	}
}

func TestReadToolsHonourContext(t *testing.T) {
	fx := newFixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		tool Tool
		args string
	}{{Search{}, `{"pattern":"x"}`}, {Find{}, `{"pattern":"*"}`}, {FileRead{}, `{"path":"file.txt"}`}, {DirList{}, `{}`}} {
		p, err := tc.tool.Prepare(fx.ws, json.RawMessage(tc.args))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.Execute(ctx, Report{}); reasonOf(err) != ReasonCancelled || !errors.Is(err, context.Canceled) {
			t.Errorf("%s with a cancelled context: %v", tc.tool.Name(), err)
		}
	}
}
