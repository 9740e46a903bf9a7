package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/b10x/harness/confine/spawn"
	"github.com/b10x/harness/gate"
	"github.com/b10x/harness/surface"
	"github.com/b10x/harness/tools"
	"github.com/b10x/harness/workspace"
)

// marked lists the host processes whose command line holds marker.
func marked(marker string) []string {
	var found []string
	dirs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, d := range dirs {
		b, err := os.ReadFile(d)
		if err == nil && strings.Contains(string(b), marker) {
			found = append(found, d+": "+strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	return found
}

// TestCancelledRunKillsTree cancels a confined run call over MCP
// (notifications/cancelled) and checks that the gate records it as
// cancelled and that no process of its tree is left on the host.
func TestCancelledRunKillsTree(t *testing.T) {
	f := runFixture(t)
	rec := f.rec
	cs := f.mustConnect(t, nil)

	marker := fmt.Sprintf("%d.%d", 900+os.Getpid()%100, time.Now().UnixNano()%1000000)
	script := fmt.Sprintf("sleep %s & sleep %s & echo started; wait", marker, marker)
	args, _ := json.Marshal(map[string]any{"argv": []string{"sh", "-c", script}})
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "run", Arguments: json.RawMessage(args)})
		errc <- err
	}()
	deadline := time.Now().Add(20 * time.Second)
	for len(marked(marker)) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("the program's tree did not start; record: %v", rec.calls(t))
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if err := <-errc; err == nil {
		t.Fatal("a cancelled call returned no error")
	}
	for {
		if recs := rec.calls(t); len(recs) == 1 {
			if recs[0].Entry != "run" || recs[0].Status != gate.Failed || recs[0].Reason != string(tools.ReasonCancelled) {
				t.Fatalf("%+v", recs[0])
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the cancelled run was not recorded")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if left := marked(marker); len(left) > 0 {
		t.Fatalf("processes left after the cancelled call: %v", left)
	}
}

// TestRunProgressCountsOutput: a run call that asked for progress hears
// how much its program printed while it runs.
func TestRunProgressCountsOutput(t *testing.T) {
	old := progressEvery
	progressEvery = 50 * time.Millisecond
	t.Cleanup(func() { progressEvery = old })
	f := runFixture(t)
	var mu sync.Mutex
	var msgs []string
	cs := f.mustConnect(t, &sdk.ClientOptions{ProgressNotificationHandler: func(_ context.Context, r *sdk.ProgressNotificationClientRequest) {
		mu.Lock()
		msgs = append(msgs, r.Params.Message)
		mu.Unlock()
	}})
	args, _ := json.Marshal(map[string]any{"argv": []string{"sh", "-c", "echo 123456789; sleep 1"}})
	p := &sdk.CallToolParams{Name: "run", Arguments: json.RawMessage(args)}
	p.SetProgressToken(7)
	r, err := cs.CallTool(context.Background(), p)
	if err != nil || r.IsError {
		t.Fatal(err, text(r))
	}
	mu.Lock()
	defer mu.Unlock()
	for _, m := range msgs {
		if strings.HasSuffix(m, ", 10 bytes of output so far") {
			return
		}
	}
	t.Fatalf("no notification counted the output: %q", msgs)
}

// runFixture is a server whose gate publishes a confined run of sh,
// approved by ApproveAll.
func runFixture(t *testing.T) *fixture {
	t.Helper()
	progs, err := tools.ResolvePrograms([]string{"sh"}, os.Getenv("PATH"), tools.RunView{})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ws, err := workspace.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	view, err := tools.PinRunView(ws.Dir(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	run := tools.RunTool(tools.RunConfig{Programs: progs, Runner: spawn.NewDirect(spawn.Options{}), View: view, Env: []string{"PATH=/usr/bin:/bin"}})
	a, _ := NewApprover(ApproveAll, 0)
	rec := &syncBuffer{}
	g, err := gate.New(gate.Config{Workspace: ws, Tools: append(tools.ReadTools(), run), Host: gate.Host{ConfinedExecution: true, Programs: 1}, Approver: a, Recorder: gate.NewRecorder(rec)})
	if err != nil {
		t.Fatal(err)
	}
	s, _ := surface.New(surface.Flat, g, surface.Options{})
	srv, err := NewServer(Config{Surface: s, Gate: g})
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{srv: srv, rec: rec, dir: ws.Dir()}
}
