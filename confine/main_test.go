package confine

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/b10x/harness/internal/reexec"
)

// noopEntry exits at once; TestMain starts it to warm the runtime up.
const noopEntry = "confine-test-noop"

func init() { reexec.Register(noopEntry, func() { os.Exit(0) }) }

func TestMain(m *testing.M) {
	reexec.Init()
	// Warm up what the runtime opens lazily and keeps (the netpoller,
	// the pidfd check), so that only leaks count.
	_ = reexec.Command(noopEntry).Run()
	before := openFDs()
	code := m.Run()
	if after := openFDs(); code == 0 && len(after) > len(before) {
		fmt.Fprintf(os.Stderr, "leaked file descriptors: before %v, after %v\n", before, after)
		code = 1
	}
	os.Exit(code)
}

// openFDs lists this process's open descriptors with their targets.
func openFDs() []string {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		fmt.Fprintf(os.Stderr, "list fds: %v\n", err)
		os.Exit(1)
	}
	var out []string
	for _, e := range ents {
		target, _ := os.Readlink("/proc/self/fd/" + e.Name())
		out = append(out, e.Name()+"="+target)
	}
	return out
}

// runTestChild re-executes the test binary under a registered entry point
// and decodes the one JSON object it prints into out. The child's stderr is
// logged; a failed child fails the test.
func runTestChild(t *testing.T, attr *syscall.SysProcAttr, out any, entry string, args ...string) {
	t.Helper()
	cmd := reexec.Command(entry, args...)
	cmd.SysProcAttr = attr
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if stderr.Len() > 0 {
		t.Logf("child %s stderr:\n%s", entry, stderr.String())
	}
	if err != nil {
		t.Fatalf("child %s %q: %v", entry, args, err)
	}
	if err := json.Unmarshal(stdout.Bytes(), out); err != nil {
		t.Fatalf("child %s: bad output %q: %v", entry, stdout.String(), err)
	}
}

// childPrint writes v as the child's one JSON answer and exits 0.
func childPrint(v any) {
	if err := json.NewEncoder(os.Stdout).Encode(v); err != nil {
		os.Stderr.WriteString("child: encode: " + err.Error() + "\n")
		os.Exit(3)
	}
	os.Exit(0)
}

// Classic BPF opcodes for the seccomp filters tests install.
const (
	bpfLd   = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
	bpfJeq  = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
	bpfJset = unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K
	bpfRet  = unix.BPF_RET | unix.BPF_K
)

// installTestFilter sets no_new_privs on every thread and installs filter
// on every thread (TSYNC). Only test children call it.
func installTestFilter(filter []unix.SockFilter) error {
	if _, _, e := syscall.AllThreadsSyscall(syscall.SYS_PRCTL, unix.PR_SET_NO_NEW_PRIVS, 1, 0); e != 0 {
		return fmt.Errorf("prctl(PR_SET_NO_NEW_PRIVS) on all threads: %w", e)
	}
	prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	if _, _, e := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&prog))); e != 0 {
		return fmt.Errorf("seccomp(SET_MODE_FILTER, TSYNC): %w", e)
	}
	return nil
}
