package main

import (
	"encoding/json"
	"testing"
)

// TestDoctorJSONIsConsistent: each mode's plan names its own mode (strict
// too, when it refuses), every erratum the kernel reports fixed is
// described, and the cgroup's leaf controllers are a list, never null
// (issue 18, item 3). The exit status follows strict: 0 when it starts.
func TestDoctorJSONIsConsistent(t *testing.T) {
	r := harness(t, "", "doctor", "--json")
	var d struct {
		Modes []struct {
			Mode   string `json:"mode"`
			Starts bool   `json:"starts"`
			Plan   struct {
				Mode string `json:"mode"`
			} `json:"plan"`
		} `json:"modes"`
		Probe struct {
			Landlock struct {
				Fixed []struct {
					ID          int    `json:"id"`
					ABI         int    `json:"abi"`
					Description string `json:"description"`
				} `json:"fixed_errata"`
			} `json:"landlock"`
			Cgroup map[string]json.RawMessage `json:"cgroup"`
		} `json:"probe"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &d); err != nil {
		t.Fatalf("doctor --json: %v\n%s", err, r.stdout)
	}
	strictStarts := false
	for _, m := range d.Modes {
		if m.Plan.Mode != m.Mode {
			t.Errorf("mode %s: its plan says mode %q", m.Mode, m.Plan.Mode)
		}
		if m.Mode == "strict" {
			strictStarts = m.Starts
		}
	}
	if want := map[bool]int{true: 0, false: exitFailed}[strictStarts]; r.code != want {
		t.Errorf("doctor exited %d; strict starts: %v, so want %d", r.code, strictStarts, want)
	}
	for _, e := range d.Probe.Landlock.Fixed {
		if e.ID <= 3 && (e.Description == "" || e.ABI == 0) {
			t.Errorf("erratum %d is reported without its ABI and description: %+v", e.ID, e)
		}
	}
	if c, ok := d.Probe.Cgroup["leaf_controllers"]; ok && string(c) == "null" {
		t.Error("cgroup leaf_controllers is null")
	}
}
