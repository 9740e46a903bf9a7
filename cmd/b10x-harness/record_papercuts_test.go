package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/b10x/harness/internal/testenv"
)

// TestRecordSummaryNamesTheRun: calls are numbered within their run, so a
// record of several runs says which run each refused call belongs to
// (issue 18, item 8); and run_start keeps the user's approver choice
// beside the effective one (auto without a terminal denies; item 10).
func TestRecordSummaryNamesTheRun(t *testing.T) {
	ws := t.TempDir()
	must(t, os.WriteFile(filepath.Join(ws, "hello.txt"), []byte("hello\n"), 0o644))
	rec := filepath.Join(t.TempDir(), "rec.jsonl")
	for _, args := range [][]string{
		{"file_read", `{"path":"hello.txt"}`},
		{"file_read", `{"path":"../outside"}`},
	} {
		harness(t, "", append([]string{"call", "--workspace", ws, "--record", rec}, args...)...)
	}
	r := harness(t, "", "record", "summary", rec)
	if !strings.Contains(r.stdout, "  run 2 #1 file_read: refused") {
		t.Errorf("record summary does not name the run of the refused call:\n%s", r.stdout)
	}
	b, err := os.ReadFile(rec)
	must(t, err)
	var start struct {
		Policy struct {
			Approve  string `json:"approve"`
			Approver string `json:"approver"`
		} `json:"policy"`
	}
	must(t, json.Unmarshal([]byte(strings.SplitN(string(b), "\n", 2)[0]), &start))
	if start.Policy.Approve != "auto" || start.Policy.Approver != "deny" {
		t.Errorf("run_start policy: approve %q, approver %q; want the choice auto and the effective deny (no terminal)", start.Policy.Approve, start.Policy.Approver)
	}
}

// TestEnclosingLimitsRecorded: where run calls get no pids, memory or cpu
// limits of their own, run_start says what bounds them together (the
// harness's own cgroup), and the start note says so; where they do, it
// records nothing of the kind.
func TestEnclosingLimitsRecorded(t *testing.T) {
	testenv.Require(t, execution(), "confined execution", testenv.ShapeNoLandlock, testenv.ShapeNoUserns)
	ws := t.TempDir()
	must(t, os.WriteFile(filepath.Join(ws, "hello.txt"), []byte("hello\n"), 0o644))
	rec := filepath.Join(t.TempDir(), "rec.jsonl")
	r := harness(t, "", "call", "--workspace", ws, "--record", rec, "--yes", "--allow-program", "true", "run", `{"argv":["true"]}`)
	b, err := os.ReadFile(rec)
	must(t, err)
	var start struct {
		Confinement struct {
			Missing []struct {
				Name string `json:"name"`
			} `json:"missing"`
			Enclosing *struct {
				Dir string `json:"dir"`
			} `json:"enclosing_limits"`
		} `json:"confinement"`
	}
	must(t, json.Unmarshal([]byte(strings.SplitN(string(b), "\n", 2)[0]), &start))
	noLimits := false
	for _, m := range start.Confinement.Missing {
		noLimits = noLimits || m.Name == "pids-limit" || m.Name == "memory-limit" || m.Name == "cpu-limit"
	}
	// The enclosing limits are read from cgroup v2 (an independent probe
	// says whether this machine has it).
	cg, err := testenv.ProbeCgroups()
	must(t, err)
	if cg.V2Mount == "" {
		if start.Confinement.Enclosing != nil {
			t.Errorf("no cgroup v2 here, yet run_start records enclosing limits %+v", start.Confinement.Enclosing)
		}
		return
	}
	switch {
	case noLimits && (start.Confinement.Enclosing == nil || start.Confinement.Enclosing.Dir == ""):
		t.Errorf("calls get no limits of their own, yet run_start does not say what bounds them: %s", strings.SplitN(string(b), "\n", 2)[0])
	case noLimits && !strings.Contains(r.stderr, "the harness's own cgroup"):
		t.Errorf("the start note does not say what bounds the calls:\n%s", r.stderr)
	case !noLimits && start.Confinement.Enclosing != nil:
		t.Errorf("calls have limits of their own, yet run_start records enclosing limits %+v", start.Confinement.Enclosing)
	}
}
