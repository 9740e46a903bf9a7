package main

import (
	"context"
	"fmt"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/b10x/harness/vmtest/internal/protocol"
)

// The self-test boots one guest with the packages in vmtest/testdata/selftest,
// each built to end in a known way, and checks that vmtest judges each one
// correctly. A judge that never fails proves nothing; this shows, on every
// run, that a failing, all-skipped, leaking or hanging suite fails its shape.

// selftestPattern names the self-test packages.
const selftestPattern = "./vmtest/testdata/selftest/..."

// selftestHangTimeout is the hang package's -test.timeout; it hangs before
// its tests start, so only the guest's deadline (this plus the grace) ends it.
const (
	selftestHangTimeout = 3
	selftestGrace       = 2
)

func (m *machine) selftest(ctx context.Context, o options) (bool, error) {
	// The probe image decides KVM against TCG; boot it under TCG, which
	// always works, so a broken probe image cannot pass for "no KVM here".
	// It boots while the self-test image is built and booted.
	type probeResult struct {
		took time.Duration
		err  error
	}
	probed := make(chan probeResult, 1)
	go func() {
		took, err := probeBoot(ctx, m.vm, "tcg", m.probe, 4*time.Minute)
		probed <- probeResult{took, err}
	}()
	probeOK := func() bool {
		pr := <-probed
		if pr.err != nil {
			m.step("self-test: the KVM probe image does not boot under TCG: %v", pr.err)
			return false
		}
		m.step("self-test: the probe image boots under TCG in %.1fs", pr.took.Seconds())
		return true
	}

	pkgs, err := listPackages(m.modRoot, []string{selftestPattern}, false)
	if err != nil {
		<-probed
		return false, err
	}
	var names []string
	for i := range pkgs {
		names = append(names, pkgs[i].ImportPath)
		if path.Base(pkgs[i].ImportPath) == "hang" {
			pkgs[i].TimeoutSeconds = selftestHangTimeout
		}
	}
	cfg := protocol.Config{TimeoutSeconds: 120, GraceSeconds: selftestGrace, Env: []string{"VMTEST_SELFTEST=1"}}
	initrd, broken, err := m.image("selftest", pkgs, cfg)
	if err != nil {
		<-probed
		return false, err
	}
	if len(broken) > 0 {
		<-probed
		return false, fmt.Errorf("self-test packages do not build: %v", broken)
	}
	so := o
	so.quiet = true
	// One boot per kernel this invocation uses: the guest init's judging
	// (leaks, deadlines) runs on that kernel, so each kernel must show it
	// can fail a package. They boot o.parallel at a time.
	shapes := []string{protocol.ShapeDebian61}
	if _, ok := m.kernels[series612.Name]; ok {
		shapes = append(shapes, protocol.ShapeDebian612)
	}
	if _, ok := m.kernels[series618.Name]; ok {
		shapes = append(shapes, protocol.ShapeDebian618)
	}
	results := make([]*shapeResult, len(shapes))
	sem := make(chan struct{}, o.parallel)
	var wg sync.WaitGroup
	for i, shape := range shapes {
		name := "selftest"
		if i > 0 {
			name += "-" + shape
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			results[i] = m.runShape(ctx, name, shape, initrd, names, so)
		}()
	}
	wg.Wait()
	var complaints []string
	for i, r := range results {
		for _, c := range checkSelftest(r) {
			complaints = append(complaints, shapes[i]+": "+c)
		}
	}
	for _, c := range complaints {
		m.step("self-test: %s", c)
	}
	if !probeOK() {
		return false, nil
	}
	if len(complaints) == 0 {
		for i, r := range results {
			m.step("self-test passed on %s (%s) in %.1fs: pass, fail, all-skip, leak and hang packages each judged as built (logs in %s)", shapes[i], m.kernelFor(shapes[i]).Pkg, r.Elapsed.Seconds(), m.vm.logsDir)
		}
	}
	return len(complaints) == 0, nil
}

// checkSelftest compares the self-test guest's result with what each package
// was built to do, and returns every difference.
func checkSelftest(r *shapeResult) []string {
	var bad []string
	complain := func(format string, args ...any) { bad = append(bad, fmt.Sprintf(format, args...)) }
	byName := map[string]*pkgReport{}
	for _, p := range r.Pkgs {
		byName[path.Base(p.Pkg)] = p
	}
	reasons := r.reasons(false)
	failedFor := func(pkg string) bool {
		return slices.ContainsFunc(reasons, func(s string) bool { return strings.Contains(s, "/selftest/"+pkg+": ") })
	}
	for _, want := range []string{"pass", "fail", "allskip", "leak", "hang"} {
		if byName[want] == nil {
			complain("package %s missing from the result", want)
			return bad
		}
	}
	if !slices.Contains(r.Problems, "the guest reported exit status 1") {
		complain("the guest's DONE line should say exit status 1; shape problems: %q", r.Problems)
	}

	p := byName["pass"]
	if len(p.problems(false)) > 0 || failedFor("pass") {
		complain("pass: judged failed: %q", p.problems(false))
	}
	if n := p.count("PASS"); n < 12 {
		complain("pass: %d tests passed, want at least 12", n)
	}
	if i := slices.IndexFunc(p.Tests, func(t testResult) bool { return t.Name == "TestSkipsOne" }); i < 0 || p.Tests[i].Status != "SKIP" || p.Tests[i].Reason != "selftest skip reason" {
		complain("pass: TestSkipsOne should be a SKIP with reason %q; tests: %+v", "selftest skip reason", p.Tests)
	}
	if !slices.Contains(p.Layers, "LAYERS: selftest-layer") {
		complain("pass: the LAYERS line was not collected: %q", p.Layers)
	}

	f := byName["fail"]
	if f.Exit != 1 || f.count("FAIL") != 1 || !failedFor("fail") {
		complain("fail: want exit 1, one FAIL and a failed verdict; got exit %d, %d FAIL, problems %q", f.Exit, f.count("FAIL"), f.problems(false))
	}

	a := byName["allskip"]
	if a.Exit != 0 || !a.allSkipped() || !failedFor("allskip") {
		complain("allskip: want exit 0 judged failed for skipping everything; got exit %d, tests %+v", a.Exit, a.Tests)
	}
	for name, reason := range map[string]string{"TestOne": "first skip", "TestTwo": "second skip", "TestTwo/sub": "nested skip"} {
		if !slices.Contains(a.Tests, testResult{Name: name, Status: "SKIP", Reason: reason}) {
			complain("allskip: want %s skipped with reason %q; tests: %+v", name, reason, a.Tests)
		}
	}

	l := byName["leak"]
	hasLeak := func(kind, what string) bool {
		return slices.ContainsFunc(l.Leaks, func(s string) bool { return strings.HasPrefix(s, kind) && strings.Contains(s, what) })
	}
	if l.Exit != 0 || !hasLeak("process:", "sleep 1000") || !hasLeak("cgroup:", "leaked") || !failedFor("leak") {
		complain("leak: want exit 0, a leaked sleep process and a leaked cgroup, judged failed; got exit %d, leaks %q", l.Exit, l.Leaks)
	}

	h := byName["hang"]
	timedOut := slices.ContainsFunc(r.Info, func(s string) bool {
		return strings.HasPrefix(s, "timeout ") && strings.Contains(s, "/selftest/hang")
	})
	if h.Exit != -1 || len(h.Tests) != 0 || !timedOut || !failedFor("hang") {
		complain("hang: want it killed at its deadline (exit -1, no tests, a timeout line), judged failed; got exit %d, %d tests, timeout line %v", h.Exit, len(h.Tests), timedOut)
	}
	return bad
}
