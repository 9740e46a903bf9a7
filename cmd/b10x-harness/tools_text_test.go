package main

import (
	"strings"
	"testing"

	"github.com/b10x/harness/internal/testenv"
)

// TestToolsTextShowsWriteRules: the text of `tools` shows each entry's
// whole description, the write rules the model is told included, not only
// its first line (issue 18, item 4).
func TestToolsTextShowsWriteRules(t *testing.T) {
	ws := t.TempDir()
	r := harness(t, "", "tools", "--workspace", ws, "--write-scope", "keys/*.pem=denied", "--write-scope", "src/**=allowed")
	if r.code != 0 {
		t.Fatalf("tools: exit %d\n%s", r.code, r.stderr)
	}
	published, _, _ := strings.Cut(r.stdout, "Not published:")
	testenv.Require(t, strings.Contains(published, "  file_write "), "file_write (a confined workspace)", testenv.ShapeNoLandlock)
	for _, want := range []string{"Write rules", "- keys/*.pem: no write tool may change these paths", "- src/**: "} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("tools text lacks %q:\n%s", want, r.stdout)
		}
	}
}

// TestConfineOffChecksPrograms: --allow-program is checked under every
// mode; --confine off publishes no run tool, yet a program that does not
// exist is still a usage error (issue 18, item 1), and each unpublished
// entry gives the real reason.
func TestConfineOffChecksPrograms(t *testing.T) {
	ws := t.TempDir()
	r := harness(t, "", "tools", "--workspace", ws, "--confine", "off", "--allow-program", "b10x-no-such-program")
	if r.code != exitUsage || !strings.Contains(r.stderr, `--allow-program "b10x-no-such-program": not found`) {
		t.Errorf("exit %d, stderr %q; want a usage error naming the program", r.code, r.stderr)
	}
	r = harness(t, "", "tools", "--workspace", ws, "--confine", "off", "--allow-program", "sh")
	for _, want := range []string{"run: needs confined execution: confine off", "file_write: needs a confined workspace: confine off"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("tools --confine off does not say %q:\n%s", want, r.stdout)
		}
	}
}
