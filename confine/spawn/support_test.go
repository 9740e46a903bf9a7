package spawn

import (
	"bufio"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
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
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/b10x/harness/confine"
	"github.com/b10x/harness/internal/reexec"
	"github.com/b10x/harness/internal/testenv"
)

// Entry points of the test binary. The probe runs INSIDE the confinement as
// the target program: it is an ordinary binary there (the test binary
// itself), making the raw system calls an attacker would.
const (
	probeEntry   = "spawn-test-probe"
	harnessEntry = "spawn-test-harness"
	allocEntry   = "spawn-test-alloc"
)

func init() {
	reexec.Register(probeEntry, probeMain)
	reexec.Register(harnessEntry, harnessMain)
	reexec.Register(allocEntry, allocMain)
}

// probeMain runs each probe named in its arguments ("name" or
// "name:operand") and prints "name=result" per line, where result is "ok",
// an errno name, or data. It exits 0 whatever the probes found.
func probeMain() {
	w := bufio.NewWriter(os.Stdout)
	for _, arg := range os.Args[1:] {
		name, operand, _ := strings.Cut(arg, ":")
		fmt.Fprintf(w, "%s=%s\n", arg, probe(name, operand))
		w.Flush()
	}
	w.Flush()
	os.Exit(0)
}

func errName(err error) string {
	if err == nil {
		return "ok"
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		if n := unix.ErrnoName(errno); n != "" {
			return n
		}
		return "errno" + strconv.Itoa(int(errno))
	}
	return "error:" + strings.ReplaceAll(err.Error(), "\n", " ")
}

func rawErr(e syscall.Errno) error {
	if e == 0 {
		return nil
	}
	return e
}

