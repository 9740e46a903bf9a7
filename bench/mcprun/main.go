// Command mcprun measures run tool calls through one MCP stdio session,
// side by side with bubblewrap started from the same process, as
// bench/peers.sh runs it (issue 34). COMMAND is the server, for example
// `b10x-harness mcp --workspace WS --allow-program true --approve-up-to
// high`; every call is `run` with argv ["true"]. Two cases, each
// alternating the server and bubblewrap turn by turn so that load
// elsewhere falls on both:
//
//   - burst: -n calls sent at once on the session (a model's turn with
//     several tool calls), against -n bubblewraps started at once. Each
//     call's time runs from the moment the burst is sent to its answer;
//     the first call is the one answered first, the later calls are the
//     others, averaged over the burst. -bursts bursts, each after -pause
//     (the model's turn, when the harness refills its pre-started
//     sandboxes); the figures are medians over the bursts.
//   - paused: -calls calls one at a time, each after -pause, against
//     -calls bubblewraps each after the same pause: p50 and p90.
//
// -warmup bursts and paused calls of each side come first, untimed. Every
// call must succeed (not isError, outcome executed, exit code 0) and every
// bubblewrap exit 0, or mcprun fails.
//
//	go run ./bench/mcprun -n 4 -bursts 20 -calls 40 -pause 100ms -- \
//	    bin/b10x-harness mcp --workspace WS --allow-program true --approve-up-to high
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// outcomeMeta is the _meta key of the harness's tools/call results
// (mcp.OutcomeMeta), read here without importing the server's package.
const outcomeMeta = "b10x-harness/outcome"

// callInfo is what a run call's outcome says about where its time went.
type callInfo struct {
	prestarted, queued bool
	slotWait, spawn    time.Duration // the slot's wait and the spawn's own duration, whole ms
}

