package spawn

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/b10x/harness/confine/spawn/internal/helper"
	"github.com/b10x/harness/confine/spawn/internal/seccomp"
	"github.com/b10x/harness/confine/spawn/internal/seccomp/seccomptest"
	"github.com/b10x/harness/internal/reexec"
	"github.com/b10x/harness/internal/testenv"
)

// floodEntry makes unshare(CLONE_NEWUSER) as often as its argument says
// and prints how many were refused with EPERM and how long they took.
const floodEntry = "spawn-test-refusal-flood"

func init() { reexec.Register(floodEntry, floodMain) }

func floodMain() {
	n, _ := strconv.Atoi(os.Args[1])
	eperm := 0
	start := time.Now()
	for range n {
		if _, _, e := unix.RawSyscall(unix.SYS_UNSHARE, unix.CLONE_NEWUSER, 0, 0); e == unix.EPERM {
			eperm++
		}
	}
	fmt.Printf("eperm=%d ns=%d\n", eperm, time.Since(start).Nanoseconds())
	os.Exit(0)
}

// TestDenialsOfSeccompAttributed: every call the child's filter refuses is
// handed to the call's own init (a seccomp user notification) and comes
// back in that call's Result, named with the argument that is its reason;
// the program still sees EPERM for each (TestSeccompInKernel's table, made
// here too), two calls at once get their own, and a flood of 100,000
// refusals leaves MaxRefused of them and the count (decision 0090).
func TestDenialsOfSeccompAttributed(t *testing.T) {
	testenv.Require(t, seccomp.Supported, "a seccomp filter for this architecture")
	sup := ProbeSeccompDenials()
	testenv.Require(t, sup.Attributable, "seccomp user notification ("+sup.Why+")", testenv.HostLacks(!sup.Attributable)...)
	abi, err := testenv.LandlockABI()
	if err != nil {
		t.Fatal(err)
	}
	cases := seccomptest.Cases(t, abi, seccomp.MaxKnownSyscall)
	argv := append([]string{"b10x-reexec:" + seccomptest.Entry}, seccomptest.Args(cases)...)
	for name, r := range runners(t) {
		ws := workspace(t)
		s := Spec{Program: pin(t, selfExe(t)), Argv: argv, Env: []string{"PATH=/usr/bin:/bin"}, Dir: ws, Workspace: pin(t, ws)}
		type call struct {
			res Result
			out output
			err error
		}
		calls := make([]*call, 2)
		var wg sync.WaitGroup
		for i := range calls {
			calls[i] = &call{}
			wg.Add(1)
			do := func() {
				defer wg.Done()
				c := calls[i]
				c.res, c.out, c.err = run(t, r, s)
			}
			if name == "pre-started" {
				do() // its one slot is for one call at a time
			} else {
				go do()
			}
		}
		wg.Wait()
		for i, c := range calls {
			if c.err != nil || c.res.ExitCode != 0 {
				t.Fatalf("%s: call %d: %v %+v\n%s", name, i, c.err, c.res, c.out)
			}
			seccomptest.Check(t, name, cases, c.out.stdout.Bytes())
			if !c.res.SeccompAttributed {
				t.Fatalf("%s: call %d: the filter's refusals were not told (layers %v)", name, i, c.res.Layers)
			}
			// Every EPERM the program saw of the filter, and nothing else,
			// is one refusal of this call.
			eperm := strings.Count(string(c.out.stdout.Bytes()), "=EPERM\n")
			if c.res.SeccompRefusedAll != eperm || len(c.res.SeccompRefused) != eperm {
				t.Errorf("%s: call %d: %d refusals told (%d listed), the program saw %d EPERMs: %q", name, i, c.res.SeccompRefusedAll, len(c.res.SeccompRefused), eperm, c.res.SeccompRefused)
			}
			for _, want := range []string{"unshare(CLONE_NEWUSER)", "clone(CLONE_NEWUSER)", "socket(AF_PACKET)", "socket(AF_VSOCK)", "mount", "bpf", "ioctl(TIOCSTI)", "fchmodat(S_ISUID)", "prlimit64(another process)"} {
				if !slices.Contains(c.res.SeccompRefused, want) {
					t.Errorf("%s: call %d: %q not among its refusals %q", name, i, want, c.res.SeccompRefused)
				}
			}
		}
		t.Logf("%s: %d refusals told, first %q", name, calls[0].res.SeccompRefusedAll, calls[0].res.SeccompRefused[:3])

		// A flood: the list stops at MaxRefused, the count goes on, and
		// the program sees EPERM for each. Through one runner: the others
		// reach the same init, and it takes a minute a runner in a TCG
		// guest.
		if name != "direct" {
			continue
		}
		const n = 100000
		flood := Spec{Program: pin(t, selfExe(t)), Argv: []string{"b10x-reexec:" + floodEntry, strconv.Itoa(n)}, Env: []string{"PATH=/usr/bin:/bin"}, Dir: ws, Workspace: pin(t, ws)}
		res, out, err := run(t, r, flood)
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("%s: flood: %v %+v\n%s", name, err, res, out)
		}
		got := strings.Fields(string(out.stdout.Bytes()))
		if len(got) != 2 || got[0] != "eperm="+strconv.Itoa(n) {
			t.Fatalf("%s: flood: %q, want eperm=%d", name, got, n)
		}
		for _, op := range res.SeccompRefused {
			if op != "unshare(CLONE_NEWUSER)" {
				t.Logf("%s: flood: other refusal %q", name, op)
			}
		}
		if res.SeccompRefusedAll != n || len(res.SeccompRefused) != helper.MaxRefused {
			t.Errorf("%s: flood: %d told, %d listed; want %d and %d", name, res.SeccompRefusedAll, len(res.SeccompRefused), n, helper.MaxRefused)
		}
		ns, _ := strconv.ParseInt(strings.TrimPrefix(got[1], "ns="), 10, 64)
		t.Logf("%s: flood: %d refused calls in %v (%v each), the call %v, memory peak %d", name, n, time.Duration(ns), time.Duration(ns/n), res.Duration, res.MemoryPeak)
	}
}

