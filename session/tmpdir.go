package session

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/b10x/harness/internal/proc"
)

// The hooks' private temporary directory, and why a second process removes
// it.
//
// Hooks run as children of the harness after it has confined its own
// writes, so they inherit its Landlock domain; their TMPDIR must be a
// directory that domain lets them write. The harness creates it in $TMPDIR
// before confining itself, but afterwards it can empty it and never remove
// it: removing a directory needs the remove_dir right on its parent ($TMPDIR
// itself), which the domain does not grant and must not (it would let the
// harness remove any empty directory there). So a small process started
// before the harness confines itself, and never confined, removes it: it
// waits until the harness closes its end of a pipe (at Close, or when the
// harness dies in any way, SIGKILL included) and then removes the
// directory. Close waits for it, so the directory is gone when a command
// returns; after a signal or a crash it is gone moments after the harness.

// privateTmp creates the hooks' temporary directory in $TMPDIR and starts
// the process that removes it; s's Close waits for that removal. It must be
// called after the cgroup is opened (the reaper joins the harness's cgroup)
// and before the harness confines its own writes.
func privateTmp(cu *cleanup) (string, error) {
	dir, err := os.MkdirTemp("", "b10x-harness-")
	if err != nil {
		return "", fmt.Errorf("creating the hooks' temporary directory: %w", err)
	}
	// A relative $TMPDIR gives a relative name: the reaper runs in "/" and
	// the harness's own Landlock rules take absolute paths only.
	if abs, err := filepath.Abs(dir); err != nil {
		os.Remove(dir)
		return "", fmt.Errorf("creating the hooks' temporary directory: %w", err)
	} else {
		dir = abs
	}
	rm, err := proc.StartRemover(dir, true)
	if err != nil {
		os.Remove(dir)
		return "", fmt.Errorf("the hooks' temporary directory: %w", err)
	}
	cu.add(func() { _ = rm.Done() })
	return dir, nil
}
