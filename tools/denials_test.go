package tools

import (
	"strings"
	"testing"

	"github.com/b10x/harness/confine/audit"
)

func TestKernelDenialsNote(t *testing.T) {
	if got := kernelDenialsNote(audit.Support{Why: "the kernel's audit is disabled"}); got != "kernel denials are not attributable here (the kernel's audit is disabled)" {
		t.Errorf("not attributable: %q", got)
	}
	if got := kernelDenialsNote(audit.Support{Attributable: true}); !strings.HasPrefix(got, "kernel denials are not attributable here (") {
		t.Errorf("attributable, no reader: %q", got)
	}
}
