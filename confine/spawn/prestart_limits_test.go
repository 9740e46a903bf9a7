package spawn

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/b10x/harness/cgroup"
	"github.com/b10x/harness/confine"
)

// TestWarmKeyCoversTheParentsPart: the key a pre-started sandbox is
// matched by holds what the parent does around the plan (the leaf's
// limits, whether there is a leaf, the user namespace, the program's host
// ids, the layers, the idmapped trees), so a call that differs in any of
// them does not take it; and it leaves out the call's own fields
// (program, argv, environment, directory), which the sandbox is handed.
// Only the limits can be seen for real where the leaves get controllers
// (TestPrestartedGetsItsOwnLimits, in the VM shapes); this checks the key
// itself, on every host.
func TestWarmKeyCoversTheParentsPart(t *testing.T) {
	d := newDirect(testOptions())
	ws := workspace(t)
	p, err := d.prepare(shSpec(t, ws, "true"))
	if err != nil {
		t.Fatal(err)
	}
	p.limits = cgroup.Limits{PidsMax: 64, MemoryMax: 64 << 20, CPUQuota: 50 * time.Millisecond}
	p.leafWant = true
	base := warmKey(p)
	for what, change := range map[string]func(q *prepared){
		"pids.max":        func(q *prepared) { q.limits.PidsMax = 16 },
		"memory.max":      func(q *prepared) { q.limits.MemoryMax = 16 << 20 },
		"cpu.max":         func(q *prepared) { q.limits.CPUQuota = 10 * time.Millisecond },
		"cpu period":      func(q *prepared) { q.limits.CPUPeriod = 10 * time.Millisecond },
		"no leaf":         func(q *prepared) { q.leafWant = false },
		"user namespace":  func(q *prepared) { q.useUser = !q.useUser },
		"host uid":        func(q *prepared) { q.hostUID++ },
		"host gid":        func(q *prepared) { q.hostGID++ },
		"layers":          func(q *prepared) { q.layers = append(q.layers[:len(q.layers):len(q.layers)], confine.LayerPidsLimit) },
		"idmapped trees":  func(q *prepared) { q.idmapped = append(q.idmapped, Pinned{Path: ws, Dev: 1, Ino: 2, Dir: true}) },
		"the plan itself": func(q *prepared) { pl := *q.plan; pl.Hostname = "other"; q.plan = &pl },
	} {
		q := *p
		change(&q)
		if warmKey(&q) == base {
			t.Errorf("a call with another %s matches a sandbox built without it", what)
		}
	}
	q := *p
	pl := *q.plan
	pl.Path, pl.ProgDev, pl.ProgIno, pl.Argv, pl.Env, pl.Dir = "/other", 1, 2, []string{"other"}, []string{"X=1"}, filepath.Join(ws, "sub")
	q.plan = &pl
	if warmKey(&q) != base {
		t.Error("a call with another program, argv, environment or directory does not match the sandbox built for its view")
	}
}

// TestPrestartedGetsItsOwnLimits: a call whose limits differ from those a
// pre-started sandbox was built with (pids.max 64 there, 16 asked) does
// not run in it: its program's leaf, read back from the host through
// /proc/PID/cgroup while it runs, has the call's own pids.max. A call
// with the limits the next sandbox was built for then does take it, with
// those limits. Only where the leaves get the pids controller (the VM
// shapes; a host whose cgroup v2 has it).
func TestPrestartedGetsItsOwnLimits(t *testing.T) {
	requireSpawn(t)
	if !inChildCgroup(t, true) {
		return
	}
	m := openCgroup(t, "pids")
	opts := testOptions()
	opts.Cgroup = m
	opts.Require.Layers = []string{confine.LayerCgroupLeaf, confine.LayerPidsLimit}
	d := newDirect(opts)
	d.pre = &prestarter{}
	t.Cleanup(d.closePrestart)
	ws := workspace(t)
	first := shSpec(t, ws, "true")
	first.Limits.PidsMax = 64
	if res, out, err := run(t, d, first); err != nil || res.ExitCode != 0 {
		t.Fatalf("first call: %v %+v\n%s", err, res, out)
	}
	w := waitWarm(t, d)
	if !w.said || w.l.leaf == nil {
		t.Fatalf("the sandbox pre-started behind the first call failed a step or has no leaf (said %v)", w.said)
	}
	if got := readTrim(t, filepath.Join(w.l.leaf.Path(), "pids.max")); got != "64" {
		t.Fatalf("the waiting sandbox's pids.max is %q, want the first call's 64: the test would prove nothing", got)
	}
	for i, c := range []struct {
		pidsMax    int64
		prestarted bool
	}{{16, false}, {16, true}} {
		if c.prestarted {
			waitWarm(t, d)
		}
		res, got := runReadingPidsMax(t, d, ws, c.pidsMax)
		t.Logf("call %d: pids.max %q, %+v", i, got, res)
		if got != fmt.Sprint(c.pidsMax) {
			t.Errorf("call %d asked for pids.max %d; its program's leaf has %q", i, c.pidsMax, got)
		}
		if res.Prestarted != c.prestarted {
			t.Errorf("call %d: Prestarted %v, want %v", i, res.Prestarted, c.prestarted)
		}
	}
	if n := d.pre.taken.Load(); n != 1 {
		t.Errorf("%d calls took a pre-started sandbox, want 1 (the last)", n)
	}
}

// runReadingPidsMax runs a call with pids.max pidsMax whose program waits
// on its standard input; while it waits, it reads the pids.max of the
// program's cgroup from the host, then lets it end.
func runReadingPidsMax(t *testing.T, d *direct, ws string, pidsMax int64) (Result, string) {
	t.Helper()
	mount, _ := cgroup2Self(t)
	if mount == "" {
		t.Fatal("no cgroup2 mount, yet the pids controller is there")
	}
	uniq := uniqueSleep()
	s := shSpec(t, ws, "")
	s.Argv = []string{"sh", "-c", "read x; echo done", uniq}
	s.Limits.PidsMax = pidsMax
	s.Timeout = 2 * time.Minute
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	type ran struct {
		res Result
		err error
	}
	done := make(chan ran, 1)
	go func() {
		res, err := d.Run(context.Background(), s, Stdio{Stdin: inR, Stdout: outW})
		inR.Close()
		outW.Close()
		done <- ran{res, err}
	}()
	got := ""
	deadline := time.Now().Add(time.Minute)
	for got == "" && time.Now().Before(deadline) {
		for _, pid := range processesWith(uniq) {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
			if err != nil {
				continue
			}
			for _, l := range strings.Split(string(b), "\n") {
				if rel, ok := strings.CutPrefix(l, "0::"); ok {
					if v, err := os.ReadFile(filepath.Join(mount, rel, "pids.max")); err == nil {
						got = strings.TrimSpace(string(v))
					}
				}
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	inW.Close()
	out, _ := io.ReadAll(outR)
	outR.Close()
	r := <-done
	if r.err != nil || r.res.ExitCode != 0 || string(out) != "done\n" {
		t.Fatalf("call with pids.max %d: %v %+v %q", pidsMax, r.err, r.res, out)
	}
	if got == "" {
		t.Fatalf("call with pids.max %d: its program's cgroup was not found within a minute", pidsMax)
	}
	return r.res, got
}

func readTrim(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}