// underListenerEntry runs one call whose program makes unshare(CLONE_NEWUSER)
// from a process whose own filter stack already holds a seccomp listener
// (an allow-all filter loaded with SECCOMP_FILTER_FLAG_NEW_LISTENER, as a
// harness under a container runtime that notifies would be). It prints the
// program's output and whether the call's refusals were told.
const underListenerEntry = "spawn-test-under-listener"

func init() { reexec.Register(underListenerEntry, underListenerMain) }

func underListenerMain() {
	ws := os.Args[1]
	prog := []unix.SockFilter{{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ALLOW}}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		fmt.Println("no_new_privs:", err)
		os.Exit(3)
	}
	if err := loadAllowListener(prog); err != nil {
		fmt.Println("outer filter:", err)
		os.Exit(3)
	}
	s := Spec{Program: pinOrExit(os.Args[2]), Argv: []string{"b10x-reexec:" + seccomptest.Entry, "unshare-newuser=272,0x10000000"}, Env: []string{"PATH=/usr/bin:/bin"}, Dir: ws, Workspace: pinOrExit(ws)}
	res, err := NewDirect(testOptions()).Run(context.Background(), s, Stdio{Stdout: os.Stdout, Stderr: os.Stderr})
	fmt.Printf("err=%v attributed=%v layers=%v\n", err, res.SeccompAttributed, res.Layers)
	os.Exit(0)
}

// TestDenialsOfSeccompUnderAListener: where the harness's own filter stack
// holds a listener already, a stack takes no second one (EBUSY): the call
// still runs, its refused calls still fail with EPERM, and its Result says
// they were not told.
func TestDenialsOfSeccompUnderAListener(t *testing.T) {
	testenv.Require(t, seccomp.Supported, "a seccomp filter for this architecture")
	sup := ProbeSeccompDenials()
	testenv.Require(t, sup.Attributable, "seccomp user notification ("+sup.Why+")", testenv.HostLacks(!sup.Attributable)...)
	requireSpawn(t)
	ws := workspace(t)
	out, err := reexec.Command(underListenerEntry, ws, selfExe(t)).CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(string(out), "unshare-newuser=EPERM") || !strings.Contains(string(out), "err=<nil> attributed=false") {
		t.Fatalf("want the refusal EPERM and not told:\n%s", out)
	}
	t.Logf("%s", out)
	if !strings.Contains(string(out), "seccomp") {
		t.Errorf("the call ran without its filter:\n%s", out)
	}
}
