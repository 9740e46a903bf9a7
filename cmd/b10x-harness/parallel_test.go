package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/b10x/harness/internal/testenv"
	"github.com/b10x/harness/session"
)

// TestMaxParallelPolicy: max_parallel's default is the host's CPU count
// (at least 4), a flag and the file set it, policy show says where it came
// from, and 0 or less is one line naming the flag or the file's line.
func TestMaxParallelPolicy(t *testing.T) {
	dir := t.TempDir()
	pf := filepath.Join(dir, "p.toml")
	must(t, os.WriteFile(pf, []byte("max_parallel = 7\n"), 0o644))
	bad := filepath.Join(dir, "bad.toml")
	must(t, os.WriteFile(bad, []byte("confine = \"off\"\nmax_parallel = 0\n"), 0o644))
	for _, c := range []struct {
		args   []string
		value  int
		source string
	}{
		{nil, max(runtime.NumCPU(), 4), "default"},
		{[]string{"--max-parallel", "5"}, 5, "flag --max-parallel"},
		{[]string{"--policy", pf}, 7, pf + ":1:1"},
		{[]string{"--policy", pf, "--max-parallel=1"}, 1, "flag --max-parallel"},
	} {
		r := harness(t, "", append([]string{"policy", "show", "--json", "--workspace", dir}, c.args...)...)
		if r.code != 0 {
			t.Fatalf("policy show %v: exit %d: %s", c.args, r.code, r.stderr)
		}
		var shown struct{ Policy []session.KeyValue }
		must(t, json.Unmarshal([]byte(r.stdout), &shown))
		found := false
		for _, kv := range shown.Policy {
			if kv.Key == "max_parallel" {
				found = true
				if v, _ := kv.Value.(float64); int(v) != c.value || kv.Source != c.source {
					t.Errorf("%v: max_parallel = %v (%s), want %d (%s)", c.args, kv.Value, kv.Source, c.value, c.source)
				}
			}
		}
		if !found {
			t.Errorf("%v: policy show has no max_parallel: %s", c.args, r.stdout)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"policy", "show", "--workspace", dir, "--max-parallel", "0"}, "b10x-harness: --max-parallel 0: must be at least 1 (run calls of the session at once; default: the number of CPUs, at least 4)\n"},
		{[]string{"call", "--workspace", dir, "--max-parallel=-3", "file_read", `{"path":"p.toml"}`}, "b10x-harness: --max-parallel -3: must be at least 1"},
		{[]string{"mcp", "--workspace", dir, "--max-parallel", "0"}, "b10x-harness: --max-parallel 0: must be at least 1"},
		{[]string{"policy", "check", bad}, "b10x-harness: " + bad + ":2:1: max_parallel: must be at least 1"},
		{[]string{"call", "--policy", bad, "--workspace", dir, "file_read", `{"path":"p.toml"}`}, "b10x-harness: " + bad + ":2:1: max_parallel: must be at least 1"},
	} {
		r := harness(t, "", c.args...)
		if r.code != exitUsage || r.stdout != "" || !strings.HasPrefix(r.stderr, c.want) || strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 and one line %q", c.args, r.code, r.stdout, r.stderr, c.want)
		}
	}
	r := harness(t, "", "policy", "schema")
	if !strings.Contains(r.stdout, "\"max_parallel\": {") {
		t.Errorf("policy schema has no max_parallel")
	}
}

