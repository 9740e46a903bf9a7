package main

// ATTACKS.md, "Reading": file_read, dir_list, search and find through
// `b10x-harness call`.

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// atkReadFlags: the read tools are the same code under every --confine
// mode (the harness's own Landlock domain limits writes only), so the
// table runs under off, which spares the kernel probe (~0.5 s) per call;
// TestAttackReadingUnderAuto repeats a sample under the default mode.
var atkReadFlags = []string{"--confine", "off"}

// readWorkspace adds to newAtkWS what the Reading cases need.
func readWorkspace(t *testing.T) *atkWS {
	t.Helper()
	a := newAtkWS(t)
	// Names that only look like traversal, and a literal %2e%2e.
	for _, n := range []string{"..test", "test..", "te..st", "...", "....", "%2e%2e"} {
		a.write(t, n, "look-alike "+n+"\n")
	}
	a.write(t, "sub/%2e%2e/x", "inside a directory named %2e%2e\n")
	// The same word in NFC (é = U+00E9) and NFD (e + U+0301).
	a.write(t, "caf\u00e9", "NFC\n")
	a.write(t, "cafe\u0301", "NFD\n")
	a.write(t, "alias\uFFFD", "U+FFFD\n")
	// Links out: to a file, to a directory, absolute, a chain, magic links.
	a.link(t, "../data-archived/x", "link-out")
	a.link(t, "../data-archived", "dirout")
	a.link(t, filepath.Join(a.base, "outdir", "x"), "abs-out")
	a.link(t, "link2", "link1")
	a.link(t, "sub/link3", "link2")
	a.link(t, "../../outdir/x", "sub/link3")
	a.link(t, "/proc/self/root", "procroot")
	a.link(t, "/proc/self/cwd", "proccwd")
	a.link(t, "/dev/fd/3", "fd3")
	// Links inside: followed.
	a.link(t, "hello.txt", "in-link")
	a.link(t, "sub", "in-dir")
	a.link(t, "in-link", "in-chain")
	// 300 levels of d/: deep enough to need as many ../ to climb out. (The
	// ATTACKS.md form, 1000 a/ then 1001 ../, is over the 4096-byte path
	// limit and refused before anything is opened, so needs no tree.)
	must(t, os.MkdirAll(filepath.Join(a.ws, strings.Repeat("d/", 300)), 0o755))
	a.seal(t)
	return a
}

type readCase struct {
	name, tool, args string
	status, reason   string // reason "" for executed
	step             string // the gate step that refuses ("paths", "arguments")
	contains         string // for executed: the result holds this
	lacks            []string
}

