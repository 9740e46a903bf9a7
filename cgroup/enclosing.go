package cgroup

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Enclosing are the limits of the cgroups that hold this process, which
// bound every process it starts together, whatever leaves it can or cannot
// make: a container's or a pod's own limits. A plain value.
type Enclosing struct {
	// Dir is the cgroup v2 directory of this process.
	Dir string `json:"dir"`
	// MemoryMax and PidsMax are the tightest memory.max and pids.max of Dir
	// and its ancestors up to the mount's root; -1 when none is set (every
	// file says "max" or is absent).
	MemoryMax int64 `json:"memory_max"`
	PidsMax   int64 `json:"pids_max"`
	// CPUMax is cpu.max ("QUOTA PERIOD") of the nearest cgroup that sets a
	// quota; "" when none does.
	CPUMax string `json:"cpu_max,omitempty"`
}

// String says the limits in a few words, e.g. "memory.max 2 GiB, pids.max
// 512" or "no memory, pids or cpu limit".
func (e Enclosing) String() string {
	var parts []string
	if e.MemoryMax >= 0 {
		parts = append(parts, fmt.Sprintf("memory.max %d bytes", e.MemoryMax))
	}
	if e.PidsMax >= 0 {
		parts = append(parts, fmt.Sprintf("pids.max %d", e.PidsMax))
	}
	if e.CPUMax != "" {
		parts = append(parts, "cpu.max "+e.CPUMax)
	}
	if len(parts) == 0 {
		return "no memory, pids or cpu limit"
	}
	return strings.Join(parts, ", ")
}

// EnclosingLimits reads the limits that hold this process (see Enclosing).
// It fails only when this process's cgroup v2 directory cannot be found;
// an unreadable limit file counts as no limit.
func EnclosingLimits() (Enclosing, error) {
	loc, err := locateSelf("")
	if err != nil {
		return Enclosing{}, err
	}
	return enclosingFrom(loc.dir, loc.mount), nil
}

// enclosingFrom reads the limits of dir and its ancestors up to top.
func enclosingFrom(dir, top string) Enclosing {
	e := Enclosing{Dir: dir, MemoryMax: -1, PidsMax: -1}
	tighter := func(cur int64, file string) int64 {
		b, err := os.ReadFile(file)
		if err != nil {
			return cur
		}
		s := strings.TrimSpace(string(b))
		if s == "max" {
			return cur
		}
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil || v < 0 {
			return cur
		}
		if cur < 0 || v < cur {
			return v
		}
		return cur
	}
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		e.MemoryMax = tighter(e.MemoryMax, filepath.Join(d, "memory.max"))
		e.PidsMax = tighter(e.PidsMax, filepath.Join(d, "pids.max"))
		if e.CPUMax == "" {
			if b, err := os.ReadFile(filepath.Join(d, "cpu.max")); err == nil {
				if f := strings.Fields(string(b)); len(f) == 2 && f[0] != "max" {
					e.CPUMax = f[0] + " " + f[1]
				}
			}
		}
		if d == filepath.Clean(top) || d == "/" || !strings.HasPrefix(d, filepath.Clean(top)) {
			break
		}
	}
	return e
}
