package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/b10x/harness/confine/spawn"
	"github.com/b10x/harness/internal/pathattack"
	"github.com/b10x/harness/internal/reexec"
	"github.com/b10x/harness/workspace"
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
const outsideSecret = pathattack.Secret

// fixture is pathattack's tree, its root opened as a workspace:
//
//	T/secret.txt             outsideSecret
//	T/outside/secret2.txt    outsideSecret
//	T/data-archived/x, T/data2/x, T/data_backup, T/data.bak   outsideSecret
//	T/data/                  the workspace, see pathattack.Tree
type fixture struct {
	base string // T
	root string // T/data
	ws   *workspace.Workspace
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	fx := &fixture{}
	fx.base, fx.root = pathattack.Tree(t)
	ws, err := workspace.Open(fx.root)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	fx.ws = ws
	return fx
}

// resolveCase is one of pathattack's cases, its reason a Reason.
type resolveCase struct {
	name   string
	path   string
	want   string
	reason Reason
}

// readCases are pathattack's read attacks for fx.
func readCases(fx *fixture) []resolveCase {
	var cs []resolveCase
	for _, c := range pathattack.ReadCases(fx.base, fx.root) {
		cs = append(cs, resolveCase{c.Name, c.Path, c.Want, Reason(c.Reason)})
	}
	return cs
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
func call(t testing.TB, ws *workspace.Workspace, tool Tool, args string) (Result, error) {
	t.Helper()
	p, err := tool.Prepare(ws, json.RawMessage(args))
	if err != nil {
		return Result{}, err
	}
	return p.Execute(context.Background(), Report{})
}

// mustCall is call that fails the test on an error.
func mustCall(t testing.TB, ws *workspace.Workspace, tool Tool, args string) Result {
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
