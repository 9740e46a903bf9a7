package cgroup

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/b10x/harness/internal/reexec"
	"github.com/b10x/harness/internal/testenv"
)

// Shapes without cgroup v2 at all.
var noCgroup2 = []string{testenv.ShapeCgroupV1}

func init() {
	scenarios["killtree"] = scenarioKillTree
	scenarios["many"] = scenarioMany
	scenarios["sweeper"] = scenarioSweeper
	scenarios["victim"] = scenarioVictim
	scenarios["refuse"] = scenarioRefuse
	scenarios["attach"] = scenarioAttach
	scenarios["broker"] = scenarioBroker
	scenarios["deadline"] = scenarioDeadline
	scenarios["subreaper"] = scenarioSubreaper
}

func TestProbeHost(t *testing.T) {
	info := ProbeHost()
	// On the host the expectation is what this machine is, read from its
	// mount table and cgroup files by the test itself; the VM shapes are
	// declared.
	var cg testenv.Cgroups
	lacking := noCgroup2
	if testenv.Shape() == testenv.ShapeHost {
		var err error
		if cg, err = testenv.ProbeCgroups(); err != nil {
			t.Fatal(err)
		}
		if cg.V2Mount == "" {
			lacking = append(lacking, testenv.ShapeHost)
		}
	}
	testenv.Require(t, info.Mount != "", "cgroup2 mount ("+info.Problem+")", lacking...)
	if !info.CanCreate {
		t.Fatalf("cannot create a child cgroup: %s", info.Problem)
	}
	if !info.Kill {
		t.Errorf("cgroup.kill not found on a 6.x kernel: %s", info.Problem)
	}
	if !strings.HasPrefix(info.Self, "/") {
		t.Errorf("Self %q is not absolute", info.Self)
	}
	if len(info.Controllers)+len(info.Missing) != len(managed) {
		t.Errorf("controllers %q and missing %q do not cover %q", info.Controllers, info.Missing, managed)
	}
	switch testenv.Shape() {
	case testenv.ShapeHost:
		var want []string
		for _, c := range managed {
			if cg.Usable(c) {
				want = append(want, c)
			}
		}
		t.Logf("this host: cgroup2 at %q, v1 hierarchies %q, own cgroup %s offers %q, enables %q (root %v, alone %v)", cg.V2Mount, cg.V1, cg.Self, cg.Offered, cg.Enabled, cg.Root, cg.Alone)
		if info.Mount != cg.V2Mount || info.V1 != (len(cg.V1) > 0) || !slices.Equal(info.Controllers, want) {
			t.Fatalf("host probe %+v, want cgroup2 at %q, v1 %v, controllers %q", info, cg.V2Mount, len(cg.V1) > 0, want)
		}
		for _, c := range managed {
			if slices.Contains(want, c) {
				continue
			}
			i := slices.IndexFunc(info.Missing, func(l string) bool { return strings.HasPrefix(l, c+" controller: ") })
			if i < 0 {
				t.Errorf("no missing line for %s: %q", c, info.Missing)
				continue
			}
			line := info.Missing[i]
			if slices.Contains(cg.V1, c) && (!strings.Contains(line, "bound to the cgroup v1 hierarchy") || !strings.Contains(line, "systemd.unified_cgroup_hierarchy=1")) {
				t.Errorf("missing line for %s, which a v1 hierarchy holds, does not say so: %q", c, line)
			}
			if !strings.Contains(info.Problem, line) {
				t.Errorf("Problem %q lacks %q", info.Problem, line)
			}
		}
	case testenv.ShapeDebian61, testenv.ShapeDebian612:
		if info.Mount != "/sys/fs/cgroup" || info.V1 || !slices.Equal(info.Controllers, managed) || info.Problem != "" {
			t.Fatalf("%s probe %+v, want pure cgroup v2 at /sys/fs/cgroup with pids, memory, cpu and no problem", testenv.Shape(), info)
		}
	}
}

