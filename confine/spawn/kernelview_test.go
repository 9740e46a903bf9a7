package spawn

import (
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/b10x/harness/confine"
	"github.com/b10x/harness/confine/spawn/internal/seccomp"
	"github.com/b10x/harness/internal/mountinfo"
	"github.com/b10x/harness/internal/testenv"
	"github.com/b10x/harness/internal/testenv/ia32"
)

// The kernel's view of a run child, layer by layer, read from INSIDE the
// child (/proc/self/status, /proc/self/uid_map, /proc/self/mountinfo) or
// by attempting what a layer denies. Expectations come from the shape
// (testenv), from this process's own state read from the kernel, or from
// what the host shows of the child's work (the owner of a file it made),
// never from the layers Run reports.

// kernelView is what one run child saw of itself.
type kernelView struct {
	p      map[string]string
	status map[string]string // /proc/self/status, field: value (spaces squeezed)
	mounts []mountEntry      // /proc/self/mountinfo
	uidMap string            // /proc/self/uid_map, fields joined by single spaces
	gidMap string
}

// mountEntry is one line of mountinfo.
type mountEntry struct {
	point, root, fstype string
	opts                []string // per-mount options (ro, nosuid, ...)
	optional            []string // shared:N, master:N, ...
}

func (m mountEntry) has(opt string) bool { return slices.Contains(m.opts, opt) }

// ownStatus reads a field of this process's /proc/self/status.
func ownStatus(t *testing.T, field string) string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	return statusFields(string(b))[field]
}

func statusFields(s string) map[string]string {
	m := map[string]string{}
	for _, l := range strings.Split(s, "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok {
			m[k] = strings.Join(strings.Fields(v), " ")
		}
	}
	return m
}

func parseMountinfo(t *testing.T, s string) []mountEntry {
	t.Helper()
	var out []mountEntry
	for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
		f := strings.Fields(l)
		sep := slices.Index(f, "-")
		if sep < 6 || sep+1 >= len(f) {
			t.Fatalf("mountinfo line %q", l)
		}
		out = append(out, mountEntry{point: mountinfo.Unescape(f[4]), root: mountinfo.Unescape(f[3]), fstype: f[sep+1], opts: strings.Split(f[5], ","), optional: f[6:sep]})
	}
	return out
}

// hexData decodes a "read:" probe's answer.
func hexData(t *testing.T, name, v string) string {
	t.Helper()
	h, ok := strings.CutPrefix(v, "data:")
	if !ok {
		t.Fatalf("%s: %q, want its contents", name, v)
	}
	b, err := hex.DecodeString(h)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// readKernelView runs the probe in a fresh workspace under r and parses what
// the child read of itself; extra probes are run too (their answers are in
// p).
func readKernelView(t *testing.T, name string, r Runner, ws string, extra ...string) (kernelView, Result) {
	t.Helper()
	return readKernelViewOf(t, name, r, ws, nil, extra...)
}

// readKernelViewOf is readKernelView of a spec edit changes first.
func readKernelViewOf(t *testing.T, name string, r Runner, ws string, edit func(*Spec), extra ...string) (kernelView, Result) {
	t.Helper()
	ps := append([]string{"read:/proc/self/status", "read:/proc/self/uid_map", "read:/proc/self/gid_map", "read:/proc/self/mountinfo"}, extra...)
	spec := probeSpec(t, ws, ps...)
	if edit != nil {
		edit(&spec)
	}
	res, out, err := run(t, r, spec)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("%s: %v %+v\n%s", name, err, res, out)
	}
	p := probes(out)
	v := kernelView{p: p}
	v.status = statusFields(hexData(t, name, p["read:/proc/self/status"]))
	v.uidMap = strings.Join(strings.Fields(hexData(t, name, p["read:/proc/self/uid_map"])), " ")
	v.gidMap = strings.Join(strings.Fields(hexData(t, name, p["read:/proc/self/gid_map"])), " ")
	v.mounts = parseMountinfo(t, hexData(t, name, p["read:/proc/self/mountinfo"]))
	return v, res
}

