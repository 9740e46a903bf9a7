package session

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/b10x/harness/gate"
	"github.com/b10x/harness/internal/testenv"
	"github.com/b10x/harness/policy"
	"github.com/b10x/harness/tools"
	"github.com/b10x/harness/workspace"
)

// waitQueued waits until s holds n waiting calls.
func waitQueued(t testing.TB, s *runSlots, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for s.waiting() != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d calls waiting, want %d", s.waiting(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestRunSlotsFIFO: calls that wait are given the slots in the order they
// came, and a call that comes while others wait queues behind them even
// when a slot is being freed.
func TestRunSlotsFIFO(t *testing.T) {
	s := newRunSlots(1)
	if q, err := s.acquire(context.Background()); q || err != nil {
		t.Fatalf("first acquire: queued %v, %v", q, err)
	}
	var mu sync.Mutex
	var order []int
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			q, err := s.acquire(context.Background())
			if !q || err != nil {
				t.Errorf("waiter %d: queued %v, %v", i, q, err)
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			s.release()
		}()
		waitQueued(t, s, i+1) // i is queued before i+1 comes
	}
	s.release()
	wg.Wait()
	if !slices.Equal(order, []int{0, 1, 2, 3, 4, 5, 6, 7}) {
		t.Fatalf("slots given in the order %v, want the order of arrival", order)
	}
	if s.running != 0 || s.waiting() != 0 {
		t.Fatalf("after all: %d running, %d waiting", s.running, s.waiting())
	}
}

// TestRunSlotsCancelled: a waiting call whose context ends leaves the
// queue with its context's error and takes no slot; the calls behind it
// keep their turn.
func TestRunSlotsCancelled(t *testing.T) {
	s := newRunSlots(1)
	if _, err := s.acquire(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		q, err := s.acquire(ctx)
		if !q {
			err = errors.New("not queued")
		}
		errc <- err
	}()
	waitQueued(t, s, 1)
	after := make(chan error, 1)
	go func() { _, err := s.acquire(context.Background()); after <- err }()
	waitQueued(t, s, 2)
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled waiter: %v, want context.Canceled", err)
	}
	waitQueued(t, s, 1)
	s.release()
	if err := <-after; err != nil {
		t.Fatalf("the call behind the cancelled one: %v", err)
	}
	dctx, dcancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer dcancel()
	if q, err := s.acquire(dctx); !q || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("waiter past its deadline: queued %v, %v", q, err)
	}
	s.release()
	if s.running != 0 || s.waiting() != 0 {
		t.Fatalf("after all: %d running, %d waiting", s.running, s.waiting())
	}
}

// TestRunSlotsBound: many calls at once, some cancelled while they wait,
// never hold more than max slots, and every slot comes back.
func TestRunSlotsBound(t *testing.T) {
	const max, calls = 3, 200
	s := newRunSlots(max)
	var now, peak atomic.Int32
	var wg sync.WaitGroup
	for i := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := context.Background()
			if i%5 == 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, time.Duration(rand.IntN(3000))*time.Microsecond)
				defer cancel()
			}
			if _, err := s.acquire(ctx); err != nil {
				return
			}
			n := now.Add(1)
			for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
			}
			time.Sleep(time.Duration(rand.IntN(500)) * time.Microsecond)
			now.Add(-1)
			s.release()
		}()
	}
	wg.Wait()
	if p := peak.Load(); p > max || p < 1 {
		t.Fatalf("%d calls held a slot at once, max_parallel %d", p, max)
	}
	if s.running != 0 || s.waiting() != 0 {
		t.Fatalf("after all: %d running, %d waiting", s.running, s.waiting())
	}
}

// fakeTool's calls are Holders and Previewers when held is true, as the
// run tool's are.
type fakeTool struct {
	name string
	held bool
}

func (t fakeTool) Name() string            { return t.name }
func (t fakeTool) Description() string     { return "" }
func (t fakeTool) Schema() json.RawMessage { return json.RawMessage(`{}`) }
func (t fakeTool) Prepare(*workspace.Workspace, json.RawMessage) (tools.Prepared, error) {
	if t.held {
		return &fakeHeldCall{}, nil
	}
	return &fakeCall{}, nil
}

type fakeCall struct{ released bool }

func (c *fakeCall) Args() any             { return nil }
func (c *fakeCall) Writes() []tools.Write { return nil }
func (c *fakeCall) Execute(context.Context, tools.Report) (tools.Result, error) {
	return tools.Result{Text: "ran", Meta: map[string]any{"exit_code": 0}}, nil
}
func (c *fakeCall) Release() { c.released = true }

type fakeHeldCall struct {
	fakeCall
	hold tools.Hold
}

func (c *fakeHeldCall) Hold(read func() (tools.Hold, error), _ func()) { c.hold, _ = read() }
func (c *fakeHeldCall) Preview() tools.Preview                         { return tools.Preview{Program: "/bin/fake"} }