func main() {
	n := flag.Int("n", 4, "calls in a burst")
	bursts := flag.Int("bursts", 20, "bursts timed, of each side")
	calls := flag.Int("calls", 40, "paused calls timed, of each side")
	pause := flag.Duration("pause", 100*time.Millisecond, "the pause before each burst and each paused call (the model's turn)")
	warmup := flag.Int("warmup", 2, "untimed bursts and paused calls of each side first")
	bwrap := flag.String("bwrap", "bwrap --ro-bind / / --dev /dev --proc /proc --unshare-all --die-with-parent /bin/true", "the bubblewrap command line, split on spaces")
	flag.Parse()
	if flag.NArg() == 0 || *n < 2 || *bursts < 1 || *calls < 1 {
		fatalf("usage: mcprun [-n N≥2] [-bursts N] [-calls N] [-pause D] [-warmup N] -- COMMAND...")
	}
	bw := strings.Fields(*bwrap)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.Command(flag.Arg(0), flag.Args()[1:]...)
	cmd.Stderr = os.Stderr
	c := sdk.NewClient(&sdk.Implementation{Name: "mcprun", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &sdk.CommandTransport{Command: cmd}, nil)
	if err != nil {
		fatalf("connecting: %v", err)
	}
	defer cs.Close()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		fatalf("tools/list: %v", err)
	}
	if !hasTool(tools, "run") {
		fatalf("the server has no run tool")
	}
	call := func() (callInfo, error) { return runCall(ctx, cs) }
	spawnBwrap := func() (callInfo, error) { return callInfo{}, exec.Command(bw[0], bw[1:]...).Run() }

	// Burst.
	var mFirst, mLater, mAll, bFirst, bLater, bAll []time.Duration
	var infos []callInfo
	byOrder := make([][]time.Duration, *n) // each call's time, by the order of its answer
	for i := 0; i < *warmup+*bursts; i++ {
		time.Sleep(*pause)
		lat, inf, err := burst(*n, call)
		if err != nil {
			fatalf("burst %d, run call: %v", i+1, err)
		}
		time.Sleep(*pause)
		blat, _, err := burst(*n, spawnBwrap)
		if err != nil {
			fatalf("burst %d, bwrap: %v", i+1, err)
		}
		if i < *warmup {
			continue
		}
		f, l := split(lat)
		mFirst, mLater, mAll = append(mFirst, f), append(mLater, l), append(mAll, lat[len(lat)-1])
		f, l = split(blat)
		bFirst, bLater, bAll = append(bFirst, f), append(bLater, l), append(bAll, blat[len(blat)-1])
		infos = append(infos, inf...)
		for j, d := range lat {
			byOrder[j] = append(byOrder[j], d)
		}
		fmt.Fprintf(os.Stderr, "burst %d: run calls %s, bwrap %s\n", i+1-*warmup, list(lat), list(blat))
	}

	// Paused.
	var mPaused, bPaused []time.Duration
	var pinfos []callInfo
	for i := 0; i < *warmup+*calls; i++ {
		time.Sleep(*pause)
		t := time.Now()
		inf, err := call()
		d := time.Since(t)
		if err != nil {
			fatalf("paused call %d: %v", i+1, err)
		}
		time.Sleep(*pause)
		t = time.Now()
		if _, err := spawnBwrap(); err != nil {
			fatalf("paused bwrap %d: %v", i+1, err)
		}
		bd := time.Since(t)
		if i < *warmup {
			continue
		}
		mPaused, bPaused = append(mPaused, d), append(bPaused, bd)
		pinfos = append(pinfos, inf)
	}

	fmt.Printf("\nburst: %d calls at once, median of %d bursts, each after %s\n\n", *n, *bursts, *pause)
	fmt.Printf("| | run calls through MCP | bwrap, %d at once | ratio |\n|---|---|---|---|\n", *n)
	row := func(name string, a, b []time.Duration) {
		x, y := pct(a, 50), pct(b, 50)
		fmt.Printf("| %s | %s | %s | %.2f× |\n", name, ms(x), ms(y), float64(x)/float64(y))
	}
	row("first call answered", mFirst, bFirst)
	row("second and later calls, each", mLater, bLater)
	row("the whole burst (the last answer)", mAll, bAll)
	fmt.Printf("\n%s\n", describe(infos))
	fmt.Printf("\n| run call answered | median | took a pre-started sandbox | waited for a slot |\n|---|---|---|---|\n")
	for j, v := range byOrder {
		fmt.Printf("| %d. | %s | %d of %d | %d of %d |\n", j+1, ms(pct(v, 50)),
			count(infos, j, *n, func(c callInfo) bool { return c.prestarted }), len(v),
			count(infos, j, *n, func(c callInfo) bool { return c.queued }), len(v))
	}

	fmt.Printf("\npaused: %d calls one at a time, each after %s\n\n", *calls, *pause)
	fmt.Printf("| | p50 | p90 |\n|---|---|---|\n")
	fmt.Printf("| run call through MCP | %s | %s |\n", ms(pct(mPaused, 50)), ms(pct(mPaused, 90)))
	fmt.Printf("| bwrap | %s | %s |\n", ms(pct(bPaused, 50)), ms(pct(bPaused, 90)))
	fmt.Printf("| ratio | %.2f× | %.2f× |\n", float64(pct(mPaused, 50))/float64(pct(bPaused, 50)), float64(pct(mPaused, 90))/float64(pct(bPaused, 90)))
	fmt.Printf("\n%s\n", describe(pinfos))
}

// burst starts n calls of f at once and returns each one's time from the
// start of the burst to its end, shortest first, with what each call
// said, in the same order.
func burst(n int, f func() (callInfo, error)) ([]time.Duration, []callInfo, error) {
	type res struct {
		d   time.Duration
		inf callInfo
		err error
	}
	out := make([]res, n)
	var wg sync.WaitGroup
	var t0 time.Time // set before start is closed, read after
	start := make(chan struct{})
	for i := range out {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			inf, err := f()
			out[i] = res{time.Since(t0), inf, err}
		}()
	}
	t0 = time.Now()
	close(start)
	wg.Wait()
	sort.Slice(out, func(i, j int) bool { return out[i].d < out[j].d })
	lat, infs := make([]time.Duration, n), make([]callInfo, n)
	for i, r := range out {
		if r.err != nil {
			return nil, nil, r.err
		}
		lat[i], infs[i] = r.d, r.inf
	}
	return lat, infs, nil
}

