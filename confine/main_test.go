package confine

import (
	"bytes"
	"encoding/json"
	"os"
	"syscall"
	"testing"

	"github.com/b10x/harness/internal/reexec"
)

func TestMain(m *testing.M) {
	reexec.Init()
	os.Exit(m.Run())
}

// runTestChild re-executes the test binary under a registered entry point
// and decodes the one JSON object it prints into out. The child's stderr is
// logged; a failed child fails the test.
func runTestChild(t *testing.T, attr *syscall.SysProcAttr, out any, entry string, args ...string) {
	t.Helper()
	cmd := reexec.Command(entry, args...)
	cmd.SysProcAttr = attr
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if stderr.Len() > 0 {
		t.Logf("child %s stderr:\n%s", entry, stderr.String())
	}
	if err != nil {
		t.Fatalf("child %s %q: %v", entry, args, err)
	}
	if err := json.Unmarshal(stdout.Bytes(), out); err != nil {
		t.Fatalf("child %s: bad output %q: %v", entry, stdout.String(), err)
	}
}

// childPrint writes v as the child's one JSON answer and exits 0.
func childPrint(v any) {
	if err := json.NewEncoder(os.Stdout).Encode(v); err != nil {
		os.Stderr.WriteString("child: encode: " + err.Error() + "\n")
		os.Exit(3)
	}
	os.Exit(0)
}