// killTreeResult is what the killtree scenario saw.
type killTreeResult struct {
	Pids     []int
	SubPid   int         // a process in a child cgroup of the leaf
	Freezes  int         // inotify's IN_MODIFY events on the leaf's cgroup.freeze during Kill
	Thawed   bool        // cgroup.freeze reads 0 after Kill
	Sessions map[int]int // pid -> session ID
	Leaf     string
	Parent   string
	Known    Known
	Files    Known // the Stats files that existed in the leaf
}

// The spec's "setsid + double fork + sleep" case: every process started in
// a leaf, including one in a new session whose parent exited, is killed by
// the leaf's Kill, and nothing is left.
func TestKillTree(t *testing.T) {
	for _, mode := range []string{"cgroup.kill", "freeze"} {
		t.Run(mode, func(t *testing.T) {
			var r killTreeResult
			runChild(t, childOpts{lacking: noCgroup2, cgroup: childCgroup(t)}, &r, "killtree", mode)
			if len(r.Pids) < 3 {
				t.Fatalf("only %d processes were seen in the leaf: %v", len(r.Pids), r.Pids)
			}
			sessions := map[int]bool{}
			for _, s := range r.Sessions {
				sessions[s] = true
			}
			if len(sessions) < 2 {
				t.Errorf("no process in a second session (setsid did not take): %v", r.Sessions)
			}
			for _, pid := range append(r.Pids, r.SubPid) {
				if err := gone(pid); err != nil {
					t.Error(err)
				}
			}
			// The fallback freezes the tree before it signals anything,
			// so nothing in it can fork past the kill, and thaws it after.
			// inotify merges the two writes into one event when neither
			// was read in between; the file ends at 0.
			if mode == "freeze" && (r.Freezes < 1 || !r.Thawed) {
				t.Errorf("Kill without cgroup.kill: %d writes to cgroup.freeze seen (thawed at the end: %v), want the tree frozen and thawed", r.Freezes, r.Thawed)
			}
			for _, dir := range []string{r.Leaf, r.Parent} {
				if exists(dir) {
					t.Errorf("%s still exists", dir)
				}
			}
			if r.Known != r.Files {
				t.Errorf("Stats.Known = %b, but the files present say %b", r.Known, r.Files)
			}
			if r.Known&KnownCPU == 0 {
				t.Error("cpu.stat was not read")
			}
		})
	}
}

