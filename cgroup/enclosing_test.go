package cgroup

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/b10x/harness/internal/testenv"
)

func TestEnclosingFrom(t *testing.T) {
	top := t.TempDir()
	pod := filepath.Join(top, "kubepods", "pod1")
	self := filepath.Join(pod, "ctr")
	if err := os.MkdirAll(self, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(dir, name, v string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(top, "memory.max", "8589934592") // above the tree: never read
	write(filepath.Join(top, "kubepods"), "memory.max", "4294967296")
	write(pod, "memory.max", "max")
	write(self, "memory.max", "2147483648")
	write(pod, "pids.max", "512")
	write(self, "pids.max", "max")
	write(pod, "cpu.max", "50000 100000")
	write(self, "cpu.max", "max 100000")

	e := enclosingFrom(self, filepath.Join(top, "kubepods"))
	if e.MemoryMax != 2147483648 || e.PidsMax != 512 || e.CPUMax != "50000 100000" || e.Dir != self {
		t.Errorf("got %+v", e)
	}
	if s := e.String(); s != "memory.max 2147483648 bytes, pids.max 512, cpu.max 50000 100000" {
		t.Errorf("String() = %q", s)
	}
	none := enclosingFrom(top, top)
	if none.MemoryMax != 8589934592 || none.PidsMax != -1 || none.CPUMax != "" {
		t.Errorf("top alone: %+v", none)
	}
	if s := (Enclosing{MemoryMax: -1, PidsMax: -1}).String(); s != "no memory, pids or cpu limit" {
		t.Errorf("String() of none = %q", s)
	}
}

// TestEnclosingLimitsHere: on this host the harness's own cgroup is found
// and its limits read; whatever they are, reading them does not fail
// where a cgroup2 mount holds this process.
func TestEnclosingLimitsHere(t *testing.T) {
	_, err := locateSelf("")
	testenv.Require(t, err == nil, "a cgroup v2 directory for this process", testenv.ShapeCgroupV1)
	e, err := EnclosingLimits()
	if err != nil || e.Dir == "" {
		t.Fatalf("EnclosingLimits: %+v, %v", e, err)
	}
	t.Logf("enclosing: %s (%s)", e, e.Dir)
}
