package confine

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/b10x/harness/confine/internal/probechild"
	"github.com/b10x/harness/internal/reexec"
	"github.com/b10x/harness/internal/testenv"
)

// wantABI is the Landlock ABI each VM shape's kernel offers (at least).
var wantABI = map[string]int{
	testenv.ShapeDebian61:   2,
	testenv.ShapeDebian612:  6,
	testenv.ShapeNoLandlock: 0,
	testenv.ShapeNoUserns:   2,
	testenv.ShapeCgroupV1:   2,
}

// wantLandlockABI is the ABI the probe must find: on the host exactly what
// the kernel answers the raw landlock_create_ruleset version call made by
// the test itself (any host, any kernel), on a VM shape the declared one.
func wantLandlockABI(t *testing.T) int {
	t.Helper()
	if testenv.Shape() != testenv.ShapeHost {
		w, ok := wantABI[testenv.Shape()]
		if !ok {
			t.Fatalf("no Landlock expectation for shape %q", testenv.Shape())
		}
		return w
	}
	abi, err := testenv.LandlockABI()
	if err != nil {
		t.Fatalf("landlock_create_ruleset(NULL, 0, VERSION): %v", err)
	}
	return abi
}

func TestProbe(t *testing.T) {
	r := Probe()
	shape := testenv.Shape()

	// Nothing may be left undecided on a shape we know.
	all := []struct {
		name string
		f    Finding
	}{{"landlock", r.Landlock.Finding}, {"seccomp filter", r.Seccomp.Filter}, {"no_new_privs", r.Seccomp.NoNewPrivs}}
	for _, n := range r.Namespaces {
		all = append(all, struct {
			name string
			f    Finding
		}{n.Name + " namespace", n.Finding})
	}
	for _, it := range all {
		if it.f.Status == Inconclusive || it.f.Status == StatusUnknown {
			t.Errorf("%s: %q (%s)", it.name, it.f.Status, it.f.describe())
		}
		t.Logf("%-18s %s", it.name, it.f.describe())
	}
	if len(r.Namespaces) != len(namespaceKinds) {
		t.Errorf("%d namespace findings, want %d", len(r.Namespaces), len(namespaceKinds))
	}

	// Landlock.
	want := wantLandlockABI(t)
	switch {
	case want == 0:
		if r.Landlock.Status != NotSupported || r.Landlock.ABI != 0 {
			t.Errorf("shape %s: Landlock %s ABI %d, want not-supported ABI 0", shape, r.Landlock.Status, r.Landlock.ABI)
		}
	case shape == testenv.ShapeHost && r.Landlock.ABI != want:
		t.Errorf("host: Landlock ABI %d, but the kernel answers %d", r.Landlock.ABI, want)
	case r.Landlock.Status != Supported || r.Landlock.ABI < want:
		t.Errorf("shape %s: Landlock %s ABI %d, want supported ABI >= %d", shape, r.Landlock.Status, r.Landlock.ABI, want)
	}
	for _, f := range r.Landlock.Features {
		if f.Available != (r.Landlock.ABI >= f.MinimumABI) {
			t.Errorf("feature %s: available=%v at ABI %d, minimum %d", f.Name, f.Available, r.Landlock.ABI, f.MinimumABI)
		}
	}

	// Namespaces: root creates each; the no-userns shape (uid 1000,
	// user.max_user_namespaces=0) creates none.
	for _, n := range r.Namespaces {
		wantStatus := Supported
		if shape == testenv.ShapeNoUserns {
			wantStatus = NotSupported
		}
		if n.Status != wantStatus {
			t.Errorf("shape %s: %s namespace %s (%s), want %s", shape, n.Name, n.Status, n.describe(), wantStatus)
		}
	}
	if shape == testenv.ShapeNoUserns && r.Privilege.Root {
		t.Errorf("no-userns shape runs as uid 1000, but the probe says root: %+v", r.Privilege)
	}
	if os.Geteuid() == 0 && !r.Privilege.Root {
		t.Errorf("euid 0 but not root: %+v", r.Privilege)
	}

	// seccomp and no_new_privs: every shape has them.
	if !r.Seccomp.Filter.OK() || !r.Seccomp.NoNewPrivs.OK() {
		t.Errorf("seccomp %+v", r.Seccomp)
	}

	// The stable JSON form names its fields as documented.
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var generic map[string]any
	if err := json.Unmarshal(b, &generic); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"landlock", "privilege", "namespaces", "seccomp", "cgroup"} {
		if _, ok := generic[k]; !ok {
			t.Errorf("JSON lacks %q: %s", k, b)
		}
	}
	ll := generic["landlock"].(map[string]any)
	for _, k := range []string{"status", "abi", "errata", "features"} {
		if _, ok := ll[k]; !ok {
			t.Errorf("landlock JSON lacks %q: %v", k, ll)
		}
	}
	var back Report
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(back.Table(), r.Table()) {
		t.Errorf("the table changed through JSON:\n%v\n%v", back.Table(), r.Table())
	}

	auto, err := r.Plan(Auto)
	if err != nil {
		t.Fatal(err)
	}
	var missing []string
	for _, l := range auto.Missing {
		missing = append(missing, l.Name)
	}
	t.Logf("LAYERS: shape=%s enforced=%s missing=%s workspace=%v execution=%v limits=%v kill=%q",
		shape, strings.Join(auto.Enforced, ","), strings.Join(missing, ","),
		auto.ConfinedWorkspace, auto.ConfinedExecution, auto.ResourceLimits, auto.WholeTreeKill)
	for _, row := range r.Table() {
		t.Logf("  %-13s %-5v %s | %s", row.Layer, row.Available, row.Detail, row.Remedy)
	}
	// The first, uncached probe must agree with what strict expects here
	// (a cold probe once saw its own children sharing its cgroup).
	if want, ok := wantStrictMissing(t); ok && want.exact && !slices.Equal(missing, want.layers) {
		t.Errorf("auto on a cold probe misses %v, want exactly %v", missing, want.layers)
	}
}

