package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/b10x/harness/cgroup"
	"github.com/b10x/harness/internal/testenv"
)

// TestStrictEnclosingLimits: with limits_from enclosing, strict takes the
// harness's own cgroup's limits (a pod's) in place of per-call leaves. It
// refuses where that cgroup sets none, and where it sets pids.max,
// memory.max and cpu.max it starts, makes no leaf, and the limits bound
// the command: a fork bomb stops at pids.max.
func TestStrictEnclosingLimits(t *testing.T) {
	ws := t.TempDir()
	// Where the harness's cgroup (the test's) sets nothing, strict refuses
	// naming what is unset.
	if enc, err := cgroup.EnclosingLimits(); err == nil && enc.PidsMax < 0 && enc.MemoryMax < 0 && enc.CPUMax == "" {
		// pids_max (512 by default) stands in for pids.max, as each
		// call's RLIMIT_NPROC; without it pids.max is wanted too.
		r := harness(t, "", "exec", "--confine", "strict", "--limits-from", "enclosing", "--workspace", ws, "--", "/bin/true")
		if r.code != exitSetupError || !strings.Contains(r.stderr, "set no memory.max, cpu.max") {
			t.Errorf("strict with unbounded enclosing limits: exit %d, %s", r.code, r.stderr)
		}
		r = harness(t, "", "exec", "--confine", "strict", "--limits-from", "enclosing", "--pids-max", "0", "--workspace", ws, "--", "/bin/true")
		if r.code != exitSetupError || !strings.Contains(r.stderr, "set no pids.max (and pids_max is 0, so no call gets a RLIMIT_NPROC of its own), memory.max, cpu.max") {
			t.Errorf("strict with unbounded enclosing limits and pids_max 0: exit %d, %s", r.code, r.stderr)
		}
	}
	r := harness(t, "", "exec", "--limits-from", "enclosing", "--memory-max", "1G", "--workspace", ws, "--", "/bin/true")
	if r.code != exitSetupError || !strings.Contains(r.stderr, "--memory-max: given with limits_from enclosing") {
		t.Errorf("a per-call memory limit with limits_from enclosing: exit %d, %s", r.code, r.stderr)
	}

	cgs, err := testenv.ProbeCgroups()
	if err != nil {
		t.Fatal(err)
	}
	mount, self := atkCgroup2(t)
	abi, _ := testenv.LandlockABI()
	ok := mount != "" && os.Geteuid() == 0 && !cgs.LimitControllersLack() && abi > 0
	// Strict's other layers must hold too: no-landlock has every one but
	// Landlock.
	testenv.Require(t, ok, "a cgroup v2 with pids, memory and cpu controllers, as root, and Landlock", append(testenv.HostLacks(cgs.LimitControllersLack()), testenv.ShapeCgroupV1, testenv.ShapeNoUserns, testenv.ShapeNoLandlock)...)
	// A pod: a cgroup with limits, holding the harness.
	pod := filepath.Join(mount, filepath.Dir(self), fmt.Sprintf("b10x-pod-%d", os.Getpid()))
	if filepath.Dir(self) == "/" || self == "/" {
		pod = filepath.Join(mount, fmt.Sprintf("b10x-pod-%d", os.Getpid()))
	}
	parent := filepath.Dir(pod)
	for _, c := range []string{"+pids", "+memory", "+cpu"} {
		_ = os.WriteFile(filepath.Join(parent, "cgroup.subtree_control"), []byte(c), 0)
	}
	must(t, os.Mkdir(pod, 0o755))
	t.Cleanup(func() {
		for _, d := range atkSubCgroups(pod) {
			os.Remove(d)
		}
		os.Remove(pod)
	})
	for f, v := range map[string]string{"pids.max": "40", "memory.max": "512M", "cpu.max": "100000 100000"} {
		if err := os.WriteFile(filepath.Join(pod, f), []byte(v), 0); err != nil {
			t.Fatalf("%s: %v (the shape offers the controller but the test cannot set it)", f, err)
		}
	}
	fd, err := unix.Open(pod, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	must(t, err)
	defer unix.Close(fd)

	r = harnessIn(t, fd, "", "exec", "--confine", "strict", "--limits-from", "enclosing", "--workspace", ws, "--", "/bin/true")
	if r.code != 0 {
		t.Fatalf("strict with the pod's limits: exit %d, %s", r.code, r.stderr)
	}
	if !strings.Contains(r.stderr, "pids.max 40") || strings.Contains(r.stderr, "ran without") {
		t.Errorf("the note does not say what bounds the command: %s", r.stderr)
	}
	if left := atkSubCgroups(pod); len(left) != 0 {
		t.Errorf("cgroups made under the pod's: %v", left)
	}
	// A fork bomb stops at the pod's pids.max.
	bomb := "n=0; while [ $n -lt 200 ]; do sleep 30 & n=$((n+1)); done 2>/dev/null; echo started; kill 0"
	r = harnessIn(t, fd, "", "exec", "--confine", "strict", "--limits-from", "enclosing", "--timeout", "60s", "--workspace", ws, "--", "/bin/sh", "-c", bomb)
	peak, _ := os.ReadFile(filepath.Join(pod, "pids.peak"))
	events, _ := os.ReadFile(filepath.Join(pod, "pids.events"))
	if !strings.Contains(string(events), "max ") || strings.Contains(string(events), "max 0") {
		t.Errorf("the fork bomb did not meet the pod's pids.max: pids.events %q, peak %s, exit %d %s", events, peak, r.code, r.stderr)
	}
}

// TestEnclosingNProc: under limits_from enclosing, where no call gets a
// cgroup leaf (and a pod's pids.max may be out of sight behind its
// cgroup namespace), pids_max bounds each call's processes and threads as
// RLIMIT_NPROC in its own user namespace: a fork bomb stops there, and
// the next call gets its own count.
func TestEnclosingNProc(t *testing.T) {
	testenv.Require(t, execution(), "confined execution", testenv.ShapeNoLandlock, testenv.ShapeNoUserns)
	ws := t.TempDir()
	// The shell says how many forks worked: dash exits at the first
	// that fails, busybox's ash may go on without a new $!.
	bomb := `i=0; last=; while [ $i -lt 60 ]; do sleep 30 & [ "$!" = "$last" ] && break; last=$!; i=$((i+1)); echo "forked $i"; done; kill 0`
	for round := range 2 {
		r := harness(t, "", "exec", "--limits-from", "enclosing", "--pids-max", "16", "--timeout", "60s", "--workspace", ws, "--", "/bin/sh", "-c", bomb)
		lines := strings.Fields(r.stdout)
		if len(lines) < 2 || lines[len(lines)-2] != "forked" {
			t.Fatalf("round %d: no count: exit %d, stdout %q, stderr %s", round, r.code, r.stdout, r.stderr)
		}
		n, err := strconv.Atoi(lines[len(lines)-1])
		if err != nil {
			t.Fatal(err)
		}
		// The shell and the call's init count too.
		if n > 15 || n < 8 {
			t.Errorf("round %d: %d forks worked under RLIMIT_NPROC 16 (want 8 to 15): exit %d, %s", round, n, r.code, r.stderr)
		}
		if !strings.Contains(r.stderr, "RLIMIT_NPROC 16") {
			t.Errorf("round %d: the note does not say what bounds the command: %s", round, r.stderr)
		}
	}
}