func probe(name, operand string) string {
	switch name {
	case "execfn":
		return execFn()
	case "argv":
		var b strings.Builder
		for _, a := range os.Args {
			b.WriteString(hex.EncodeToString([]byte(a)) + ",")
		}
		return b.String()
	case "env":
		// The kernel's copy, byte for byte (Go's os.Environ drops
		// duplicates).
		raw, err := os.ReadFile("/proc/self/environ")
		if err != nil {
			return errName(err)
		}
		var b strings.Builder
		for _, e := range strings.SplitAfter(string(raw), "\x00") {
			if e == "" {
				continue
			}
			b.WriteString(hex.EncodeToString([]byte(strings.TrimSuffix(e, "\x00"))) + ",")
		}
		return b.String()
	case "read":
		data, err := os.ReadFile(operand)
		if err != nil {
			return errName(err)
		}
		return "data:" + hex.EncodeToString(data)
	case "write":
		err := os.WriteFile(operand, []byte("written from the sandbox\n"), 0o644)
		return errName(err)
	case "exec":
		err := unix.Exec(operand, []string{operand}, nil)
		return errName(err)
	case "tcp", "udp":
		host, port, _ := strings.Cut(operand, ":")
		p, _ := strconv.Atoi(port)
		typ := unix.SOCK_STREAM
		if name == "udp" {
			typ = unix.SOCK_DGRAM
		}
		fd, err := unix.Socket(unix.AF_INET, typ|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return "socket:" + errName(err)
		}
		defer unix.Close(fd)
		sa := &unix.SockaddrInet4{Port: p}
		copy(sa.Addr[:], parseIP4(host))
		if name == "tcp" {
			return errName(unix.Connect(fd, sa))
		}
		return errName(unix.Sendto(fd, []byte("udp from the sandbox"), 0, sa))
	case "vsock":
		fd, err := unix.Socket(unix.AF_VSOCK, unix.SOCK_STREAM, 0)
		if err == nil {
			unix.Close(fd)
		}
		return errName(err)
	case "vsock-high":
		// The domain with garbage in the high half: the kernel reads an
		// int, so this is AF_VSOCK to it.
		fd, _, e := unix.RawSyscall(unix.SYS_SOCKET, 1<<32|unix.AF_VSOCK, unix.SOCK_STREAM, 0)
		if e == 0 {
			unix.Close(int(fd))
		}
		return errName(rawErr(e))
	case "iouring":
		var params [120]byte
		fd, _, e := unix.RawSyscall(unix.SYS_IO_URING_SETUP, 4, uintptr(unsafe.Pointer(&params[0])), 0)
		if e == 0 {
			unix.Close(int(fd))
		}
		return errName(rawErr(e))
	case "unix", "abstract":
		fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return "socket:" + errName(err)
		}
		defer unix.Close(fd)
		path := operand
		if name == "abstract" {
			path = "@" + operand
		}
		return errName(unix.Connect(fd, &unix.SockaddrUnix{Name: path}))
	case "kill":
		pid, _ := strconv.Atoi(operand)
		return errName(unix.Kill(pid, 0))
	case "killall":
		return errName(unix.Kill(-1, unix.SIGKILL))
	case "ptrace":
		pid, _ := strconv.Atoi(operand)
		_, _, e := unix.RawSyscall6(unix.SYS_PTRACE, unix.PTRACE_ATTACH, uintptr(pid), 0, 0, 0, 0)
		return errName(rawErr(e))
	case "vmread":
		pid, _ := strconv.Atoi(operand)
		var b [8]byte
		local := []unix.Iovec{{Base: &b[0], Len: 8}}
		remote := []unix.RemoteIovec{{Base: 0x400000, Len: 8}}
		_, err := unix.ProcessVMReadv(pid, local, remote, 0)
		return errName(err)
	case "unshare-user":
		_, _, e := unix.RawSyscall(unix.SYS_UNSHARE, unix.CLONE_NEWUSER, 0, 0)
		return errName(rawErr(e))
	case "clone-user":
		r, _, e := unix.RawSyscall6(unix.SYS_CLONE, unix.CLONE_NEWUSER|uintptr(unix.SIGCHLD), 0, 0, 0, 0, 0)
		if e == 0 && r == 0 {
			unix.RawSyscall(unix.SYS_EXIT_GROUP, 0, 0, 0)
		}
		return errName(rawErr(e))
	case "clone3":
		_, _, e := unix.RawSyscall(unix.SYS_CLONE3, 0, 0, 0)
		return errName(rawErr(e))
	case "mount":
		return errName(unix.Mount("tmpfs", "/tmp", "tmpfs", 0, ""))
	case "umount":
		return errName(unix.Unmount("/proc", unix.MNT_DETACH))
	case "setns":
		fd, err := unix.Open("/proc/self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return "open:" + errName(err)
		}
		defer unix.Close(fd)
		return errName(unix.Setns(fd, 0))
	case "tiocsti", "tiocsti-high":
		c := byte('x')
		cmd := uintptr(unix.TIOCSTI)
		if name == "tiocsti-high" {
			cmd |= 1 << 32
		}
		_, _, e := unix.RawSyscall(unix.SYS_IOCTL, 0, cmd, uintptr(unsafe.Pointer(&c)))
		return errName(rawErr(e))
	case "keyctl":
		ring := int64(unix.KEY_SPEC_SESSION_KEYRING)
		_, _, e := unix.RawSyscall6(unix.SYS_KEYCTL, unix.KEYCTL_GET_KEYRING_ID, uintptr(ring), 0, 0, 0, 0)
		return errName(rawErr(e))
	case "bpf":
		_, _, e := unix.RawSyscall(unix.SYS_BPF, 0, 0, 0)
		return errName(rawErr(e))
	case "x32":
		// The x32 table: the filter kills the process; nothing is printed.
		_, _, e := unix.RawSyscall(0x40000000|unix.SYS_GETPID, 0, 0, 0)
		return errName(rawErr(e))
	case "hostname-write":
		return errName(os.WriteFile("/proc/sys/kernel/hostname", []byte("changed"), 0))
	case "truncate":
		return errName(unix.Truncate(operand, 0))
	case "nr":
		// A raw system call by number, with harmless arguments.
		nr, _ := strconv.Atoi(operand)
		_, _, e := unix.RawSyscall6(uintptr(nr), ^uintptr(0), 0, 0, 0, 0, 0)
		return errName(rawErr(e))
	case "open_tree":
		// A non-recursive clone of a mount of the view (it would show what
		// the masks beneath it cover).
		fd, err := unix.OpenTree(unix.AT_FDCWD, operand, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
		if err == nil {
			defer unix.Close(fd)
			return "ok:" + readAt(fd, "shadow")
		}
		return errName(err)
	case "open_tree_attr":
		// Linux 6.15's clone that also changes attributes: read-only off.
		attr := unix.MountAttr{Attr_clr: unix.MOUNT_ATTR_RDONLY}
		p, _ := unix.BytePtrFromString(operand)
		fd, _, e := unix.RawSyscall6(unix.SYS_OPEN_TREE_ATTR, atFDCWD, uintptr(unsafe.Pointer(p)), unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr), 0)
		if e == 0 {
			defer unix.Close(int(fd))
			return "ok:" + readAt(int(fd), "shadow")
		}
		return errName(rawErr(e))
	case "mount_setattr":
		return errName(unix.MountSetattr(unix.AT_FDCWD, operand, 0, &unix.MountAttr{Attr_clr: unix.MOUNT_ATTR_RDONLY}))
	case "move_mount":
		return errName(unix.MoveMount(unix.AT_FDCWD, operand, unix.AT_FDCWD, "/tmp", 0))
	case "umount2":
		return errName(unix.Unmount(operand, unix.MNT_DETACH))
	case "fsopen":
		fd, err := unix.Fsopen("tmpfs", unix.FSOPEN_CLOEXEC)
		if err == nil {
			unix.Close(fd)
		}
		return errName(err)
	case "fspick":
		fd, err := unix.Fspick(unix.AT_FDCWD, operand, unix.FSPICK_CLOEXEC)
		if err == nil {
			unix.Close(fd)
		}
		return errName(err)
	case "fsmount":
		_, err := unix.Fsmount(-1, unix.FSMOUNT_CLOEXEC, 0)
		return errName(err)
	case "remount-rw":
		return errName(unix.Mount("", operand, "", unix.MS_REMOUNT|unix.MS_BIND, ""))
	case "chmod-setid":
		// Every way to give a file a set-id bit; each must be refused.
		// operand is a directory to work in.
		f := filepath.Join(operand, "setid")
		if err := os.WriteFile(f, []byte("#!/bin/sh\n"), 0o755); err != nil {
			return "write:" + errName(err)
		}
		var out []string
		try := func(name string, err error) { out = append(out, name+"-"+errName(err)) }
		try("chmod", unix.Chmod(f, 0o4755))
		try("fchmodat", unix.Fchmodat(unix.AT_FDCWD, f, 0o2755, 0))
		p, _ := unix.BytePtrFromString(f)
		_, _, e := unix.RawSyscall6(unix.SYS_FCHMODAT2, atFDCWD, uintptr(unsafe.Pointer(p)), 0o6755, 0, 0, 0)
		try("fchmodat2", rawErr(e))
		if fd, err := unix.Open(f, unix.O_RDONLY|unix.O_CLOEXEC, 0); err == nil {
			try("fchmod", unix.Fchmod(fd, 0o4711))
			unix.Close(fd)
		}
		fd, err := unix.Open(filepath.Join(operand, "setid-new"), unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o4755)
		if err == nil {
			unix.Close(fd)
		}
		try("open", err)
		try("mknodat", unix.Mknodat(unix.AT_FDCWD, filepath.Join(operand, "setid-node"), unix.S_IFREG|0o2755, 0))
		try("setcap", unix.Setxattr(f, "security.capability", []byte{1, 0, 0, 2, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0}, 0))
		return strings.Join(out, ",")
	case "ia32":
		return ia32Probe(operand)
	case "pid":
		return strconv.Itoa(os.Getpid())
	case "ppid":
		return strconv.Itoa(os.Getppid())
	case "status":
		// Named lines of /proc/self/status, e.g. status:CapBnd.
		status, err := os.ReadFile("/proc/self/status")
		if err != nil {
			return errName(err)
		}
		for _, l := range strings.Split(string(status), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && k == operand {
				return strings.Join(strings.Fields(v), " ")
			}
		}
		return "unknown"
	case "uid":
		return strconv.Itoa(os.Getuid())
	case "cgroup":
		// The lines of /proc/self/cgroup, joined by ";".
		b, err := os.ReadFile("/proc/self/cgroup")
		if err != nil {
			return errName(err)
		}
		return strings.ReplaceAll(strings.TrimSpace(string(b)), "\n", ";")
	case "caps":
		status, err := os.ReadFile("/proc/self/status")
		if err != nil {
			return errName(err)
		}
		for _, l := range strings.Split(string(status), "\n") {
			if strings.HasPrefix(l, "CapEff:") {
				return strings.TrimSpace(strings.TrimPrefix(l, "CapEff:"))
			}
		}
		return "unknown"
	case "ls":
		ents, err := os.ReadDir(operand)
		if err != nil {
			return errName(err)
		}
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		return "list:" + strings.Join(names, ",")
	}
	return "unknown-probe"
}

