package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
