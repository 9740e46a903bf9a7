// Command vmtest runs the module's tests inside real Linux kernels under
// qemu, once per host shape, and exits 0 only when every shape passed.
//
//	go run ./vmtest -shapes all
//	go run ./vmtest -shapes debian-6.1,no-landlock -pkgs ./confine/...,./cgroup/... -run TestProbe
//
// It installs qemu-system-x86 and fetches Debian 12's kernel and
// busybox-static packages with apt when they are missing (nothing else is
// downloaded), builds static test binaries once, packs them with a guest
// init and busybox into an initramfs, and boots one VM per shape. See
// vmtest/README.md for the shapes and what a result means.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/b10x/harness/vmtest/internal/protocol"
)

type options struct {
	shapes       string
	pkgs         string
	run          string
	timeout      time.Duration
	shapeTimeout time.Duration
	parallel     int
	accel        string
	memMiB       int
	cpus         int
	cache        string
	kernelPkg    string
	quiet        bool
	keep         bool
	selftest     bool
	ldflags      string
	env          []string            // NAME=value for every test binary
	payload      []payload           // host trees packed into the initramfs (-payload)
	pkgsIn       map[string][]string // shape -> package patterns (-pkgs-in)
	runIn        map[string]string   // "shape:pattern" -> -test.run (-run-in)
}

func main() {
	os.Exit(realMain(os.Args[1:]))
}

func realMain(argv []string) int {
	var o options
	fs := flag.NewFlagSet("vmtest", flag.ContinueOnError)
	fs.StringVar(&o.shapes, "shapes", "all", "comma-separated shapes: all (every VM shape), host, "+strings.Join(protocol.VMShapes, ", "))
	fs.StringVar(&o.pkgs, "pkgs", "./...", "comma-separated package patterns; packages without tests and vmtest itself are left out")
	fs.StringVar(&o.run, "run", "", "regular expression passed to each test binary as -test.run")
	fs.DurationVar(&o.timeout, "timeout", 5*time.Minute, "per test binary, as go test's -timeout; the guest kills the binary "+protocol.DefaultGrace.String()+" later")
	fs.DurationVar(&o.shapeTimeout, "shape-timeout", 25*time.Minute, "hard deadline for one shape, boot included; qemu is killed after it")
	fs.IntVar(&o.parallel, "parallel", 2, "how many VM shapes boot at once")
	fs.StringVar(&o.accel, "accel", "auto", "auto (KVM only if a probe guest boots under it), kvm or tcg")
	fs.IntVar(&o.memMiB, "mem", 2048, "guest memory in MiB")
	fs.IntVar(&o.cpus, "smp", 2, "guest CPUs")
	fs.StringVar(&o.cache, "cache", "", "cache directory (default .cache/vmtest under the module root)")
	fs.StringVar(&o.kernelPkg, "kernel", "", "comma-separated kernel packages to boot, each for the shapes of its series, e.g. linux-image-6.1.0-57-amd64,linux-image-6.12.95+deb12-amd64,linux-image-6.18.15+deb13-amd64 (default: newest cached, else newest in apt)")
	fs.BoolVar(&o.quiet, "q", false, "do not stream the guests' consoles; print only the summary")
	fs.BoolVar(&o.selftest, "selftest", false, "first boot a guest with packages built to pass, fail, skip, leak and hang, and stop unless vmtest judges each correctly")
	fs.BoolVar(&o.keep, "keep", false, "keep the build directory (test binaries, initramfs) and print its path")
	fs.StringVar(&o.ldflags, "ldflags", "", "more linker flags for the test binaries (make passes the helper image's stamp, -X=...)")
	fs.Func("pkgs-in", "SHAPE=PATTERNS: in SHAPE run only the packages of -pkgs that the comma-separated PATTERNS match (repeatable; a shape not named runs them all)", func(v string) error {
		shape, pats, ok := strings.Cut(v, "=")
		if !ok || shape == "" || strings.TrimSpace(pats) == "" {
			return fmt.Errorf("want SHAPE=PATTERNS, got %q", v)
		}
		if !slices.Contains(protocol.KnownVMShapes(), shape) {
			return fmt.Errorf("%q is not a VM shape (%s)", shape, strings.Join(protocol.KnownVMShapes(), ", "))
		}
		if _, dup := o.pkgsIn[shape]; dup {
			return fmt.Errorf("shape %s given twice", shape)
		}
		if o.pkgsIn == nil {
			o.pkgsIn = map[string][]string{}
		}
		for _, p := range strings.Split(pats, ",") {
			if p = strings.TrimSpace(p); p != "" {
				o.pkgsIn[shape] = append(o.pkgsIn[shape], p)
			}
		}
		return nil
	})
	fs.Func("run-in", "SHAPE:PATTERN=REGEXP: in SHAPE, the packages PATTERN matches run only the tests REGEXP selects, as -test.run (repeatable; not with -run)", func(v string) error {
		key, re, ok := strings.Cut(v, "=")
		shape, pat, ok2 := strings.Cut(key, ":")
		if !ok || !ok2 || shape == "" || pat == "" || re == "" {
			return fmt.Errorf("want SHAPE:PATTERN=REGEXP, got %q", v)
		}
		if !slices.Contains(protocol.KnownVMShapes(), shape) {
			return fmt.Errorf("%q is not a VM shape (%s)", shape, strings.Join(protocol.KnownVMShapes(), ", "))
		}
		if _, err := regexp.Compile(re); err != nil {
			return fmt.Errorf("%s: %v", v, err)
		}
		if o.runIn == nil {
			o.runIn = map[string]string{}
		}
		if _, dup := o.runIn[key]; dup {
			return fmt.Errorf("%s given twice", key)
		}
		o.runIn[key] = re
		return nil
	})
	fs.Func("payload", "HOSTDIR=GUESTDIR: pack the host directory tree HOSTDIR into every guest at the absolute path GUESTDIR (repeatable; make k8stest carries the cluster's programs so)", func(v string) error {
		p, err := parsePayload(v)
		if err != nil {
			return err
		}
		o.payload = append(o.payload, p)
		return nil
	})
	fs.Func("env", "NAME=value for every test binary, in every shape (repeatable)", func(v string) error {
		if name, _, ok := strings.Cut(v, "="); !ok || name == "" {
			return fmt.Errorf("want NAME=value, got %q", v)
		}
		o.env = append(o.env, v)
		return nil
	})
	if err := fs.Parse(argv); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "vmtest: unexpected arguments %q\n", fs.Args())
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	code, err := runAll(ctx, o)
	if err != nil {
		fmt.Fprintf(os.Stderr, "vmtest: %v\n", err)
	}
	return code
}