// TestKernelViewPrivileges: no_new_privs is set and every capability set
// is empty, as the kernel shows them to the program.
func TestKernelViewPrivileges(t *testing.T) {
	for name, r := range runners(t) {
		v, _ := readKernelView(t, name, r, workspace(t))
		if got := v.status["NoNewPrivs"]; got != "1" {
			t.Errorf("%s: NoNewPrivs = %q, want 1", name, got)
		}
		for _, set := range []string{"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"} {
			if got := v.status[set]; got != "0000000000000000" {
				t.Errorf("%s: %s = %q, want no capability", name, set, got)
			}
		}
	}
}

// TestKernelViewSeccomp: the program is in seccomp filter mode with
// exactly one filter more than this process has (the kernel counts a
// process's filters; the child inherits the harness's own), and a call the
// filter denies fails with the filter's errno: EPERM for a denied name,
// ENOSYS for a number above those it knows.
func TestKernelViewSeccomp(t *testing.T) {
	own, err := strconv.Atoi(ownStatus(t, "Seccomp_filters"))
	if err != nil {
		t.Fatalf("this kernel does not count seccomp filters in /proc/self/status: %v", err)
	}
	unknown := "nr:" + strconv.Itoa(seccomp.MaxKnownSyscall+1)
	for name, r := range runners(t) {
		v, _ := readKernelView(t, name, r, workspace(t), "bpf", "keyctl", unknown)
		if got := v.status["Seccomp"]; got != "2" {
			t.Errorf("%s: Seccomp = %q, want 2 (filter mode)", name, got)
		}
		if got, want := v.status["Seccomp_filters"], strconv.Itoa(own+1); got != want {
			t.Errorf("%s: Seccomp_filters = %q, want %s (this process's %d and the call's)", name, got, want, own)
		}
		for k, want := range map[string]string{"bpf": "EPERM", "keyctl": "EPERM", unknown: "ENOSYS"} {
			if v.p[k] != want {
				t.Errorf("%s: %s = %q, want %s", name, k, v.p[k], want)
			}
		}
	}
}

// TestKernelViewIdentity: the program is root of a user namespace that maps
// exactly one id, and that id is the one the host shows as the owner of a
// file the program made: the workspace owner's when the harness is root,
// the harness's own otherwise (docs/decisions/0037-child-identity.md).
func TestKernelViewIdentity(t *testing.T) {
	// What the host must see: the test makes its workspaces testOwner's
	// when it is root.
	wantUID, wantGID := os.Geteuid(), os.Getegid()
	// uid_map read from inside shows the id in the parent namespace: the
	// helper's, which maps every id onto itself as root, and 0 onto the
	// harness's ids otherwise.
	mapUID, mapGID := 0, 0
	if os.Geteuid() == 0 {
		wantUID, wantGID = testOwner, testOwner
		mapUID, mapGID = testOwner, testOwner
	}
	for name, r := range runners(t) {
		ws := workspace(t)
		made := filepath.Join(ws, "made")
		v, _ := readKernelView(t, name, r, ws, "write:"+made)
		if v.p["write:"+made] != "ok" {
			t.Fatalf("%s: write in the workspace: %q", name, v.p["write:"+made])
		}
		if want := "0 " + strconv.Itoa(mapUID) + " 1"; v.uidMap != want {
			t.Errorf("%s: uid_map %q, want %q (one id, root of its namespace)", name, v.uidMap, want)
		}
		if want := "0 " + strconv.Itoa(mapGID) + " 1"; v.gidMap != want {
			t.Errorf("%s: gid_map %q, want %q", name, v.gidMap, want)
		}
		if got := v.status["Uid"]; got != "0 0 0 0" {
			t.Errorf("%s: Uid %q, want 0 of its own namespace", name, got)
		}
		fi, err := os.Lstat(made)
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		if int(st.Uid) != wantUID || int(st.Gid) != wantGID {
			t.Errorf("%s: the child's file is %d:%d on the host, want %d:%d", name, st.Uid, st.Gid, wantUID, wantGID)
		}
	}
}

