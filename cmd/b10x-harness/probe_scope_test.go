package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/b10x/harness/internal/testenv"
)

// TestAutoProbesOnlyWhatItPublishes: under --confine auto a session that
// declares no program probes only the harness's own layer and says so in
// run_start; run is unpublished for want of a program, not for the host;
// declaring a program brings the full probe back (no not_probed).
func TestAutoProbesOnlyWhatItPublishes(t *testing.T) {
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "a.txt"), []byte("hi\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	confinement := func(t *testing.T, rec string) map[string]any {
		t.Helper()
		lines := readRecord(t, rec)
		if len(lines) == 0 || lines[0]["event"] != "run_start" {
			t.Fatalf("record %v", lines)
		}
		c, ok := lines[0]["confinement"].(map[string]any)
		if !ok {
			t.Fatalf("run_start without confinement: %v", lines[0])
		}
		return c
	}

	rec := filepath.Join(t.TempDir(), "r.jsonl")
	r := harness(t, "", "call", "--workspace", ws, "--record", rec, "file_read", `{"path":"a.txt"}`)
	if r.code != 0 || !strings.Contains(r.stdout, `"executed"`) {
		t.Fatalf("file_read: %d %s %s", r.code, r.stdout, r.stderr)
	}
	c := confinement(t, rec)
	if np, _ := c["not_probed"].(string); !strings.Contains(np, "no program is declared") {
		t.Fatalf("run_start confinement %v: want not_probed naming the missing program", c)
	}
	for _, e := range c["enforced"].([]any) {
		if e != "landlock-self" {
			t.Fatalf("enforced %v without probing it", e)
		}
	}
	r = harness(t, "", "call", "--workspace", ws, "run", `{"argv":["true"]}`)
	if r.code != 3 || !strings.Contains(r.stdout, `"unpublished"`) || !strings.Contains(r.stdout, "allow_program") {
		t.Fatalf("run without a program: %d %s %s", r.code, r.stdout, r.stderr)
	}

	testenv.Require(t, atkExecution(), "confined execution", testenv.ShapeNoLandlock, testenv.ShapeNoUserns)
	rec = filepath.Join(t.TempDir(), "r.jsonl")
	r = harness(t, "", "call", "--workspace", ws, "--record", rec, "--allow-program", "true", "--yes", "run", `{"argv":["true"]}`)
	if r.code != 0 {
		t.Fatalf("run true: %d %s %s", r.code, r.stdout, r.stderr)
	}
	if c := confinement(t, rec); c["not_probed"] != nil {
		t.Fatalf("a session with a program probed partially: %v", c)
	}
}
