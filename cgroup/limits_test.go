package cgroup

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/b10x/harness/internal/reexec"
	"github.com/b10x/harness/internal/testenv"
)

// Limits need the pids, memory and cpu controllers in cgroup v2: the
// cgroup-v1 shape has no cgroup v2, and a host may bind them to cgroup v1
// (as a hybrid one does); the test reads which from the host's own cgroup
// files. Every other shape must run these tests.
var noControllers = func() []string {
	lacking := []string{testenv.ShapeCgroupV1}
	if testenv.Shape() == testenv.ShapeHost {
		cg, err := testenv.ProbeCgroups()
		lacking = append(lacking, testenv.HostLacks(err != nil || cg.LimitControllersLack())...)
	}
	return lacking
}()

func init() {
	scenarios["forkbomb"] = scenarioForkBomb
	scenarios["membomb"] = scenarioMemBomb
	scenarios["cpumax"] = scenarioCPUMax
	reexec.Register("cgroup-test-hog", hogMain)
	reexec.Register("cgroup-test-spin", spinMain)
}

type forkBombResult struct {
	PidsMax, PidsPeak, ForkFailures int64
	Known                           Known
}

// A fork bomb in a leaf with pids.max 32 never holds more than 32 tasks,
// fork fails inside it, and the harness stays responsive.
func TestForkBombBounded(t *testing.T) {
	var r forkBombResult
	runChild(t, childOpts{lacking: noControllers, cgroup: childCgroup(t)}, &r, "forkbomb")
	t.Logf("%+v", r)
	if r.Known&KnownPidsPeak == 0 {
		t.Fatal("pids.peak was not read")
	}
	if r.PidsPeak > r.PidsMax || r.PidsPeak < r.PidsMax/2 {
		t.Errorf("pids.peak %d with pids.max %d: the bomb should have filled, never exceeded, the limit", r.PidsPeak, r.PidsMax)
	}
	if r.ForkFailures == 0 {
		t.Error("pids.events reports no refused fork: the limit was never hit")
	}
}

func scenarioForkBomb([]string) (any, error) {
	if err := SetChildSubreaper(); err != nil {
		return nil, err
	}
	m, err := openOrMissing()
	if err != nil {
		return nil, err
	}
	defer m.Close()
	if err := requireControllers(m, "pids"); err != nil {
		return nil, err
	}
	r := forkBombResult{PidsMax: 32}
	leaf, err := m.NewLeaf("forkbomb", Limits{PidsMax: r.PidsMax})
	if err != nil {
		return nil, err
	}
	// Every copy forks copies of itself without end; a copy whose fork is
	// refused dies (the shell's error), the others keep the leaf full.
	cmd := exec.Command("/bin/sh", "-c", `f() { while :; do f & done; }; f`)
	if err := startIn(leaf, cmd); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// Let it press against the limit until forks have been refused for
	// a while.
	err = waitFor(ctx, "refused forks", func() (bool, error) {
		b, err := os.ReadFile(filepath.Join(leaf.Path(), "pids.events"))
		if err != nil {
			return false, err
		}
		kv, err := parseFlatKeyed(b)
		if err != nil {
			return false, err
		}
		r.ForkFailures = int64(kv["max"])
		return r.ForkFailures >= 20, nil
	})
	if err != nil {
		return nil, err
	}
	// The harness is unharmed: it can still start a process of its own.
	if err := exec.Command("/bin/true").Run(); err != nil {
		return nil, fmt.Errorf("harness cannot start a process during the bomb: %w", err)
	}
	st, err := leaf.Stats()
	if err != nil {
		return nil, err
	}
	r.PidsPeak, r.Known = st.PidsPeak, st.Known
	if err := leaf.Kill(); err != nil {
		return nil, err
	}
	if err := leaf.WaitEmpty(ctx); err != nil {
		return nil, err
	}
	cmd.Wait()
	if err := reapAll(10 * time.Second); err != nil {
		return nil, err
	}
	return r, m.Close()
}

type memBombResult struct {
	MemoryMax, MemoryPeak, OOMKills int64
	SwapMax                         string // "" when memory.swap.max does not exist
	Known                           Known
	Signal                          string
}

