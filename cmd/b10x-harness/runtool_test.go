package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/b10x/harness/internal/testenv"
)

// execution says whether this shape can confine run calls at all.
func execution() bool {
	return testenv.Shape() != testenv.ShapeNoLandlock && testenv.Shape() != testenv.ShapeNoUserns
}

func TestRunProgramMatching(t *testing.T) {
	ws, _ := sampleWorkspace(t)
	// A binary named like an allowed program, planted in the workspace.
	must(t, os.WriteFile(filepath.Join(ws, "sh"), []byte("#!/bin/sh\necho PLANTED\n"), 0o755))
	must(t, os.MkdirAll(filepath.Join(ws, "sub"), 0o755))
	base := []string{"call", "--workspace", ws, "--yes", "--allow-program", "sh"}
	cases := []struct {
		argv   string
		reason string
	}{
		{`["./sh","-c","echo hi"]`, "program_not_allowed"},
		{`["/tmp/x/sh"]`, "program_not_allowed"},
		{`["sh/../../bin/sh"]`, "program_not_allowed"},
		{`["SH"]`, "program_not_allowed"},
		{`["bash"]`, "program_not_allowed"},
		{`[]`, "invalid_argument"},
		{`"sh -c id"`, "invalid_argument"},
	}
	for _, c := range cases {
		r := harness(t, "", append(base, "run", `{"argv":`+c.argv+`}`)...)
		o := outcome(t, r)
		want := c.reason
		if !execution() {
			want = "unpublished"
		}
		if o["status"] != "refused" || o["reason"] != want {
			t.Errorf("argv %s: %v", c.argv, o)
		}
	}
	// Where run is not published, the refusals above are all there is to see.
	testenv.Require(t, execution(), "confined execution", testenv.ShapeNoLandlock, testenv.ShapeNoUserns)
	// The declared name runs the file resolved at start, never the planted one,
	// and argv reaches execve as bytes: no shell interprets it.
	r := harness(t, "", append(base, "run", `{"argv":["sh","-c","echo \"$1|$2\"","x","a;b && $(id) `+"`id`"+` > f"],"cwd":"sub"}`)...)
	o := outcome(t, r)
	res, _ := o["result"].(string)
	if o["status"] != "executed" || strings.Contains(res, "PLANTED") || !strings.Contains(res, "a;b && $(id) `id` > f|") {
		t.Fatalf("%v\n%s", o, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(ws, "sub", "f")); err == nil {
		t.Fatal("a redirection in an argument was interpreted")
	}
	// cwd outside the workspace, or through a link out of it.
	must(t, os.Symlink("../data-archived", filepath.Join(ws, "out")))
	for _, cwd := range []string{"..", "/etc", "out", "../data-archived"} {
		o := outcome(t, harness(t, "", append(base, "run", `{"argv":["sh","-c","pwd"],"cwd":"`+cwd+`"}`)...))
		if o["status"] != "refused" || o["reason"] != "denied_path" {
			t.Errorf("cwd %s: %v", cwd, o)
		}
	}
}

func TestRunConfinesTheChild(t *testing.T) {
	// TestRunProgramMatching asserts that run is not published where it is absent.
	testenv.Require(t, execution(), "confined execution", testenv.ShapeNoLandlock, testenv.ShapeNoUserns)
	ws, outside := sampleWorkspace(t)
	rec := filepath.Join(t.TempDir(), "rec.jsonl")
	script := `cat ../data-archived/x; cat ` + outside + `/x; cat /proc/1/environ | tr '\0' '\n' | grep -c B10X_FAKE_KEY; echo env:; env; echo written > inside.txt; echo nope > ` + outside + `/planted; echo end`
	cmd := []string{"call", "--workspace", ws, "--record", rec, "--yes", "--allow-program", "sh", "run", `{"argv":["sh","-c",` + jsonString(script) + `]}`}
	c := harnessCommand(cmd...)
	c.Env = append(os.Environ(), "B10X_TEST_MAIN=1", "B10X_FAKE_KEY=sk-live-do-not-leak")
	out, _ := c.CombinedOutput()
	s := string(out)
	if strings.Contains(s, "OUTSIDE-SECRET") || strings.Contains(s, "sk-live-do-not-leak") {
		t.Fatalf("the child read outside the workspace or the harness's environment:\n%s", s)
	}
	if !strings.Contains(s, "end") {
		t.Fatalf("the script did not run:\n%s", s)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "inside.txt")); string(b) != "written\n" {
		t.Fatalf("writing in the workspace failed:\n%s", s)
	}
	if _, err := os.Stat(filepath.Join(outside, "planted")); err == nil {
		t.Fatal("the child wrote outside the workspace")
	}
	lines := readRecord(t, rec)
	if lines[1]["event"] != "intent" {
		t.Fatalf("record line 2 %v, want the intent line", lines[1])
	}
	call := lines[2]
	meta, _ := call["meta"].(map[string]any)
	t.Logf("LAYERS: %v", meta["layers"])
	if call["status"] != "executed" || meta["layers"] == nil {
		t.Fatalf("record %v", call)
	}
}

func TestExec(t *testing.T) {
	ws, _ := sampleWorkspace(t)
	r := harness(t, "", "exec", "--workspace", ws, "--", "sh", "-c", "echo out; echo err >&2; exit 7")
	if !execution() {
		// The spawn fails closed at the missing layer: the command never ran.
		if r.code != 125 || !strings.Contains(r.stderr, "did not run") || r.stdout != "" {
			t.Fatalf("exit %d %s", r.code, r.stderr)
		}
	}
	testenv.Require(t, execution(), "confined execution", testenv.ShapeNoLandlock, testenv.ShapeNoUserns)
	if r.code != 7 || r.stdout != "out\n" || !strings.Contains(r.stderr, "err\n") {
		t.Fatalf("exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	report := filepath.Join(t.TempDir(), "report.json")
	r = harness(t, "", "exec", "--workspace", ws, "--timeout", execLimit(t, ws, "1s"), "--report", report, "--", "sh", "-c", "sleep 1000.5151 & setsid sleep 1000.5151 & sleep 1000.5151")
	if r.code != 124 {
		t.Fatalf("timeout: exit %d %s", r.code, r.stderr)
	}
	if b, err := os.ReadFile(report); err != nil || !strings.Contains(string(b), `"timed_out": true`) {
		t.Fatalf("report %s %v", b, err)
	}
	if ps, _ := exec.Command("pgrep", "-f", "sleep 1000.5151").Output(); len(ps) > 0 {
		t.Fatalf("processes survived the timeout: %s", ps)
	}
	r = harness(t, "", "exec", "--workspace", ws, "--", "sh", "-c", "sleep 1000.5152 & setsid sleep 1000.5152 & echo started")
	if r.code != 0 || r.stdout != "started\n" {
		t.Fatalf("exit %d %q %s", r.code, r.stdout, r.stderr)
	}
	if ps, _ := exec.Command("pgrep", "-f", "sleep 1000.5152").Output(); len(ps) > 0 {
		t.Fatalf("processes survived the call: %s", ps)
	}
	if r := harness(t, "", "exec", "--workspace", ws, "--", "no-such-program-here"); r.code != exitNotFound {
		t.Fatalf("missing program: exit %d %s", r.code, r.stderr)
	}
}

func jsonString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"', '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case '\n':
			b.WriteString(`\n`)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
