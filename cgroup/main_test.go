package cgroup

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/b10x/harness/internal/reexec"
	"github.com/b10x/harness/internal/testenv"
)

// Tests that open a Manager (which may move the process between cgroups)
// run in a re-executed child of the test binary: the entry point childEntry
// runs one named scenario and prints its result as JSON on stdout. Exit
// status 1 is a failure (reason on stderr), exitMissing means a feature the
// scenario needs is missing (reason on stderr); the parent test decides
// through testenv.Require whether that is a skip or a failure.
const (
	childEntry  = "cgroup-test"
	exitMissing = 3
)

// scenarios are the child programs; filled in by init functions of the
// test files.
var scenarios = map[string]func(args []string) (any, error){}

func init() { reexec.Register(childEntry, childMain) }

// missingError reports a feature a scenario needs and the host lacks.
type missingError struct{ what string }

func (e missingError) Error() string { return e.what }

func childMain() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "cgroup-test: no scenario")
		os.Exit(1)
	}
	fn, ok := scenarios[os.Args[1]]
	if !ok {
		fmt.Fprintf(os.Stderr, "cgroup-test: unknown scenario %q\n", os.Args[1])
		os.Exit(1)
	}
	res, err := fn(os.Args[2:])
	var me missingError
	if errors.As(err, &me) {
		fmt.Fprintln(os.Stderr, me.what)
		os.Exit(exitMissing)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "scenario %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
	if err := json.NewEncoder(os.Stdout).Encode(res); err != nil {
		fmt.Fprintf(os.Stderr, "scenario %s: encode result: %v\n", os.Args[1], err)
		os.Exit(1)
	}
	os.Exit(0)
}

// openOrMissing opens a Manager, turning "no cgroup v2" into missingError.
func openOrMissing() (*Manager, error) {
	m, err := Open(Options{})
	if errors.Is(err, ErrNotSupported) {
		return nil, missingError{"cgroup v2: " + err.Error()}
	}
	return m, err
}

// requireControllers returns missingError unless leaves get every named
// controller.
func requireControllers(m *Manager, names ...string) error {
	for _, n := range names {
		if !slices.Contains(m.Controllers(), n) {
			return missingError{fmt.Sprintf("%s controller for leaves: %s", n, m.missingFor(n))}
		}
	}
	return nil
}

// childPids records every test child (and grandchild reported back) so
// that TestMain can find cgroup directories they leaked.
var (
	childMu   sync.Mutex
	childPids = map[int]bool{}
)

func recordPid(pid int) {
	childMu.Lock()
	childPids[pid] = true
	childMu.Unlock()
}

var siblingSeq int

// moved records that childCgroup moved the test process down into a child
// of its own cgroup, so that TestMain can move it back.
var moved struct {
	own    string   // the test's original cgroup, delegated to the test user
	main   string   // own/b10xtest-PID-main, where the test process now runs
	before []string // own's cgroup.subtree_control before the move
	tried  bool     // the move was attempted (once per test binary)
}

// childCgroup returns the cgroup a scenario child should start in: "" (the
// test's own cgroup) when that is the hierarchy's root, where a child may
// enable controllers for its leaves. In a non-root cgroup the test process
// itself would keep the child from doing so (the no-internal-process rule),
// so the child is started alone in a fresh cgroup, removed in t.Cleanup:
//
//   - a sibling of the test's cgroup, when the test may create one there
//     (root, as in the debian-6.1 shape);
//   - otherwise (EACCES or EPERM: an unprivileged test in a delegated
//     cgroup, as in the no-userns shape, where only its own cgroup is
//     writable) a child of the test's own cgroup, after moving the test
//     process once into another child of it, OWN/b10xtest-PID-main, and
//     enabling the managed controllers in OWN: what a service with
//     Delegate=yes does with its subtree. TestMain moves the process back
//     (restoreOwn).
//
// "" when none of this can be done; the scenario then reports what it lacks.
func childCgroup(t *testing.T) string {
	t.Helper()
	loc, err := locateSelf("")
	if err != nil || isRootCgroup(loc.dir) {
		return ""
	}
	siblingSeq++
	name := fmt.Sprintf("b10xtest-%d-%d", os.Getpid(), siblingSeq)
	up := filepath.Dir(loc.dir)
	dir := filepath.Join(up, name)
	err = unix.Mkdir(dir, 0o755)
	if (errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM)) && !moved.tried {
		moved.tried = true
		if merr := moveIntoOwnChild(loc.dir); merr != nil {
			t.Logf("children start in the test's own cgroup: create sibling %s: %v; and %v", dir, err, merr)
			return ""
		}
		t.Logf("create sibling %s: %v; the test process moved into %s and children start beside it", dir, err, moved.main)
		up = moved.own
		dir = filepath.Join(up, name)
		err = unix.Mkdir(dir, 0o755)
	}
	if err != nil {
		t.Logf("children start in the test's own cgroup: create %s: %v", dir, err)
		return ""
	}
	// The new cgroup gets the controllers its parent enables for children;
	// enable the managed ones there when the parent may (it holds no
	// process), as a delegating service manager would have.
	if !isRootCgroup(up) {
		if procs, err := readPids(filepath.Join(up, "cgroup.procs")); err == nil && len(procs) == 0 {
			if err := enableManaged(up); err != nil {
				t.Logf("enable controllers for the test cgroup: %v", err)
			}
		}
	}
	t.Cleanup(func() {
		if err := removeTree(dir); err != nil {
			t.Errorf("remove test cgroup: %v", err)
		}
	})
	return dir
}