func scenarioKillTree(args []string) (any, error) {
	if err := SetChildSubreaper(); err != nil {
		return nil, err
	}
	m, err := openOrMissing()
	if err != nil {
		return nil, err
	}
	defer m.Close()
	if len(args) > 0 && args[0] == "freeze" {
		m.freezeKill = true
	}
	leaf, err := m.NewLeaf("killtree", Limits{})
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("/bin/sh", "-c", `sleep 1000 & setsid sh -c "sleep 1000 &" & sleep 1000`)
	if err := startIn(leaf, cmd); err != nil {
		return nil, err
	}
	// A child cgroup of the leaf, with a process of its own: a program
	// may make one where it can write cgroupfs. Kill must reach it too.
	sub := filepath.Join(leaf.Path(), "sub")
	if err := unix.Mkdir(sub, 0o755); err != nil {
		return nil, fmt.Errorf("create a child cgroup of the leaf: %w", err)
	}
	subFD, err := unix.Open(sub, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	subCmd := exec.Command("sleep", "1000")
	subCmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: subFD}
	err = subCmd.Start()
	unix.Close(subFD)
	if err != nil {
		return nil, fmt.Errorf("start a process in %s: %w", sub, err)
	}
	r := killTreeResult{Leaf: leaf.Path(), Parent: m.Parent(), Sessions: map[int]int{}, SubPid: subCmd.Process.Pid}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// Wait for the three sleeps; each must sit in the leaf.
	want := "0::" + cgPath(m, leaf.Path()) + "\n"
	err = waitFor(ctx, "three sleeps in the leaf", func() (bool, error) {
		pids, err := treePids(leaf.Path())
		if err != nil {
			return false, err
		}
		// The shell that ran setsid exits by itself; count the sleeps
		// and the top shell (dash may have become the last sleep).
		r.Pids = []int{cmd.Process.Pid}
		for _, pid := range pids {
			comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
			if strings.TrimSpace(string(comm)) == "sleep" && pid != cmd.Process.Pid && pid != r.SubPid {
				r.Pids = append(r.Pids, pid)
			}
		}
		return len(r.Pids) >= 4 || len(r.Pids) == 3 && sleepComm(cmd.Process.Pid), nil
	})
	if err != nil {
		return nil, err
	}
	for _, pid := range r.Pids {
		cg, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
		if err != nil {
			return nil, err
		}
		if !strings.HasSuffix(string(cg), want) {
			return nil, fmt.Errorf("process %d is in %q, want %q", pid, cg, want)
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return nil, err
		}
		f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		r.Sessions[pid], _ = strconv.Atoi(f[3]) // field 6: session
	}
	st, err := leaf.Stats()
	if err != nil {
		return nil, err
	}
	r.Known = st.Known
	for file, k := range map[string]Known{"memory.peak": KnownMemoryPeak, "pids.peak": KnownPidsPeak, "cpu.stat": KnownCPU, "memory.events": KnownOOMKills} {
		if exists(filepath.Join(leaf.Path(), file)) {
			r.Files |= k
		}
	}
	cg, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", r.SubPid))
	if err != nil {
		return nil, err
	}
	if want := "0::" + cgPath(m, sub) + "\n"; !strings.HasSuffix(string(cg), want) {
		return nil, fmt.Errorf("process %d is in %q, want %q", r.SubPid, cg, want)
	}
	// Every write to the leaf's cgroup.freeze during Kill, as the kernel
	// reports it.
	freeze := filepath.Join(leaf.Path(), "cgroup.freeze")
	ifd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, err
	}
	defer unix.Close(ifd)
	if _, err := unix.InotifyAddWatch(ifd, freeze, unix.IN_MODIFY); err != nil {
		return nil, fmt.Errorf("watch %s (Linux 5.2+ has it in every cgroup but the root): %w", freeze, err)
	}
	if err := leaf.Kill(); err != nil {
		return nil, err
	}
	buf := make([]byte, 4096)
	for {
		n, err := unix.Read(ifd, buf)
		if err == unix.EAGAIN || n <= 0 {
			break
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			if ev.Mask&unix.IN_MODIFY != 0 {
				r.Freezes++
			}
			off += unix.SizeofInotifyEvent + int(ev.Len)
		}
	}
	if b, err := os.ReadFile(freeze); err == nil && strings.TrimSpace(string(b)) == "0" {
		r.Thawed = true
	}
	// The whole tree empties, the child cgroup's process included.
	wctx, wcancel := context.WithTimeout(ctx, 5*time.Second)
	err = leaf.WaitEmpty(wctx)
	wcancel()
	if err != nil {
		_ = subCmd.Process.Kill()
		_ = subCmd.Wait()
		return nil, fmt.Errorf("after Kill: %w (the process in the child cgroup %s is alive: %v)", err, sub, gone(r.SubPid) != nil)
	}
	if err := cmd.Wait(); err == nil {
		return nil, fmt.Errorf("the shell exited cleanly; it should have been killed")
	}
	if err := subCmd.Wait(); err == nil {
		return nil, fmt.Errorf("the process in the child cgroup exited cleanly; it should have been killed")
	}
	if err := reapAll(5 * time.Second); err != nil {
		return nil, err
	}
	for _, pid := range r.Pids {
		if err := gone(pid); err != nil {
			return nil, err
		}
	}
	if err := leaf.Close(); err != nil {
		return nil, err
	}
	if leaf.FD() != -1 {
		return nil, fmt.Errorf("FD after Close is %d, want -1", leaf.FD())
	}
	if err := leaf.Close(); err != nil {
		return nil, fmt.Errorf("second Close: %w", err)
	}
	if err := m.Close(); err != nil {
		return nil, err
	}
	return r, nil
}

func sleepComm(pid int) bool {
	comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	return strings.TrimSpace(string(comm)) == "sleep"
}

// cgPath is dir as it appears in /proc/<pid>/cgroup.
func cgPath(m *Manager, dir string) string {
	rel, _ := within(dir, m.loc.mount)
	return filepath.Join(m.loc.mountRoot, rel)
}

type manyResult struct {
	Leaves    int
	FDsBefore int
	FDsAfter  int
	Left      []string
	Parent    string
}