// A process allocating without end in a leaf with memory.max 32 MiB is
// OOM-killed; the figures say so.
func TestMemoryBombOOM(t *testing.T) {
	var r memBombResult
	runChild(t, childOpts{lacking: noControllers, cgroup: childCgroup(t)}, &r, "membomb")
	t.Logf("%+v", r)
	if r.Known&(KnownOOMKills|KnownMemoryPeak) != KnownOOMKills|KnownMemoryPeak {
		t.Fatalf("memory figures unknown: %b", r.Known)
	}
	if r.OOMKills < 1 {
		t.Errorf("oom_kill = %d, want >= 1", r.OOMKills)
	}
	// The kernel lets a task it is OOM-killing, and a few unfailable
	// kernel allocations, charge past memory.max: a page more was seen
	// here. A megabyte of slack still tells a bound from no bound.
	if r.MemoryPeak > r.MemoryMax+1<<20 || r.MemoryPeak < r.MemoryMax/2 {
		t.Errorf("memory.peak %d with memory.max %d", r.MemoryPeak, r.MemoryMax)
	}
	if r.Signal != "killed" {
		t.Errorf("hog ended with %q, want killed", r.Signal)
	}
	if r.SwapMax != "" && r.SwapMax != "0" {
		t.Errorf("memory.swap.max = %q, want 0", r.SwapMax)
	}
}

func scenarioMemBomb([]string) (any, error) {
	m, err := openOrMissing()
	if err != nil {
		return nil, err
	}
	defer m.Close()
	if err := requireControllers(m, "memory"); err != nil {
		return nil, err
	}
	r := memBombResult{MemoryMax: 32 << 20}
	leaf, err := m.NewLeaf("membomb", Limits{MemoryMax: r.MemoryMax})
	if err != nil {
		return nil, err
	}
	if b, err := os.ReadFile(filepath.Join(leaf.Path(), "memory.swap.max")); err == nil {
		r.SwapMax = strings.TrimSpace(string(b))
	}
	hog := reexec.Command("cgroup-test-hog")
	if err := startIn(leaf, hog); err != nil {
		return nil, err
	}
	done := make(chan error, 1)
	go func() { done <- hog.Wait() }()
	select {
	case err = <-done:
	case <-time.After(90 * time.Second):
		hog.Process.Kill()
		<-done
		return nil, errors.New("the hog was not OOM-killed within 90s")
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return nil, fmt.Errorf("hog: %v, want it killed", err)
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		r.Signal = ws.Signal().String()
	}
	st, err := leaf.Stats()
	if err != nil {
		return nil, err
	}
	r.MemoryPeak, r.OOMKills, r.Known = st.MemoryPeak, st.OOMKills, st.Known
	return r, m.Close()
}

// hogMain allocates and touches memory until killed (at most 4 GiB).
func hogMain() {
	var keep [][]byte
	for range 4096 {
		b := make([]byte, 1<<20)
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1
		}
		keep = append(keep, b)
	}
	fmt.Fprintf(os.Stderr, "hog: allocated %d MiB and was not stopped\n", len(keep))
	os.Exit(0)
}

type cpuMaxResult struct {
	CPUMax string
	Spun   time.Duration
	Usage  time.Duration
}

// cpu.max holds what was asked, and a process spinning in the leaf gets
// no more CPU than the quota allows.
func TestCPUMax(t *testing.T) {
	var r cpuMaxResult
	runChild(t, childOpts{lacking: noControllers, cgroup: childCgroup(t)}, &r, "cpumax")
	t.Logf("%+v", r)
	if r.CPUMax != "20000 100000" {
		t.Errorf("cpu.max = %q, want \"20000 100000\"", r.CPUMax)
	}
	// 20% of the wall time spun, plus one period and start-up slack.
	if limit := r.Spun/5 + 300*time.Millisecond; r.Usage > limit || r.Usage <= 0 {
		t.Errorf("spinning %v under a 20%% quota used %v of CPU, want (0, %v]", r.Spun, r.Usage, limit)
	}
}

