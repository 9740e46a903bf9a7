package spawn

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/b10x/harness/cgroup"
	"github.com/b10x/harness/confine"
	"github.com/b10x/harness/internal/testenv"
)

// TestBrokerUnderRestrictedHarness: the harness (this re-run child)
// restricts itself with Landlock after starting a broker. Runs through the
// broker still work; runs started directly cannot mount (the measurement
// behind the broker); and the child cannot use the harness's own grants.
func TestBrokerUnderRestrictedHarness(t *testing.T) {
	requireSpawn(t)
	if !inChild(t) {
		return
	}
	testenv.Require(t, hasLandlock(t) >= 1, "Landlock", testenv.ShapeNoLandlock)
	// The harness's temporary directory is the system's (t.TempDir makes
	// everything there, and its cleanup must still work); the child's view
	// has a /tmp of its own.
	ws := workspace(t)
	harnessTmp := workspace(t)
	testRoot := os.TempDir()
	b, err := StartBroker(BrokerOptions{Require: testOptions().Require})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	direct := NewDirect(testOptions())

	applied, err := confine.RestrictSelf(confine.SelfPolicy{Workspace: ws, WritePaths: []string{testRoot}, Devices: confine.DefaultDevices()})
	if err != nil {
		t.Fatalf("RestrictSelf: %v", err)
	}
	t.Logf("harness restricted: %s", applied.Verified)
	// The harness itself may write its grants, and nothing else.
	if err := os.WriteFile(filepath.Join(harnessTmp, "harness-own"), []byte("x"), 0o600); err != nil {
		t.Fatalf("the harness cannot write its own grant: %v", err)
	}
	outside, err := os.CreateTemp("/var/tmp", "b10x-spawn-test-")
	if err == nil {
		outside.Close()
		os.Remove(outside.Name())
		t.Fatal("the harness wrote outside its grants: it is not restricted")
	}

	leak := filepath.Join(harnessTmp, "leak")
	script := fmt.Sprintf("echo in > %s/made-by-child; echo out > %s; cat %s/harness-own; exit 0", ws, leak, harnessTmp)
	res, out, err := run(t, b, shSpec(t, ws, script))
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("broker run under a restricted harness: %v %+v\n%s", err, res, out)
	}
	t.Logf("LAYERS: %v", res.Layers)
	if _, err := os.Stat(filepath.Join(ws, "made-by-child")); err != nil {
		t.Errorf("the child could not write its workspace: %v", err)
	}
	if _, err := os.Stat(leak); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the child wrote into the harness's grant %s", leak)
	}
	if !bytes.Contains(out.stderr.Bytes(), []byte("No such file")) && !bytes.Contains(out.stderr.Bytes(), []byte("nonexistent")) {
		t.Errorf("the child saw the harness's grant: %s", out)
	}

	// Direct from the restricted process: the helper inherits the domain
	// and its first mount is refused (EPERM); or, where the helper is this
	// binary re-executed rather than the sealed image, the domain, which
	// grants no execute beside the workspace, refuses to start it (EACCES).
	_, out, err = run(t, direct, shSpec(t, ws, "echo ran > "+filepath.Join(ws, "direct-ran")))
	var se *SetupError
	mountRefused := errors.As(err, &se) && errors.Is(err, unix.EPERM) && se.Step == "make mounts private"
	execRefused := errors.As(err, &se) && errors.Is(err, unix.EACCES) && se.Step == "clone"
	if !mountRefused && !execRefused {
		t.Fatalf("direct run under the harness's domain: %v, want a SetupError at \"make mounts private\" with EPERM or at \"clone\" with EACCES\n%s", err, out)
	}
	t.Logf("direct under Landlock: %v", err)
	if _, err := os.Stat(filepath.Join(ws, "direct-ran")); !errors.Is(err, os.ErrNotExist) {
		t.Error("the program ran although its helper could not build the view")
	}
}

// maxRSS is this process's peak resident set, in bytes.
func maxRSS(t testing.TB) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return ru.Maxrss * 1024
}