// 200 leaves one after the other, each running a process, leave no
// directory and no descriptor behind.
func TestManyLeaves(t *testing.T) {
	var r manyResult
	runChild(t, childOpts{lacking: noCgroup2, cgroup: childCgroup(t)}, &r, "many", "200")
	if r.Leaves != 200 {
		t.Fatalf("ran %d leaves", r.Leaves)
	}
	if r.FDsAfter != r.FDsBefore {
		t.Errorf("open descriptors went from %d to %d", r.FDsBefore, r.FDsAfter)
	}
	if len(r.Left) != 0 {
		t.Errorf("left in the parent: %q", r.Left)
	}
	if exists(r.Parent) {
		t.Errorf("parent %s still exists", r.Parent)
	}
}

func countFDs() (int, error) {
	ents, err := os.ReadDir("/proc/self/fd")
	return len(ents), err
}

func scenarioMany(args []string) (any, error) {
	n, err := strconv.Atoi(args[0])
	if err != nil {
		return nil, err
	}
	m, err := openOrMissing()
	if err != nil {
		return nil, err
	}
	defer m.Close()
	one := func(i int) error {
		leaf, err := m.NewLeaf(fmt.Sprintf("seq-%d", i), Limits{})
		if err != nil {
			return err
		}
		cmd := exec.Command("/bin/true")
		if err := startIn(leaf, cmd); err != nil {
			leaf.Close()
			return err
		}
		if err := cmd.Wait(); err != nil {
			leaf.Close()
			return fmt.Errorf("/bin/true in %s: %w", leaf.Path(), err)
		}
		if _, err := leaf.Stats(); err != nil {
			leaf.Close()
			return err
		}
		return leaf.Close()
	}
	// One leaf first, so that lazily opened runtime descriptors exist
	// before counting.
	if err := one(-1); err != nil {
		return nil, err
	}
	r := manyResult{Parent: m.Parent()}
	if r.FDsBefore, err = countFDs(); err != nil {
		return nil, err
	}
	for i := range n {
		if err := one(i); err != nil {
			return nil, err
		}
		r.Leaves++
	}
	if r.FDsAfter, err = countFDs(); err != nil {
		return nil, err
	}
	subs, err := subdirs(m.Parent())
	if err != nil {
		return nil, err
	}
	for _, s := range subs {
		if s != selfLeaf {
			r.Left = append(r.Left, s)
		}
	}
	if err := m.Close(); err != nil {
		return nil, err
	}
	return r, nil
}

type sweepResult struct {
	Victim  int
	Sleeper int
	Parent  string
	Removed []string
	// The live harness beside the dead one: its parent and its sleeper
	// must survive the sweep.
	Live, LiveSleeper int
	LiveParent        string
}

type victimReport struct {
	Parent  string
	Leaf    string
	Sleeper int
}

// A harness SIGKILLed with a process running in its leaf leaves the leaf
// and the process behind; the next harness's Sweep kills the process and
// removes the directories. A harness still alive beside it keeps its
// parent, its leaf and its process (issue 18, item 11).
func TestSweep(t *testing.T) {
	var r sweepResult
	runChild(t, childOpts{lacking: noCgroup2, cgroup: childCgroup(t)}, &r, "sweeper")
	recordPid(r.Victim)
	recordPid(r.Live)
	t.Logf("dead %s, live %s; removed %q", r.Parent, r.LiveParent, r.Removed)
	if !slices.Contains(r.Removed, r.Parent) {
		t.Errorf("Sweep removed %q, not the dead harness's parent %s", r.Removed, r.Parent)
	}
	if slices.Contains(r.Removed, r.LiveParent) {
		t.Errorf("Sweep removed the live harness's parent %s", r.LiveParent)
	}
	if exists(r.Parent) {
		t.Errorf("%s still exists", r.Parent)
	}
	if err := gone(r.Sleeper); err != nil {
		t.Error(err)
	}
}