// TestKernelViewCallerIDs: with Spec.CallerIDs the program's namespace
// maps the host id onto itself: id(1) inside says the host uid and gid
// (as bwrap keeps the caller's), the file it makes is that id's on the
// host, and it holds no capability, as root of its namespace does not
// either.
func TestKernelViewCallerIDs(t *testing.T) {
	wantUID, wantGID := os.Geteuid(), os.Getegid()
	mapUID, mapGID := 0, 0
	if os.Geteuid() == 0 {
		wantUID, wantGID = testOwner, testOwner
		mapUID, mapGID = testOwner, testOwner
	}
	for name, r := range runners(t) {
		ws := workspace(t)
		made := filepath.Join(ws, "made")
		v, res := readKernelViewOf(t, name, r, ws, func(s *Spec) { s.CallerIDs = true }, "write:"+made, "uid")
		if !slices.Contains(res.Layers, confine.LayerUserNS) {
			// Without a user namespace the program switches to the host
			// ids whichever way: TestFailsClosedWithoutNamespaces.
			testenv.Require(t, false, "user namespaces for the run child", testenv.ShapeNoUserns)
		}
		if v.p["write:"+made] != "ok" {
			t.Fatalf("%s: write in the workspace: %q", name, v.p["write:"+made])
		}
		if want := fmt.Sprintf("%d %d 1", wantUID, mapUID); v.uidMap != want {
			t.Errorf("%s: uid_map %q, want %q (the host id, onto itself)", name, v.uidMap, want)
		}
		if want := fmt.Sprintf("%d %d 1", wantGID, mapGID); v.gidMap != want {
			t.Errorf("%s: gid_map %q, want %q", name, v.gidMap, want)
		}
		if want := strings.Repeat(strconv.Itoa(wantUID)+" ", 4); v.status["Uid"] != want[:len(want)-1] || v.p["uid"] != strconv.Itoa(wantUID) {
			t.Errorf("%s: Uid %q, getuid %q; want %d", name, v.status["Uid"], v.p["uid"], wantUID)
		}
		for _, set := range []string{"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"} {
			if got := v.status[set]; got != "0000000000000000" {
				t.Errorf("%s: %s = %q, want no capability", name, set, got)
			}
		}
		fi, err := os.Lstat(made)
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		if int(st.Uid) != wantUID || int(st.Gid) != wantGID {
			t.Errorf("%s: the child's file is %d:%d on the host, want %d:%d", name, st.Uid, st.Gid, wantUID, wantGID)
		}
	}
}

// kvSystemDirs are the host directories the view must show read-only, as
// this test finds them: each of these that is a directory (not a link) on
// the host.
func kvSystemDirs(t *testing.T) []string {
	var out []string
	for _, d := range []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt"} {
		if fi, err := os.Lstat(d); err == nil && fi.IsDir() {
			out = append(out, d)
		}
	}
	if !slices.Contains(out, "/usr") || !slices.Contains(out, "/etc") {
		t.Fatalf("no /usr or /etc directory on this host: %v", out)
	}
	return out
}

