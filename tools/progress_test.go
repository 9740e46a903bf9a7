package tools

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/b10x/harness/confine/spawn"
)

// printRunner writes to the call's stdout and stderr and runs nothing.
type printRunner struct{ out, errOut string }

func (r printRunner) Run(ctx context.Context, s spawn.Spec, io spawn.Stdio) (spawn.Result, error) {
	io.Stdout.WriteString(r.out)
	io.Stderr.WriteString(r.errOut)
	return spawn.Result{}, nil
}

// TestProgressCountsOutput: a run's progress counts everything the
// program writes, past the capture's cap; without it nothing changes.
func TestProgressCountsOutput(t *testing.T) {
	var mu sync.Mutex
	var seen []int64
	progress := func(n int64) {
		mu.Lock()
		seen = append(seen, n)
		mu.Unlock()
	}
	out, errOut := strings.Repeat("o", 5000), strings.Repeat("e", 300)
	// The capture keeps 100 bytes a stream; progress counts everything.
	_, o, e, err := RunCaptured(context.Background(), printRunner{out, errOut}, spawn.Spec{}, strings.NewReader(""), 100, progress)
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) == 0 || slices.Max(seen) != 5300 || o.Total()+e.Total() != 5300 {
		t.Fatalf("reports %v, captured %d+%d", seen, o.Total(), e.Total())
	}
	// Without the hook nothing is reported and nothing changes.
	if _, o, _, err := RunCaptured(context.Background(), printRunner{out, errOut}, spawn.Spec{}, strings.NewReader(""), 100, nil); err != nil || o.Total() != 5000 {
		t.Fatal(err, o.Total())
	}
}
