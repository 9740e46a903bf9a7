package workspace

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/b10x/harness/internal/pathattack"
	"github.com/b10x/harness/internal/reexec"
)

func TestMain(m *testing.M) {
	reexec.Init()
	before := openFds()
	code := m.Run()
	// Every descriptor the package opens must be closed by the time its
	// call returns: fail the package on a leak (runtime-internal epoll and
	// eventfd descriptors aside).
	if code == 0 {
		for fd, target := range openFds() {
			if _, had := before[fd]; !had && !strings.HasPrefix(target, "anon_inode:") {
				fmt.Fprintf(os.Stderr, "workspace tests: descriptor %s (%s) leaked\n", fd, target)
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
		fmt.Fprintln(os.Stderr, "workspace tests:", err)
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

// fixture is pathattack's tree, its root opened as a workspace.
type fixture struct {
	base string // T
	root string // T/data
	ws   *Workspace
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	fx := &fixture{}
	fx.base, fx.root = pathattack.Tree(t)
	ws, err := Open(fx.root)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	fx.ws = ws
	return fx
}

// kindOf returns the kind of an *Error, or "" for nil, or "not *Error".
func kindOf(err error) Kind {
	if err == nil {
		return ""
	}
	var e *Error
	if !errors.As(err, &e) {
		return "not *Error: " + Kind(err.Error())
	}
	return e.Kind
}

func readFile(t testing.TB, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// assertNoTemps fails the test for every temporary file of a write left
// beneath root.
func assertNoTemps(t *testing.T, root string) {
	t.Helper()
	filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && IsTempName(d.Name()) {
			t.Errorf("temporary file left behind: %s", p)
		}
		return nil
	})
}
