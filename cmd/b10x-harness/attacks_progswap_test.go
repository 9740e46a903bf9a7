package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/b10x/harness/internal/testenv"
)

// Finding A of issue 27: the allowed program was resolved again by name at
// every call, so when it lay in the workspace a run child could swap it for
// a link: the next call bound the link's target (any file of the host) into
// its view, and ran the child's own script over it, or ran a script outside
// the view outright. Allowed programs are now pinned at start and executed
// by descriptor (docs/decisions/0071-programs-pinned.md).

// progSwapFixture is a workspace whose allowed program tool is a script,
// and an outside directory (not in any view) with a secret and a script.
type progSwapFixture struct {
	ws, outside, tool, secret string
}

const (
	progSwapSecret  = "PROGSWAP-SECRET-6b1f"
	progSwapOutside = "PROGSWAP-OUTSIDE-RAN"
	progSwapPinned  = "pinned-tool-ran"
)

func newProgSwapFixture(t *testing.T) progSwapFixture {
	t.Helper()
	dir := t.TempDir()
	f := progSwapFixture{ws: filepath.Join(dir, "ws"), outside: filepath.Join(dir, "outside")}
	must(t, os.MkdirAll(f.ws, 0o755))
	must(t, os.MkdirAll(f.outside, 0o755))
	f.secret = filepath.Join(f.outside, "secret")
	must(t, os.WriteFile(f.secret, []byte(progSwapSecret+"\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(f.outside, "script.sh"), []byte("#!/bin/sh\necho "+progSwapOutside+"\n"), 0o755))
	f.tool = filepath.Join(f.ws, "tool")
	must(t, os.WriteFile(f.tool, []byte("#!/bin/sh\necho "+progSwapPinned+"\n"), 0o755))
	// The child's own script, as a model writes it: it reads the secret
	// at its host path, which only a bind of the secret would show.
	must(t, os.WriteFile(filepath.Join(f.ws, "evil"), []byte("#!/bin/sh\ncat "+f.secret+" 2>&1; echo EVIL-RAN\n"), 0o755))
	return f
}

// TestAttackProgramSwapMCP is the race of the finding through the real
// binary's MCP server: one run call keeps swapping the allowed program
// (a hard link of the pinned file itself, a link to the secret, the
// child's own script, a link to a script
// outside the view, each put in place by rename) while concurrent calls
// run it. No call shows the secret or runs the outside script; each runs
// the pinned file, or is refused naming the program, or fails at its
// program step; and both the pinned runs and the refusals are seen.
func TestAttackProgramSwapMCP(t *testing.T) {
	testenv.Require(t, atkExecution(), "confined execution", testenv.ShapeNoLandlock, testenv.ShapeNoUserns)
	t.Parallel()
	f := newProgSwapFixture(t)
	s := mcpMustConnect(t, nil, "--workspace", f.ws, "--allow-program", "sh", "--allow-program", f.tool, "--approve", "all", "--timeout", "90s")
	must(t, os.Link(f.tool, filepath.Join(f.ws, "orig")))
	swap := `while [ ! -e stop ]; do
		ln -f orig t0 && mv -f t0 tool
		ln -sf ` + f.secret + ` t1 && mv -f t1 tool
		cp evil t2 && mv -f t2 tool
		ln -sf ` + filepath.Join(f.outside, "script.sh") + ` t3 && mv -f t3 tool
		done; echo swapper-done`
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	swapped := make(chan *sdk.CallToolResult, 1)
	go func() {
		args, _ := json.Marshal(map[string]any{"argv": []string{"sh", "-c", swap}})
		r, err := s.cs.CallTool(ctx, &sdk.CallToolParams{Name: "run", Arguments: json.RawMessage(args)})
		if err != nil {
			t.Errorf("the swapper: %v", err)
		}
		swapped <- r
	}()
	var mu sync.Mutex
	counts := map[string]int{}
	var wg sync.WaitGroup
	// Under emulation (the VM shapes) a run call takes about a second:
	// fewer calls there, which must never show what lies outside the view
	// but need not see every outcome.
	perClient, host := 10, !testenv.InVM()
	if !host {
		perClient = 3
	}
	// On the host the race must be seen run: a call finds the pinned file
	// in place only in a short part of each swap, so a client goes on
	// past its ten calls (up to a hundred) until one has.
	ran := func() int {
		return counts["pinned"] + counts["own script"] + counts["interpreter found a link"] + counts["swapped before exec by name"]
	}
	more := func(i int) bool {
		if i < perClient {
			return true
		}
		mu.Lock()
		defer mu.Unlock()
		return host && i < 10*perClient && (ran() == 0 || counts["refused"]+counts["refused in the sandbox"] == 0)
	}
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; more(i); i++ {
				args, _ := json.Marshal(map[string]any{"argv": []string{f.tool}})
				r, err := s.cs.CallTool(ctx, &sdk.CallToolParams{Name: "run", Arguments: json.RawMessage(args)})
				if err != nil {
					t.Errorf("call: %v", err)
					return
				}
				b, _ := json.Marshal(r)
				text := string(b)
				o, _ := mcpOutcome(r)
				res, _ := o["result"].(string)
				kind := "other: " + text
				switch {
				case strings.Contains(text, progSwapSecret) || strings.Contains(text, progSwapOutside):
					t.Errorf("a call showed what lies outside the view: %s", text)
					kind = "leak"
				case mcpReason(o) == "executed" && strings.Contains(res, progSwapPinned):
					kind = "pinned"
				case mcpReason(o) == "executed" && strings.Contains(res, "EVIL-RAN"):
					// The child's own script, interpreted by name in the
					// instant after the check (decision 0071): in the
					// view, and it could not read the secret (above).
					kind = "own script"
				case mcpReason(o) == "executed" && (strings.Contains(res, "cannot open "+f.tool) || strings.Contains(res, "can't open '"+f.tool+"'")):
					// The script's interpreter (dash's wording, or
					// busybox's in the VM shapes), opening it by name
					// after the check, found the link the swapper had put
					// there since (its target lies outside the view), or
					// nothing, between the swapper's rm and its ln.
					kind = "interpreter found a link"
				case mcpReason(o) == "program_not_allowed" && o["status"] == "refused":
					kind = "refused"
				case mcpReason(o) == "tool_error" && strings.Contains(text, "(step exec "+f.tool+")"):
					// The script executed by its checked path found the
					// swapper's link there in the instant after the check
					// (decision 0071): nothing ran.
					kind = "swapped before exec by name"
				case mcpReason(o) == "program_not_allowed" && o["status"] == "failed":
					kind = "refused in the sandbox"
				}
				mu.Lock()
				counts[kind]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	must(t, os.WriteFile(filepath.Join(f.ws, "stop"), nil, 0o644))
	r := <-swapped
	if r == nil || r.IsError {
		t.Fatalf("the swapper did not end as executed: %+v", r)
	}
	t.Logf("outcomes: %v", counts)
	for k, n := range counts {
		if strings.HasPrefix(k, "other") {
			t.Errorf("%d unexpected outcome(s): %s", n, k)
		}
	}
	// The race was run: some calls got past the check while the swapper
	// worked (the pinned file ran, or the window decision 0071 accepts
	// for a script was hit) and some were refused.
	if host && (ran() == 0 || counts["refused"]+counts["refused in the sandbox"] == 0) {
		t.Errorf("outcomes %v: the swap and the calls did not overlap", counts)
	}
}

// TestAttackProgramSwapReplay is the finding without a race, through a
// replayed `run`: call 1 replaces the allowed program by a link to a script
// outside the view, call 2 runs it. Call 2 is refused (program_not_allowed,
// in the record too) and the outside script never runs.
func TestAttackProgramSwapReplay(t *testing.T) {
	testenv.Require(t, atkExecution(), "confined execution", testenv.ShapeNoLandlock, testenv.ShapeNoUserns)
	t.Parallel()
	f := newProgSwapFixture(t)
	turn := func(argv ...string) string {
		b, _ := json.Marshal(map[string]any{"tool_calls": []any{map[string]any{"name": "run", "arguments": map[string]any{"argv": argv}}}})
		return string(b) + "\n"
	}
	script := filepath.Join(t.TempDir(), "swap.jsonl")
	must(t, os.WriteFile(script, []byte(turn("sh", "-c", "rm tool && ln -s "+filepath.Join(f.outside, "script.sh")+" tool && echo swapped")+
		turn(f.tool)+turn("sh", "-c", "cat "+f.secret+" 2>&1; echo read-done")), 0o644))
	rec := filepath.Join(t.TempDir(), "rec.jsonl")
	r := rnHarness(t, nil, "", "run", "--provider", "replay:"+script, "--workspace", f.ws, "--record", rec,
		"--allow-program", "sh", "--allow-program", f.tool, "--approve", "all")
	b, err := os.ReadFile(rec)
	if err != nil {
		t.Fatalf("no record: %v\nstdout:\n%s\nstderr:\n%s", err, r.stdout, r.stderr)
	}
	all := r.stdout + r.stderr + string(b)
	if strings.Contains(all, progSwapOutside) || strings.Contains(all, progSwapSecret) {
		t.Errorf("the outside script ran or the secret was read:\n%s", all)
	}
	var calls []map[string]any
	for _, l := range strings.Split(string(b), "\n") {
		var o map[string]any
		if json.Unmarshal([]byte(l), &o) == nil && o["event"] == "call" {
			calls = append(calls, o)
		}
	}
	if len(calls) != 3 {
		t.Fatalf("%d call lines, want 3:\n%s", len(calls), b)
	}
	if calls[0]["status"] != "executed" || calls[1]["status"] != "refused" || calls[1]["reason"] != "program_not_allowed" {
		t.Errorf("calls: %v / %v, want the swap executed and the swapped program refused (program_not_allowed)", calls[0], calls[1])
	}
}
