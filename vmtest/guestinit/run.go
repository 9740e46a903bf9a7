package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/b10x/harness/vmtest/internal/protocol"
)

// maxListed bounds how many leaked things of one kind are named.
const maxListed = 10

// runPackage runs one test binary and reports it. It returns true when the
// binary exited 0 and left nothing behind.
func runPackage(env *guestEnv, cfg protocol.Config, i int, p protocol.Package) bool {
	say(protocol.StartLine(p.ImportPath))
	start := time.Now()
	leaked := false
	leak := func(what string) {
		leaked = true
		say(protocol.LeakLine(p.ImportPath, what))
	}
	fail := func(why string) bool {
		say(protocol.InfoLine("error", p.ImportPath+": "+why))
		say(protocol.PkgLine(p.ImportPath, -1, time.Since(start)))
		return false
	}

	name := fmt.Sprintf("%02d-%s", i, path.Base(p.ImportPath))
	base := filepath.Join("/tmp/vmtest", name)
	work, err := makeWorkDir(env, cfg, base, p)
	if err != nil {
		return fail(err.Error())
	}
	mountsBefore, err := mountTargets()
	if err != nil {
		return fail(err.Error())
	}
	cgBefore := cgroupDirs(env)

	timeout := cfg.Timeout(p)
	t, err := startTest(env, cfg, p, name, base, work, timeout)
	if err != nil {
		return fail(err.Error())
	}
	var timedOut atomic.Bool
	if timeout > 0 {
		limit := timeout + cfg.Grace()
		timer := time.AfterFunc(limit, func() {
			timedOut.Store(true)
			if t.cg != "" {
				_ = os.WriteFile(filepath.Join(t.cg, "cgroup.kill"), []byte("1"), 0)
			}
			signalAll(unix.SIGKILL)
		})
		defer timer.Stop()
	}
	exit := waitFor(t.proc.Pid)
	_ = t.proc.Release()
	if timedOut.Load() {
		say(protocol.InfoLine("timeout", fmt.Sprintf("%s: killed %s after its -test.timeout", p.ImportPath, cfg.Grace())))
	}
	t.endAll(leak)
	checkLeftovers(env, t.cg, mountsBefore, cgBefore, leak)
	if err := os.RemoveAll(base); err != nil {
		leak(fmt.Sprintf("working directory: %v", err))
	}
	say(protocol.PkgLine(p.ImportPath, exit, time.Since(start)))
	return exit == 0 && !leaked
}

// makeWorkDir makes the binary's directories below base (src, a copy of
// the module; tmp; home), owned by the unprivileged user when the binary
// runs as one, and returns the package's directory in the copy.
func makeWorkDir(env *guestEnv, cfg protocol.Config, base string, p protocol.Package) (string, error) {
	src, tmp, home := filepath.Join(base, "src"), filepath.Join(base, "tmp"), filepath.Join(base, "home")
	for _, d := range []string{src, tmp, home} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return "", fmt.Errorf("mkdir %s: %v", d, err)
		}
	}
	if err := copyTree(cfg.SrcRoot, src); err != nil {
		return "", err
	}
	work := filepath.Join(src, filepath.FromSlash(p.Dir))
	if st, err := os.Stat(work); err != nil || !st.IsDir() {
		return "", fmt.Errorf("package directory %s missing from the module copy: %v", p.Dir, err)
	}
	if env.unprivileged {
		if err := chownTree(base, env.uid, env.gid); err != nil {
			return "", err
		}
	}
	return work, nil
}

// testRun is a started test binary: its process, the read end of its
// output (copied to the console until copied is closed), and its cgroup
// ("" when the guest has none for it).
type testRun struct {
	proc   *os.Process
	out    *os.File
	copied chan struct{}
	cg     string
}

