// Package leak is a vmtest self-test package that passes but leaves a
// process and a cgroup behind: the guest must report both and fail it.
package leak

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestMain(m *testing.M) {
	if os.Getenv("VMTEST_SELFTEST") != "1" {
		println("vmtest self-test package: runs only under go run ./vmtest -selftest")
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestLeaksAProcess(t *testing.T) {
	cmd := exec.Command("sleep", "1000")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Deliberately neither killed nor waited for.
}

func TestLeaksACgroup(t *testing.T) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	rel, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "0::")
	if !ok {
		t.Fatalf("not on a pure cgroup2 host: %q", b)
	}
	if err := os.Mkdir(filepath.Join("/sys/fs/cgroup", rel, "leaked"), 0o755); err != nil {
		t.Fatal(err)
	}
}
