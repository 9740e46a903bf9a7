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
	want := map[string]int{testenv.ShapeHost: 7, testenv.ShapeDebian61: 2, testenv.ShapeNoLandlock: 0, testenv.ShapeNoUserns: 2, testenv.ShapeCgroupV1: 2}
	if w, ok := want[testenv.Shape()]; ok && info.ABI < w || testenv.Shape() == testenv.ShapeNoLandlock && info.ABI != 0 {
		t.Fatalf("shape %s: Landlock ABI %d, want %d", testenv.Shape(), info.ABI, w)
	}
	t.Logf("Landlock ABI %d errata %#x", info.ABI, info.Errata)
}