// TestOutputFloodBounded: 1 GB on stdout, captured with a 64 KiB Capture:
// counted, cut with a marker, and the harness's memory does not grow.
func TestOutputFloodBounded(t *testing.T) {
	requireSpawn(t)
	// 1 GB here; the VM shapes emulate the CPU (TCG), where 1 GB through
	// busybox takes over five minutes (256 MiB took 98 s): 64 MiB there,
	// still 1024 times the capture.
	total := 1_000_000_000
	if testenv.InVM() {
		total = 64 << 20
	}
	const keep = 64 << 10
	r := NewDirect(testOptions())
	ws := workspace(t)
	c := NewCapture(keep)
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		io.Copy(c, pr)
		pr.Close()
	}()
	before := maxRSS(t)
	s := shSpec(t, ws, fmt.Sprintf("yes 0123456789abcdef | head -c %d", total))
	s.Timeout = 5 * time.Minute
	res, err := r.Run(context.Background(), s, Stdio{Stdout: pw})
	pw.Close()
	wg.Wait()
	after := maxRSS(t)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("%v %+v", err, res)
	}
	if c.Total() != int64(total) {
		t.Fatalf("counted %d bytes, want %d", c.Total(), total)
	}
	got := c.Bytes()
	marker := fmt.Sprintf("[... %d bytes cut ...]", total-keep)
	if !bytes.Contains(got, []byte(marker)) {
		t.Fatalf("no marker %q in the capture", marker)
	}
	if len(got) > keep+len(marker)+2 {
		t.Fatalf("capture holds %d bytes, want at most %d plus the marker", len(got), keep)
	}
	line := []byte("0123456789abcdef\n")
	head, tail, _ := bytes.Cut(got, []byte("\n"+marker+"\n"))
	cycle := bytes.Repeat(line, keep/len(line)+2)
	if !bytes.HasPrefix(cycle, head) || len(head) != keep/2 {
		t.Fatalf("the head (%d bytes) is not the program's first output: %q", len(head), head[:min(32, len(head))])
	}
	if !bytes.Contains(cycle, tail) || len(tail) != keep/2 || !bytes.HasSuffix(got, line[:total%len(line)]) {
		t.Fatalf("the tail (%d bytes) is not the program's last output: %q", len(tail), tail[max(0, len(tail)-32):])
	}
	t.Logf("%d bytes in %v; peak RSS %d MiB before, %d MiB after", total, res.Duration, before>>20, after>>20)
	if grown := after - before; grown > 32<<20 {
		t.Fatalf("the harness's peak RSS grew by %d MiB while capturing %d bytes", grown>>20, total)
	}
}

// openCgroup opens a manager for a limits test, requiring the controller
// on the shapes that have it.
func openCgroup(t *testing.T, ctl string) *cgroup.Manager {
	m, err := cgroup.Open(cgroup.Options{Name: "b10x-spawn-test"})
	ok := err == nil && slices.Contains(m.Controllers(), ctl)
	if err != nil && !errors.Is(err, cgroup.ErrNotSupported) {
		t.Fatalf("cgroup.Open: %v", err)
	}
	if err == nil && !ok {
		t.Logf("controllers: %v; missing: %v", m.Controllers(), m.Missing())
		m.Close()
	}
	lacking := []string{testenv.ShapeCgroupV1}
	if testenv.Shape() == testenv.ShapeHost {
		// A host may lack it (bound to cgroup v1): read from its own
		// cgroup files, not from the manager under test.
		cg, err := testenv.ProbeCgroups()
		lacking = append(lacking, testenv.HostLacks(err != nil || !slices.Contains(cg.RootOffered, ctl))...)
	}
	testenv.Require(t, ok, "the "+ctl+" controller for leaves", lacking...)
	t.Cleanup(func() {
		if err := m.Close(); err != nil {
			t.Errorf("cgroup manager Close: %v", err)
		}
	})
	return m
}

