package spawn

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// TestProbeRun: a Spec with Probe does every step of a call and stops
// before the program's execve: it succeeds where a call would reach its
// program, the program never runs, and a step that fails fails the probe
// as it would fail the call.
func TestProbeRun(t *testing.T) {
	for name, r := range runners(t) {
		ws := workspace(t)
		p := shSpec(t, ws, `echo ran > ran.txt`)
		p.Probe = true
		res, err := r.Run(context.Background(), p, Stdio{})
		if err != nil || res.ExitCode != 0 || res.Signal != "" {
			t.Fatalf("%s: probe: %+v, %v", name, res, err)
		}
		if _, err := os.Stat(filepath.Join(ws, "ran.txt")); err == nil {
			t.Errorf("%s: the probe executed the program", name)
		}
		// A step that fails: the working directory does not exist in the
		// view.
		p.Dir = filepath.Join(ws, "no-such-dir")
		if _, err := r.Run(context.Background(), p, Stdio{}); err == nil {
			t.Errorf("%s: a probe whose chdir cannot succeed succeeded", name)
		}
	}
}
