package cgroup

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/b10x/harness/internal/testenv"
)

func init() { scenarios["swapmax"] = scenarioSwapMax }

type swapMaxResult struct {
	// Limited and Unlimited are memory.swap.max of a leaf with a memory
	// limit and of one without; "" when the file does not exist.
	Limited, Unlimited string
	// ParentHas is whether the Manager's parent, a cgroup the kernel
	// gives the memory controller's files too, has memory.swap.max: how
	// a host says it has swap accounting, apart from the leaves.
	ParentHas bool
}

// TestSwapMaxZeroInLeaf: a leaf with a memory limit reads memory.swap.max
// back as 0, so the program cannot dodge memory.max by swapping; a leaf
// without one keeps the kernel's "max" (the 0 is the limit's doing). The
// file exists wherever the memory controller does with swap accounting,
// as in every VM shape that has the controller; a host may lack it (a
// kernel without CONFIG_MEMCG_SWAP, or booted with swapaccount=0), which
// it shows by the file's absence from the harness's parent cgroup too.
func TestSwapMaxZeroInLeaf(t *testing.T) {
	var r swapMaxResult
	runChild(t, childOpts{lacking: noControllers, cgroup: childCgroup(t)}, &r, "swapmax")
	t.Logf("%+v", r)
	lacking := []string{}
	if testenv.Shape() == testenv.ShapeHost {
		lacking = testenv.HostLacks(!r.ParentHas)
	}
	testenv.Require(t, r.Limited != "" && r.Unlimited != "", "memory.swap.max in a leaf (swap accounting)", lacking...)
	if r.Limited != "0" {
		t.Errorf("memory.swap.max of a leaf with memory.max set: %q, want 0", r.Limited)
	}
	if r.Unlimited != "max" {
		t.Errorf("memory.swap.max of a leaf without a memory limit: %q, want the kernel's max", r.Unlimited)
	}
}

func scenarioSwapMax([]string) (any, error) {
	m, err := openOrMissing()
	if err != nil {
		return nil, err
	}
	defer m.Close()
	if err := requireControllers(m, "memory"); err != nil {
		return nil, err
	}
	var r swapMaxResult
	_, err = os.Stat(filepath.Join(m.Parent(), "memory.swap.max"))
	r.ParentHas = err == nil
	for name, lim := range map[string]Limits{"swap-limited": {MemoryMax: 32 << 20}, "swap-unlimited": {}} {
		leaf, err := m.NewLeaf(name, lim)
		if err != nil {
			return nil, err
		}
		v := ""
		if b, err := os.ReadFile(filepath.Join(leaf.Path(), "memory.swap.max")); err == nil {
			v = strings.TrimSpace(string(b))
		}
		if lim.MemoryMax > 0 {
			r.Limited = v
		} else {
			r.Unlimited = v
		}
		if err := leaf.Close(); err != nil {
			return nil, err
		}
	}
	return r, m.Close()
}

// TestApplySwapMax: the rule behind TestSwapMaxZeroInLeaf on every host,
// with regular files standing in for the kernel's in a leaf directory: a
// memory limit writes memory.swap.max 0 when the file exists, creates
// nothing when it does not, and no memory limit leaves it alone.
func TestApplySwapMax(t *testing.T) {
	for _, c := range []struct {
		what     string
		lim      Limits
		files    map[string]string // the leaf's files and what they hold
		wantSwap string            // "" with no file
	}{
		{"memory limit, swap accounting", Limits{MemoryMax: 32 << 20}, map[string]string{"memory.max": "", "memory.swap.max": ""}, "0"},
		{"memory limit, no swap accounting", Limits{MemoryMax: 32 << 20}, map[string]string{"memory.max": ""}, ""},
		{"no memory limit", Limits{}, map[string]string{"memory.max": "", "memory.swap.max": "untouched"}, "untouched"},
	} {
		dir := t.TempDir()
		for f, content := range c.files {
			if err := os.WriteFile(filepath.Join(dir, f), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		l := &Leaf{path: dir, fd: fd}
		period, err := c.lim.check()
		if err != nil {
			t.Fatal(err)
		}
		err = l.apply(c.lim, period)
		unix.Close(fd)
		if err != nil {
			t.Errorf("%s: apply: %v", c.what, err)
			continue
		}
		got := ""
		if b, err := os.ReadFile(filepath.Join(dir, "memory.swap.max")); err == nil {
			got = string(b)
		} else if !os.IsNotExist(err) {
			t.Fatal(err)
		}
		if got != c.wantSwap {
			t.Errorf("%s: memory.swap.max holds %q, want %q", c.what, got, c.wantSwap)
		}
	}
}
