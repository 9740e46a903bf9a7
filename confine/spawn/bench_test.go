package spawn

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"
)

// The spawn benchmarks time one confined call of /bin/true from a process
// that has already started (a session's run calls), against bubblewrap
// spawning the same program with every namespace, side by side:
//
//	go test -ldflags="$(make -s helper-ldflags)" ./confine/spawn -run '^$' -bench True -benchtime 40x
//
// The -ldflags stamp the helper image in (make builds it), so that
// BenchmarkRunTrue uses it as the harness does; BenchmarkRunTrueSelf
// re-executes the test binary instead.

// BenchmarkRunTrue spawns /bin/true end to end under every layer this host
// offers (without a cgroup), from this process, with the helper the harness
// uses (the embedded image when this binary has a usable one).
func BenchmarkRunTrue(b *testing.B) {
	requireSpawn(b)
	b.Log("helper: ", HelperSource())
	benchRun(b, NewDirect(testOptions()))
}

// BenchmarkRunTrueSelf is BenchmarkRunTrue with the test binary itself
// re-executed as the helper.
func BenchmarkRunTrueSelf(b *testing.B) {
	requireSpawn(b)
	d := newDirect(testOptions())
	d.helper = &helperExe{why: "benchmark: this binary re-executed"}
	benchRun(b, d)
}

// BenchmarkRunTrueBroker is BenchmarkRunTrue through a broker, the way a
// harness that restricts itself runs calls.
func BenchmarkRunTrueBroker(b *testing.B) {
	requireSpawn(b)
	br, err := StartBroker(BrokerOptions{Require: testOptions().Require})
	if err != nil {
		b.Fatal(err)
	}
	defer br.Close()
	benchRun(b, br)
}

// BenchmarkRunTruePrestarted is BenchmarkRunTrue in a session's rhythm:
// between two calls the model takes its turn, and the sandbox started
// behind the last call is ready when the next comes. The wait for it is
// outside the timer (b.StopTimer): what is timed is the call as the model
// sees it, from Run to its Result.
func BenchmarkRunTruePrestarted(b *testing.B) {
	requireSpawn(b)
	d := newDirect(testOptions())
	d.pre = &prestarter{}
	defer d.closePrestart()
	ws := workspace(b)
	s := Spec{Program: pin(b, lookPath(b, "true")), Argv: []string{"true"}, Dir: ws, Workspace: pin(b, ws)}
	if _, err := d.Run(context.Background(), s, Stdio{}); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		waitWarm(b, d)
		b.StartTimer()
		res, err := d.Run(context.Background(), s, Stdio{})
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("%v %+v", err, res)
		}
	}
	b.StopTimer()
	if n := d.pre.taken.Load(); n != int64(b.N) {
		b.Fatalf("%d of %d calls ran in a pre-started sandbox", n, b.N)
	}
}

// BenchmarkRunTrueBackToBack is BenchmarkRunTruePrestarted without the
// model's turn: each call comes as soon as the last returned, while the
// sandbox behind it is still being built.
func BenchmarkRunTrueBackToBack(b *testing.B) {
	requireSpawn(b)
	d := newDirect(testOptions())
	d.pre = &prestarter{}
	defer d.closePrestart()
	benchRun(b, d)
}

