package audit

import (
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/b10x/harness/internal/testenv"
)

// childEnv makes the test binary a restricted child (TestMain): it waits
// for a byte on stdin, creates a Landlock domain that handles creating
// regular files and grants it nowhere, with
// LANDLOCK_RESTRICT_SELF_LOG_NEW_EXEC_ON, and executes /bin/sh to create
// the file named in $B10X_AUDIT_TOUCH.
const childEnv = "B10X_AUDIT_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		restrictedChild()
		return
	}
	os.Exit(m.Run())
}

func restrictedChild() {
	runtime.LockOSThread()
	var b [1]byte
	if _, err := os.Stdin.Read(b[:]); err != nil {
		os.Exit(3)
	}
	const makeReg = 1 << 8 // LANDLOCK_ACCESS_FS_MAKE_REG
	attr := struct{ fs, net, scoped uint64 }{fs: makeReg}
	fd, _, e := unix.RawSyscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr), 0)
	if e != 0 {
		fmt.Fprintln(os.Stderr, "landlock_create_ruleset:", e)
		os.Exit(4)
	}
	if _, _, e := unix.RawSyscall(unix.SYS_PRCTL, unix.PR_SET_NO_NEW_PRIVS, 1, 0); e != 0 {
		os.Exit(5)
	}
	const logNewExecOn = 1 << 1
	if _, _, e := unix.RawSyscall(unix.SYS_LANDLOCK_RESTRICT_SELF, fd, logNewExecOn, 0); e != 0 {
		fmt.Fprintln(os.Stderr, "landlock_restrict_self:", e)
		os.Exit(6)
	}
	err := syscall.Exec("/bin/sh", []string{"sh", "-c", `: > "$B10X_AUDIT_TOUCH"`}, os.Environ())
	fmt.Fprintln(os.Stderr, "exec:", err)
	os.Exit(7)
}

// auditEnabledHere asks the kernel for its audit status independently of
// the code under test: AUDIT_GET's enabled field.
func auditEnabledHere(t *testing.T) bool {
	fd, err := syscall.Socket(syscall.AF_NETLINK, syscall.SOCK_RAW|syscall.SOCK_CLOEXEC, 9)
	if err != nil {
		t.Logf("socket NETLINK_AUDIT: %v", err)
		return false
	}
	defer syscall.Close(fd)
	req := make([]byte, 16)
	binary.NativeEndian.PutUint32(req, 16)
	binary.NativeEndian.PutUint16(req[4:], 1000)
	binary.NativeEndian.PutUint16(req[6:], 1)
	if err := syscall.Sendto(fd, req, 0, &syscall.SockaddrNetlink{Family: syscall.AF_NETLINK}); err != nil {
		t.Logf("AUDIT_GET: %v", err)
		return false
	}
	buf := make([]byte, 4096)
	for {
		n, _, err := syscall.Recvfrom(fd, buf, 0)
		if err != nil || n < 16 {
			t.Logf("AUDIT_GET: %v", err)
			return false
		}
		switch binary.NativeEndian.Uint16(buf[4:]) {
		case 1000:
			return n >= 24 && binary.NativeEndian.Uint32(buf[20:]) != 0
		case 2:
			if binary.NativeEndian.Uint32(buf[16:]) != 0 {
				return false
			}
		}
	}
}

// TestProbeHere checks Probe against what the kernel says here, both ways.
func TestProbeHere(t *testing.T) {
	abi, err := testenv.LandlockABI()
	if err != nil {
		t.Fatal(err)
	}
	want := abi >= 7 && os.Geteuid() == 0 && auditEnabledHere(t)
	s := Probe()
	t.Logf("Landlock ABI %d; %s", abi, s)
	if s.Attributable != want {
		t.Fatalf("Probe says attributable %v (%s); the kernel says %v", s.Attributable, s.Why, want)
	}
	if abi >= 7 && os.Geteuid() == 0 && !want && !strings.Contains(s.Why, "audit is disabled") {
		t.Errorf("audit is off here; Probe says %q", s.Why)
	}
}

// TestDenialsAttributed runs two restricted children at once, each denied
// a different file, and checks that each denial reaches its own Watch.
func TestDenialsAttributed(t *testing.T) {
	abi, _ := testenv.LandlockABI()
	lacks := abi < 7 || os.Geteuid() != 0 || !auditEnabledHere(t)
	s := Probe()
	testenv.Require(t, s.Attributable, "Landlock audit records ("+s.Why+")",
		append([]string{testenv.ShapeDebian61, testenv.ShapeDebian612, testenv.ShapeNoLandlock, testenv.ShapeNoUserns, testenv.ShapeCgroupV1},
			testenv.HostLacks(lacks)...)...)
	r, err := Open()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	dir := t.TempDir()
	type child struct {
		cmd   *exec.Cmd
		in    *os.File
		w     *Watch
		touch string
	}
	var cs []child
	for _, name := range []string{"a", "b"} {
		pr, pw, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		touch := filepath.Join(dir, name)
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), childEnv+"=1", "B10X_AUDIT_TOUCH="+touch)
		cmd.Stdin = pr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		pr.Close()
		cs = append(cs, child{cmd: cmd, in: pw, w: r.Watch(cmd.Process.Pid, 0), touch: touch})
	}
	for _, c := range cs {
		c.in.Write([]byte{1})
		c.in.Close()
	}
	for _, c := range cs {
		if err := c.cmd.Wait(); err == nil {
			t.Errorf("%s: created, want a denial", c.touch)
		}
	}
	for _, c := range cs {
		d, dropped := c.w.Stop()
		if len(d) != 1 || dropped != 0 {
			t.Errorf("%s: denials %v (+%d), want one", c.touch, d, dropped)
			continue
		}
		if want := "landlock: fs.make_reg " + dir; d[0].String() != want && d[0].String() != want+"/"+filepath.Base(c.touch) {
			t.Errorf("%s: %s, want %s", c.touch, d[0], want)
		}
	}
}

// TestChildDenied checks, wherever the kernel has Landlock ABI 7 whether
// or not its audit is on, that a domain created with
// LANDLOCK_RESTRICT_SELF_LOG_NEW_EXEC_ON (as a run child's is) is accepted
// and enforced after the execve.
func TestChildDenied(t *testing.T) {
	abi, err := testenv.LandlockABI()
	if err != nil {
		t.Fatal(err)
	}
	testenv.Require(t, abi >= 7, fmt.Sprintf("Landlock ABI 7 (have %d)", abi),
		append([]string{testenv.ShapeDebian61, testenv.ShapeDebian612, testenv.ShapeNoLandlock, testenv.ShapeNoUserns, testenv.ShapeCgroupV1},
			testenv.HostLacks(abi < 7)...)...)
	touch := filepath.Join(t.TempDir(), "x")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=1", "B10X_AUDIT_TOUCH="+touch)
	cmd.Stdin = strings.NewReader("1")
	out, err := cmd.CombinedOutput()
	// A failed redirection: dash exits 2, busybox sh (the VM guests') 1.
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() == 0 || !strings.Contains(string(out), "Permission denied") {
		t.Fatalf("child: %v %q; want sh's failure and Permission denied", err, out)
	}
	if _, err := os.Stat(touch); err == nil {
		t.Fatal("the file was created")
	}
}
