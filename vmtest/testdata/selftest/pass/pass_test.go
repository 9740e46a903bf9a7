// Package pass is a vmtest self-test package: every test passes except one
// that skips, and each checks a property of the guest the real suites rely on.
// It runs only inside `go run ./vmtest -selftest`.
package pass

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

func TestMain(m *testing.M) {
	if os.Getenv("VMTEST_PIVOT") == "1" {
		os.Exit(pivot())
	}
	if os.Getenv("VMTEST_SELFTEST") != "1" {
		println("vmtest self-test package: runs only under go run ./vmtest -selftest")
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestShapeIsSet(t *testing.T) {
	t.Log("LAYERS: selftest-layer")
	if s := os.Getenv("B10X_SHAPE"); s == "" {
		t.Fatal("B10X_SHAPE is not set in the guest")
	}
}

func TestSkipsOne(t *testing.T) {
	t.Skip("selftest skip reason")
}

func TestSubtests(t *testing.T) {
	for _, n := range []string{"a", "b"} {
		t.Run(n, func(t *testing.T) {})
	}
}

func TestBusyboxApplets(t *testing.T) {
	for _, p := range []string{"/bin/sh", "/usr/bin/env", "/bin/sleep", "/usr/bin/yes", "/sbin/ip"} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
	out, err := exec.Command("sh", "-c", "echo $((6*7)) | cat").Output()
	if err != nil || strings.TrimSpace(string(out)) != "42" {
		t.Fatalf("sh through PATH: %q, %v", out, err)
	}
}

func TestTestdataInWorkingDirectory(t *testing.T) {
	b, err := os.ReadFile("testdata/hello.txt")
	if err != nil || strings.TrimSpace(string(b)) != "hello from testdata" {
		t.Fatalf("testdata/hello.txt: %q, %v", b, err)
	}
}

// The working directory is the package's directory in a copy of the whole
// module, as under go test: paths like ../../examples resolve.
func TestModuleAround(t *testing.T) {
	b, err := os.ReadFile("../../../../go.mod")
	if err != nil || !strings.Contains(string(b), "module github.com/b10x/harness") {
		t.Fatalf("../../../../go.mod from the package directory: %q, %v", b, err)
	}
}

func TestReexecSelf(t *testing.T) {
	out, err := exec.Command("/proc/self/exe", "-test.run=^TestSubtests$", "-test.v").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestSubtests") {
		t.Fatalf("re-running the test binary through /proc/self/exe: %v\n%s", err, out)
	}
}

func TestLoopback(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		if c, err := l.Accept(); err == nil {
			c.Write([]byte("hi"))
			c.Close()
		}
	}()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	buf := make([]byte, 2)
	if _, err := c.Read(buf); err != nil || string(buf) != "hi" {
		t.Fatalf("read over loopback: %q, %v", buf, err)
	}
}

func TestWritableTempDir(t *testing.T) {
	d := t.TempDir()
	if err := os.WriteFile(d+"/f", []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if home, err := os.UserHomeDir(); err != nil {
		t.Fatal(err)
	} else if err := os.WriteFile(home+"/f", []byte("x"), 0o600); err != nil {
		t.Fatalf("HOME is not writable: %v", err)
	}
}

// TestPivotRoot checks that / is an ordinary mount, as on a booted host:
// pivot_root(2) refuses to move the initramfs's rootfs.
func TestPivotRoot(t *testing.T) {
	cmd := exec.Command("/proc/self/exe")
	cmd.Env = append(os.Environ(), "VMTEST_PIVOT=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: unix.CLONE_NEWNS}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("pivot_root in a new mount namespace: %v\n%s", err, out)
	}
}

func pivot() int {
	fail := func(what string, err error) int {
		fmt.Fprintf(os.Stderr, "%s: %v\n", what, err)
		return 1
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fail("make / private", err)
	}
	dir, err := os.MkdirTemp("", "newroot")
	if err != nil {
		return fail("mkdtemp", err)
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, ""); err != nil {
		return fail("mount tmpfs", err)
	}
	if err := os.Mkdir(filepath.Join(dir, "old"), 0o700); err != nil {
		return fail("mkdir old", err)
	}
	if err := unix.PivotRoot(dir, filepath.Join(dir, "old")); err != nil {
		return fail("pivot_root", err)
	}
	return 0
}

// TestRootIsShared checks that mounts are shared, as systemd makes them.
func TestRootIsShared(t *testing.T) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 6 && f[4] == "/" {
			if !strings.HasPrefix(f[6], "shared:") {
				t.Fatalf("/ is not a shared mount: %s", l)
			}
			return
		}
	}
	t.Fatalf("no mount at / in mountinfo:\n%s", b)
}
