package helper

import (
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"github.com/b10x/harness/internal/testenv"
)

// The program stage's own checks are second locks: the clone already set
// the ids, capset already emptied the sets. These tests give each check a
// process where the first lock did not hold, and the check must say so.

// TestCheckIdentity: the program stage refuses to go on under any uid or
// gid but the plan's (0 of its own namespace with NestUser).
func TestCheckIdentity(t *testing.T) {
	uid, gid := uint32(os.Getuid()), uint32(os.Getgid())
	if uint32(os.Geteuid()) != uid || uint32(os.Getegid()) != gid {
		t.Fatalf("the test runs with real ids %d/%d and effective %d/%d; the check needs them equal", uid, gid, os.Geteuid(), os.Getegid())
	}
	cases := []struct {
		name string
		p    Plan
		ok   bool
	}{
		{"own ids", Plan{ChildUID: uid, ChildGID: gid}, true},
		{"another uid", Plan{ChildUID: uid + 1, ChildGID: gid}, false},
		{"another gid", Plan{ChildUID: uid, ChildGID: gid + 1}, false},
		{"nested, want root of the namespace", Plan{NestUser: true, ChildUID: uid, ChildGID: gid}, uid == 0 && gid == 0},
	}
	for _, c := range cases {
		err := checkIdentity(&c.p)
		if (err == nil) != c.ok {
			t.Errorf("%s (running as %d/%d): checkIdentity = %v, want ok=%v", c.name, uid, gid, err, c.ok)
		}
	}
}

// capChildEnv makes the test binary run capabilityChild instead of the
// tests.
const capChildEnv = "B10X_HELPER_TEST_CAPCHILD"

// TestCheckNoCapabilities: the read-back fails while any capability is
// left in the bounding, permitted, effective or inheritable set, and
// passes once all are empty. The test process's own sets (a bounding set
// that is not empty) fail it; a re-run child of this binary, as root,
// empties them one at a time and checks after each step.
func TestCheckNoCapabilities(t *testing.T) {
	if os.Getenv(capChildEnv) != "" {
		capabilityChild(t)
		return
	}
	if err := checkNoCapabilities(); err == nil {
		t.Fatal("checkNoCapabilities passes in the test process, whose bounding set is not empty")
	}
	testenv.Require(t, os.Geteuid() == 0, "running as root (to hold capabilities to drop)", testenv.ShapeNoUserns)
	for _, mode := range []string{"bounding", "sets"} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCheckNoCapabilities$", "-test.v")
		cmd.Env = append(os.Environ(), capChildEnv+"="+mode)
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "--- PASS: TestCheckNoCapabilities") {
			t.Fatalf("child %s: %v\n%s", mode, err, out)
		}
	}
}

// capabilityChild runs in a re-run child as root. Mode "bounding" leaves
// only the bounding set; mode "sets" empties the bounding set first, then
// leaves CAP_CHOWN in fewer and fewer sets, down to the inheritable set
// alone (which execve keeps for a non-root program), then none.
func capabilityChild(t *testing.T) {
	runtime.LockOSThread() // capabilities are per thread; never unlocked: the thread dies with the test
	set := func(eff, perm, inh uint32) {
		t.Helper()
		hdr := capUserHeader{version: linuxCapabilityVersion3}
		data := [2]capUserData{{effective: eff, permitted: perm, inheritable: inh}}
		if _, _, e := syscall.RawSyscall(syscall.SYS_CAPSET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0); e != 0 {
			t.Fatalf("capset eff %#x perm %#x inh %#x: %v", eff, perm, inh, e)
		}
	}
	const chown, setpcap = 1 << 0, 1 << 8 // CAP_CHOWN, CAP_SETPCAP
	if err := checkNoCapabilities(); err == nil {
		t.Fatal("passes with every set full")
	}
	if os.Getenv(capChildEnv) == "bounding" {
		set(0, 0, 0)
		if err := checkNoCapabilities(); err == nil {
			t.Fatal("passes with a full bounding set")
		}
		return
	}
	set(setpcap|chown, setpcap|chown, chown) // CAP_SETPCAP to drop the bounding set
	if err := dropBoundingSet(); err != nil {
		t.Fatal(err)
	}
	for _, s := range []struct {
		what           string
		eff, perm, inh uint32
	}{
		{"effective, permitted and inheritable", chown, chown, chown},
		{"permitted and inheritable", 0, chown, chown},
		{"inheritable", 0, 0, chown},
	} {
		set(s.eff, s.perm, s.inh)
		if err := checkNoCapabilities(); err == nil {
			t.Fatalf("passes with CAP_CHOWN %s", s.what)
		}
	}
	set(0, 0, 0)
	if err := checkNoCapabilities(); err != nil {
		t.Fatalf("fails with every set empty: %v", err)
	}
}

// TestAlone: the init is alone once every child it had has ended and been
// reaped; a child still running means it is not; and it stops reaping
// after maxAloneReaps, so that orphans ending in a stream cannot hold the
// program's status back.
func TestAlone(t *testing.T) {
	start := func(argv ...string) *os.Process {
		t.Helper()
		path, err := exec.LookPath(argv[0])
		if err != nil {
			t.Fatal(err)
		}
		p, err := os.StartProcess(path, argv, &os.ProcAttr{})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	ended := func(ps []*os.Process) {
		t.Helper()
		for _, p := range ps {
			for {
				// The child has ended when its state is Z (a zombie
				// waiting to be reaped).
				b, err := os.ReadFile("/proc/" + strconv.Itoa(p.Pid) + "/stat")
				if err != nil {
					t.Fatal(err)
				}
				if s := string(b); strings.HasPrefix(s[strings.LastIndexByte(s, ')')+1:], " Z") {
					break
				}
				runtime.Gosched()
			}
		}
	}
	if !alone() {
		t.Fatal("no child at all: not alone")
	}
	var few []*os.Process
	for range 3 {
		few = append(few, start("true"))
	}
	ended(few)
	if !alone() {
		t.Fatal("three ended children: not alone once they were reaped")
	}
	sleeper := start("sleep", "1000")
	if alone() {
		t.Error("a child still running: alone")
	}
	sleeper.Kill()
	ended([]*os.Process{sleeper})
	var many []*os.Process
	for range maxAloneReaps + 20 {
		many = append(many, start("true"))
	}
	ended(many)
	if alone() {
		t.Errorf("%d ended children: alone, past the cap of %d reaps", len(many), maxAloneReaps)
	}
	if !alone() {
		t.Error("the rest reaped: not alone")
	}
}