func scenarioCPUMax([]string) (any, error) {
	m, err := openOrMissing()
	if err != nil {
		return nil, err
	}
	defer m.Close()
	if err := requireControllers(m, "cpu"); err != nil {
		return nil, err
	}
	leaf, err := m.NewLeaf("cpumax", Limits{CPUQuota: 20 * time.Millisecond})
	if err != nil {
		return nil, err
	}
	var r cpuMaxResult
	b, err := os.ReadFile(filepath.Join(leaf.Path(), "cpu.max"))
	if err != nil {
		return nil, err
	}
	r.CPUMax = strings.TrimSpace(string(b))
	spin := reexec.Command("cgroup-test-spin", "1500ms")
	start := time.Now()
	if err := startIn(leaf, spin); err != nil {
		return nil, err
	}
	if err := spin.Wait(); err != nil {
		return nil, fmt.Errorf("spinner: %w", err)
	}
	r.Spun = time.Since(start)
	st, err := leaf.Stats()
	if err != nil {
		return nil, err
	}
	if st.Known&KnownCPU == 0 {
		return nil, errors.New("cpu.stat unknown")
	}
	r.Usage = st.CPUUsage
	return r, m.Close()
}

// spinMain burns CPU for the wall-clock duration in os.Args[1].
func spinMain() {
	d, err := time.ParseDuration(os.Args[1])
	if err != nil {
		os.Exit(2)
	}
	end := time.Now().Add(d)
	n := 0
	for time.Now().Before(end) {
		n++
	}
	os.Exit(0)
}

func init() {
	scenarios["move"] = scenarioMove
	scenarios["foreign"] = scenarioForeign
}

type moveResult struct {
	Base, SelfDir        string
	During, After        string // this process's cgroup while open and after Close
	SubBefore, SubDuring []string
	SubAfter             []string
	Controllers          []string
}

// Alone in a non-root cgroup, Open moves the process into PARENT/_harness,
// enables the controllers for its leaves, and Close puts everything back.
func TestOpenMovesSelfWhenAlone(t *testing.T) {
	var r moveResult
	runChild(t, childOpts{lacking: noControllers, cgroup: childCgroup(t)}, &r, "move")
	t.Logf("%+v", r)
	if r.During != r.SelfDir || r.After != r.Base {
		t.Errorf("cgroup while open %s (want %s), after Close %s (want %s)", r.During, r.SelfDir, r.After, r.Base)
	}
	if !slices.Equal(r.Controllers, managed) {
		t.Errorf("controllers %q, want %q", r.Controllers, managed)
	}
	for _, c := range managed {
		if !slices.Contains(r.SubDuring, c) {
			t.Errorf("%s not enabled in the base's subtree_control while open: %q", c, r.SubDuring)
		}
	}
	if !slices.Equal(r.SubBefore, r.SubAfter) {
		t.Errorf("base subtree_control %q before Open, %q after Close", r.SubBefore, r.SubAfter)
	}
}

func ownCgroup() (string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	p, _, err := parseProcCgroup(b)
	return p, err
}

func scenarioMove([]string) (any, error) {
	loc, err := locateSelf("")
	if errors.Is(err, ErrNotSupported) {
		return nil, missingError{"cgroup v2: " + err.Error()}
	}
	if err != nil {
		return nil, err
	}
	if isRootCgroup(loc.dir) {
		return nil, missingError{"a non-root cgroup to start the test in (" + loc.dir + " is the root)"}
	}
	procs, err := readPids(filepath.Join(loc.dir, "cgroup.procs"))
	if err != nil {
		return nil, err
	}
	if len(procs) != 1 {
		return nil, missingError{fmt.Sprintf("a cgroup of its own: %s holds %v", loc.dir, procs)}
	}
	r := moveResult{Base: cgPathLoc(loc, loc.dir)}
	if r.SubBefore, err = readList(filepath.Join(loc.dir, "cgroup.subtree_control")); err != nil {
		return nil, err
	}
	m, err := Open(Options{})
	if err != nil {
		return nil, err
	}
	defer m.Close()
	if err := requireControllers(m, managed...); err != nil {
		return nil, err
	}
	r.SelfDir = cgPathLoc(loc, m.selfDir)
	r.Controllers = m.Controllers()
	if r.During, err = ownCgroup(); err != nil {
		return nil, err
	}
	if r.SubDuring, err = readList(filepath.Join(loc.dir, "cgroup.subtree_control")); err != nil {
		return nil, err
	}
	leaf, err := m.NewLeaf("limited", Limits{PidsMax: 8, MemoryMax: 64 << 20, CPUQuota: 50 * time.Millisecond})
	if err != nil {
		return nil, err
	}
	sleeper := exec.Command("/bin/sleep", "1000")
	if err := startIn(leaf, sleeper); err != nil {
		return nil, err
	}
	// Close kills what runs in the leaves it still has.
	if err := m.Close(); err != nil {
		return nil, err
	}
	if err := sleeper.Wait(); err == nil {
		return nil, errors.New("the sleeper in an open leaf survived Close")
	}
	if r.After, err = ownCgroup(); err != nil {
		return nil, err
	}
	if r.SubAfter, err = readList(filepath.Join(loc.dir, "cgroup.subtree_control")); err != nil {
		return nil, err
	}
	if exists(m.Parent()) {
		return nil, fmt.Errorf("%s left after Close", m.Parent())
	}
	return r, nil
}