func validate(o options) error {
	switch {
	case o.timeout <= 0:
		return fmt.Errorf("-timeout %s: must be positive", o.timeout)
	case o.shapeTimeout <= 0:
		return fmt.Errorf("-shape-timeout %s: must be positive", o.shapeTimeout)
	case o.parallel < 1:
		return fmt.Errorf("-parallel %d: must be at least 1", o.parallel)
	case o.memMiB < 256:
		return fmt.Errorf("-mem %d: at least 256 MiB", o.memMiB)
	case o.cpus < 1:
		return fmt.Errorf("-smp %d: must be at least 1", o.cpus)
	case o.accel != "auto" && o.accel != "kvm" && o.accel != "tcg":
		return fmt.Errorf("-accel %q: want auto, kvm or tcg", o.accel)
	}
	return nil
}

func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("not inside a Go module: run vmtest from the repository")
	}
	return filepath.Dir(mod), nil
}

// runAll returns the exit status: 0 all shapes passed, 1 a shape (or the
// self-test) failed, 2 vmtest could not run (bad flags, missing tools, build
// failure).
func runAll(ctx context.Context, o options) (int, error) {
	if err := validate(o); err != nil {
		return 2, err
	}
	shapes, err := parseShapes(o.shapes)
	if err != nil {
		return 2, err
	}
	modRoot, err := moduleRoot()
	if err != nil {
		return 2, err
	}
	if o.cache == "" {
		o.cache = filepath.Join(modRoot, ".cache", "vmtest")
	}
	out := &prefixWriter{w: os.Stdout}
	step := func(format string, args ...any) { out.Printf("vmtest: "+format+"\n", args...) }
	total := time.Now()

	pkgs, err := testPackages(modRoot, o, step)
	if err != nil {
		return 2, err
	}
	vmShapes, hostShape := splitHostShape(shapes)
	var results []*shapeResult
	if len(vmShapes) > 0 || o.selftest {
		m, err := prepare(ctx, o, modRoot, out, step, vmShapes)
		if err != nil {
			return 2, err
		}
		defer m.cleanup()
		rs, code, err := m.runVMShapes(ctx, o, pkgs, vmShapes)
		if code != 0 || err != nil {
			return code, err
		}
		results = append(results, rs...)
	}
	if hostShape {
		step("shape host: go test on this machine")
		results = append(results, runHost(ctx, modRoot, pkgs, o, out))
	}
	return summarize(out, step, results, o.run != "", total), nil
}