// startTest starts p's binary in work, as the unprivileged user when the
// guest runs tests as one, in a cgroup of its own named for name when the
// guest has a parent for them, with the shape's environment and its
// directories below base (tmp, home), and copies its output to the console.
func startTest(env *guestEnv, cfg protocol.Config, p protocol.Package, name, base, work string, timeout time.Duration) (*testRun, error) {
	sys := &syscall.SysProcAttr{}
	if env.unprivileged {
		sys.Credential = &syscall.Credential{Uid: uint32(env.uid), Gid: uint32(env.gid), Groups: []uint32{}}
	}
	t := &testRun{copied: make(chan struct{})}
	cgFD := -1
	if env.cgroupParent != "" {
		t.cg = filepath.Join(env.cgroupParent, name+".service")
		var err error
		if cgFD, err = makeCgroup(t.cg, env); err != nil {
			return nil, err
		}
		sys.UseCgroupFD, sys.CgroupFD = true, cgFD
	}

	devnull, err := os.Open(os.DevNull)
	if err != nil {
		return nil, fmt.Errorf("open %s: %v", os.DevNull, err)
	}
	defer devnull.Close()
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("pipe: %v", err)
	}
	args := []string{p.Binary, "-test.v=true", "-test.count=1", "-test.paniconexit0"}
	if timeout > 0 {
		args = append(args, "-test.timeout="+timeout.String())
	}
	if cfg.Run != "" {
		args = append(args, "-test.run="+cfg.Run)
	}
	user, logname := "root", "root"
	if env.unprivileged {
		user, logname = protocol.UnprivilegedName, protocol.UnprivilegedName
	}
	t.proc, err = os.StartProcess(p.Binary, args, &os.ProcAttr{
		Dir: work,
		Env: append([]string{
			"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
			"HOME=" + filepath.Join(base, "home"), "TMPDIR=" + filepath.Join(base, "tmp"), "USER=" + user, "LOGNAME=" + logname,
			"LANG=C.UTF-8", "B10X_SHAPE=" + protocol.TestShape(env.shape), "B10X_VM=" + env.shape,
		}, cfg.Env...),
		Files: []*os.File{devnull, w, w},
		Sys:   sys,
	})
	w.Close()
	if cgFD >= 0 {
		unix.Close(cgFD)
	}
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("start %s: %v", p.Binary, err)
	}
	t.out = r
	go func() {
		defer close(t.copied)
		copyLines(r, console)
	}()
	return t, nil
}

// endAll ends what the binary left running once it has exited (each
// process reported as a leak), waits for its output to be copied, and
// closes it.
func (t *testRun) endAll(leak func(string)) {
	// Whatever still runs was started by the tests and not cleaned up.
	rest, err := leftovers(time.Second)
	if err != nil {
		leak(err.Error())
	}
	for i, pr := range rest {
		if i == maxListed {
			leak(fmt.Sprintf("process: and %d more", len(rest)-maxListed))
			break
		}
		leak("process: " + pr.String())
	}
	if t.cg != "" {
		_ = os.WriteFile(filepath.Join(t.cg, "cgroup.kill"), []byte("1"), 0)
	}
	if survivors := killAll(5 * time.Second); len(survivors) > 0 {
		leak(fmt.Sprintf("process: %d could not be killed, first: %v", len(survivors), survivors[0]))
	}
	select {
	case <-t.copied:
	case <-time.After(5 * time.Second):
		leak("output pipe still open 5s after every process was killed")
	}
	t.out.Close()
}

// checkLeftovers reports and removes what the binary left in the guest
// beyond processes: its cgroup cg and what is below it, mounts that were
// not in mountsBefore, and cgroups made elsewhere that were not in
// cgBefore.
func checkLeftovers(env *guestEnv, cg string, mountsBefore, cgBefore []string, leak func(string)) {
	if cg != "" {
		for _, what := range removeCgroup(cg) {
			leak(what)
		}
	}
	if after, err := mountTargets(); err == nil {
		for _, m := range newItems(mountsBefore, after) {
			leak("mount: " + m)
			_ = unix.Unmount(m, unix.MNT_DETACH)
		}
	}
	// Cgroups made elsewhere than below the binary's own (which
	// removeCgroup handled), e.g. by a test that moved itself out.
	extra := slices.DeleteFunc(newItems(cgBefore, cgroupDirs(env)), func(d string) bool {
		return cg != "" && (d == cg || strings.HasPrefix(d, cg+"/"))
	})
	sort.Sort(sort.Reverse(sort.StringSlice(extra)))
	for _, d := range extra {
		leak("cgroup: " + d)
		_ = os.WriteFile(filepath.Join(d, "cgroup.kill"), []byte("1"), 0)
		_ = os.Remove(d)
	}
}

// waitFor reaps children until pid exits and returns its exit status, or -1
// when a signal ended it. Orphans the tests leave are reaped on the way.
func waitFor(pid int) int {
	for {
		var ws unix.WaitStatus
		got, err := unix.Wait4(-1, &ws, 0, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			say(protocol.InfoLine("error", fmt.Sprintf("wait4: %v", err)))
			return -1
		}
		if got != pid {
			continue
		}
		switch {
		case ws.Exited():
			return ws.ExitStatus()
		case ws.Signaled():
			say(protocol.InfoLine("signal", fmt.Sprintf("pid %d killed by signal %d (%v)", pid, int(ws.Signal()), ws.Signal())))
			return -1
		}
	}
}

// signalAll sends sig to every process but this one, without reaping.
func signalAll(sig unix.Signal) {
	ps, _ := otherProcs()
	for _, p := range ps {
		_ = unix.Kill(p.pid, sig)
	}
}

