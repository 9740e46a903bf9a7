package seccomp

import (
	"os"
	"testing"

	"github.com/b10x/harness/internal/reexec"
)

// TestMain lets the test binary start itself as the kernel test's child
// (kernel_test.go).
func TestMain(m *testing.M) {
	reexec.Init()
	os.Exit(m.Run())
}