// testPackages lists the packages with tests that -pkgs names, checks
// -pkgs-in and -run-in against them, and says which run where.
func testPackages(modRoot string, o options, step func(string, ...any)) ([]testPkg, error) {
	var patterns []string
	for _, p := range strings.Split(o.pkgs, ",") {
		if p = strings.TrimSpace(p); p != "" {
			patterns = append(patterns, p)
		}
	}
	if len(patterns) == 0 {
		return nil, fmt.Errorf("-pkgs %q names no package", o.pkgs)
	}
	pkgs, err := listPackages(modRoot, patterns, true)
	if err != nil {
		return nil, err
	}
	if len(pkgs) == 0 {
		return nil, fmt.Errorf("no package with tests matches %s", strings.Join(patterns, " "))
	}
	var names []string
	for _, p := range pkgs {
		names = append(names, p.ImportPath)
	}
	step("%d packages with tests: %s", len(pkgs), strings.Join(names, " "))
	if err := restrictShapes(modRoot, pkgs, o.pkgsIn); err != nil {
		return nil, err
	}
	if len(o.runIn) > 0 && o.run != "" {
		return nil, errors.New("-run-in and -run: give one")
	}
	if err := runInShapes(modRoot, pkgs, o.runIn); err != nil {
		return nil, err
	}
	for _, shape := range slices.Sorted(maps.Keys(o.pkgsIn)) {
		var in []string
		for _, p := range pkgs {
			if p.runsIn(shape) {
				in = append(in, p.Rel)
			}
		}
		step("shape %s runs %d of them: %s", shape, len(in), strings.Join(in, " "))
	}
	return pkgs, nil
}

// splitHostShape separates the shapes booted in a VM from the host shape,
// which runs on this machine.
func splitHostShape(shapes []string) (vmShapes []string, host bool) {
	for _, s := range shapes {
		if s == protocol.ShapeHost {
			host = true
		} else {
			vmShapes = append(vmShapes, s)
		}
	}
	return vmShapes, host
}

// runVMShapes checks each shape's kernel command line, runs the self-test
// when asked (a failed one stops everything: status 1), then boots the
// shapes. A non-zero status or an error is runAll's to return.
func (m *machine) runVMShapes(ctx context.Context, o options, pkgs []testPkg, vmShapes []string) ([]*shapeResult, int, error) {
	for _, s := range vmShapes {
		if _, err := cmdline(s, m.kernelFor(s).DefaultLSM); err != nil {
			return nil, 2, err
		}
	}
	if o.selftest {
		ok, err := m.selftest(ctx, o)
		if err != nil {
			return nil, 2, err
		}
		if !ok {
			m.step("the self-test FAILED: vmtest cannot be trusted to judge the shapes; stopping")
			return nil, 1, nil
		}
	}
	if len(vmShapes) == 0 {
		return nil, 0, nil
	}
	rs, err := m.runShapes(ctx, o, pkgs, vmShapes)
	if err != nil {
		return nil, 2, err
	}
	return rs, 0, nil
}