// readAt reads name beneath the directory fd and says how many bytes it
// held, or why it could not.
func readAt(dir int, name string) string {
	fd, err := unix.Openat(dir, name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return errName(err)
	}
	defer unix.Close(fd)
	var b [4096]byte
	n, err := unix.Read(fd, b[:])
	if err != nil {
		return errName(err)
	}
	return strconv.Itoa(n) + "-bytes"
}

func parseIP4(s string) []byte {
	var out [4]byte
	parts := strings.Split(s, ".")
	for i := 0; i < 4 && i < len(parts); i++ {
		v, _ := strconv.Atoi(parts[i])
		out[i] = byte(v)
	}
	return out[:]
}

// allocMain allocates and touches the number of MiB in its argument, then
// prints "done" (it does not get there under a smaller memory.max).
func allocMain() {
	mib, _ := strconv.Atoi(os.Args[1])
	var keep [][]byte
	for i := 0; i < mib; i++ {
		b := make([]byte, 1<<20)
		for j := 0; j < len(b); j += 4096 {
			b[j] = 1
		}
		keep = append(keep, b)
	}
	fmt.Println("done", len(keep))
	os.Exit(0)
}

// harnessMain plays a harness that gets SIGKILLed mid-call: arguments are
// the mode ("direct" or "broker"), the workspace, the shell and a unique
// sleep argument. It starts a call whose tree sleeps (with a setsid'd
// grandchild) and prints the tree's "started" line on its stdout.
func harnessMain() {
	mode, ws, sh, uniq := os.Args[1], os.Args[2], os.Args[3], os.Args[4]
	var r Runner
	switch mode {
	case "direct":
		r = NewDirect(testOptions())
	case "broker":
		b, err := StartBroker(BrokerOptions{Require: testOptions().Require})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(3)
		}
		r = b
	}
	script := fmt.Sprintf("setsid sleep %s & sleep %s & echo started; wait", uniq, uniq)
	s := Spec{Program: pinOrExit(sh), Argv: []string{"sh", "-c", script}, Env: []string{"PATH=/usr/bin:/bin"}, Dir: ws, Workspace: pinOrExit(ws)}
	_, err := r.Run(context.Background(), s, Stdio{Stdout: os.Stdout, Stderr: os.Stderr})
	fmt.Fprintln(os.Stderr, "harness: run returned:", err)
	os.Exit(4)
}