// copyLines copies the tests' output to the console a line at a time (a
// line longer than the buffer goes in pieces). A line of output that starts
// like a result line gets a space in front, so no test can speak for init.
func copyLines(r io.Reader, w io.Writer) {
	br := bufio.NewReaderSize(r, 64<<10)
	atStart := true
	for {
		line, err := br.ReadSlice('\n')
		if len(line) > 0 {
			if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
				line = append(line, '\n')
			}
			if atStart && bytes.HasPrefix(line, []byte(protocol.Prefix)) {
				line = append([]byte{' '}, line...)
			}
			atStart = line[len(line)-1] == '\n'
			_, _ = w.Write(line)
		}
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			return
		}
	}
}

// makeCgroup creates the test binary's cgroup and, for an unprivileged test
// user, delegates it the way systemd does (Delegate=yes): the directory and
// its cgroup.procs, cgroup.subtree_control and cgroup.threads belong to the
// user. It returns an open directory fd for CLONE_INTO_CGROUP.
func makeCgroup(dir string, env *guestEnv) (int, error) {
	if err := os.Mkdir(dir, 0o755); err != nil {
		return -1, fmt.Errorf("mkdir cgroup %s: %w", dir, err)
	}
	if env.unprivileged {
		for _, f := range []string{"", "cgroup.procs", "cgroup.subtree_control", "cgroup.threads"} {
			if err := os.Lchown(filepath.Join(dir, f), env.uid, env.gid); err != nil {
				return -1, fmt.Errorf("delegate cgroup %s to uid %d: %w", dir, env.uid, err)
			}
		}
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open cgroup %s: %w", dir, err)
	}
	return fd, nil
}

// removeCgroup reports the cgroups the tests left below dir, kills anything
// in them and removes the whole subtree, deepest first. It returns one line
// per leftover cgroup and per failure.
func removeCgroup(dir string) []string {
	var dirs []string
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	var out []string
	for _, d := range dirs {
		if d != dir {
			if len(out) < maxListed {
				out = append(out, "cgroup: "+d)
			} else if len(out) == maxListed {
				out = append(out, "cgroup: more")
			}
		}
	}
	slices.Reverse(dirs)
	for _, d := range dirs {
		var err error
		for range 50 {
			if err = unix.Rmdir(d); err == nil || !errors.Is(err, unix.EBUSY) {
				break
			}
			_ = os.WriteFile(filepath.Join(d, "cgroup.kill"), []byte("1"), 0)
			reapAll()
			time.Sleep(20 * time.Millisecond)
		}
		if err != nil {
			out = append(out, fmt.Sprintf("cgroup: rmdir %s: %v", d, err))
		}
	}
	return out
}

func mountTargets() ([]string, error) {
	ms, err := readMountinfo()
	if err != nil {
		return nil, err
	}
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.target
	}
	return out, nil
}

// cgroupDirs lists every cgroup directory below the roots of the shape's
// hierarchies (the cgroup2 mount or each v1 mount).
func cgroupDirs(env *guestEnv) []string {
	roots := env.v1Mounts
	if env.cgroupParent != "" {
		roots = []string{cgroupRoot}
	}
	var out []string
	for _, root := range roots {
		_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() && p != root {
				out = append(out, p)
			}
			return nil
		})
	}
	return out
}

// newItems returns the elements of after that are not in before, counting
// duplicates (a second mount on the same target is new).
func newItems(before, after []string) []string {
	count := map[string]int{}
	for _, b := range before {
		count[b]++
	}
	var out []string
	for _, a := range after {
		if count[a] > 0 {
			count[a]--
			continue
		}
		out = append(out, a)
	}
	return out
}

// copyTree copies the module's files, as packed by the host, into the
// binary's fresh directory.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("copy %s: %w", p, err)
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return fmt.Errorf("copy %s: %w", p, err)
		}
		target := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return fmt.Errorf("copy %s: %w", p, err)
		}
		switch {
		case d.IsDir():
			if err := os.MkdirAll(target, info.Mode().Perm()|0o700); err != nil {
				return fmt.Errorf("copy %s: %w", p, err)
			}
		case d.Type() == fs.ModeSymlink:
			l, err := os.Readlink(p)
			if err == nil {
				err = os.Symlink(l, target)
			}
			if err != nil {
				return fmt.Errorf("copy %s: %w", p, err)
			}
		case d.Type().IsRegular():
			b, err := os.ReadFile(p)
			if err == nil {
				err = os.WriteFile(target, b, info.Mode().Perm())
			}
			if err != nil {
				return fmt.Errorf("copy %s: %w", p, err)
			}
		}
		return nil
	})
}

func chownTree(root string, uid, gid int) error {
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("chown %s: %w", p, err)
		}
		if err := os.Lchown(p, uid, gid); err != nil {
			return fmt.Errorf("chown %s to %s: %w", p, strconv.Itoa(uid), err)
		}
		return nil
	})
}
