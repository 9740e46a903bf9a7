package probecache

import (
	"sync"
	"testing"
)

func TestValueKeepsOnlyConclusive(t *testing.T) {
	for _, tc := range []struct {
		o    Outcome
		kept bool
	}{{Supported, true}, {NotSupported, true}, {Inconclusive, false}} {
		var c Value[int]
		runs := 0
		probe := func() (int, Outcome) { runs++; return runs, tc.o }
		first, second := c.Get(probe), c.Get(probe)
		if tc.kept && (first != 1 || second != 1 || runs != 1) {
			t.Errorf("outcome %d: got %d then %d after %d probes, want 1, 1 after 1", tc.o, first, second, runs)
		}
		if !tc.kept && (first != 1 || second != 2 || runs != 2) {
			t.Errorf("outcome %d: got %d then %d after %d probes, want 1, 2 after 2", tc.o, first, second, runs)
		}
	}
}

func TestValueRetriesUntilConclusive(t *testing.T) {
	var c Value[string]
	outcomes := []Outcome{Inconclusive, Inconclusive, NotSupported, Supported}
	runs := 0
	probe := func() (string, Outcome) {
		o := outcomes[runs]
		runs++
		return map[Outcome]string{Inconclusive: "?", NotSupported: "no", Supported: "yes"}[o], o
	}
	var got []string
	for range 5 {
		got = append(got, c.Get(probe))
	}
	if want := "? ? no no no"; join(got) != want || runs != 3 {
		t.Errorf("got %q after %d probes, want %q after 3", join(got), runs, want)
	}
}

func TestZeroOutcomeIsInconclusive(t *testing.T) {
	var o Outcome
	if o != Inconclusive || o.Conclusive() {
		t.Errorf("zero Outcome %d is conclusive", o)
	}
}

func TestMapPerKey(t *testing.T) {
	var c Map[string, int]
	var mu sync.Mutex
	runs := map[string]int{}
	probe := func(key string, o Outcome) func() (int, Outcome) {
		return func() (int, Outcome) { mu.Lock(); defer mu.Unlock(); runs[key]++; return runs[key], o }
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(2)
		go func() { defer wg.Done(); c.Get("a", probe("a", Supported)) }()
		go func() { defer wg.Done(); c.Get("b", probe("b", Inconclusive)) }()
	}
	wg.Wait()
	if runs["a"] != 1 || runs["b"] != 8 {
		t.Errorf("probes run: a %d (want 1), b %d (want 8)", runs["a"], runs["b"])
	}
	if got := c.Get("a", probe("a", Supported)); got != 1 {
		t.Errorf("a = %d, want the kept 1", got)
	}
}

func join(s []string) string {
	out := ""
	for i, v := range s {
		if i > 0 {
			out += " "
		}
		out += v
	}
	return out
}