// testOptions are the Options every test uses: the baseline, except what
// the current shape is declared to lack.
func testOptions() Options {
	var o Options
	if testenv.Shape() == testenv.ShapeNoLandlock {
		o.Require.AllowMissing = []string{confine.LayerLandlockChild}
	}
	return o
}

// hasLandlock reports whether the child gets a Landlock domain here.
func hasLandlock(t testing.TB) int {
	info, err := confine.ProbeLandlock()
	if err != nil {
		t.Fatal(err)
	}
	return info.ABI
}

// lookPath resolves a program the way a caller does at start.
func lookPath(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("program %s: %v", name, err)
	}
	p, err = filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func selfExe(t testing.TB) string {
	t.Helper()
	p, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// testOwner is the unprivileged owner of the tests' workspaces when they
// run as root: a run child runs as the workspace's owner, never as root.
const testOwner = 1000

// workspace returns a fresh workspace directory (canonical), owned by
// testOwner when the test runs as root.
func workspace(t testing.TB) string {
	t.Helper()
	ws, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		if err := os.Chown(ws, testOwner, testOwner); err != nil {
			t.Fatal(err)
		}
	}
	return ws
}

// own gives path to testOwner when the test runs as root, as a file the
// workspace's owner made would be.
func own(t testing.TB, path string) string {
	t.Helper()
	if os.Geteuid() == 0 {
		if err := os.Chown(path, testOwner, testOwner); err != nil {
			t.Fatal(err)
		}
	}
	return path
}

// pin pins p as a caller does at start.
func pin(t testing.TB, p string) Pinned {
	t.Helper()
	pp, err := Pin(p)
	if err != nil {
		t.Fatal(err)
	}
	return pp
}

