package gate

import (
	"os"
	"testing"

	"github.com/b10x/harness/internal/reexec"
)

// TestMain lets the test binary act as the hook init (internal/proc), which
// the gate starts by re-executing its own binary.
func TestMain(m *testing.M) {
	reexec.Init()
	os.Exit(m.Run())
}
