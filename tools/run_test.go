package tools

import (
	"context"
	"encoding/json"
	"syscall"
	"testing"

	"github.com/b10x/harness/confine/spawn"
)

// specRunner records the Spec of each call and runs nothing.
type specRunner struct{ specs []spawn.Spec }

func (r *specRunner) Run(ctx context.Context, s spawn.Spec, io spawn.Stdio) (spawn.Result, error) {
	r.specs = append(r.specs, s)
	return spawn.Result{}, nil
}

// TestRunConfigReachesSpec: the run tool's configuration, TmpSize included,
// is what the runner gets.
func TestRunConfigReachesSpec(t *testing.T) {
	ws, err := OpenWorkspace(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	// The view as PinRunView would make it, without holding a descriptor
	// for the rest of the test process (this runner checks nothing).
	var st syscall.Stat_t
	if err := syscall.Stat(ws.Dir(), &st); err != nil {
		t.Fatal(err)
	}
	view := RunView{Workspace: spawn.Pinned{Path: ws.Dir(), Dev: st.Dev, Ino: st.Ino, Dir: true}}
	for _, size := range []int64{0, 3 << 20} {
		r := &specRunner{}
		tool := RunTool(RunConfig{Programs: Programs{"true": "/bin/true"}, Runner: r, TmpSize: size, Net: true, View: view})
		p, err := tool.Prepare(ws, json.RawMessage(`{"argv":["true"]}`))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.Execute(context.Background()); err != nil {
			t.Fatal(err)
		}
		if len(r.specs) != 1 || r.specs[0].TmpSize != size || !r.specs[0].Net || r.specs[0].Path != "/bin/true" {
			t.Fatalf("TmpSize %d: the runner got %+v", size, r.specs)
		}
	}
}
