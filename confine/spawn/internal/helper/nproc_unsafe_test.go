package helper

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestLimitProcs: the proof catches a process the kernel does not hold to
// RLIMIT_NPROC (uid 0 of the initial user namespace, as go test runs
// here as root) and passes one it does (the same binary as nobody).
func TestLimitProcs(t *testing.T) {
	if os.Getenv("B10X_NPROC_CHILD") == "1" {
		if err := limitProcs(64); err != nil {
			os.Stdout.WriteString("limitProcs: " + err.Error() + "\n")
			os.Exit(3)
		}
		os.Stdout.WriteString("limitProcs: ok\n")
		os.Exit(0)
	}
	// A copy nobody can execute: go test's build directory is root's
	// alone.
	dir, err := os.MkdirTemp("", "b10x-nproc-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "helper.test")
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	child := func(cred *syscall.Credential) (string, error) {
		cmd := exec.Command(bin, "-test.run=^TestLimitProcs$")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "B10X_NPROC_CHILD=1")
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		out, err := cmd.CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	out, err := child(nil)
	if os.Geteuid() == 0 {
		if err == nil || !strings.Contains(out, "not enforced") {
			t.Errorf("as root of the initial user namespace: %v, %q; want the proof to refuse", err, out)
		}
		out, err = child(&syscall.Credential{Uid: 65534, Gid: 65534})
	}
	if err != nil || out != "limitProcs: ok" {
		t.Errorf("as an unprivileged uid: %v, %q; want the limit set and proven", err, out)
	}
}