// missingLayers is the layers strict must name on a shape, and whether
// that list is exact (false: at least these).
type missingLayers struct {
	layers []string
	exact  bool
}

// strictMissing is, per VM shape, what strict must name.
var strictMissing = map[string]missingLayers{
	testenv.ShapeDebian61:   {nil, true},
	testenv.ShapeDebian612:  {nil, true},
	testenv.ShapeNoLandlock: {[]string{LayerLandlockSelf, LayerLandlockChild}, true},
	testenv.ShapeNoUserns:   {[]string{LayerUserNS, LayerPidNS, LayerMountNS, LayerNetNS, LayerIPCNS, LayerUTSNS}, false},
	testenv.ShapeCgroupV1:   {[]string{LayerCgroupLeaf, LayerPidsLimit, LayerMemoryLimit, LayerCPULimit}, true},
}

// wantStrictMissing is what strict must name here: on a VM shape the
// declared list; on the host, what the test finds itself: the Landlock
// layers when the kernel answers no ABI, the cgroup leaf without a
// cgroup2 mount, and each limit layer whose controller this process's
// cgroup cannot give its leaves (testenv.Cgroups.Usable), from the mount
// table and cgroup files. The host must be able to make every namespace
// (the test runs as root there, or with user namespaces).
func wantStrictMissing(t *testing.T) (missingLayers, bool) {
	t.Helper()
	if testenv.Shape() != testenv.ShapeHost {
		w, ok := strictMissing[testenv.Shape()]
		return w, ok
	}
	var w missingLayers
	w.exact = true
	if wantLandlockABI(t) == 0 {
		w.layers = append(w.layers, LayerLandlockSelf, LayerLandlockChild)
	}
	cg, err := testenv.ProbeCgroups()
	if err != nil {
		t.Fatal(err)
	}
	if cg.V2Mount == "" {
		w.layers = append(w.layers, LayerCgroupLeaf)
	}
	for ctl, layer := range map[string]string{"pids": LayerPidsLimit, "memory": LayerMemoryLimit, "cpu": LayerCPULimit} {
		if !cg.Usable(ctl) {
			w.layers = append(w.layers, layer)
		}
	}
	// In the order the layers are named.
	names := LayerNames()
	slices.SortFunc(w.layers, func(a, b string) int { return slices.Index(names, a) - slices.Index(names, b) })
	return w, true
}

// TestStrictOnShape asserts what strict says on each shape; on the host it
// must refuse naming exactly the layers the test finds missing itself.
func TestStrictOnShape(t *testing.T) {
	r := Probe()
	want, ok := wantStrictMissing(t)
	if !ok {
		t.Fatalf("no expectation for shape %q", testenv.Shape())
	}
	plan, err := r.Plan(Strict)
	if len(want.layers) == 0 {
		if err != nil {
			t.Fatalf("strict on %s: %v", testenv.Shape(), err)
		}
		if !plan.ConfinedWorkspace || !plan.ConfinedExecution || !plan.ResourceLimits {
			t.Errorf("strict plan holds all classes, got %+v", plan)
		}
		return
	}
	if err == nil {
		t.Fatalf("strict on %s succeeded: %+v", testenv.Shape(), plan)
	}
	var se *StrictError
	if !errors.As(err, &se) || !errors.Is(err, ErrNotSupported) {
		t.Fatalf("strict error %T %v: want *StrictError matching ErrNotSupported", err, err)
	}
	lines := strings.Split(err.Error(), "\n")
	var got []string
	for _, l := range se.Missing {
		got = append(got, l.Name)
	}
	if want.exact && !slices.Equal(got, want.layers) {
		t.Errorf("strict names %v, want exactly %v", got, want.layers)
	}
	for _, name := range want.layers {
		if !slices.Contains(got, name) {
			t.Errorf("strict does not name %s (names %v)", name, got)
		}
	}
	if len(lines) != len(se.Missing) {
		t.Errorf("%d lines for %d missing layers:\n%s", len(lines), len(se.Missing), err)
	}
	for i, l := range se.Missing {
		if !strings.Contains(lines[i], "layer "+l.Name+" missing") || l.Remedy == "" || !strings.Contains(lines[i], l.Remedy) {
			t.Errorf("line %d does not name %s with its remedy: %q", i, l.Name, lines[i])
		}
	}
	t.Logf("strict refuses on %s:\n%s", testenv.Shape(), err)
}