// startVictim starts a victim harness and reads its report.
func startVictim() (*exec.Cmd, victimReport, error) {
	var rep victimReport
	victim := reexec.Command(childEntry, "victim")
	victim.Stderr = os.Stderr
	out, err := victim.StdoutPipe()
	if err != nil {
		return nil, rep, err
	}
	if err := victim.Start(); err != nil {
		return nil, rep, err
	}
	line, err := bufio.NewReader(out).ReadBytes('\n')
	if err != nil {
		victim.Process.Kill()
		victim.Wait()
		return nil, rep, fmt.Errorf("victim said nothing: %w", err)
	}
	if err := json.Unmarshal(line, &rep); err != nil {
		victim.Process.Kill()
		victim.Wait()
		if strings.HasPrefix(string(line), "missing:") {
			return nil, rep, missingError{strings.TrimPrefix(strings.TrimSpace(string(line)), "missing:")}
		}
		return nil, rep, fmt.Errorf("victim report %q: %w", line, err)
	}
	return victim, rep, nil
}

// scenarioSweeper starts two victim harnesses (each opens a Manager and
// runs sleep in a leaf), SIGKILLs one, then opens its own Manager and
// sweeps; then it checks the live one and ends it.
func scenarioSweeper([]string) (any, error) {
	if err := SetChildSubreaper(); err != nil {
		return nil, err
	}
	victim, rep, err := startVictim()
	if err != nil {
		return nil, err
	}
	live, liveRep, err := startVictim()
	if err != nil {
		victim.Process.Kill()
		victim.Wait()
		return nil, err
	}
	r := sweepResult{Victim: victim.Process.Pid, Sleeper: rep.Sleeper, Parent: rep.Parent,
		Live: live.Process.Pid, LiveSleeper: liveRep.Sleeper, LiveParent: liveRep.Parent}
	endLive := func() {
		live.Process.Kill()
		live.Wait()
	}
	if err := victim.Process.Kill(); err != nil {
		endLive()
		return nil, err
	}
	victim.Wait()
	// The harness is dead; its sleeper lives on in the stale leaf.
	if !exists(rep.Leaf) {
		endLive()
		return nil, fmt.Errorf("stale leaf %s vanished by itself", rep.Leaf)
	}
	if unix.Kill(rep.Sleeper, 0) != nil {
		endLive()
		return nil, fmt.Errorf("sleeper %d died with its harness; the test proves nothing", rep.Sleeper)
	}
	m, err := openOrMissing()
	if err != nil {
		endLive()
		return nil, err
	}
	defer m.Close()
	r.Removed, err = m.Sweep()
	if err != nil {
		endLive()
		return nil, err
	}
	if !exists(liveRep.Leaf) || unix.Kill(liveRep.Sleeper, 0) != nil {
		endLive()
		return nil, fmt.Errorf("the live harness's leaf %s or its sleeper %d did not survive the sweep", liveRep.Leaf, liveRep.Sleeper)
	}
	// Now end the live one too: the next sweep takes what it left.
	endLive()
	more, err := m.Sweep()
	if err != nil {
		return nil, err
	}
	if !slices.Contains(more, liveRep.Parent) {
		return nil, fmt.Errorf("after its harness died, %s was not swept (removed %q)", liveRep.Parent, more)
	}
	if err := reapAll(5 * time.Second); err != nil {
		return nil, err
	}
	for _, p := range []int{rep.Sleeper, liveRep.Sleeper} {
		if err := gone(p); err != nil {
			return nil, err
		}
	}
	return r, m.Close()
}

// scenarioVictim opens a Manager, starts sleep in a leaf, reports, and
// waits to be killed.
func scenarioVictim([]string) (any, error) {
	m, err := Open(Options{})
	if errors.Is(err, ErrNotSupported) {
		fmt.Printf("missing:%v\n", err)
		time.Sleep(time.Hour)
	}
	if err != nil {
		return nil, err
	}
	leaf, err := m.NewLeaf("victim", Limits{})
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("/bin/sleep", "1000")
	if err := startIn(leaf, cmd); err != nil {
		return nil, err
	}
	b, _ := json.Marshal(victimReport{Parent: m.Parent(), Leaf: leaf.Path(), Sleeper: cmd.Process.Pid})
	fmt.Printf("%s\n", b)
	time.Sleep(time.Hour)
	return nil, errors.New("victim was not killed")
}

