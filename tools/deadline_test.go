package tools

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// One regexp match over a 10 MB line, which takes tens of seconds, stops
// within a bound of its deadline or cancel (issue 20, item 4: a 5 s run
// timeout ended a search after 78 s). The bound is generous for a loaded
// 2-core machine; the promise is 100 ms.
func TestSearchStopsInsideOneLine(t *testing.T) {
	fx := newFixture(t)
	rng := rand.New(rand.NewPCG(3, 4))
	line := make([]byte, 10<<20)
	for i := range line {
		line[i] = "ab"[rng.IntN(2)]
	}
	if err := os.WriteFile(filepath.Join(fx.root, "one-line.txt"), line, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		ctx    func() (context.Context, context.CancelFunc)
		reason Reason
		is     error
	}{
		{"deadline", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 200*time.Millisecond)
		}, ReasonTimeout, context.DeadlineExceeded},
		{"cancel", func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(200*time.Millisecond, cancel)
			return ctx, cancel
		}, ReasonCancelled, context.Canceled},
	} {
		for _, args := range []string{
			`{"pattern":"[ab]{1000}[cd]","path":"one-line.txt"}`,
			`{"pattern":"[ab]{1000}[cd]"}`,
			`{"pattern":"b[ab]{1000}c"}`, // a literal, then the regexp on the line
		} {
			p, err := Search{}.Prepare(fx.ws, []byte(args))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := tc.ctx()
			start := time.Now()
			_, err = p.Execute(ctx, Report{})
			took := time.Since(start)
			cancel()
			if reasonOf(err) != tc.reason || !errors.Is(err, tc.is) {
				t.Errorf("%s %s: %v, want %s wrapping %v", tc.name, args, err, tc.reason, tc.is)
			}
			if took > 3*time.Second {
				t.Errorf("%s %s: returned after %v", tc.name, args, took)
			}
			t.Logf("%s %s: returned after %v", tc.name, args, took)
		}
	}
}
