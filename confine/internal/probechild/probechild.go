// Package probechild is the child side of the kernel probe in package
// confine: a re-executed copy of the binary that is created with the
// namespace flags under test (or none) and reports, as one JSON object on
// stdout, what took effect.
//
// It imports the standard library only and runs from its package's init,
// like the spawn helper: Go initialises packages in import-path order among
// those ready, so the child answers before the MCP SDK, kong and the
// rest of the binary initialise, which is most of a start of the CLI binary
// (docs/decisions/0034). In any other process the init does nothing.
package probechild

import (
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
)

// Argv0 is the probe child's argv[0]: internal/reexec's prefix and the
// entry name package confine starts it under.
const Argv0 = "b10x-reexec:confine-probe"

func init() {
	if len(os.Args) > 0 && os.Args[0] == Argv0 {
		Main()
	}
}

// Result is what a probe child prints on stdout, one JSON object.
type Result struct {
	OK     bool   `json:"ok"`
	Step   string `json:"step,omitempty"`  // the step that failed
	Errno  int    `json:"errno,omitempty"` // its errno, 0 when not a syscall failure
	Detail string `json:"detail"`
}

// Main runs in the re-executed child. Arguments:
//
//	ns NAME PARENT_INODE        report whether /proc/self/ns/NAME differs from the parent's
//	nsall NAME=INODE...         the same for several kinds at once
//	seccomp                     set no_new_privs, install an allow-all filter, report each step
//
// It always exits 0 after printing its result, or 2 on bad arguments (a
// bug) or when the result cannot be written.
func Main() {
	args := os.Args[1:]
	var res Result
	switch {
	case len(args) == 3 && args[0] == "ns":
		res = namespace(args[1], args[2])
	case len(args) == 1 && args[0] == "seccomp":
		res = seccomp()
	case len(args) > 1 && args[0] == "nsall":
		res = allNamespaces(args[1:])
	default:
		fmt.Fprintf(os.Stderr, "confine probe: bug: bad arguments %q\n", args)
		os.Exit(2)
	}
	if err := json.NewEncoder(os.Stdout).Encode(res); err != nil {
		fmt.Fprintf(os.Stderr, "confine probe: write result: %v\n", err)
		os.Exit(2)
	}
	os.Exit(0)
}

// namespace compares this process's namespace of kind proc with the
// parent's inode; a new PID namespace must also make this process PID 1.
func namespace(proc, parentIno string) Result {
	var st syscall.Stat_t
	if err := syscall.Stat("/proc/self/ns/"+proc, &st); err != nil {
		return Result{Step: "stat /proc/self/ns/" + proc, Errno: errnoOf(err), Detail: err.Error()}
	}
	if strconv.FormatUint(st.Ino, 10) == parentIno {
		return Result{Step: "compare", Detail: fmt.Sprintf("child still in the parent's %s namespace (inode %d)", proc, st.Ino)}
	}
	d := fmt.Sprintf("created (inode %d)", st.Ino)
	if proc == "pid" {
		if pid := os.Getpid(); pid != 1 {
			return Result{Step: "getpid", Detail: fmt.Sprintf("new pid namespace but the child is pid %d, not 1", pid)}
		}
		d += ", child is pid 1"
	}
	return Result{OK: true, Detail: d}
}

// allNamespaces checks every NAME=INODE pair; the first failure is the
// result.
func allNamespaces(pairs []string) Result {
	var details []string
	for _, p := range pairs {
		name, ino, ok := strings.Cut(p, "=")
		if !ok {
			return Result{Step: "arguments", Detail: "bad pair " + p}
		}
		r := namespace(name, ino)
		if !r.OK {
			return r
		}
		details = append(details, name+" "+r.Detail)
	}
	return Result{OK: true, Detail: strings.Join(details, "; ")}
}

// prctl options and seccomp values (linux/prctl.h, linux/seccomp.h,
// linux/filter.h).
const (
	prGetSeccomp      = 21
	prSetNoNewPrivs   = 38
	prGetNoNewPrivs   = 39
	seccompModeFilter = 2
	seccompSetFilter  = 1    // SECCOMP_SET_MODE_FILTER
	bpfRetK           = 0x06 // BPF_RET | BPF_K (BPF_K is 0)
	seccompRetAllow   = 0x7fff0000
)

func prctl(option uintptr) (int, error) {
	r, _, e := syscall.RawSyscall6(syscall.SYS_PRCTL, option, 0, 0, 0, 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(r), nil
}

// seccomp sets no_new_privs, reads it back, installs an allow-all filter
// and reads the seccomp mode back, on this one thread.
func seccomp() Result {
	runtime.LockOSThread()
	if _, _, e := syscall.RawSyscall6(syscall.SYS_PRCTL, prSetNoNewPrivs, 1, 0, 0, 0, 0); e != 0 {
		return Result{Step: "prctl(PR_SET_NO_NEW_PRIVS)", Errno: int(e), Detail: e.Error()}
	}
	if v, err := prctl(prGetNoNewPrivs); err != nil || v != 1 {
		return Result{Step: "prctl(PR_GET_NO_NEW_PRIVS)", Errno: errnoOf(err), Detail: fmt.Sprintf("reads back %d (%v)", v, err)}
	}
	if e := setModeFilter([]syscall.SockFilter{{Code: bpfRetK, K: seccompRetAllow}}); e != 0 {
		return Result{Step: "seccomp(SET_MODE_FILTER)", Errno: int(e), Detail: e.Error()}
	}
	if mode, err := prctl(prGetSeccomp); err != nil || mode != seccompModeFilter {
		return Result{Step: "prctl(PR_GET_SECCOMP)", Errno: errnoOf(err), Detail: fmt.Sprintf("mode %d after installing a filter (%v)", mode, err)}
	}
	return Result{OK: true, Detail: "no_new_privs set; filter installed (seccomp mode 2)"}
}

func errnoOf(err error) int {
	if e, ok := err.(syscall.Errno); ok {
		return int(e)
	}
	return 0
}