// summarize prints each shape's summary and the wall times, and returns
// the exit status: 1 when a shape failed, else 0 (also when no shape was
// selected). runFilter is whether -run chose the tests.
func summarize(out *prefixWriter, step func(string, ...any), results []*shapeResult, runFilter bool, total time.Time) int {
	if len(results) == 0 {
		step("no shape selected; total %.1fs", time.Since(total).Seconds())
		return 0
	}
	failed := 0
	out.Printf("\n")
	for _, r := range results {
		out.Printf("%s", formatSummary(r, runFilter))
		if len(r.reasons(runFilter)) > 0 {
			failed++
		}
	}
	var times []string
	for _, r := range results {
		times = append(times, fmt.Sprintf("%s %.1fs", r.Shape, r.Elapsed.Seconds()))
	}
	step("wall time per shape: %s; total %.1fs", strings.Join(times, ", "), time.Since(total).Seconds())
	if failed > 0 {
		step("%d of %d shapes FAILED", failed, len(results))
		return 1
	}
	step("all %d shapes passed", len(results))
	return 0
}

// machine is what every boot of this invocation shares: tools, the guest
// init, the build directory and the accelerator decision.
type machine struct {
	vm      vm                // its kernel is the 6.1 one, which the self-test and probe boot
	kernels map[string]kernel // by series name
	modRoot string
	build   string
	initBin string
	probe   string // initramfs of the init alone, for probe boots
	busybox string
	applets []string
	step    func(string, ...any)
	keep    bool
	ldflags string    // more linker flags for the test binaries
	payload []payload // host trees for every guest
}

// kernelFor returns the kernel shape boots.
func (m *machine) kernelFor(shape string) kernel {
	if k, ok := m.kernels[shapeSeries(shape).Name]; ok {
		return k
	}
	return m.vm.kernel
}

func (m *machine) cleanup() {
	if !m.keep {
		_ = os.RemoveAll(m.build)
	}
}

// kernelPkgs sorts the -kernel flag's packages by series.
func kernelPkgs(flag string) (map[string]string, error) {
	out := map[string]string{}
	for _, p := range strings.Split(flag, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		sr, ok := seriesOf(p)
		if !ok {
			return nil, fmt.Errorf("-kernel %s: not a kernel package of a known series (linux-image-6.1.0-NN-amd64, linux-image-6.12.NN+deb12-amd64, linux-image-6.18.NN+deb13-amd64)", p)
		}
		if prev, dup := out[sr.Name]; dup {
			return nil, fmt.Errorf("-kernel names two %s kernels: %s and %s", sr.Name, prev, p)
		}
		out[sr.Name] = p
	}
	return out, nil
}

// prepare finds or fetches the tools (the 6.1 kernel always, for the
// self-test and the probe, and the kernel of every other series among
// shapes), builds the guest init and decides the accelerator.
func prepare(ctx context.Context, o options, modRoot string, out *prefixWriter, step func(string, ...any), shapes []string) (*machine, error) {
	t0 := time.Now()
	pins, err := kernelPkgs(o.kernelPkg)
	if err != nil {
		return nil, err
	}
	tl := &tooling{cache: o.cache, log: step}
	qemu, err := tl.qemu()
	if err != nil {
		return nil, err
	}
	kernels := map[string]kernel{}
	var kernelNames []string
	for _, sr := range kernelSeriesAll {
		needed := sr.Name == series61.Name
		for _, s := range shapes {
			needed = needed || shapeSeries(s).Name == sr.Name
		}
		if !needed {
			continue
		}
		k, err := tl.kernel(sr, pins[sr.Name])
		if err != nil {
			return nil, err
		}
		kernels[sr.Name] = k
		kernelNames = append(kernelNames, k.Pkg)
	}
	k := kernels[series61.Name]
	bb, err := tl.busybox()
	if err != nil {
		return nil, err
	}
	applets, err := busyboxApplets(bb)
	if err != nil {
		return nil, err
	}
	step("tools ready in %.1fs: %s, kernel %s, busybox with %d applets", time.Since(t0).Seconds(), qemu, strings.Join(kernelNames, " and "), len(applets))
	if err := os.MkdirAll(o.cache, 0o755); err != nil {
		return nil, fmt.Errorf("create cache %s: %w", o.cache, err)
	}
	pruneStaleBuilds(o.cache)
	build, err := os.MkdirTemp(o.cache, "build-")
	if err != nil {
		return nil, fmt.Errorf("create build directory: %w", err)
	}
	m := &machine{kernels: kernels, modRoot: modRoot, build: build, busybox: bb, applets: applets, step: step, keep: o.keep, ldflags: o.ldflags, payload: o.payload}
	if o.keep {
		step("keeping the build directory %s", build)
	}
	m.initBin = filepath.Join(build, "init")
	if err := buildGuestInit(modRoot, m.initBin); err != nil {
		m.cleanup()
		return nil, err
	}
	logs, err := newLogDir(filepath.Join(o.cache, "logs"))
	if err != nil {
		m.cleanup()
		return nil, err
	}
	step("console logs in %s", logs)
	m.vm = vm{qemu: qemu, kernel: k, memMiB: o.memMiB, cpus: o.cpus, out: out, logsDir: logs}
	m.probe = filepath.Join(build, "probe.cpio")
	if err := writeInitramfs(m.probe, initramfsSpec{Init: m.initBin}); err != nil {
		m.cleanup()
		return nil, err
	}
	switch o.accel {
	case "auto":
		t0 = time.Now()
		var why string
		m.vm.accel, why = detectAccel(ctx, m.vm, m.probe, kvmProbeDeadline)
		step("accelerator %s: %s (decided in %.1fs)", m.vm.accel, why, time.Since(t0).Seconds())
	default:
		m.vm.accel = o.accel
		step("accelerator %s (forced by -accel)", m.vm.accel)
	}
	return m, nil
}