// TestForkBombBounded: a fork bomb stays within pids.max; the harness is
// unharmed and the figures say so.
func TestForkBombBounded(t *testing.T) {
	requireSpawn(t)
	if !inChildCgroup(t, true) {
		return
	}
	m := openCgroup(t, "pids")
	opts := testOptions()
	opts.Cgroup = m
	opts.Require.Layers = []string{confine.LayerCgroupLeaf, confine.LayerPidsLimit}
	const max = 48
	ws := workspace(t)
	s := shSpec(t, ws, `while :; do sleep 100 & done`)
	s.Limits.PidsMax = max
	s.Timeout = 3 * time.Second
	res, out, err := run(t, NewDirect(opts), s)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	t.Logf("LAYERS: %v; result %+v", res.Layers, res)
	if !slices.Contains(res.Layers, confine.LayerPidsLimit) {
		t.Errorf("layers %v lack %s", res.Layers, confine.LayerPidsLimit)
	}
	if res.PidsPeak < max/2 || res.PidsPeak > max {
		t.Errorf("pids peak %d, want it to reach the limit %d and stay within it", res.PidsPeak, max)
	}
	// The harness still forks.
	if _, out, err := run(t, NewDirect(opts), shSpec(t, ws, "echo alive")); err != nil || string(out.stdout.Bytes()) != "alive\n" {
		t.Fatalf("after the bomb: %v %s", err, out)
	}
}

// TestMemoryBombOOMKilled: a program past memory.max is OOM-killed and the
// Result says so.
func TestMemoryBombOOMKilled(t *testing.T) {
	requireSpawn(t)
	if !inChildCgroup(t, true) {
		return
	}
	m := openCgroup(t, "memory")
	opts := testOptions()
	opts.Cgroup = m
	opts.Require.Layers = []string{confine.LayerCgroupLeaf, confine.LayerMemoryLimit}
	ws := workspace(t)
	s := Spec{Program: pin(t, selfExe(t)), Argv: []string{"b10x-reexec:" + allocEntry, "256"}, Dir: ws, Workspace: pin(t, ws), Timeout: time.Minute}
	s.Limits.MemoryMax = 32 << 20
	res, out, err := run(t, NewDirect(opts), s)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	t.Logf("LAYERS: %v; result %+v", res.Layers, res)
	if !res.OOMKilled || res.Signal != "SIGKILL" {
		t.Errorf("result %+v, want OOMKilled and SIGKILL\n%s", res, out)
	}
	if strings.Contains(string(out.stdout.Bytes()), "done") {
		t.Errorf("the program allocated 256 MiB under a 32 MiB limit")
	}
	if res.MemoryPeak <= 0 || res.MemoryPeak > 33<<20 {
		t.Errorf("memory peak %d, want within the 32 MiB limit", res.MemoryPeak)
	}
}

