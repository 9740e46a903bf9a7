package cgroup

import (
	"slices"
	"testing"
	"time"
)

func TestLimitsNeedsAndOnly(t *testing.T) {
	all := Limits{PidsMax: 8, MemoryMax: 1 << 20, CPUQuota: 50 * time.Millisecond, CPUPeriod: 200 * time.Millisecond}
	want := []Need{{"PidsMax", ControllerPids}, {"MemoryMax", ControllerMemory}, {"CPUQuota", ControllerCPU}}
	if got := all.Needs(); !slices.Equal(got, want) {
		t.Errorf("Needs = %v, want %v", got, want)
	}
	if got := (Limits{}).Needs(); got != nil {
		t.Errorf("zero Limits needs %v", got)
	}
	if got := (Limits{MemoryMax: 1}).Needs(); !slices.Equal(got, want[1:2]) {
		t.Errorf("Needs = %v, want %v", got, want[1:2])
	}
	if got, want := all.Only([]Controller{ControllerCPU, ControllerPids}), (Limits{PidsMax: 8, CPUQuota: 50 * time.Millisecond, CPUPeriod: 200 * time.Millisecond}); got != want {
		t.Errorf("Only(cpu, pids) = %+v, want %+v", got, want)
	}
	if got := all.Only(nil); got != (Limits{}) {
		t.Errorf("Only(nil) = %+v", got)
	}
	if got := (Limits{CPUPeriod: time.Second}).Only([]Controller{ControllerCPU}); got != (Limits{}) {
		t.Errorf("a period without a quota is kept: %+v", got)
	}
	if !slices.Equal(managed, []string{"pids", "memory", "cpu"}) {
		t.Errorf("managed = %q", managed)
	}
}
