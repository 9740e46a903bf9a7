// Package reexec lets the harness binary (and test binaries) start themselves
// under a hidden entry point: the run helper, the spawn broker, kernel probes.
//
// Register entry points in package init functions; call Init first thing in
// main and in every TestMain of a package whose code re-executes itself. Init
// returns only when the process was not started under a registered entry
// point; otherwise it runs the entry point, which must not return (it exits).
//
// The entry point is chosen by os.Args[0], which Command sets to the entry
// point's name, so it cannot collide with any user argument.
package reexec

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
)

// prefix marks argv[0] values that select an entry point.
const prefix = "b10x-reexec:"

var (
	mu      sync.Mutex
	entries = map[string]func(){}
)

// Register adds an entry point. It panics on a duplicate name: that is a
// programming error found at init time.
func Register(name string, fn func()) {
	mu.Lock()
	defer mu.Unlock()
	if _, dup := entries[name]; dup {
		panic("reexec: duplicate entry point " + name)
	}
	entries[name] = fn
}

// Init runs the registered entry point named by os.Args[0], if any, and
// exits with status 70 if the entry point returns (a bug). It returns
// normally when argv[0] names no entry point.
func Init() {
	if !strings.HasPrefix(os.Args[0], prefix) {
		return
	}
	name := strings.TrimPrefix(os.Args[0], prefix)
	mu.Lock()
	fn, ok := entries[name]
	mu.Unlock()
	if !ok {
		fmt.Fprintf(os.Stderr, "b10x-harness: unknown hidden entry point %q\n", name)
		os.Exit(70)
	}
	fn()
	fmt.Fprintf(os.Stderr, "b10x-harness: bug: entry point %q returned\n", name)
	os.Exit(70)
}

// Self is the path used to re-execute the running binary.
const Self = "/proc/self/exe"

// Command returns an exec.Cmd that starts this binary under the entry point
// name with the given arguments. The caller sets SysProcAttr, stdio and env.
func Command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(Self, args...)
	cmd.Args = append([]string{prefix + name}, args...)
	return cmd
}