func TestAttackReading(t *testing.T) {
	t.Parallel()
	a := readWorkspace(t)
	abs := func(rel string) string { return filepath.Join(a.base, rel) }
	deny := func(name, tool, args string) readCase {
		return readCase{name: name, tool: tool, args: args, status: "refused", reason: "denied_path", step: "paths"}
	}
	invalid := func(name, tool, args string) readCase {
		return readCase{name: name, tool: tool, args: args, status: "refused", reason: "invalid_argument", step: "arguments"}
	}
	ok := func(name, tool, args, contains string, lacks ...string) readCase {
		return readCase{name: name, tool: tool, args: args, status: "executed", contains: contains, lacks: lacks}
	}
	p := func(path string) string { return atkJSON(t, map[string]any{"path": path}) }
	sp := func(pattern, path string) string { return atkJSON(t, map[string]any{"pattern": pattern, "path": path}) }
	up1001 := strings.Repeat("a/", 1000) + strings.Repeat("../", 1001) + "data-archived/x"
	up301 := strings.Repeat("d/", 300) + strings.Repeat("../", 301) + "data-archived/x"
	cases := []readCase{
		// Prefix siblings: a check without a separator would admit them.
		deny("sibling -archived abs", "file_read", p(abs("data-archived/x"))),
		deny("sibling 2 rel", "file_read", p("../data2/x")),
		deny("sibling _backup abs", "file_read", p(abs("data_backup"))),
		deny("sibling .bak abs", "file_read", p(abs("data.bak"))),
		deny("sibling dir_list", "dir_list", p(abs("data-archived"))),
		deny("sibling search", "search", sp(atkPattern, abs("data-archived"))),
		deny("sibling find", "find", sp("**", "../data2")),
		// Traversal.
		deny("a/../../etc/passwd", "file_read", p("a/../../etc/passwd")),
		deny("./../../x", "file_read", p("./../../x")),
		deny("../data-archived/x", "file_read", p("../data-archived/x")),
		deny("traversal in search path", "search", sp("root", "a/../../../etc")),
		deny("traversal in find path", "find", sp("*", "sub/../../data2")),
		deny("300 a/ then 301 ../", "file_read", p(up301)),
		invalid("1000 a/ then 1001 ../ (over the path limit)", "file_read", p(up1001)),
		ok("sub/.. is the root", "dir_list", p("sub/.."), "file hello.txt"),
		ok("sub/.. as a search path", "search", sp("^world$", "sub/.."), "hello.txt:2:world"),
		ok("300 d/ then 300 ../ is the root", "dir_list", p(strings.Repeat("d/", 300)+strings.Repeat("../", 300)), "file hello.txt"),
		// Names that only look like traversal.
		ok("..test", "file_read", p("..test"), "look-alike ..test"),
		ok("test..", "file_read", p("test.."), "look-alike test.."),
		ok("te..st", "file_read", p("te..st"), "look-alike te..st"),
		ok("...", "file_read", p("..."), "look-alike ...\n"),
		ok("....", "file_read", p("...."), "look-alike ....\n"),
		ok("%2e%2e is a file name", "file_read", p("%2e%2e"), "look-alike %2e%2e"),
		ok("%2e%2e is a directory name", "file_read", p("sub/%2e%2e/x"), "inside a directory named %2e%2e"),
		{name: "%2e%2e is never decoded", tool: "file_read", args: p("sub/%2e%2e/%2e%2e/%2e%2e/data-archived/x"), status: "failed", reason: "tool_error"},
		// Absolute paths.
		ok("absolute inside", "file_read", p(filepath.Join(a.ws, "hello.txt")), "hello"),
		ok("absolute root", "dir_list", p(a.ws), "file hello.txt"),
		deny("absolute /etc/passwd", "file_read", p("/etc/passwd")),
		deny("absolute with .. back out", "file_read", p(a.ws+"/../data-archived/x")),
		deny("absolute dir_list /", "dir_list", p("/")),
		deny("absolute find /etc", "find", sp("passwd", "/etc")),
		// Bad arguments (file_read's NUL and non-string are in call_test.go).
		invalid("dir_list NUL", "dir_list", p("sub\x00/../..")),
		invalid("search NUL in path", "search", sp("x", "a\x00b")),
		invalid("find NUL in pattern", "find", `{"pattern":"a\u0000b"}`),
		invalid("search path not a string", "search", `{"pattern":"x","path":["sub"]}`),
		invalid("find pattern not a string", "find", `{"pattern":7}`),
		invalid("dir_list path not a string", "dir_list", `{"path":{"p":"."}}`),
		invalid("file_read empty path", "file_read", `{"path":""}`),
		invalid("file_read no path", "file_read", `{}`),
		invalid("search empty pattern", "search", `{"pattern":""}`),
		invalid("find empty pattern", "find", `{"pattern":""}`),
		// Invalid UTF-8 must not be decoded into U+FFFD, which would
		// alias the file literally named "alias\uFFFD".
		invalid("file_read invalid UTF-8", "file_read", "{\"path\":\"alias\xff\"}"),
		// NFC and NFD are different names.
		ok("NFC", "file_read", p("caf\u00e9"), "NFC"),
		ok("NFD", "file_read", p("cafe\u0301"), "NFD"),
		// Links.
		deny("absolute link out", "file_read", p("abs-out")),
		deny("link to a directory out", "file_read", p("dirout/x")),
		deny("dir_list through a link out", "dir_list", p("dirout")),
		deny("search beneath a link out", "search", sp(".", "dirout")),
		deny("find beneath a link out", "find", sp("*", "dirout")),
		deny("chain link1 -> link2 -> link3 -> outside", "file_read", p("link1")),
		deny("chain middle", "file_read", p("link2")),
		ok("link inside followed", "file_read", p("in-link"), "hello"),
		ok("chain inside followed", "file_read", p("in-chain"), "world"),
		ok("directory link inside followed", "file_read", p("in-dir/inner.txt"), "inner"),
		ok("dir_list shows links as links", "dir_list", p(""), "symlink dirout -> (outside the workspace; not followed)"),
		ok("search never descends a link out", "search", sp(atkPattern, ""), "no matches"),
		ok("find never descends a link out", "find", `{"pattern":"**","max_results":100000}`, "dirout (symlink)", "dirout/", "link1/", "procroot/", "fd3/"),
		ok("find by the outside file's name", "find", `{"pattern":"**/x","max_results":100000}`, "sub/%2e%2e/x", "dirout/x", "link"),
		// Magic links.
		deny("/proc/self/root", "file_read", p("/proc/self/root"+filepath.Join(a.base, "data-archived/x"))),
		deny("/proc/self/root/etc/passwd in dir_list", "dir_list", p("/proc/self/root/etc")),
		deny("/proc/self/cwd", "file_read", p("/proc/self/cwd/hello.txt")),
		deny("/proc/self/cwd in find", "find", sp("*", "/proc/self/cwd")),
		deny("/dev/fd/3", "file_read", p("/dev/fd/3/hello.txt")),
		deny("/dev/fd/0 in search", "search", sp(".", "/dev/fd/0")),
		deny("/proc/self/fd/3", "dir_list", p("/proc/self/fd/3")),
		deny("link to /proc/self/root", "file_read", p("procroot/etc/passwd")),
		deny("link to /proc/self/cwd", "file_read", p("proccwd/hello.txt")),
		deny("link to /dev/fd/3", "dir_list", p("fd3")),
	}
	for _, c := range atkSample(cases, 5) {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			at := a.call(t, nil, atkReadFlags, c.tool, c.args)
			at.want(t, c.status, c.reason)
			if c.step != "" {
				at.refusedAt(t, c.reason, c.step)
			}
			if c.status == "executed" {
				if !strings.Contains(at.result(), c.contains) {
					t.Fatalf("result lacks %q:\n%s", c.contains, atkClip(at.result()))
				}
				for _, l := range c.lacks {
					if strings.Contains(at.result(), l) {
						t.Fatalf("result shows %q:\n%s", l, atkClip(at.result()))
					}
				}
			}
		})
	}
	t.Cleanup(func() { a.checkOutside(t) })
}

