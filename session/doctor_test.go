package session

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/b10x/harness/confine"
)

// TestDoctorPublication: what doctor says each mode publishes and
// withholds is the gate's own decision (gate.Host.Withholds), in the
// gate's words, naming the layers the plan lacks.
func TestDoctorPublication(t *testing.T) {
	reads := []string{"file_read", "dir_list", "search", "find"}
	for _, tc := range []struct {
		name string
		plan confine.Plan
		pub  []string
		with map[string]string
	}{
		{"everything", confine.Plan{Mode: confine.Auto, ConfinedWorkspace: true, ConfinedExecution: true},
			append(slices.Clone(reads), "file_write", "file_edit", "run (with allow_program)"), map[string]string{}},
		{"off", confine.Plan{Mode: confine.Off},
			reads, map[string]string{"file_write": "needs a confined workspace: confine off", "file_edit": "needs a confined workspace: confine off", "run": "needs confined execution: confine off"}},
		{"no landlock", confine.Plan{Mode: confine.Auto, Missing: []confine.Layer{{Name: confine.LayerLandlockSelf}, {Name: confine.LayerLandlockChild}, {Name: confine.LayerMemoryLimit}}},
			reads, map[string]string{"file_write": "needs a confined workspace: this host lacks landlock-self", "file_edit": "needs a confined workspace: this host lacks landlock-self", "run": "needs confined execution: this host lacks landlock-child"}},
		{"no kill", confine.Plan{Mode: confine.Auto, ConfinedWorkspace: true, Missing: []confine.Layer{{Name: confine.LayerCgroupLeaf}, {Name: confine.LayerPidNS}}},
			append(slices.Clone(reads), "file_write", "file_edit"), map[string]string{"run": "needs confined execution: this host lacks pidns"}},
	} {
		pub, with := publication(tc.plan)
		if !slices.Equal(pub, tc.pub) {
			t.Errorf("%s: publishes %v, want %v", tc.name, pub, tc.pub)
		}
		if len(with) != len(tc.with) {
			t.Errorf("%s: withholds %v, want %v", tc.name, with, tc.with)
		}
		for k, v := range tc.with {
			if with[k] != v {
				t.Errorf("%s: %s withheld as %q, want %q", tc.name, k, with[k], v)
			}
		}
	}
}

// TestDoctorMasked: doctor names what a run child reads as empty, as the
// machine shows it: a regular file of /etc without the other-read bit
// (read here with stat, not through the code under test) is listed.
func TestDoctorMasked(t *testing.T) {
	msg, paths := maskedSummary(true)
	if !strings.Contains(msg, "read scope denies") || !strings.Contains(msg, "paused (its cgroup leaf frozen)") {
		t.Errorf("maskedSummary does not name the read scope and the pause: %s", msg)
	}
	if m, _ := maskedSummary(false); !strings.Contains(m, "max_parallel 1 closes that") {
		t.Errorf("maskedSummary without cgroup leaves does not say what closes the gap: %s", m)
	}
	ents, err := os.ReadDir("/etc")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		st, err := os.Lstat("/etc/" + e.Name())
		if err != nil || !st.Mode().IsRegular() || st.Mode().Perm()&0o004 != 0 {
			continue
		}
		if !slices.Contains(paths, "/etc/"+e.Name()) || !strings.Contains(msg, "/etc/"+e.Name()) {
			t.Errorf("/etc/%s (mode %v) is not listed as read as empty: %s", e.Name(), st.Mode().Perm(), msg)
		}
	}
}