// BenchmarkRunTrueBurst is a model's turn with several run calls (or
// concurrent MCP calls): burstCalls calls of /bin/true issued at once,
// timed from their issue to the last one's Result (ns/op), with each
// call's own latency averaged (ms/call) and the slowest (max-ms). Between
// two bursts the model takes its turn (outside the timer): the pool is
// full again. pool=1 is the one sandbox of decision 0069, pool=4 the pool
// of 0092; bwrap is bubblewrap's one-shot, burstCalls at once, from this
// process.
func BenchmarkRunTrueBurst(b *testing.B) {
	requireSpawn(b)
	for _, name := range []string{"pool=1", "pool=4", "bwrap"} {
		b.Run(name, func(b *testing.B) {
			var call func() error
			var settle func()
			if name == "bwrap" {
				bwrap, err := exec.LookPath("bwrap")
				if err != nil {
					b.Fatal("bubblewrap is the reference here: apt-get install bubblewrap")
				}
				args := []string{"--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-all", "--die-with-parent", lookPath(b, "true")}
				call = func() error { return exec.Command(bwrap, args...).Run() }
				settle = func() {}
			} else {
				n := 1
				if name == "pool=4" {
					n = 4
				}
				d := newDirect(testOptions())
				d.pre = newPrestarter(n)
				defer d.closePrestart()
				ws := workspace(b)
				s := Spec{Program: pin(b, lookPath(b, "true")), Argv: []string{"true"}, Dir: ws, Workspace: pin(b, ws)}
				call = func() error {
					res, err := d.Run(context.Background(), s, Stdio{})
					if err == nil && res.ExitCode != 0 {
						err = fmt.Errorf("exit %d", res.ExitCode)
					}
					return err
				}
				settle = func() { waitPool(b, d, n) }
				if err := call(); err != nil {
					b.Fatal(err)
				}
			}
			var sum, slowest time.Duration
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				settle()
				b.StartTimer()
				lat, errs := make([]time.Duration, burstCalls), make([]error, burstCalls)
				start := time.Now()
				var wg sync.WaitGroup
				for i := range burstCalls {
					wg.Go(func() {
						errs[i] = call()
						lat[i] = time.Since(start)
					})
				}
				wg.Wait()
				for i := range burstCalls {
					if errs[i] != nil {
						b.Fatal(errs[i])
					}
					sum += lat[i]
				}
				slowest = max(slowest, slices.Max(lat))
			}
			b.StopTimer()
			b.ReportMetric(float64(sum.Microseconds())/1e3/float64(b.N*burstCalls), "ms/call")
			b.ReportMetric(float64(slowest.Microseconds())/1e3, "max-ms")
		})
	}
}

// burstCalls is how many calls BenchmarkRunTrueBurst issues at once: the
// pool's cap (MaxPrestartPool).
const burstCalls = MaxPrestartPool

// BenchmarkScanMasks is one scan of the host's /etc for the entries a
// child must not see: the largest part of planning a process's first call
// (later calls of a process reuse it under an inotify watch).
func BenchmarkScanMasks(b *testing.B) {
	for i := 0; i < b.N; i++ {
		if _, err := scanMasks(maskedRoot, -1); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBwrapTrue is the reference: bubblewrap (Debian's package) with
// every namespace, started from this process as a session would.
func BenchmarkBwrapTrue(b *testing.B) {
	bwrap, err := exec.LookPath("bwrap")
	if err != nil {
		b.Fatal("bubblewrap is the reference here: apt-get install bubblewrap")
	}
	args := []string{"--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-all", "--die-with-parent", lookPath(b, "true")}
	for i := 0; i < b.N; i++ {
		if out, err := exec.Command(bwrap, args...).CombinedOutput(); err != nil {
			b.Fatalf("bwrap: %v: %s", err, out)
		}
	}
}

func benchRun(b *testing.B, r Runner) {
	ws := workspace(b)
	s := Spec{Program: pin(b, lookPath(b, "true")), Argv: []string{"true"}, Dir: ws, Workspace: pin(b, ws)}
	if _, err := r.Run(context.Background(), s, Stdio{}); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res, err := r.Run(context.Background(), s, Stdio{})
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("%v %+v", err, res)
		}
	}
}

// BenchmarkRunTrueHeld is BenchmarkRunTrue with a workspace that holds a
// .git directory and ten files read-only (Spec.ReadOnly) in two
// directories, each anchored: the binds a run call with protected paths
// and a small write scope adds (docs/BENCHMARKS.md).
func BenchmarkRunTrueHeld(b *testing.B) {
	requireSpawn(b)
	ws := workspace(b)
	s := Spec{Program: pin(b, lookPath(b, "true")), Argv: []string{"true"}, Dir: ws, Workspace: pin(b, ws)}
	for _, rel := range []string{".git/config", "keys/k0.pem", "keys/k1.pem", "keys/k2.pem", "keys/k3.pem", "keys/k4.pem",
		"src/a/k5.pem", "src/a/k6.pem", "src/a/k7.pem", "src/a/k8.pem", "src/a/k9.pem"} {
		p := filepath.Join(ws, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			b.Fatal(err)
		}
		if rel != ".git/config" {
			s.ReadOnly = append(s.ReadOnly, p)
		}
	}
	s.ReadOnly = append(s.ReadOnly, filepath.Join(ws, ".git"))
	r := NewDirect(testOptions())
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res, err := r.Run(context.Background(), s, Stdio{})
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("%v %+v", err, res)
		}
	}
}