// pinOrExit is pin for code that has no testing.TB.
func pinOrExit(p string) Pinned {
	pp, err := Pin(p)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	return pp
}

func shSpec(t testing.TB, ws, script string) Spec {
	return Spec{Program: pin(t, lookPath(t, "sh")), Argv: []string{"sh", "-c", script}, Env: []string{"PATH=/usr/bin:/bin", "HOME=" + ws}, Dir: ws, Workspace: pin(t, ws)}
}

func probeSpec(t testing.TB, ws string, probes ...string) Spec {
	return Spec{Program: pin(t, selfExe(t)), Argv: append([]string{"b10x-reexec:" + probeEntry}, probes...), Env: []string{"PATH=/usr/bin:/bin"}, Dir: ws, Workspace: pin(t, ws)}
}

// output is what a run wrote, captured through pipes.
type output struct {
	stdout, stderr *Capture
}

func (o output) String() string {
	return fmt.Sprintf("stdout: %q\nstderr: %q", o.stdout.Bytes(), o.stderr.Bytes())
}

// run runs s with captured stdout and stderr (1 MiB each).
func run(t testing.TB, r Runner, s Spec) (Result, output, error) {
	return runCtx(context.Background(), t, r, s)
}

func runCtx(ctx context.Context, t testing.TB, r Runner, s Spec) (Result, output, error) {
	t.Helper()
	o := output{NewCapture(1 << 20), NewCapture(1 << 20)}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); io.Copy(o.stdout, outR); outR.Close() }()
	go func() { defer wg.Done(); io.Copy(o.stderr, errR); errR.Close() }()
	res, rerr := r.Run(ctx, s, Stdio{Stdout: outW, Stderr: errW})
	outW.Close()
	errW.Close()
	wg.Wait()
	return res, o, rerr
}

// probes parses "name=result" lines.
func probes(o output) map[string]string { return probeLines(o.stdout.Bytes()) }

// probeLines parses "name=result" lines of a probe's stdout.
func probeLines(b []byte) map[string]string {
	m := map[string]string{}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, "="); ok {
			m[k] = v
		}
	}
	return m
}

// spawnable caches whether a confined call can run here at all.
var spawnable struct {
	once sync.Once
	err  error
}

// requireSpawn checks that this host can run a confined call at all. The
// no-userns shape runs the tests as an unprivileged user on a kernel that
// refuses user namespaces: no namespace can be made there, so every call
// fails at its clone step (fail closed), and the tests that run programs
// are declared absent in that shape.
func requireSpawn(t testing.TB) {
	t.Helper()
	spawnable.once.Do(func() {
		ws, err := os.MkdirTemp("", "b10x-spawn-probe-")
		if err == nil && os.Geteuid() == 0 {
			err = os.Chown(ws, testOwner, testOwner)
		}
		if err != nil {
			spawnable.err = err
			return
		}
		defer os.RemoveAll(ws)
		s := Spec{Program: pin(t, lookPath(t, "true")), Argv: []string{"true"}, Dir: ws, Workspace: pinOrExit(ws)}
		_, spawnable.err = NewDirect(testOptions()).Run(context.Background(), s, Stdio{})
	})
	what := "a confined call"
	if spawnable.err != nil {
		what += " (" + spawnable.err.Error() + ")"
	}
	testenv.Require(t, spawnable.err == nil, what, testenv.ShapeNoUserns)
}

// runners returns the two Runners every attack runs under: this process
// (direct) and a broker. The broker is closed at the end of the test.
func runners(t *testing.T) map[string]Runner {
	t.Helper()
	requireSpawn(t)
	b, err := StartBroker(BrokerOptions{Require: testOptions().Require})
	if err != nil {
		t.Fatalf("StartBroker: %v", err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("broker Close: %v", err)
		}
	})
	self := newDirect(testOptions())
	self.helper = &helperExe{why: "test: this binary re-executed"}
	return map[string]Runner{"direct": NewDirect(testOptions()), "broker": b, "direct, self as helper": self,
		"pre-started": newPrestarted(t, testOptions())}
}

// prestarted is a Runner whose every call (but probes) runs in a sandbox
// pre-started for its Spec before the call, and fails the test if the
// call did not take it.
type prestarted struct {
	t testing.TB
	d *direct
}