type refuseResult struct {
	Simulated []string // controllers removed from the Manager to exercise the refusal
	Refused   []string // errors seen, one per case
}

// A limit whose controller leaves do not get is refused before anything
// is created; bad names and bad limits are refused too.
func TestRefusals(t *testing.T) {
	var r refuseResult
	runChild(t, childOpts{lacking: noCgroup2, cgroup: childCgroup(t)}, &r, "refuse")
	// 3 limits, 8 names, a second Open.
	if len(r.Refused) != 12 {
		t.Errorf("%d refusals reported, want 12: %q", len(r.Refused), r.Refused)
	}
}

func scenarioRefuse([]string) (any, error) {
	m, err := openOrMissing()
	if err != nil {
		return nil, err
	}
	defer m.Close()
	var r refuseResult
	// Where a controller is available (the VM shapes), take it away from
	// this Manager so that the refusal path runs everywhere.
	for _, c := range managed {
		if slices.Contains(m.controllers, c) {
			r.Simulated = append(r.Simulated, c)
			m.controllers = slices.DeleteFunc(m.controllers, func(s string) bool { return s == c })
			m.missing = append(m.missing, c+" controller: taken away by the test")
		}
	}
	for _, tc := range []struct {
		l          Limits
		ctl, limit string
	}{
		{Limits{PidsMax: 10}, "pids", "PidsMax"},
		{Limits{MemoryMax: 1 << 20}, "memory", "MemoryMax"},
		{Limits{CPUQuota: 10 * time.Millisecond}, "cpu", "CPUQuota"},
	} {
		leaf, err := m.NewLeaf("refused", tc.l)
		if err == nil {
			leaf.Close()
			return nil, fmt.Errorf("%+v accepted without the %s controller", tc.l, tc.ctl)
		}
		var ue *UnavailableError
		if !errors.As(err, &ue) || ue.Controller != tc.ctl || ue.Limit != tc.limit || !errors.Is(err, ErrNotSupported) {
			return nil, fmt.Errorf("%+v: error %v (%T), want an UnavailableError for %s", tc.l, err, err, tc.ctl)
		}
		if !strings.Contains(err.Error(), tc.ctl+" controller") || ue.Reason == "" {
			return nil, fmt.Errorf("error %q does not say which controller and why", err)
		}
		if exists(filepath.Join(m.Parent(), "refused")) {
			return nil, fmt.Errorf("a refused leaf was created")
		}
		r.Refused = append(r.Refused, err.Error())
	}
	for _, name := range []string{"", ".", "..", "_harness", "a/b", "../escape", "x y", strings.Repeat("n", 201)} {
		if leaf, err := m.NewLeaf(name, Limits{}); err == nil {
			leaf.Close()
			return nil, fmt.Errorf("leaf name %q accepted", name)
		} else {
			r.Refused = append(r.Refused, err.Error())
		}
	}
	if _, err := m.NewLeaf("neg", Limits{PidsMax: -1}); err == nil || exists(filepath.Join(m.Parent(), "neg")) {
		return nil, fmt.Errorf("negative PidsMax: %v", err)
	}
	// The same name twice: the second is refused, the first stays usable.
	a, err := m.NewLeaf("twice", Limits{})
	if err != nil {
		return nil, err
	}
	if b, err := m.NewLeaf("twice", Limits{}); err == nil {
		b.Close()
		return nil, errors.New("a second leaf named twice was created")
	} else if !errors.Is(err, unix.EEXIST) {
		return nil, fmt.Errorf("second leaf named twice: %v, want EEXIST", err)
	}
	if err := a.Close(); err != nil {
		return nil, err
	}
	// One Open per process at a time.
	if m2, err := Open(Options{}); err == nil {
		m2.Close()
		return nil, errors.New("a second Manager opened in the same process")
	} else {
		r.Refused = append(r.Refused, err.Error())
	}
	if err := m.Close(); err != nil {
		return nil, err
	}
	if _, err := m.NewLeaf("late", Limits{}); err == nil {
		return nil, errors.New("NewLeaf after Close succeeded")
	}
	if err := m.Close(); err != nil {
		return nil, fmt.Errorf("second Close: %w", err)
	}
	// Closed, so a new Open works again.
	m3, err := Open(Options{})
	if err != nil {
		return nil, fmt.Errorf("Open after Close: %w", err)
	}
	return r, m3.Close()
}

