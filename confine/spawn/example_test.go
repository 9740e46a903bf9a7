package spawn_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/b10x/harness/confine/spawn"
)

// One program run from this process under the run layers, its output
// captured through a pipe. The workspace is the child's to write; of the
// rest of the host it sees only the system directories, read-only.
//
// Run needs the kernel's confinement: user namespaces (or root) and
// mounts, and unless Options.Require allows their absence, seccomp and
// Landlock. On a host without one of them it returns a *SetupError naming
// the step, and the program never runs. So this example is compiled, not
// run as a test (the suite must pass on any host, and the VM shapes
// without Landlock or user namespaces run this package); on a host that
// has them it prints
//
//	exit 0: "hello\n"
//	written: "hello\n"
func ExampleNewDirect() {
	dir, err := os.MkdirTemp("", "b10x-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	// Pin each path once, at start, as a harness does.
	sh, err := spawn.Pin("/bin/sh")
	if err != nil {
		panic(err)
	}
	ws, err := spawn.Pin(dir)
	if err != nil {
		panic(err)
	}
	spec := spawn.Spec{
		Program:   sh,
		Argv:      []string{"sh", "-c", "echo hello > greeting && cat greeting"},
		Env:       []string{"PATH=/usr/bin:/bin"},
		Dir:       ws.Path,
		Workspace: ws,
		Timeout:   time.Minute,
	}

	stdout := spawn.NewCapture(64 << 10)
	r, w, err := os.Pipe()
	if err != nil {
		panic(err)
	}
	copied := make(chan struct{})
	go func() { io.Copy(stdout, r); close(copied) }()
	res, err := spawn.NewDirect(spawn.Options{}).Run(context.Background(), spec, spawn.Stdio{Stdout: w})
	w.Close()
	<-copied
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("exit %d: %q\n", res.ExitCode, stdout.Bytes())
	b, _ := os.ReadFile(filepath.Join(ws.Path, "greeting"))
	fmt.Printf("written: %q\n", b)
}