// image builds the test binaries of pkgs and packs them into an initramfs
// named name.cpio in the build directory. It also returns the packages that
// do not compile, with the compiler's output; they are not in the image.
func (m *machine) image(name string, pkgs []testPkg, cfg protocol.Config) (string, map[string]string, error) {
	t0 := time.Now()
	broken, err := buildTests(m.modRoot, filepath.Join(m.build, name), m.ldflags, pkgs)
	if err != nil {
		return "", nil, err
	}
	m.step("built %d test binaries in %.1fs", len(pkgs)-len(broken), time.Since(t0).Seconds())
	for pkg, out := range broken {
		m.step("%s does not build; every shape fails it:\n%s", pkg, strings.TrimSpace(out))
	}
	pkgs = slices.DeleteFunc(slices.Clone(pkgs), func(p testPkg) bool { return p.Binary == "" })
	t0 = time.Now()
	for _, p := range pkgs {
		cfg.Packages = append(cfg.Packages, protocol.Package{ImportPath: p.ImportPath, Binary: "/tests/" + filepath.Base(p.Binary), Dir: p.Rel, TimeoutSeconds: p.TimeoutSeconds, Shapes: p.Shapes, RunIn: p.RunIn})
	}
	cfg.SrcRoot = "/src"
	files, skipped, err := moduleFiles(m.modRoot)
	if err != nil {
		return "", nil, err
	}
	for _, s := range skipped {
		m.step("not packed into the guest's module copy: %s", s)
	}
	initrd := filepath.Join(m.build, name+".cpio")
	modules := map[string][]string{}
	for _, k := range m.kernels {
		if len(k.Modules) > 0 {
			modules[strings.TrimPrefix(k.Pkg, "linux-image-")] = k.Modules
		}
	}
	if err := writeInitramfs(initrd, initramfsSpec{Init: m.initBin, Busybox: m.busybox, Applets: m.applets, Packages: pkgs, Config: cfg, ModRoot: m.modRoot, Files: files, Modules: modules, Payload: m.payload}); err != nil {
		return "", nil, err
	}
	st, err := os.Stat(initrd)
	if err != nil {
		return "", nil, fmt.Errorf("stat %s: %w", initrd, err)
	}
	m.step("initramfs %.1f MiB packed in %.1fs", float64(st.Size())/(1<<20), time.Since(t0).Seconds())
	return initrd, broken, nil
}

