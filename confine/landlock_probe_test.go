package confine

import (
	"testing"

	"github.com/b10x/harness/internal/testenv"
)

func TestProbeLandlock(t *testing.T) {
	info, err := ProbeLandlock()
	if err != nil {
		t.Fatal(err)
	}
	w := wantLandlockABI(t)
	if info.ABI != w && (testenv.Shape() == testenv.ShapeHost || testenv.Shape() == testenv.ShapeNoLandlock || info.ABI < w) {
		t.Fatalf("shape %s: Landlock ABI %d, want %d", testenv.Shape(), info.ABI, w)
	}
	t.Logf("Landlock ABI %d errata %#x", info.ABI, info.Errata)
}