func newPrestarted(t testing.TB, o Options) prestarted {
	d := newDirect(o)
	d.pre = &prestarter{}
	t.Cleanup(d.closePrestart)
	return prestarted{t, d}
}

func (r prestarted) Run(ctx context.Context, s Spec, io Stdio) (Result, error) {
	if s.Probe {
		return r.d.Run(ctx, s, io)
	}
	ps := r.d.pre
	for _, w := range settle(r.t, ps) {
		r.d.discard(w) // built for the last call's Spec, maybe not this one's
	}
	var w *warm
	if w = r.d.prestart(s); w == nil {
		// No sandbox for this Spec (it does not plan): the call fails
		// as a cold one would.
		return r.d.Run(ctx, s, io)
	}
	select {
	case <-w.ready:
	case <-time.After(30 * time.Second):
		r.t.Errorf("a pre-started sandbox was not ready within 30s")
	}
	ps.mu.Lock()
	ps.ready = append(ps.ready, w)
	ps.mu.Unlock()
	before := ps.taken.Load()
	res, err := r.d.Run(ctx, s, io)
	if w.said && ps.taken.Load() != before+1 {
		r.t.Errorf("the call did not run in the sandbox pre-started for it")
	}
	return res, err
}

// settle waits until no sandbox of ps is being built and takes every
// ready one out of the pool.
func settle(t testing.TB, ps *prestarter) []*warm {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ps.mu.Lock()
		if ps.inflight == 0 {
			ready := ps.ready
			ps.ready = nil
			ps.mu.Unlock()
			return ready
		}
		ps.mu.Unlock()
		if time.Now().After(deadline) {
			t.Fatal("a sandbox was still being built after 30s")
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// processesWith lists the pids whose command line holds arg as one of its
// arguments.
func processesWith(arg string) []int {
	return processesWhere(func(_ int, argv []string) bool { return slices.Contains(argv, arg) })
}

// processesWhere lists the pids of the host's processes whose pid and
// argument vector match.
func processesWhere(match func(pid int, argv []string) bool) []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		if match(pid, strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// uniqueSleep returns a sleep argument no other process has.
func uniqueSleep() string {
	return fmt.Sprintf("1000.%d%d", os.Getpid(), time.Now().UnixNano()%1000000)
}

// inChild runs the calling test in a re-run child of the test binary when
// it is not one already (tests that restrict the process, or place it in
// a cgroup, must not do so in the test process). It returns true in the
// child, where the test body runs; in the parent it relays the child's
// output and verdict and returns false.
func inChild(t *testing.T) bool {
	t.Helper()
	return inChildCgroup(t, false)
}

// inChildCgroup is inChild; with ownCgroup, the child starts alone in a
// fresh sibling of the test's cgroup (when that is not the hierarchy's
// root), so that a cgroup manager opened there may enable controllers for
// its leaves: cgroup v2 allows it only in a cgroup holding no other
// process, and the test process shares its own.
func inChildCgroup(t *testing.T, ownCgroup bool) bool {
	t.Helper()
	return rerun(t, func(a *syscall.SysProcAttr) {
		if !ownCgroup {
			return
		}
		if dir := siblingCgroup(t); dir != "" {
			fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { unix.Close(fd) })
			a.UseCgroupFD, a.CgroupFD = true, fd
		}
	})
}

// inPrivateMounts is inChildCgroup's re-run, in a mount namespace of the
// child's own (private: nothing it mounts reaches the host), for tests
// that mount.
func inPrivateMounts(t *testing.T) bool {
	t.Helper()
	return rerun(t, func(a *syscall.SysProcAttr) { a.Unshareflags = syscall.CLONE_NEWNS })
}

// rerun reports whether this is the re-run child of the test; in the
// parent it runs the test again in a child whose attributes attr sets,
// relays its verdict and returns false.
func rerun(t *testing.T, attr func(*syscall.SysProcAttr)) bool {
	t.Helper()
	const key = "B10X_SPAWN_TEST_CHILD"
	if os.Getenv(key) == t.Name() {
		return true
	}
	cmd := exec.Command(selfExe(t), "-test.run", "^"+t.Name()+"$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), key+"="+t.Name())
	// The child dies with this process (a test binary's timeout panic
	// included), and with it whatever it started.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	attr(cmd.SysProcAttr)
	out, err := cmd.CombinedOutput()
	t.Logf("re-run child output:\n%s", out)
	switch {
	case err != nil:
		t.Fatalf("re-run child failed: %v", err)
	case strings.Contains(string(out), "--- SKIP: "+t.Name()):
		// A child may skip only through testenv.Require, which fails a
		// shape expected to have the feature; relay its verdict with its
		// reason, and fail any other skip.
		why := requireSkipReason(string(out))
		if why == "" {
			t.Fatalf("re-run child skipped %s other than through testenv.Require", t.Name())
		}
		t.Skip("re-run child: " + why)
	case !strings.Contains(string(out), "--- PASS: "+t.Name()):
		t.Fatalf("re-run child did not report a pass for %s", t.Name())
	}
	return false
}

// requireSkipReason returns the reason testenv.Require gave in a test
// binary's verbose output, or "" when there is none.
func requireSkipReason(out string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "(declared absent there)") {
			return strings.TrimSpace(l)
		}
	}
	return ""
}

// childFDs maps this process's open descriptors to what each names.
func childFDs(t testing.TB) map[string]string {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	fds := make(map[string]string, len(ents))
	for _, e := range ents {
		target, _ := os.Readlink("/proc/self/fd/" + e.Name())
		fds[e.Name()] = target
	}
	return fds
}

// fdChanges names the descriptors that differ between two childFDs maps.
func fdChanges(before, after map[string]string) string {
	var out []string
	for fd, was := range before {
		if now, ok := after[fd]; !ok {
			out = append(out, fmt.Sprintf("%s closed (was %s)", fd, was))
		} else if now != was {
			out = append(out, fmt.Sprintf("%s now %s (was %s)", fd, now, was))
		}
	}
	for fd, now := range after {
		if _, ok := before[fd]; !ok {
			out = append(out, fmt.Sprintf("%s opened (%s)", fd, now))
		}
	}
	slices.Sort(out)
	return strings.Join(out, "; ")
}

// zombies lists this process's children that are zombies.
func zombies(t testing.TB) []int {
	self := os.Getpid()
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) > 1 && f[0] == "Z" && f[1] == strconv.Itoa(self) {
			out = append(out, pid)
		}
	}
	return out
}