// enableManaged enables in dir's cgroup.subtree_control every managed
// controller dir offers and does not enable yet.
func enableManaged(dir string) error {
	avail, err := readList(filepath.Join(dir, "cgroup.controllers"))
	if err != nil {
		return err
	}
	on, err := readList(filepath.Join(dir, "cgroup.subtree_control"))
	if err != nil {
		return err
	}
	var errs []error
	for _, c := range managed {
		if slices.Contains(avail, c) && !slices.Contains(on, c) {
			if err := writeFile(filepath.Join(dir, "cgroup.subtree_control"), "+"+c); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// moveIntoOwnChild moves the test process from own into a new child
// own/b10xtest-PID-main and enables the managed controllers in own, so that
// own holds no process and its other children get the controllers. It
// fails, having undone what it did, when own holds other processes (they
// would keep own from enabling controllers, and a test never moves them)
// or a step fails.
func moveIntoOwnChild(own string) (err error) {
	pid := os.Getpid()
	procs, err := readPids(filepath.Join(own, "cgroup.procs"))
	if err != nil {
		return err
	}
	if len(procs) != 1 || procs[0] != pid {
		return fmt.Errorf("cannot make %s hold no process: it holds %v besides this test process (%d)", own, procs, pid)
	}
	before, err := readList(filepath.Join(own, "cgroup.subtree_control"))
	if err != nil {
		return err
	}
	main := filepath.Join(own, fmt.Sprintf("b10xtest-%d-main", pid))
	if err := unix.Mkdir(main, 0o755); err != nil {
		return fmt.Errorf("create %s to move the test process into: %w", main, err)
	}
	moved.own, moved.main, moved.before = own, main, before
	if err := writeFile(filepath.Join(main, "cgroup.procs"), strconv.Itoa(pid)); err != nil {
		moved.own, moved.main = "", ""
		return errors.Join(fmt.Errorf("move the test process into %s: %w", main, err), rmdirRetry(main))
	}
	if err := enableManaged(own); err != nil {
		return errors.Join(err, restoreOwn())
	}
	return nil
}

// restoreOwn undoes moveIntoOwnChild: it disables in own's
// cgroup.subtree_control what was enabled since, moves the test process
// back into own and removes own/b10xtest-PID-main. Nothing to do when the
// process was not moved. Errors join every step that failed.
func restoreOwn() error {
	if moved.main == "" {
		return nil
	}
	var errs []error
	ctl := filepath.Join(moved.own, "cgroup.subtree_control")
	on, err := readList(ctl)
	if err != nil {
		errs = append(errs, err)
	}
	for _, c := range slices.Backward(on) {
		if !slices.Contains(moved.before, c) {
			if err := writeFile(ctl, "-"+c); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if err := writeFile(filepath.Join(moved.own, "cgroup.procs"), strconv.Itoa(os.Getpid())); err != nil {
		errs = append(errs, fmt.Errorf("move the test process back into %s: %w", moved.own, err))
	} else if err := rmdirRetry(moved.main); err != nil {
		errs = append(errs, err)
	} else {
		moved.own, moved.main = "", ""
	}
	return errors.Join(errs...)
}

// childOpts are the options of one scenario run.
type childOpts struct {
	lacking []string      // shapes where a missing feature is a skip
	timeout time.Duration // default 2 minutes (the VM shapes run under TCG)
	cgroup  string        // start the child in this cgroup; "" inherits
}

// runChild runs scenario in a re-executed child and decodes its result into
// out. A missing feature goes through testenv.Require with o.lacking.
func runChild(t *testing.T, o childOpts, out any, scenario string, args ...string) {
	t.Helper()
	if o.timeout == 0 {
		o.timeout = 2 * time.Minute
	}
	cmd := reexec.Command(childEntry, append([]string{scenario}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if o.cgroup != "" {
		fd, err := unix.Open(o.cgroup, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatalf("open child cgroup: %v", err)
		}
		defer unix.Close(fd)
		cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd}
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start child %s: %v", scenario, err)
	}
	recordPid(cmd.Process.Pid)
	timer := time.AfterFunc(o.timeout, func() { _ = cmd.Process.Kill() })
	err := cmd.Wait()
	timer.Stop()
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() == exitMissing {
		testenv.Require(t, false, strings.TrimSpace(stderr.String()), o.lacking...)
		t.Fatalf("unreachable: Require returned for a missing feature")
	}
	if err != nil {
		t.Fatalf("child %s: %v\nstderr:\n%s", scenario, err, stderr.String())
	}
	if err := json.Unmarshal(stdout.Bytes(), out); err != nil {
		t.Fatalf("child %s: decode result %q: %v\nstderr:\n%s", scenario, stdout.String(), err, stderr.String())
	}
}

// startIn starts argv directly inside leaf (CLONE_INTO_CGROUP).
func startIn(leaf *Leaf, cmd *exec.Cmd) error {
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: leaf.FD()}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %v in %s: %w", cmd.Args, leaf.Path(), err)
	}
	return nil
}

// reapAll reaps every exited child (those orphans re-parented to this
// process as subreaper included) until none is left or deadline.
func reapAll(deadline time.Duration) error {
	end := time.Now().Add(deadline)
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
		switch {
		case err == unix.ECHILD:
			return nil
		case err == unix.EINTR:
		case err != nil:
			return fmt.Errorf("wait4: %w", err)
		case pid == 0:
			if time.Now().After(end) {
				return fmt.Errorf("children still running after %v", deadline)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}

// gone reports whether no process pid exists any more (not even a zombie).
func gone(pid int) error {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	return fmt.Errorf("process %d still exists: %s", pid, strings.TrimSpace(string(b)))
}

// waitFor polls cond until it returns true or the deadline passes.
func waitFor(ctx context.Context, what string, cond func() (bool, error)) error {
	for {
		ok, err := cond()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// leaked lists harness cgroup directories left by this test process or its
// children: parents and probe directories named after one of their PIDs
// in or beside the test's cgroup, and the test cgroups childCgroup made
// there (siblings, or children of the test's own cgroup, the one the test
// process was moved into included when moving it back failed).
func leaked() []string {
	loc, err := locateSelf("")
	if err != nil {
		return nil // no cgroup v2: nothing can leak
	}
	childMu.Lock()
	defer childMu.Unlock()
	var out []string
	check := func(dir string) {
		names, err := subdirs(dir)
		if err != nil {
			return
		}
		for _, n := range names {
			pid, _, ok := parseParentName(n, DefaultName)
			if !ok {
				pid, _, ok = parseParentName(n, DefaultName+"-"+probeInfix)
			}
			if ok && (childPids[pid] || pid == os.Getpid()) {
				out = append(out, filepath.Join(dir, n))
			}
			if strings.HasPrefix(n, fmt.Sprintf("b10xtest-%d-", os.Getpid())) {
				out = append(out, filepath.Join(dir, n))
			}
		}
	}
	check(loc.dir)
	if !isRootCgroup(loc.dir) {
		check(filepath.Dir(loc.dir))
	}
	return out
}

func TestMain(m *testing.M) {
	reexec.Init()
	code := m.Run()
	// Back into the original cgroup first, so that leaked looks there.
	if err := restoreOwn(); err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: restore the test's cgroup: %v\n", err)
		code = 1
	}
	if l := leaked(); len(l) > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: cgroup directories left behind by the tests: %s\n", strings.Join(l, ", "))
		code = 1
	}
	os.Exit(code)
}
