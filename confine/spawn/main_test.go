package spawn

import (
	"os"
	"testing"

	"github.com/b10x/harness/internal/reexec"
)

func TestMain(m *testing.M) {
	reexec.Init()
	os.Exit(m.Run())
}