// TestKernelViewMounts: the mount table as the program's kernel shows it.
// The root and the system directories are read-only, nosuid and nodev; the
// workspace is writable but nosuid and nodev; /proc is a proc mount of the
// call's own PID namespace (the host's processes are not in it); no mount
// shares propagation with another namespace; nothing of the host beyond
// these is mounted; and a mount call, umount or remount, fails.
func TestKernelViewMounts(t *testing.T) {
	sys := kvSystemDirs(t)
	hostPid := strconv.Itoa(os.Getpid())
	exe, err := filepath.EvalSymlinks(selfExe(t)) // the program, bound alone when no directory of the view holds it
	if err != nil {
		t.Fatal(err)
	}
	for name, r := range runners(t) {
		ws := workspace(t)
		v, _ := readKernelView(t, name, r, ws, "pid", "read:/proc/"+hostPid+"/status", "umount2:/usr", "remount-rw:/usr", "umount2:"+ws)
		byPoint := map[string]mountEntry{}
		for _, m := range v.mounts {
			byPoint[m.point] = m
			if len(m.optional) > 0 {
				t.Errorf("%s: %s carries propagation %v: a mount event could cross into or out of the view", name, m.point, m.optional)
			}
			allowed := m.point == "/" || within(m.point, "/proc") || within(m.point, "/dev") || m.point == "/tmp" || within(m.point, ws) || m.point == exe
			for _, d := range sys {
				if within(m.point, d) {
					allowed = true
					// Beneath a system directory: read-only, nosuid,
					// nodev; or a mask: the empty file of the call's own
					// tmpfs named by its index, nosuid, nodev, noexec, and
					// writable so that a read moves its access time
					// (decision 0095; its mode refuses a write).
					mask := m.fstype == "tmpfs" && len(m.root) > 1 && strings.Trim(m.root[1:], "0123456789") == "" && m.has("nosuid") && m.has("nodev") && m.has("noexec")
					if !(m.has("ro") && m.has("nosuid") && m.has("nodev")) && !mask {
						t.Errorf("%s: %s beneath %s is %s %v from %s, want read-only, nosuid, nodev (or a mask's own file)", name, m.point, d, m.fstype, m.opts, m.root)
					}
				}
			}
			if !allowed {
				t.Errorf("%s: %s (%s) is mounted in the view", name, m.point, m.fstype)
			}
		}
		check := func(point string, want ...string) {
			m, ok := byPoint[point]
			if !ok {
				t.Errorf("%s: no mount at %s in the child's mountinfo", name, point)
				return
			}
			for _, o := range want {
				if !m.has(o) {
					t.Errorf("%s: %s has options %v, want %s", name, point, m.opts, o)
				}
			}
		}
		check("/", "ro", "nosuid", "nodev")
		for _, d := range sys {
			check(d, "ro", "nosuid", "nodev")
		}
		check(ws, "rw", "nosuid", "nodev")
		check("/proc", "nosuid", "nodev", "noexec")
		check("/tmp", "rw", "nosuid", "nodev")
		if m := byPoint["/proc"]; m.fstype != "proc" {
			t.Errorf("%s: /proc is %q, want a proc mount", name, m.fstype)
		}
		// Fresh: the program is a low pid of its own namespace, and this
		// process is not in it.
		if pid, err := strconv.Atoi(v.p["pid"]); err != nil || pid > 16 {
			t.Errorf("%s: the program's pid is %q, want a low pid of a new namespace", name, v.p["pid"])
		}
		if got := v.p["read:/proc/"+hostPid+"/status"]; got != "ENOENT" {
			t.Errorf("%s: /proc/%s (this test process) from inside: %q, want ENOENT", name, hostPid, got)
		}
		for _, k := range []string{"umount2:/usr", "remount-rw:/usr", "umount2:" + ws} {
			if v.p[k] == "ok" || v.p[k] == "" {
				t.Errorf("%s: %s = %q, want a refusal", name, k, v.p[k])
			}
		}
	}
}

// TestKernelViewLandlock: a write that only Landlock stands in the way of
// is refused: /proc/self/comm is the program's own (DAC lets it write it,
// the proc mount is writable) but the domain grants /proc read only. Where
// the shape has no Landlock the same write goes through, proving it is
// Landlock that refuses. The kernel's Landlock ABI is asked with the raw
// system call, not through the code under test.
func TestKernelViewLandlock(t *testing.T) {
	abi, err := testenv.LandlockABI()
	if err != nil {
		t.Fatal(err)
	}
	testenv.Require(t, abi > 0 || testenv.Shape() == testenv.ShapeNoLandlock, "Landlock (raw ABI probe)")
	for name, r := range runners(t) {
		ws := workspace(t)
		v, _ := readKernelView(t, name, r, ws, "write:/proc/self/comm", "write:"+filepath.Join(ws, "ok"))
		want := "EACCES"
		if abi == 0 {
			want = "ok"
		}
		if got := v.p["write:/proc/self/comm"]; got != want {
			t.Errorf("%s: write /proc/self/comm = %q, want %s (Landlock ABI %d)", name, got, want, abi)
		}
		if got := v.p["write:"+filepath.Join(ws, "ok")]; got != "ok" {
			t.Errorf("%s: write in the workspace = %q, want ok", name, got)
		}
	}
}

// i386 system call numbers the probe makes through int 0x80.
const (
	ia32Getpid = 20
	ia32Mount  = 21
	ia32Ptrace = 26
)

// ia32Probe makes i386 system call number operand through int 0x80 with
// zero arguments, after saying on stdout that it is about to: a process
// killed by the call prints the marker and no result.
func ia32Probe(operand string) string {
	nr, err := strconv.Atoi(operand)
	if err != nil {
		return "bad-number"
	}
	fmt.Printf("ia32-before:%d\n", nr)
	return strconv.Itoa(int(ia32.Syscall(uint32(nr), 0, 0, 0, 0, 0)))
}

