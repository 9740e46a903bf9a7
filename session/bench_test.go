package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/b10x/harness/gate"
	"github.com/b10x/harness/policy"
)

// The session benchmarks time one run call of /bin/true as a model's
// client sees it: through the surface, the gate, the record, the run tool
// and the broker, from Call to its Outcome. Between two calls the model
// takes its turn (50 ms here), outside the figure: that is when the
// sandbox of the next call is started (decision 0069). Open confines the
// whole process, so the calls run in a re-run child, which reports the
// mean and the median of its calls as the ns/call and ns/call-median
// metrics (ns/op is the child's whole life, its start included).
// bubblewrap's one-shot start of the same program is beside them:
//
//	go test -ldflags="$(make -s helper-ldflags)" ./session -run '^$' -bench SessionRun -benchtime 40x

type benchReport struct {
	Mean, Median time.Duration
	Prestarted   int
}

func init() {
	children["bench-run"] = func() (any, error) {
		n, err := strconv.Atoi(os.Getenv("N"))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("N=%q", os.Getenv("N"))
		}
		ws, err := os.MkdirTemp("", "b10x-bench-session")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(ws)
		p := Defaults()
		p.Workspace = ws
		p.Approve, p.ApproveUpTo = ApproveAll, policy.RiskHigh
		p.Programs = []string{"true"}
		s, err := Open(context.Background(), p, Options{Command: "bench", Version: "test", Prestart: os.Getenv("PRESTART") == "1"})
		if err != nil {
			return nil, err
		}
		defer s.End("completed")
		args := json.RawMessage(`{"argv":["true"]}`)
		var r benchReport
		var took []time.Duration
		for i := 0; i <= n; i++ {
			time.Sleep(50 * time.Millisecond) // the model's turn
			t0 := time.Now()
			out := s.Call(context.Background(), "run", args)
			d := time.Since(t0)
			if out.Status != gate.Executed || out.Meta["exit_code"] != 0 {
				return nil, errors.New("run call: " + string(out.Status) + " " + string(out.Reason) + " " + out.Message)
			}
			if i == 0 {
				continue // the first call after Open
			}
			took = append(took, d)
			if out.Meta["prestarted"] == true {
				r.Prestarted++
			}
		}
		var sum time.Duration
		for _, d := range took {
			sum += d
		}
		slices.Sort(took)
		r.Mean, r.Median = sum/time.Duration(len(took)), took[len(took)/2]
		return r, nil
	}
}

func BenchmarkSessionRun(b *testing.B) {
	for _, c := range []struct {
		name     string
		prestart string
	}{{"prestarted", "1"}, {"cold", "0"}} {
		b.Run(c.name, func(b *testing.B) {
			var r benchReport
			inChild(b, "bench-run", []string{"N=" + strconv.Itoa(b.N), "PRESTART=" + c.prestart}, &r)
			if (r.Prestarted == b.N) != (c.prestart == "1") || (c.prestart == "0" && r.Prestarted != 0) {
				b.Fatalf("%d of %d calls pre-started", r.Prestarted, b.N)
			}
			b.ReportMetric(float64(r.Mean.Nanoseconds()), "ns/call")
			b.ReportMetric(float64(r.Median.Nanoseconds()), "ns/call-median")
		})
	}
	b.Run("bwrap", func(b *testing.B) {
		bwrap, err := exec.LookPath("bwrap")
		if err != nil {
			b.Fatal("bubblewrap is the reference here: apt-get install bubblewrap")
		}
		t, err := exec.LookPath("true")
		if err != nil {
			b.Fatal(err)
		}
		args := []string{"--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-all", "--die-with-parent", t}
		var sum time.Duration
		for i := 0; i < b.N; i++ {
			t0 := time.Now()
			if out, err := exec.Command(bwrap, args...).CombinedOutput(); err != nil {
				b.Fatalf("bwrap: %v: %s", err, out)
			}
			sum += time.Since(t0)
		}
		b.ReportMetric(float64(sum.Nanoseconds())/float64(b.N), "ns/call")
	})
}