// The denied-userns child: a seccomp filter makes clone(CLONE_NEWUSER) fail
// with EPERM, as a container runtime's policy or a sysctl would, and the
// probe runs under it.
const deniedUsernsEntry = "confine-test-probe-denied-userns"

func init() { reexec.Register(deniedUsernsEntry, deniedUsernsChildMain) }

func deniedUsernsChildMain() {
	filter := []unix.SockFilter{
		{Code: bpfLd, K: 0},                                             // 0: A = nr
		{Code: bpfJeq, K: unix.SYS_CLONE, Jt: 0, Jf: 3},                 // 1: clone? else 5
		{Code: bpfLd, K: 16},                                            // 2: A = low word of args[0] (flags)
		{Code: bpfJset, K: unix.CLONE_NEWUSER, Jt: 0, Jf: 3},            // 3: NEWUSER? else 7
		{Code: bpfRet, K: unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)},  // 4
		{Code: bpfJeq, K: unix.SYS_CLONE3, Jt: 0, Jf: 1},                // 5: clone3? else 7
		{Code: bpfRet, K: unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)}, // 6
		{Code: bpfRet, K: unix.SECCOMP_RET_ALLOW},                       // 7
	}
	if err := installTestFilter(filter); err != nil {
		childPrint(map[string]string{"error": err.Error()})
	}
	childPrint(Probe())
}

// TestProbeUsernsRefused proves the probe says not-supported (and not
// inconclusive, and never supported) when the kernel refuses a user
// namespace, and what that does to the other namespaces and to strict.
func TestProbeUsernsRefused(t *testing.T) {
	var r Report
	runTestChild(t, nil, &r, deniedUsernsEntry)
	user := r.Namespace("user")
	if user.Status != NotSupported || !strings.Contains(user.Error, "operation not permitted") {
		t.Fatalf("user namespace under a filter refusing it: %+v, want not-supported with EPERM", user)
	}
	for _, n := range r.Namespaces[1:] {
		// Root creates the others without a user namespace; anyone else
		// needs it and is refused too.
		want := NotSupported
		if r.Privilege.Root {
			want = Supported
		}
		if n.Status != want {
			t.Errorf("%s namespace: %s (%s), want %s", n.Name, n.Status, n.describe(), want)
		}
	}
	users := r.layer(LayerUserNS)
	if users.Available || users.Remedy == "" || !strings.Contains(users.Remedy, "user.max_user_namespaces") {
		t.Errorf("userns layer: %+v", users)
	}
	t.Logf("userns layer: required=%v detail=%s", users.Required, users.Detail)
}

func TestCachedKeepsOnlyConclusive(t *testing.T) {
	calls := 0
	for _, tc := range []struct {
		status    Status
		wantCalls int
	}{{Inconclusive, 3}, {StatusUnknown, 3}, {Supported, 1}, {NotSupported, 1}} {
		calls = 0
		key := fmt.Sprintf("test:%s", tc.status)
		for range 3 {
			f := cached(key, func() Finding { calls++; return Finding{Status: tc.status} })
			if f.Status != tc.status {
				t.Fatalf("cached returned %q, want %q", f.Status, tc.status)
			}
		}
		if calls != tc.wantCalls {
			t.Errorf("%q: probe ran %d times for 3 calls, want %d", tc.status, calls, tc.wantCalls)
		}
	}
}

func TestCloneRefusal(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{&os.PathError{Op: "fork/exec", Path: "/proc/self/exe", Err: syscall.EPERM}, true},
		{&os.PathError{Op: "fork/exec", Path: "/proc/self/exe", Err: syscall.ENOSPC}, true},
		{&os.PathError{Op: "fork/exec", Path: "/proc/self/exe", Err: syscall.EUSERS}, true},
		{&os.PathError{Op: "fork/exec", Path: "/proc/self/exe", Err: syscall.EINVAL}, true},
		{&os.PathError{Op: "fork/exec", Path: "/proc/self/exe", Err: syscall.ENOMEM}, false},
		{&os.PathError{Op: "fork/exec", Path: "/proc/self/exe", Err: syscall.EAGAIN}, false},
		{fmt.Errorf("something else"), false},
	} {
		if got := cloneRefusal(tc.err); got != tc.want {
			t.Errorf("cloneRefusal(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// TestProbeChildArgv0: the probe child package recognises the argv[0] the
// probe starts it under, so it answers from its init, before the rest of
// the binary initialises.
func TestProbeChildArgv0(t *testing.T) {
	if got := reexec.Command(probeEntry).Args[0]; got != probechild.Argv0 {
		t.Fatalf("reexec.Command(%q).Args[0] = %q, probechild.Argv0 = %q", probeEntry, got, probechild.Argv0)
	}
}