// TestMCPMaxParallel: thirty run calls at once from one MCP client over
// stdio, with --max-parallel 2, never have more than two programs running
// (the programs mark their start and end in one file of the workspace);
// the calls that waited say so in their meta; a call the client cancels
// while it waits for a slot is recorded as cancelled and never starts.
func TestMCPMaxParallel(t *testing.T) {
	testenv.Require(t, atkExecution(), "confined execution", testenv.ShapeNoLandlock, testenv.ShapeNoUserns)
	const n, limit = 30, 2
	ws, _ := sampleWorkspace(t)
	rec := filepath.Join(t.TempDir(), "rec.jsonl")
	s := mcpMustConnect(t, nil, "--workspace", ws, "--allow-program", "sh", "--approve", "all", "--record", rec, "--max-parallel", fmt.Sprint(limit))
	run := func(ctx context.Context, script string) (map[string]any, error) {
		args, _ := json.Marshal(map[string]any{"argv": []string{"sh", "-c", script}})
		r, err := s.cs.CallTool(ctx, &sdk.CallToolParams{Name: "run", Arguments: json.RawMessage(args)})
		if err != nil {
			return nil, err
		}
		return mcpOutcome(r)
	}
	outs := make([]map[string]any, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o, err := run(context.Background(), fmt.Sprintf("echo S %d >> log; sleep 0.3; echo E %d >> log", i, i))
			if err != nil {
				t.Errorf("call %d: %v", i, err)
			}
			outs[i] = o
		}()
	}
	wg.Wait()
	queued, bad := 0, 0
	for i, o := range outs {
		meta, _ := o["meta"].(map[string]any)
		if mcpReason(o) != "executed" || meta["slot_wait_ms"] == nil {
			if bad++; bad == 1 {
				t.Errorf("call %d: %s, meta %v", i, mcpReason(o), meta)
			}
		}
		if meta["slot_queued"] == true {
			queued++
		}
	}
	if queued < n-limit {
		t.Errorf("%d of %d calls say they queued; with --max-parallel %d at least %d had to", queued, n, limit, n-limit)
	}

	// Both slots held until the file go exists; a third call waits, and
	// the client cancels it. The file is made before the server is
	// closed, whatever happens: closing waits for the calls in flight.
	t.Cleanup(func() { _ = os.WriteFile(filepath.Join(ws, "go"), nil, 0o644) })
	for i := range limit {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if o, err := run(context.Background(), fmt.Sprintf("echo S b%d >> log; while [ ! -e go ]; do sleep 0.05; done; echo E b%d >> log", i, i)); err != nil || mcpReason(o) != "executed" {
				t.Errorf("blocking call %d: %v %v", i, o, err)
			}
		}()
	}
	deadline := time.Now().Add(30 * time.Second)
	for strings.Count(readLog(t, ws), "S b") < limit {
		if time.Now().After(deadline) {
			t.Fatalf("the blocking calls did not start: %q\nstderr:\n%s", readLog(t, ws), s.stderr)
		}
		time.Sleep(10 * time.Millisecond)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { _, err := run(ctx, "echo S cancelled >> log"); errc <- err }()
	time.Sleep(500 * time.Millisecond) // it reaches the server and waits for a slot
	cancel()
	if err := <-errc; err == nil {
		t.Error("a cancelled call returned no error")
	}
	var cancelled map[string]any
	for cancelled == nil {
		for _, l := range readRecord(t, rec) {
			if args, _ := json.Marshal(l["args"]); l["event"] == "call" && strings.Contains(string(args), "S cancelled") {
				cancelled = l
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the cancelled call was not recorded")
		}
		time.Sleep(10 * time.Millisecond)
	}
	must(t, os.WriteFile(filepath.Join(ws, "go"), nil, 0o644))
	wg.Wait()
	s.close(t)
	if meta, _ := cancelled["meta"].(map[string]any); cancelled["reason"] != "cancelled" || meta["slot_queued"] != true || meta["exit_code"] != nil {
		t.Errorf("the call cancelled while it waited is recorded as %v", cancelled)
	}

	running, peak := 0, 0
	sc := bufio.NewScanner(strings.NewReader(readLog(t, ws)))
	for sc.Scan() {
		kind, id, _ := strings.Cut(sc.Text(), " ")
		switch kind {
		case "S":
			running++
			if id == "cancelled" {
				t.Error("the call cancelled while it waited for a slot started its program")
			}
		case "E":
			running--
		}
		peak = max(peak, running)
	}
	if peak > limit || peak < 2 {
		t.Errorf("%d programs ran at once, --max-parallel %d", peak, limit)
	}
}

func readLog(t *testing.T, ws string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(ws, "log"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return string(b)
}