type attachResult struct {
	Parent             string
	Controllers        []string
	AttachControllers  []string
	Missing            []string
	AttachMissing      []string
	BrokerLeaf         string
	BrokerSleeper      int
	BrokerPid          int
	ParentAfterAttach  bool // the parent survived the attached Manager's Close
	AttachedLeafClosed bool
}

// A broker process attaches to the parent Open made, sees the same
// controllers and missing lines, and makes leaves; the attached Manager's
// Close leaves the parent; the opening Manager's Close kills and removes
// what the broker left.
func TestAttach(t *testing.T) {
	var r attachResult
	runChild(t, childOpts{lacking: noCgroup2, cgroup: childCgroup(t)}, &r, "attach")
	recordPid(r.BrokerPid)
	if !slices.Equal(r.Controllers, r.AttachControllers) || !slices.Equal(r.Missing, r.AttachMissing) {
		t.Errorf("Open: %q / %q; Attach: %q / %q", r.Controllers, r.Missing, r.AttachControllers, r.AttachMissing)
	}
	if !r.ParentAfterAttach || !r.AttachedLeafClosed {
		t.Errorf("attached Manager's Close: parent kept %v, its leaf removed %v", r.ParentAfterAttach, r.AttachedLeafClosed)
	}
	if exists(r.Parent) || exists(r.BrokerLeaf) {
		t.Errorf("left behind: parent %v, broker leaf %v", exists(r.Parent), exists(r.BrokerLeaf))
	}
	if err := gone(r.BrokerSleeper); err != nil {
		t.Error(err)
	}
}

func scenarioAttach([]string) (any, error) {
	if err := SetChildSubreaper(); err != nil {
		return nil, err
	}
	m, err := openOrMissing()
	if err != nil {
		return nil, err
	}
	defer m.Close()
	r := attachResult{Parent: m.Parent(), Controllers: m.Controllers(), Missing: m.Missing()}
	// In this process first.
	a, err := Attach(m.Parent())
	if err != nil {
		return nil, err
	}
	leaf, err := a.NewLeaf("attached", Limits{})
	if err != nil {
		return nil, err
	}
	if err := a.Close(); err != nil {
		return nil, err
	}
	r.ParentAfterAttach = exists(m.Parent())
	r.AttachedLeafClosed = !exists(leaf.Path())
	// Then in a broker process, which exits leaving a leaf with a sleeper.
	broker := reexec.Command(childEntry, "broker", m.Parent())
	broker.Stderr = os.Stderr
	out, err := broker.Output()
	if err != nil {
		return nil, fmt.Errorf("broker: %w", err)
	}
	r.BrokerPid = broker.Process.Pid
	var br brokerResult
	if err := json.Unmarshal(out, &br); err != nil {
		return nil, fmt.Errorf("broker result %q: %w", out, err)
	}
	r.AttachControllers, r.AttachMissing = br.Controllers, br.Missing
	r.BrokerLeaf, r.BrokerSleeper = br.Leaf, br.Sleeper
	if unix.Kill(br.Sleeper, 0) != nil {
		return nil, fmt.Errorf("broker's sleeper %d is not running", br.Sleeper)
	}
	if err := m.Close(); err != nil {
		return nil, err
	}
	if err := reapAll(5 * time.Second); err != nil {
		return nil, err
	}
	return r, nil
}

type brokerResult struct {
	Controllers []string
	Missing     []string
	Leaf        string
	Sleeper     int
}

func scenarioBroker(args []string) (any, error) {
	a, err := Attach(args[0])
	if err != nil {
		return nil, err
	}
	leaf, err := a.NewLeaf("from-broker", Limits{})
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("/bin/sleep", "1000")
	if err := startIn(leaf, cmd); err != nil {
		return nil, err
	}
	// Exit without closing: the opening Manager must clean up.
	return brokerResult{Controllers: a.Controllers(), Missing: a.Missing(), Leaf: leaf.Path(), Sleeper: cmd.Process.Pid}, nil
}

