package spawn

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/b10x/harness/internal/reexec"
	"github.com/b10x/harness/internal/testenv"
)

// noTmpEntry runs a call from a root directory that has no /tmp, as a
// minimal container image (FROM scratch) is: its argument is that root.
const noTmpEntry = "spawn-test-no-tmp"

func init() { reexec.Register(noTmpEntry, noTmpMain) }

type noTmpResult struct {
	Err, Output string
	TmpBefore   bool
	ExitCode    int
}

func noTmpMain() {
	var res noTmpResult
	defer func() { _ = json.NewEncoder(os.Stdout).Encode(res); os.Exit(0) }()
	step := func(what string, err error) bool {
		if err != nil {
			res.Err = what + ": " + err.Error()
		}
		return err == nil
	}
	root := os.Args[1]
	if !step("make / private", unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, "")) ||
		!step("root tmpfs", unix.Mount("tmpfs", root, "tmpfs", 0, "mode=0755")) {
		return
	}
	// The system directories (and their merged-/usr links), /dev and
	// /proc; no /tmp.
	for _, d := range []string{"/usr", "/etc", "/dev", "/proc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"} {
		fi, err := os.Lstat(d)
		switch {
		case err != nil:
			continue
		case fi.Mode()&os.ModeSymlink != 0:
			target, _ := os.Readlink(d)
			if !step("link "+d, os.Symlink(target, root+d)) {
				return
			}
		default:
			if !step("mkdir "+d, os.Mkdir(root+d, 0o755)) || !step("bind "+d, unix.Mount(d, root+d, "", unix.MS_BIND|unix.MS_REC, "")) {
				return
			}
		}
	}
	if !step("mkdir /work", os.Mkdir(root+"/work", 0o755)) || !step("chown /work", os.Chown(root+"/work", testOwner, testOwner)) ||
		!step("chroot", unix.Chroot(root)) || !step("chdir", os.Chdir("/")) {
		return
	}
	_, err := os.Lstat("/tmp")
	res.TmpBefore = err == nil
	ws, err := Pin("/work")
	if !step("pin", err) {
		return
	}
	sh, err := PinProgram("/bin/sh")
	if !step("sh", err) {
		return
	}
	w, werr := os.CreateTemp("/work", "out")
	if !step("out", werr) {
		return
	}
	r, err := NewDirect(testOptions()).Run(context.Background(), Spec{Program: sh, Argv: []string{"sh", "-c", "echo ran in $(pwd)"},
		Env: []string{"PATH=/usr/bin:/bin"}, Dir: "/work", Workspace: ws}, Stdio{Stdout: w})
	w.Close()
	b, _ := os.ReadFile(w.Name())
	res.Output, res.ExitCode = string(b), r.ExitCode
	step("run", err)
}

// TestNoTmpInRoot: a root directory without /tmp (a container image built
// FROM scratch) is not an error: the helper makes the empty mount point
// its new root needs, and the call runs (issue 16).
func TestNoTmpInRoot(t *testing.T) {
	testenv.Require(t, os.Geteuid() == 0, "root (to build a root without /tmp)", testenv.ShapeNoUserns)
	requireSpawn(t)
	root := filepath.Join(t.TempDir(), "root")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := reexec.Command(noTmpEntry, root)
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNS}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, stderr.String())
	}
	var res noTmpResult
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("child said %q: %v", out, err)
	}
	if res.TmpBefore {
		t.Fatal("the root had a /tmp: the test proves nothing")
	}
	if res.Err != "" || res.ExitCode != 0 || !strings.Contains(res.Output, "ran in /work") {
		t.Fatalf("a call from a root without /tmp: %+v", res)
	}
}