// TestRootWithoutUserNamespace: as root on a kernel that refuses a new user
// namespace (here: a seccomp filter on this re-run child refuses
// clone(CLONE_NEWUSER)), the call runs without one, and the program holds
// no capability at all. Requiring the layer refuses the call instead.
func TestRootWithoutUserNamespace(t *testing.T) {
	if !inChild(t) {
		return
	}
	testenv.Require(t, os.Geteuid() == 0, "running as root", testenv.ShapeNoUserns)
	requireSpawn(t)
	refuseNewUserNamespaces(t)
	// The harness holds inheritable and ambient capabilities, which a
	// switch from root to another uid keeps (inheritable) and execve
	// passes on: the program must still hold none.
	raiseInheritable(t)

	ws := workspace(t)
	required := testOptions()
	required.Require.Layers = []string{confine.LayerUserNS}
	_, _, err := run(t, NewDirect(required), probeSpec(t, ws, "uid"))
	var se *SetupError
	if !errors.As(err, &se) || se.Step != "clone" {
		t.Fatalf("userns required but refused by the kernel: %v, want a SetupError at clone", err)
	}

	r := NewDirect(testOptions())
	for i := 0; i < 2; i++ { // the second call knows already
		res, out, err := run(t, r, probeSpec(t, ws, "uid", "caps", "mount", "write:"+filepath.Join(ws, "f"),
			"status:CapInh", "status:CapPrm", "status:CapBnd", "status:CapAmb", "status:NoNewPrivs", "cgroup"))
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		t.Logf("LAYERS: %v", res.Layers)
		if slices.Contains(res.Layers, confine.LayerUserNS) {
			t.Errorf("layers %v claim a user namespace", res.Layers)
		}
		p := probes(out)
		if p["uid"] != strconv.Itoa(testOwner) || p["caps"] != "0000000000000000" || p["mount"] != "EPERM" || p["write:"+filepath.Join(ws, "f")] != "ok" {
			t.Errorf("without a user namespace: %v, want the workspace owner's uid %d, no capability, mount EPERM, workspace writable", p, testOwner)
		}
		for _, set := range []string{"CapInh", "CapPrm", "CapBnd", "CapAmb"} {
			if got := p["status:"+set]; got != "0000000000000000" {
				t.Errorf("without a user namespace, from a harness with inheritable capabilities: %s = %q, want none", set, got)
			}
		}
		if p["status:NoNewPrivs"] != "1" {
			t.Errorf("without a user namespace: NoNewPrivs = %q, want 1", p["status:NoNewPrivs"])
		}
		// Its own cgroup namespace: every line ends at its root.
		for _, l := range strings.Split(p["cgroup"], ";") {
			if !strings.HasSuffix(l, ":/") {
				t.Errorf("without a user namespace the program sees a cgroup path outside its own namespace: %q", p["cgroup"])
				break
			}
		}
	}
}

// raiseInheritable adds CAP_NET_RAW, CAP_SYS_ADMIN and CAP_DAC_OVERRIDE
// to the inheritable and ambient sets of every thread of this process
// (root's permitted set holds them).
func raiseInheritable(t *testing.T) {
	t.Helper()
	caps := []uintptr{unix.CAP_NET_RAW, unix.CAP_SYS_ADMIN, unix.CAP_DAC_OVERRIDE}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		t.Fatal(err)
	}
	for _, c := range caps {
		data[c/32].Inheritable |= 1 << (c % 32)
	}
	if _, _, e := syscall.AllThreadsSyscall(unix.SYS_CAPSET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0); e != 0 {
		t.Fatalf("capset inheritable on every thread: %v", e)
	}
	for _, c := range caps {
		if _, _, e := syscall.AllThreadsSyscall6(unix.SYS_PRCTL, unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_RAISE, c, 0, 0, 0); e != 0 {
			t.Fatalf("raise ambient capability %d on every thread: %v", c, e)
		}
	}
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, set := range []string{"CapInh:", "CapAmb:"} {
		i := strings.Index(string(status), set)
		if i < 0 || strings.HasPrefix(strings.TrimSpace(string(status[i+len(set):])), "0000000000000000") {
			t.Fatalf("%s did not take:\n%s", set, status)
		}
	}
}

// refuseNewUserNamespaces installs, on every thread of this process, a
// seccomp filter making clone(2) and unshare(2) with CLONE_NEWUSER fail
// with EPERM, as a locked-down kernel would.
func refuseNewUserNamespaces(t *testing.T) {
	const (
		ld   = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		jeq  = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
		jset = unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K
		ret  = unix.BPF_RET | unix.BPF_K
	)
	prog := []unix.SockFilter{
		{Code: ld, K: 0},
		{Code: jeq, K: unix.SYS_CLONE, Jt: 1},
		{Code: jeq, K: unix.SYS_UNSHARE, Jf: 3},
		{Code: ld, K: 16}, // the low half of argument 0 (struct seccomp_data, little-endian)
		{Code: jset, K: unix.CLONE_NEWUSER, Jf: 1},
		{Code: ret, K: unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)},
		{Code: ret, K: unix.SECCOMP_RET_ALLOW},
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	if _, _, e := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&fprog))); e != 0 {
		t.Fatalf("seccomp: %v", e)
	}
}
