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
	testenv.Require(t, strings.Contains(r.stdout, "  file_write"), "file_write (a confined workspace)", testenv.ShapeNoLandlock)
	for _, want := range []string{"Write rules", "- keys/*.pem: no write tool may change these paths", "- src/**: "} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("tools text lacks %q:\n%s", want, r.stdout)
		}
	}
}