// TestAttackReadingUnderAuto: a sample of the table under the default
// --confine auto, where the harness has confined itself.
func TestAttackReadingUnderAuto(t *testing.T) {
	t.Parallel()
	a := readWorkspace(t)
	for _, c := range atkSample([]struct{ tool, path string }{
		{"file_read", filepath.Join(a.base, "data-archived/x")},
		{"file_read", "link1"},
		{"dir_list", "dirout"},
		{"file_read", "/proc/self/cwd/hello.txt"},
	}, 2) {
		at := a.call(t, nil, nil, c.tool, atkJSON(t, map[string]any{"path": c.path}))
		at.refusedAt(t, "denied_path", "paths")
	}
	at := a.call(t, nil, nil, "search", atkJSON(t, map[string]any{"pattern": atkPattern}))
	at.want(t, "executed", "")
	a.checkOutside(t)
}

// TestAttackReadingSwapRace: a directory of the workspace is swapped with a
// link to an outside directory (renameat2 RENAME_EXCHANGE, atomically, in
// a tight loop) while search, find, file_read and dir_list run through the
// CLI, for about three seconds. No outside byte may ever appear.
func TestAttackReadingSwapRace(t *testing.T) {
	t.Parallel()
	a := newAtkWS(t)
	for i := 0; i < 20; i++ {
		a.write(t, filepath.Join("d", "f"+string(rune('a'+i))), "needle inside\n")
	}
	a.write(t, "d/x", "needle inside x\n")
	for i := 0; i < 20; i++ {
		must(t, os.WriteFile(filepath.Join(a.base, "outdir", "f"+string(rune('a'+i))), []byte("needle "+atkSecret+"\n"), 0o644))
	}
	a.link(t, "../outdir", "swap")
	a.seal(t)

	d, swap := filepath.Join(a.ws, "d"), filepath.Join(a.ws, "swap")
	stop := make(chan struct{})
	var swaps atomic.Int64
	var swapper sync.WaitGroup
	swapper.Add(1)
	go func() {
		defer swapper.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := unix.Renameat2(unix.AT_FDCWD, d, unix.AT_FDCWD, swap, unix.RENAME_EXCHANGE); err != nil {
				t.Errorf("swap: %v", err)
				return
			}
			swaps.Add(1)
		}
	}()

	calls := []struct{ tool, args string }{
		{"search", `{"pattern":"needle","path":"d"}`},
		{"search", `{"pattern":"needle"}`},
		{"file_read", `{"path":"d/x"}`},
		{"find", `{"pattern":"**","path":"d"}`},
		{"dir_list", `{"path":"d"}`},
		{"search", `{"pattern":"needle","path":"d/fa"}`},
	}
	// Calls run for three seconds, and on until both outcomes were seen
	// (a call that found the real directory, one that found the link), so
	// the race is known to have been exercised; at most a minute.
	var executed, notExecuted atomic.Int64
	start := time.Now()
	more := func() bool {
		switch {
		case t.Failed() || time.Since(start) > time.Minute:
			return false
		case time.Since(start) < 3*time.Second:
			return true
		}
		return executed.Load() == 0 || notExecuted.Load() == 0
	}
	var callers sync.WaitGroup
	for w := 0; w < 2; w++ {
		callers.Add(1)
		go func(w int) {
			defer callers.Done()
			for i := w; more(); i++ {
				c := calls[i%len(calls)]
				// try reports any outside byte in the output or the
				// record, and any inconsistency.
				at, err := a.try(nil, "", atkReadFlags, c.tool, c.args)
				if err != nil {
					t.Error(err)
					return
				}
				if at.out["status"] == "executed" {
					executed.Add(1)
				} else {
					notExecuted.Add(1)
				}
			}
		}(w)
	}
	callers.Wait()
	close(stop)
	swapper.Wait()
	t.Logf("%d swaps; %d calls executed, %d refused or failed", swaps.Load(), executed.Load(), notExecuted.Load())
	if swaps.Load() < 100 || executed.Load() == 0 || notExecuted.Load() == 0 {
		t.Fatalf("the race was not exercised: %d swaps, %d executed, %d not", swaps.Load(), executed.Load(), notExecuted.Load())
	}
	a.checkOutside(t)
}