// TestSlottedCallKeepsInterfaces: only the run tool is wrapped; a wrapped
// call is still what the gate asks of it (a Holder, a Previewer, a
// Releaser, each reaching the call), a call that is no Holder does not
// become one, and the result keeps its meta beside the wait's.
func TestSlottedCallKeepsInterfaces(t *testing.T) {
	slots := newRunSlots(1)
	ts := withSlots([]tools.Tool{fakeTool{name: "file_read"}, fakeTool{name: "run", held: true}}, slots)
	if _, ok := ts[0].(slottedTool); ok {
		t.Error("file_read was wrapped")
	}
	if _, ok := ts[1].(slottedTool); !ok {
		t.Fatal("run was not wrapped")
	}
	p, err := ts[1].Prepare(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	inner := p.(*slottedHeldCall).Prepared.(*fakeHeldCall)
	h, ok := p.(tools.Holder)
	if !ok {
		t.Fatal("a wrapped run call is not a tools.Holder: the gate would not hold paths from its child")
	}
	h.Hold(func() (tools.Hold, error) { return tools.Hold{ReadOnly: []string{".git"}}, nil }, func() {})
	if len(inner.hold.ReadOnly) != 1 {
		t.Error("Hold did not reach the call")
	}
	if pv, ok := p.(tools.Previewer); !ok || pv.Preview().Program != "/bin/fake" {
		t.Error("Preview did not reach the call")
	}
	p.(tools.Releaser).Release()
	if !inner.released {
		t.Error("Release did not reach the call")
	}
	res, err := p.Execute(context.Background(), tools.Report{})
	if err != nil || res.Text != "ran" || res.Meta["exit_code"] != 0 || res.Meta["slot_wait_ms"] == nil || res.Meta["slot_queued"] != nil {
		t.Errorf("Execute: %+v, %v", res, err)
	}
	if slots.running != 0 {
		t.Errorf("%d slots held after the call", slots.running)
	}
	fr, err := slottedTool{Tool: fakeTool{name: "other"}, slots: slots}.Prepare(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := fr.(tools.Holder); ok {
		t.Error("a wrapped call that is no Holder became one")
	}
}

// parallelReport is what the parallel scenario saw.
type parallelReport struct {
	Published bool           `json:"published"`
	Outcomes  []string       `json:"outcomes"` // status/reason of each of the many calls
	Queued    int            `json:"queued"`   // how many of them said slot_queued
	NoWait    int            `json:"no_wait"`  // how many had no slot_wait_ms
	Cancelled gate.Outcome   `json:"cancelled"`
	TimedOut  gate.Outcome   `json:"timed_out"`
	Blockers  []gate.Outcome `json:"blockers"`
}

const parallelMax = 3

func init() {
	children["parallel"] = func() (any, error) {
		ws, n := os.Getenv("WS"), 30
		p := Defaults()
		p.Workspace = ws
		p.Record = os.Getenv("RECORD")
		p.Approve, p.ApproveUpTo = ApproveAll, policy.RiskHigh
		p.Programs = []string{"sh"}
		p.MaxParallel = parallelMax
		p.Run.Timeout = time.Minute
		s, err := Open(context.Background(), p, Options{Command: "test", Version: "test"})
		if err != nil {
			return nil, err
		}
		defer s.End("completed")
		var r parallelReport
		if _, r.Published = s.Gate().Tool("run"); !r.Published {
			return r, nil
		}
		call := func(ctx context.Context, script string) gate.Outcome {
			b, _ := json.Marshal(map[string]any{"argv": []string{"sh", "-c", script}})
			return s.Call(ctx, "run", b)
		}
		// Many calls at once: each program marks its start and its end in
		// one file of the workspace (O_APPEND, a line each).
		outs := make([]gate.Outcome, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				outs[i] = call(context.Background(), fmt.Sprintf("echo S %d >> log; sleep 0.4; echo E %d >> log", i, i))
			}()
		}
		wg.Wait()
		for _, o := range outs {
			r.Outcomes = append(r.Outcomes, string(o.Status)+"/"+string(o.Reason))
			if o.Meta["slot_queued"] == true {
				r.Queued++
			}
			if _, ok := o.Meta["slot_wait_ms"]; !ok {
				r.NoWait++
			}
		}

		// Every slot held by a call that waits for the file go; one more
		// call waits for a slot and is cancelled, another's deadline
		// passes: neither may start.
		blockers := make([]gate.Outcome, parallelMax)
		for i := range parallelMax {
			wg.Add(1)
			go func() {
				defer wg.Done()
				blockers[i] = call(context.Background(), fmt.Sprintf("echo S b%d >> log; while [ ! -e go ]; do sleep 0.05; done; echo E b%d >> log", i, i))
			}()
		}
		deadline := time.Now().Add(30 * time.Second)
		for {
			b, _ := os.ReadFile(filepath.Join(ws, "log"))
			if bytes.Count(b, []byte("S b")) == parallelMax {
				break
			}
			if time.Now().After(deadline) {
				return nil, fmt.Errorf("the blocking calls did not start: %q", b)
			}
			time.Sleep(10 * time.Millisecond)
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan gate.Outcome, 1)
		go func() { done <- call(ctx, "echo S cancelled >> log") }()
		// It waits for a slot (the test says so when it never did).
		for wait := time.Now().Add(5 * time.Second); s.slots.waiting() != 1 && time.Now().Before(wait); {
			time.Sleep(time.Millisecond)
		}
		time.Sleep(50 * time.Millisecond)
		cancel()
		r.Cancelled = <-done
		tctx, tcancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		r.TimedOut = call(tctx, "echo S timed-out >> log")
		tcancel()
		if err := os.WriteFile(filepath.Join(ws, "go"), nil, 0o644); err != nil {
			return nil, err
		}
		wg.Wait()
		r.Blockers = blockers
		return r, nil
	}
}

// TestMaxParallelSession: thirty run calls at once through a real session
// with max_parallel 3 never have more than three programs running, as the
// programs themselves mark it; the calls that waited say so in their
// meta; a call cancelled while it waits, and one whose deadline passes
// while it waits, fail with their reason and never start.
func TestMaxParallelSession(t *testing.T) {
	base := t.TempDir()
	ws := filepath.Join(base, "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		_ = os.Lchown(ws, 1000, 1000) // as TestOpenAttack: a child cannot be given root's tree everywhere
	}
	rec := filepath.Join(base, "record.jsonl")
	var r parallelReport
	inChild(t, "parallel", []string{"WS=" + ws, "RECORD=" + rec}, &r)
	testenv.Require(t, r.Published, "confined execution (run published)", testenv.ShapeNoLandlock, testenv.ShapeNoUserns)

	for i, o := range r.Outcomes {
		if o != "executed/" {
			t.Errorf("call %d: %s", i, o)
			break
		}
	}
	if r.NoWait > 0 {
		t.Errorf("%d run calls have no slot_wait_ms in their meta", r.NoWait)
	}
	if r.Queued < len(r.Outcomes)-parallelMax {
		t.Errorf("%d of %d calls say they queued; with max_parallel %d at least %d had to", r.Queued, len(r.Outcomes), parallelMax, len(r.Outcomes)-parallelMax)
	}

	// The overlap, from the programs' own marks, in the order written.
	f, err := os.Open(filepath.Join(ws, "log"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	running, peak, starts := 0, 0, map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		kind, id, _ := strings.Cut(sc.Text(), " ")
		switch kind {
		case "S":
			running++
			starts[id] = true
		case "E":
			running--
		}
		peak = max(peak, running)
	}
	if peak > parallelMax {
		t.Errorf("%d programs ran at once, max_parallel %d", peak, parallelMax)
	}
	if peak < 2 {
		t.Errorf("at most %d program ran at once: the calls did not run side by side at all", peak)
	}
	for _, id := range []string{"cancelled", "timed-out"} {
		if starts[id] {
			t.Errorf("the %s call waiting for a slot started its program", id)
		}
	}

	for _, c := range []struct {
		name   string
		o      gate.Outcome
		reason tools.Reason
	}{{"cancelled", r.Cancelled, tools.ReasonCancelled}, {"timed out", r.TimedOut, tools.ReasonTimeout}} {
		if c.o.Status != gate.Failed || c.o.Reason != c.reason || !strings.Contains(c.o.Message, "waited") || !strings.Contains(c.o.Message, "never started") {
			t.Errorf("%s while waiting: %s/%s %q", c.name, c.o.Status, c.o.Reason, c.o.Message)
		}
		if c.o.Meta["slot_queued"] != true || c.o.Meta["exit_code"] != nil {
			t.Errorf("%s while waiting: meta %v", c.name, c.o.Meta)
		}
	}
	for i, o := range r.Blockers {
		if o.Status != gate.Executed {
			t.Errorf("blocking call %d: %s/%s %s", i, o.Status, o.Reason, o.Message)
		}
	}

	// The record has every run call's wait, the cancelled one's too.
	b, err := os.ReadFile(rec)
	if err != nil {
		t.Fatal(err)
	}
	calls, waited := 0, 0
	for _, l := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		var line struct {
			Event string         `json:"event"`
			Entry string         `json:"entry"`
			Meta  map[string]any `json:"meta"`
		}
		if err := json.Unmarshal(l, &line); err != nil {
			t.Fatal(err)
		}
		if line.Event == "call" && line.Entry == "run" {
			calls++
			if _, ok := line.Meta["slot_wait_ms"]; ok {
				waited++
			}
		}
	}
	if want := len(r.Outcomes) + parallelMax + 2; calls != want || waited != calls {
		t.Errorf("record: %d run calls, %d with slot_wait_ms; want %d of each", calls, waited, want)
	}
}

// TestDefaultMaxParallel: the default is the CPUs this process may use,
// and at least 4; every policy starts from it.
func TestDefaultMaxParallel(t *testing.T) {
	if got, want := Defaults().MaxParallel, max(runtime.NumCPU(), 4); got != want || got < 4 {
		t.Fatalf("Defaults().MaxParallel = %d, want %d", got, want)
	}
}
