package main

import (
	"strings"
	"testing"
)

// TestHelpCommand: `help [COMMAND...]` is `COMMAND... --help`, byte for
// byte; a command it does not know is a usage error; exec's and call's
// help list their exit statuses.
func TestHelpCommand(t *testing.T) {
	for _, args := range [][]string{{}, {"exec"}, {"policy", "show"}, {"mcp"}} {
		h := harness(t, "", append([]string{"help"}, args...)...)
		d := harness(t, "", append(args, "--help")...)
		if h.code != 0 || h.stdout != d.stdout || h.stdout == "" {
			t.Errorf("help %v: exit %d, %d bytes; want --help's %d bytes", args, h.code, len(h.stdout), len(d.stdout))
		}
	}
	if r := harness(t, "", "help", "nosuch"); r.code != exitUsage || !strings.Contains(r.stderr, "nosuch") {
		t.Errorf("help nosuch: exit %d, %q", r.code, r.stderr)
	}
	for cmd, codes := range map[string][]string{"exec": {"124", "125", "126", "127", "--grace"}, "call": {"0 when", "1 when", "3 when", "2 on"}} {
		out := strings.Join(strings.Fields(harness(t, "", cmd, "--help").stdout), " ")
		for _, c := range codes {
			if !strings.Contains(out, c) {
				t.Errorf("%s --help does not say %q", cmd, c)
			}
		}
	}
}