// ia32Present reports whether this kernel runs an i386 system call from a
// 64-bit process: an unconfined re-run of this binary makes getpid through
// int 0x80 and must get its own pid. A kernel without IA32 emulation kills
// it with SIGSEGV; one built with it but booted with ia32_emulation=0
// answers ENOSYS.
func ia32Present(t *testing.T) (bool, string) {
	t.Helper()
	if !ia32.Supported {
		return false, "this build has no i386 entry point (" + runtime.GOARCH + ")"
	}
	cmd := exec.Command(selfExe(t), "ia32:"+strconv.Itoa(ia32Getpid), "pid")
	cmd.Args[0] = "b10x-reexec:" + probeEntry
	out, err := cmd.Output()
	p := probeLines(out)
	if err != nil {
		return false, fmt.Sprintf("int 0x80 outside the sandbox: %v, output %q", err, out)
	}
	if got := p["ia32:"+strconv.Itoa(ia32Getpid)]; got != p["pid"] {
		return false, fmt.Sprintf("int 0x80 getpid outside the sandbox returned %s, not the pid %s", got, p["pid"])
	}
	return true, ""
}

// ia32Declared is where the i386 entry point may be absent: the host, when
// its kernel says it has no IA32 emulation (its build configuration, read
// from /boot or /proc/config.gz, and its command line); nowhere else.
// Every VM shape boots Debian's 6.1 kernel, which has it.
func ia32Declared(t *testing.T) []string {
	t.Helper()
	if testenv.InVM() {
		return nil
	}
	var uts unix.Utsname
	if err := unix.Uname(&uts); err != nil {
		t.Fatal(err)
	}
	config := ""
	if b, err := os.ReadFile("/boot/config-" + unix.ByteSliceToString(uts.Release[:])); err == nil {
		config = string(b)
	} else if out, err := exec.Command("sh", "-c", "zcat /proc/config.gz 2>/dev/null || gzip -dc /proc/config.gz").Output(); err == nil {
		config = string(out)
	}
	cmdline, _ := os.ReadFile("/proc/cmdline")
	switch {
	case strings.Contains(config, "# CONFIG_IA32_EMULATION is not set"),
		strings.Contains(config, "CONFIG_IA32_EMULATION_DEFAULT_DISABLED=y") && !strings.Contains(string(cmdline), "ia32_emulation=1"),
		strings.Contains(string(cmdline), "ia32_emulation=0"),
		runtime.GOARCH != "amd64":
		return []string{testenv.ShapeHost}
	}
	return nil
}

// TestSeccompIA32 proves the filter's architecture check from inside: a
// program that makes a system call through the i386 table (int 0x80, the
// 32-bit entry point every x86-64 kernel with IA32 emulation keeps) is
// killed by SIGSYS before the call runs, whether the call is one the
// native filter denies (mount, ptrace) or allows (getpid). The filter is
// written for the native numbers only; i386 mount is 21, which is access
// on x86-64.
func TestSeccompIA32(t *testing.T) {
	ok, why := ia32Present(t)
	testenv.Require(t, ok, "IA32 emulation (int 0x80): "+why, ia32Declared(t)...)
	for name, r := range runners(t) {
		for _, nr := range []int{ia32Mount, ia32Ptrace, ia32Getpid} {
			ws := workspace(t)
			k := "ia32:" + strconv.Itoa(nr)
			res, out, err := run(t, r, probeSpec(t, ws, k))
			if err != nil {
				t.Fatalf("%s: %v\n%s", name, err, out)
			}
			stdout := string(out.stdout.Bytes())
			if !strings.Contains(stdout, "ia32-before:"+strconv.Itoa(nr)+"\n") {
				t.Fatalf("%s: i386 call %d: the probe never got to it: %+v\n%s", name, nr, res, out)
			}
			if res.Signal != "SIGSYS" || strings.Contains(stdout, k+"=") {
				t.Errorf("%s: i386 system call %d: %+v, output %q; want the program killed by SIGSYS before the call returns", name, nr, res, stdout)
			}
		}
	}
}