// siblingCgroup creates, next to this process's cgroup v2 cgroup, an empty
// cgroup for a re-run child, removed in t.Cleanup. It returns "" when this
// process is in the hierarchy's root (a child may enable controllers there
// already) or when there is no cgroup2 mount.
func siblingCgroup(t *testing.T) string {
	mount, self := cgroup2Self(t)
	if mount == "" || self == "/" {
		return ""
	}
	up := filepath.Join(mount, filepath.Dir(self))
	dir := filepath.Join(up, fmt.Sprintf("b10x-spawntest-%d-%d", os.Getpid(), time.Now().UnixNano()%1000000))
	if err := os.Mkdir(dir, 0o755); errors.Is(err, os.ErrPermission) && os.Geteuid() != 0 {
		// Not root (the no-userns shape): only the test's own cgroup is
		// delegated to it.
		t.Logf("the re-run child starts in the test's own cgroup: %v", err)
		return ""
	} else if err != nil {
		t.Fatalf("create a cgroup for the re-run child: %v", err)
	}
	t.Cleanup(func() {
		// The child's manager removed what it made; the directory is
		// empty once the child is gone.
		deadline := time.Now().Add(5 * time.Second)
		for {
			err := os.Remove(dir)
			if err == nil || errors.Is(err, os.ErrNotExist) {
				return
			}
			if time.Now().After(deadline) {
				t.Errorf("remove %s: %v", dir, err)
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
	return dir
}

// cgroup2Self returns the cgroup2 mount point and this process's cgroup
// path relative to it ("" when there is no cgroup2 mount).
func cgroup2Self(t *testing.T) (mount, self string) {
	cg, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(cg), "\n") {
		if p, ok := strings.CutPrefix(l, "0::"); ok {
			self = p
		}
	}
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(mi), "\n") {
		f := strings.Fields(l)
		for i, x := range f {
			if x == "-" && i+1 < len(f) && f[i+1] == "cgroup2" && len(f) > 4 && f[3] == "/" {
				return f[4], self
			}
		}
	}
	return "", ""
}

// atFDCWD is AT_FDCWD as a raw system call argument.
var atFDCWD = func() uintptr { v := unix.AT_FDCWD; return uintptr(v) }()