// Attach refuses what is not a harness parent, with a reason.
func TestAttachRefuses(t *testing.T) {
	info := ProbeHost()
	testenv.Require(t, info.Mount != "", "cgroup2 mount ("+info.Problem+")", noCgroup2...)
	loc, err := locateSelf("")
	if err != nil {
		t.Fatal(err)
	}
	odd := filepath.Join(loc.dir, fmt.Sprintf("b10xtest-%d-notaparent", os.Getpid()))
	if err := unix.Mkdir(odd, 0o755); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := rmdirRetry(odd); err != nil {
			t.Error(err)
		}
	}()
	file := filepath.Join(t.TempDir(), "b10x-1-2")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{
		"b10x-1-2":                      "not an absolute path",
		t.TempDir():                     "not on a cgroup2 filesystem",
		file:                            "not on a cgroup2 filesystem",
		info.Mount:                      "root of its hierarchy",
		filepath.Join(info.Mount, "nx"): "no such file",
		odd:                             "not named like a harness parent",
	} {
		m, err := Attach(path)
		if err == nil {
			m.Close()
			t.Errorf("Attach(%q) succeeded", path)
			continue
		}
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Attach(%q): %v, want it to say %q", path, err, want)
		}
	}
}

type deadlineResult struct {
	Waited  time.Duration
	Sleeper int
}

// WaitEmpty gives up when its context ends, saying so; Close then kills.
func TestWaitEmptyDeadline(t *testing.T) {
	var r deadlineResult
	runChild(t, childOpts{lacking: noCgroup2, cgroup: childCgroup(t)}, &r, "deadline")
	if r.Waited < 200*time.Millisecond || r.Waited > 5*time.Second {
		t.Errorf("WaitEmpty returned after %v with a 200ms deadline", r.Waited)
	}
	if err := gone(r.Sleeper); err != nil {
		t.Error(err)
	}
}

func scenarioDeadline([]string) (any, error) {
	if err := SetChildSubreaper(); err != nil {
		return nil, err
	}
	m, err := openOrMissing()
	if err != nil {
		return nil, err
	}
	defer m.Close()
	leaf, err := m.NewLeaf("deadline", Limits{})
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("/bin/sleep", "1000")
	if err := startIn(leaf, cmd); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	err = leaf.WaitEmpty(ctx)
	r := deadlineResult{Waited: time.Since(start), Sleeper: cmd.Process.Pid}
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), leaf.Path()) {
		return nil, fmt.Errorf("WaitEmpty on a running leaf: %v, want a deadline error naming the leaf", err)
	}
	if err := leaf.Close(); err != nil {
		return nil, err
	}
	cmd.Wait()
	if err := reapAll(5 * time.Second); err != nil {
		return nil, err
	}
	return r, m.Close()
}

type subreaperResult struct {
	Self, Orphan, OrphanParent int
}

// With the subreaper attribute, an orphaned grandchild is re-parented to
// this process rather than to init.
func TestSetChildSubreaper(t *testing.T) {
	var r subreaperResult
	runChild(t, childOpts{}, &r, "subreaper")
	if r.OrphanParent != r.Self {
		t.Errorf("orphan %d has parent %d, want the subreaper %d", r.Orphan, r.OrphanParent, r.Self)
	}
	if err := gone(r.Orphan); err != nil {
		t.Error(err)
	}
}

func scenarioSubreaper([]string) (any, error) {
	if err := SetChildSubreaper(); err != nil {
		return nil, err
	}
	out, err := exec.Command("/bin/sh", "-c", "sleep 1000 >/dev/null 2>&1 & echo $!").Output()
	if err != nil {
		return nil, err
	}
	r := subreaperResult{Self: os.Getpid()}
	if r.Orphan, err = strconv.Atoi(strings.TrimSpace(string(out))); err != nil {
		return nil, err
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", r.Orphan))
	if err != nil {
		return nil, err
	}
	f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	r.OrphanParent, _ = strconv.Atoi(f[1]) // field 4: ppid
	if err := unix.Kill(r.Orphan, unix.SIGKILL); err != nil {
		return nil, err
	}
	if err := reapAll(5 * time.Second); err != nil {
		return nil, err
	}
	return r, nil
}