// runShapes builds the image once and boots every shape, o.parallel at a time.
func (m *machine) runShapes(ctx context.Context, o options, pkgs []testPkg, shapes []string) ([]*shapeResult, error) {
	cfg := protocol.Config{Run: o.run, TimeoutSeconds: int(o.timeout.Seconds()), Env: o.env}
	initrd, broken, err := m.image("tests", pkgs, cfg)
	if err != nil {
		return nil, err
	}
	expected := func(shape string) []string {
		var e []string
		for _, p := range pkgs {
			if _, bad := broken[p.ImportPath]; !bad && p.runsIn(shape) {
				e = append(e, p.ImportPath)
			}
		}
		return e
	}
	results := make([]*shapeResult, len(shapes))
	sem := make(chan struct{}, o.parallel)
	var wg sync.WaitGroup
	for i, s := range shapes {
		wg.Add(1)
		sem <- struct{}{} // here, not in the goroutine: shapes start in order
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			r := m.runShape(ctx, s, s, initrd, expected(s), o)
			for _, pkg := range slices.Sorted(maps.Keys(broken)) {
				r.Problems = append(r.Problems, pkg+": does not build (see above)")
			}
			results[i] = r
		}()
	}
	wg.Wait()
	return results, nil
}

// kvmProbeDeadline bounds the KVM probe. Under working KVM the probe guest
// powers off in well under a second; under TCG it takes about 2 s; on a
// host whose /dev/kvm hangs a stock kernel, this is the whole cost.
const kvmProbeDeadline = 4 * time.Second

// runShape boots one shape and judges its console. name labels the output
// and the log file.
func (m *machine) runShape(ctx context.Context, name, shape, initrd string, expected []string, o options) *shapeResult {
	if ctx.Err() != nil {
		return &shapeResult{Shape: shape, Problems: []string{"not booted: vmtest was interrupted"}}
	}
	c := newConsoleParser(expected)
	v := m.vm
	v.kernel = m.kernelFor(shape)
	v.cpus = shapeCPUs(shape, v.accel, v.cpus)
	v.memMiB = shapeMem(shape, v.memMiB)
	line, err := cmdline(shape, v.kernel.DefaultLSM)
	if err != nil {
		return &shapeResult{Shape: shape, Problems: []string{err.Error()}}
	}
	m.step("shape %s: booting %s (%s, %d CPUs, %d MiB): %s", name, v.kernel.Pkg, v.accel, v.cpus, v.memMiB, line)
	start := time.Now()
	err = v.boot(ctx, name, initrd, line, o.shapeTimeout, !o.quiet, c.Line)
	r := &shapeResult{Shape: shape, Elapsed: time.Since(start), Accel: m.vm.accel, Pkgs: c.Reports(), Info: c.Info}
	if err != nil {
		r.Problems = append(r.Problems, err.Error())
	}
	r.Problems = append(r.Problems, c.verdict()...)
	m.step("shape %s: finished in %.1fs", name, r.Elapsed.Seconds())
	return r
}

// keepLogs is how many runs' console logs stay in the cache; a run's
// directory is removed only once it is also older than keepLogsFor, so a
// run still going is never pruned by another.
const (
	keepLogs    = 10
	keepLogsFor = 2 * time.Hour
)

// newLogDir makes a directory of its own for this run's console logs, so
// that runs side by side do not write over each other, and prunes old ones.
func newLogDir(parent string) (string, error) {
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return "", fmt.Errorf("create %s: %w", parent, err)
	}
	dir := filepath.Join(parent, fmt.Sprintf("%s-%d", time.Now().Format("20060102-150405"), os.Getpid()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return "", fmt.Errorf("create %s: %w", dir, err)
	}
	ents, err := os.ReadDir(parent)
	if err == nil && len(ents) > keepLogs {
		// Names start with the time, so ReadDir's order is oldest first.
		for _, e := range ents[:len(ents)-keepLogs] {
			if info, err := e.Info(); err == nil && time.Since(info.ModTime()) > keepLogsFor {
				_ = os.RemoveAll(filepath.Join(parent, e.Name()))
			}
		}
	}
	return dir, nil
}

// staleBuild is the age past which a build directory is taken to be left by
// a run that was killed (a finished run removes its own, unless -keep).
const staleBuild = 12 * time.Hour

func pruneStaleBuilds(cache string) {
	dirs, _ := filepath.Glob(filepath.Join(cache, "build-*"))
	for _, d := range dirs {
		if st, err := os.Stat(d); err == nil && time.Since(st.ModTime()) > staleBuild {
			_ = os.RemoveAll(d)
		}
	}
}
