package spawn

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/b10x/harness/cgroup"
	"github.com/b10x/harness/internal/testenv"
)

// counterScript writes an ever larger number to the file n in the
// workspace until the file stop appears or $SECS seconds pass, then makes
// the file ended.
const counterScript = `i=0; end=$(( $(date +%s) + SECS )); while [ ! -e stop ] && [ $(date +%s) -lt $end ]; do
	i=$((i+1)); echo $i > n.tmp; mv n.tmp n; done; echo "counted $i"; : > ended`

// counter reads the number in ws/n (0 when there is none yet).
func counter(ws string) int {
	b, _ := os.ReadFile(filepath.Join(ws, "n"))
	n, _ := strconv.Atoi(string(bytes.TrimSpace(b)))
	return n
}

// TestQuietPausesOthers: while a call reads its held paths (Spec.Hold),
// and again while it checks them after (Spec.After), another call's
// program, which writes a counter in a loop in the same workspace, makes
// no progress (its leaf is frozen), and runs on after;
// with no leaf to freeze, it runs on and the reading does not wait for it. A
// Hold that fails fails its call with its error, and leaves the other
// running. Through this process and through a broker.
func TestQuietPausesOthers(t *testing.T) {
	requireSpawn(t)
	if !inChildCgroup(t, true) {
		return
	}
	opts := testOptions()
	m, err := cgroup.Open(cgroup.Options{Name: "b10x-quiet-test"})
	switch {
	case err == nil:
		defer m.Close()
		opts.Cgroup = m
	case errors.Is(err, cgroup.ErrNotSupported):
		testenv.Require(t, false, "cgroup v2 ("+err.Error()+")", testenv.ShapeCgroupV1)
	default:
		t.Fatalf("cgroup.Open: %v", err)
	}
	b, err := StartBroker(BrokerOptions{Cgroup: opts.Cgroup, Require: opts.Require})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	leafless := testOptions()
	for _, c := range []struct {
		name   string
		r      Runner
		frozen bool // the other call is paused, not waited for
	}{
		{"direct", NewDirect(opts), true},
		{"broker", b, true},
		{"direct without cgroup", NewDirect(leafless), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			ws := workspace(t)
			secs := "30"
			if !c.frozen {
				secs = "2"
			}
			other := shSpec(t, ws, counterScript)
			other.Env = append(other.Env, "SECS="+secs)
			other.Timeout = time.Minute
			var otherDone atomic.Bool
			done := make(chan error, 1)
			go func() {
				_, o, err := run(t, c.r, other)
				otherDone.Store(true)
				if err == nil && !bytes.Contains(o.stdout.Bytes(), []byte("counted")) {
					err = errors.New("the counting call ended oddly: " + o.String())
				}
				done <- err
			}()
			deadline := time.Now().Add(30 * time.Second)
			for counter(ws) < 3 {
				if time.Now().After(deadline) {
					t.Fatal("the counting call never counted")
				}
				time.Sleep(5 * time.Millisecond)
			}

			var during [2]int
			var endedFirst bool
			s := shSpec(t, ws, "echo held")
			s.Hold = func() (Held, error) {
				_, err := os.Stat(filepath.Join(ws, "ended"))
				endedFirst = err == nil
				during[0] = counter(ws)
				time.Sleep(200 * time.Millisecond)
				during[1] = counter(ws)
				return Held{Masked: []string{filepath.Join(ws, "n")}, After: true}, nil
			}
			var after [2]int
			afterCalled := false
			s.After = func() {
				afterCalled = true
				after[0] = counter(ws)
				time.Sleep(200 * time.Millisecond)
				after[1] = counter(ws)
			}
			res, o, err := run(t, c.r, s)
			if err != nil || res.ExitCode != 0 || !bytes.Contains(o.stdout.Bytes(), []byte("held")) {
				t.Fatalf("the call that holds: %v %+v %s", err, res, o)
			}
			if !afterCalled {
				t.Fatal("Spec.After was not called after the call")
			}
			if c.frozen {
				if during[0] != during[1] {
					t.Errorf("the other call's program counted from %d to %d while this call read its held paths", during[0], during[1])
				}
				if after[0] != after[1] {
					t.Errorf("the other call's program counted from %d to %d while this call's After ran", after[0], after[1])
				}
				if otherDone.Load() {
					t.Fatal("the other call ended: it should have been paused and resumed")
				}
				// It runs on once the view is built.
				before := counter(ws)
				for counter(ws) <= before {
					if time.Now().After(deadline) {
						t.Fatal("the other call's program did not resume")
					}
					time.Sleep(5 * time.Millisecond)
				}
			} else if endedFirst {
				t.Errorf("this call waited for a call that cannot be paused to end (it must run on)")
			}

			// A Hold that says no check is wanted after: After is not
			// called.
			afterCalled = false
			s.Hold = func() (Held, error) { return Held{}, nil }
			if res, o, err := run(t, c.r, s); err != nil || res.ExitCode != 0 {
				t.Fatalf("a call wanting no check after: %v %+v %s", err, res, o)
			}
			if afterCalled {
				t.Error("Spec.After was called although Held.After was false")
			}

			// A Hold that fails: its error is the call's, and nothing of
			// the other call stays paused.
			refused := errors.New("the hold refused the call")
			s.Hold = func() (Held, error) { return Held{}, refused }
			afterCalled = false
			if _, _, err := run(t, c.r, s); err == nil || err.Error() != refused.Error() {
				t.Fatalf("a Hold that failed: %v, want its error", err)
			}
			if afterCalled {
				t.Error("Spec.After was called although Hold failed")
			}
			if c.frozen {
				before := counter(ws)
				for counter(ws) <= before {
					if time.Now().After(deadline) {
						t.Fatal("the other call's program stayed paused after a Hold failed")
					}
					time.Sleep(5 * time.Millisecond)
				}
			}
			if err := os.WriteFile(filepath.Join(ws, "stop"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		})
	}
}
