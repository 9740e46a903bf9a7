package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/b10x/harness/confine/spawn"
	"github.com/b10x/harness/internal/reexec"
)

func TestMain(m *testing.M) {
	reexec.Init()
	before := openFds()
	code := m.Run()
	// Every descriptor a tool opens must be closed by the time it returns:
	// fail the package on a leak (runtime-internal epoll and eventfd
	// descriptors aside).
	if code == 0 {
		// spawn.Pin holds its descriptors for the life of the process, by
		// design (ResolvePrograms pins each program).
		for _, fd := range spawn.PinnedDescriptors() {
			before[strconv.Itoa(fd)] = "pinned"
		}
		for fd, target := range openFds() {
			if _, had := before[fd]; !had && !strings.HasPrefix(target, "anon_inode:") {
				fmt.Fprintf(os.Stderr, "tools tests: descriptor %s (%s) leaked\n", fd, target)
				code = 1
			}
		}
	}
	os.Exit(code)
}

// openFds maps this process's open descriptors to what they refer to.
func openFds() map[string]string {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		fmt.Fprintln(os.Stderr, "tools tests:", err)
		os.Exit(1)
	}
	fds := map[string]string{}
	for _, e := range ents {
		target, err := os.Readlink("/proc/self/fd/" + e.Name())
		if err == nil { // the descriptor ReadDir itself used is gone by now
			fds[e.Name()] = target
		}
	}
	return fds
}

// The secret planted outside every test workspace. No result may ever
// contain it.
const outsideSecret = "OUTSIDE-SECRET-7f3a9c"

// fixture is a workspace root T/data beside outside siblings:
//
//	T/secret.txt             outsideSecret
//	T/outside/secret2.txt    outsideSecret
//	T/data-archived/x, T/data2/x, T/data_backup, T/data.bak   outsideSecret
//	T/data/                  the workspace, see newFixture
type fixture struct {
	base string // T
	root string // T/data
	ws   *Workspace
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	fx := &fixture{base: base, root: filepath.Join(base, "data")}
	files := map[string]string{
		"secret.txt":          outsideSecret,
		"outside/secret2.txt": outsideSecret,
		"data-archived/x":     outsideSecret,
		"data2/x":             outsideSecret,
		"data_backup":         outsideSecret,
		"data.bak":            outsideSecret,

		"data/file.txt":         "hello\n",
		"data/sub/inner.txt":    "inner text\n",
		"data/..test":           "dotdot-test\n",
		"data/test..":           "test-dotdot\n",
		"data/te..st":           "te-dotdot-st\n",
		"data/...":              "three dots\n",
		"data/....":             "four dots\n",
		"data/%2e%2e":           "percent-encoded name\n",
		"data/caf\u00e9":        "nfc\n", // NFC
		"data/cafe\u0301":       "nfd\n", // NFD
		"data/nfc/caf\u00e9":    "only nfc\n",
		"data/bin.dat":          "abc\x00def\n",
		"data/a/.keep":          "",
		"data/deep/notes.md":    "a note\n",
		"data/deep/er/code.go":  "package er\n\nfunc NewThing() {}\n",
		"data/deep/er/other.go": "package er\n",
	}
	for name, content := range files {
		p := filepath.Join(base, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// 300 nested "a" directories: the in-length form of the deep
	// traversal attack reaches the resolver.
	if err := os.MkdirAll(filepath.Join(fx.root, strings.Repeat("a/", 300)), 0o755); err != nil {
		t.Fatal(err)
	}
	links := map[string]string{
		"out":          "../secret.txt",
		"outabs":       filepath.Join(base, "secret.txt"),
		"link1":        "link2",
		"link2":        "link3",
		"link3":        filepath.Join(base, "secret.txt"),
		"in":           "sub/inner.txt",
		"inabs":        filepath.Join(fx.root, "sub/inner.txt"),
		"reenter":      "../data/file.txt",
		"dirout":       "../outside",
		"dirin":        "sub",
		"dangling_out": filepath.Join(base, "created-outside.txt"),
		"dangling_in":  "newtarget.txt",
		"procroot":     "/proc/self/root",
		"loop1":        "loop2",
		"loop2":        "loop1",
		"sub/up":       "../file.txt",
		"sub/upout":    "../../secret.txt",
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(fx.root, name)); err != nil {
			t.Fatal(err)
		}
	}
	ws, err := OpenWorkspace(fx.root)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	fx.ws = ws
	return fx
}

// reasonOf returns the reason of a *Error, or "" for nil, or "not *Error".
func reasonOf(err error) Reason {
	if err == nil {
		return ""
	}
	var e *Error
	if !errors.As(err, &e) {
		return "not *Error: " + Reason(err.Error())
	}
	return e.Reason
}

// call prepares and executes a tool call.
func call(t testing.TB, ws *Workspace, tool Tool, args string) (Result, error) {
	t.Helper()
	p, err := tool.Prepare(ws, json.RawMessage(args))
	if err != nil {
		return Result{}, err
	}
	return p.Execute(context.Background(), Report{})
}

// mustCall is call that fails the test on an error.
func mustCall(t testing.TB, ws *Workspace, tool Tool, args string) Result {
	t.Helper()
	r, err := call(t, ws, tool, args)
	if err != nil {
		t.Fatalf("%s %s: %v", tool.Name(), args, err)
	}
	return r
}

// jsonArgs renders a tool's arguments as JSON.
func jsonArgs(kv map[string]any) string {
	b, err := json.Marshal(kv)
	if err != nil {
		panic(err)
	}
	return string(b)
}