func cgPathLoc(loc location, dir string) string {
	rel, _ := within(dir, loc.mount)
	return filepath.Join(loc.mountRoot, rel)
}

type foreignResult struct {
	Own, OwnAfterOpen string
	Controllers       []string
	Missing           []string
	Refused           string
}

// When the cgroup also holds a process that is not the harness, Open moves
// nothing, enables nothing, says why for each controller, and refuses
// limits; leaves without limits still work.
func TestOpenDegradesBesideOthers(t *testing.T) {
	var r foreignResult
	runChild(t, childOpts{lacking: noControllers, cgroup: childCgroup(t)}, &r, "foreign")
	t.Logf("%+v", r)
	if r.Own != r.OwnAfterOpen {
		t.Errorf("Open moved the process from %s to %s beside another process", r.Own, r.OwnAfterOpen)
	}
	if len(r.Controllers) != 0 || len(r.Missing) != len(managed) {
		t.Fatalf("controllers %q, missing %q", r.Controllers, r.Missing)
	}
	for _, line := range r.Missing {
		if !strings.Contains(line, "holds processes that are not this harness's") || !strings.Contains(line, "Delegate=yes") {
			t.Errorf("missing line does not say why and what to do: %q", line)
		}
	}
	if !strings.Contains(r.Refused, "PidsMax needs the pids controller") {
		t.Errorf("refusal %q", r.Refused)
	}
}

func scenarioForeign([]string) (any, error) {
	loc, err := locateSelf("")
	if errors.Is(err, ErrNotSupported) {
		return nil, missingError{"cgroup v2: " + err.Error()}
	}
	if err != nil {
		return nil, err
	}
	if isRootCgroup(loc.dir) {
		return nil, missingError{"a non-root cgroup to start the test in (" + loc.dir + " is the root)"}
	}
	avail, err := readList(filepath.Join(loc.dir, "cgroup.controllers"))
	if err != nil {
		return nil, err
	}
	for _, c := range managed {
		if !slices.Contains(avail, c) {
			return nil, missingError{fmt.Sprintf("%s controller delegated to %s", c, loc.dir)}
		}
	}
	other := exec.Command("/bin/sleep", "1000")
	if err := other.Start(); err != nil {
		return nil, err
	}
	defer func() { other.Process.Kill(); other.Wait() }()
	var r foreignResult
	if r.Own, err = ownCgroup(); err != nil {
		return nil, err
	}
	m, err := Open(Options{})
	if err != nil {
		return nil, err
	}
	defer m.Close()
	if r.OwnAfterOpen, err = ownCgroup(); err != nil {
		return nil, err
	}
	r.Controllers, r.Missing = m.Controllers(), m.Missing()
	if _, err := m.NewLeaf("limited", Limits{PidsMax: 8}); err == nil {
		return nil, errors.New("a pids limit was accepted without the pids controller")
	} else {
		r.Refused = err.Error()
	}
	leaf, err := m.NewLeaf("plain", Limits{})
	if err != nil {
		return nil, err
	}
	if err := exec.Command("/bin/true").Run(); err != nil {
		return nil, err
	}
	if err := leaf.Close(); err != nil {
		return nil, err
	}
	return r, m.Close()
}