func hasTool(l *sdk.ListToolsResult, name string) bool {
	for _, t := range l.Tools {
		if t.Name == name {
			return true
		}
	}
	return false
}

// runCall makes one run call of `true` and checks that it was executed
// and exited 0.
func runCall(ctx context.Context, cs *sdk.ClientSession) (callInfo, error) {
	var inf callInfo
	r, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "run", Arguments: map[string]any{"argv": []string{"true"}}})
	if err != nil {
		return inf, err
	}
	text := ""
	if len(r.Content) > 0 {
		if tc, ok := r.Content[0].(*sdk.TextContent); ok {
			text = tc.Text
		}
	}
	if r.IsError {
		return inf, fmt.Errorf("isError: %s", text)
	}
	raw, err := json.Marshal(r.Meta[outcomeMeta])
	if err != nil {
		return inf, err
	}
	var o struct {
		Status string `json:"status"`
		Meta   struct {
			ExitCode   *int  `json:"exit_code"`
			TimedOut   bool  `json:"timed_out"`
			Prestarted bool  `json:"prestarted"`
			Queued     bool  `json:"slot_queued"`
			SlotWait   int64 `json:"slot_wait_ms"`
			Duration   int64 `json:"duration_ms"`
		} `json:"meta"`
	}
	if err := json.Unmarshal(raw, &o); err != nil {
		return inf, fmt.Errorf("its outcome: %v: %s", err, raw)
	}
	if o.Status != "executed" || o.Meta.ExitCode == nil || *o.Meta.ExitCode != 0 || o.Meta.TimedOut || !strings.HasPrefix(text, "exit status 0 ") {
		return inf, fmt.Errorf("not executed with exit 0: %s; %s", raw, text)
	}
	return callInfo{o.Meta.Prestarted, o.Meta.Queued, time.Duration(o.Meta.SlotWait) * time.Millisecond, time.Duration(o.Meta.Duration) * time.Millisecond}, nil
}

// split returns a burst's first time and the mean of the others.
func split(lat []time.Duration) (first, later time.Duration) {
	var sum time.Duration
	for _, d := range lat[1:] {
		sum += d
	}
	return lat[0], sum / time.Duration(len(lat)-1)
}

// describe says how many calls took a pre-started sandbox and waited for
// a slot, and their mean slot wait and spawn time, from the outcomes.
func describe(infos []callInfo) string {
	var pre, q int
	var wait, spawn time.Duration
	for _, i := range infos {
		if i.prestarted {
			pre++
		}
		if i.queued {
			q++
		}
		wait += i.slotWait
		spawn += i.spawn
	}
	n := time.Duration(len(infos))
	return fmt.Sprintf("of %d run calls: %d took a pre-started sandbox, %d waited for a slot (max_parallel); their outcomes' mean slot_wait_ms %s, duration_ms %s",
		len(infos), pre, q, ms(wait/n), ms(spawn/n))
}

// count counts the calls answered j-th in their burst of n for which f holds.
func count(infos []callInfo, j, n int, f func(callInfo) bool) int {
	c := 0
	for i := j; i < len(infos); i += n {
		if f(infos[i]) {
			c++
		}
	}
	return c
}

func pct(v []time.Duration, p int) time.Duration {
	s := append([]time.Duration(nil), v...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[(len(s)-1)*p/100]
}

func list(v []time.Duration) string {
	s := make([]string, len(v))
	for i, d := range v {
		s[i] = fmt.Sprintf("%.1f", float64(d)/float64(time.Millisecond))
	}
	return strings.Join(s, " ") + " ms"
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }

func fatalf(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "mcprun: "+format+"\n", a...)
	os.Exit(1)
}
