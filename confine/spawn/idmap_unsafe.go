package spawn

import (
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"
	"strconv"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/b10x/harness/confine/spawn/internal/rawfork"
)

// holdUserns returns the user namespace of a process that maps 0 to uid,
// ids and group ids alike (uid_map and gid_map "0 uid 1", setgroups
// denied, as os/exec writes them for a SysProcIDMap of one id).
//
// The process is a clone of this one that never executes anything (see
// package rawfork): a holder that only waits in its new namespace while
// this process writes the namespace's maps and opens /proc/PID/ns/user,
// and exits when the pipe it reads is closed. It costs a clone (about
// 0.35 ms from map to reaped holder, in a test process), where starting
// the helper image in the namespace cost a start of the Go runtime (1.3 ms
// there, more in a one-shot call). The holder keeps no descriptor of this
// process's but its end of that pipe, and dies with the thread that made
// it (PR_SET_PDEATHSIG), should this process die first.
//
// It may be called from any goroutine; it holds its OS thread only across
// the clone. The holder is always reaped before holdUserns returns, and
// every descriptor but the namespace's is closed. The errors name the step that
// failed: the clone, a write of a map (the kernel's errno, e.g. EPERM
// without CAP_SETUID and CAP_SETGID here), the open of the namespace, or
// the holder's exit when it did not end with status 0.
func holdUserns(uid int) (*os.File, error) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		return nil, fmt.Errorf("start a user namespace for the idmapping: pipe2: %w", err)
	}
	r, w := p[0], p[1]
	// The holder's checks are prepared here: it may not allocate.
	ppid := os.Getpid()
	runtime.LockOSThread()
	pid, errno := forkUsernsHolder(r, w, ppid)
	runtime.UnlockOSThread()
	unix.Close(r)
	if errno != 0 {
		unix.Close(w)
		return nil, fmt.Errorf("start a user namespace for the idmapping: clone(CLONE_NEWUSER): %w", errno)
	}
	// reap waits for the holder's end; kill ends it first.
	reap := func(kill bool) (syscall.WaitStatus, error) {
		if kill {
			unix.Kill(pid, unix.SIGKILL)
		}
		unix.Close(w)
		var ws syscall.WaitStatus
		for {
			_, err := syscall.Wait4(pid, &ws, 0, nil)
			if !errors.Is(err, syscall.EINTR) {
				return ws, err
			}
		}
	}
	proc := "/proc/" + strconv.Itoa(pid) + "/"
	m := []byte("0 " + strconv.Itoa(uid) + " 1\n")
	for _, f := range []struct {
		name string
		data []byte
	}{{"uid_map", m}, {"setgroups", []byte("deny")}, {"gid_map", m}} {
		if err := writeProcFile(proc+f.name, f.data); err != nil {
			reap(true)
			return nil, fmt.Errorf("start a user namespace for the idmapping: %w", err)
		}
	}
	// Opened as a plain descriptor: os.Open would try (and fail) to add
	// it to the poller.
	nsfd, err := unix.Open(proc+"ns/user", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		reap(true)
		return nil, fmt.Errorf("open the idmapping's user namespace: open %sns/user: %w", proc, err)
	}
	ns := os.NewFile(uintptr(nsfd), proc+"ns/user")
	ws, err := reap(false)
	switch {
	case err != nil:
		// Not expected: the holder is this process's child, and only
		// this function waits for it.
		err = fmt.Errorf("wait4 %d: %w", pid, err)
	case !ws.Exited() || ws.ExitStatus() != 0:
		err = errors.New(describeWait(ws))
	}
	if err != nil {
		ns.Close()
		return nil, fmt.Errorf("the idmapping's user namespace holder: %w", err)
	}
	return ns, nil
}

// writeProcFile writes data to the file at path (a /proc file of the
// holder's, read by the kernel in one write).
func writeProcFile(path string, data []byte) error {
	fd, err := unix.Open(path, unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	n, err := unix.Write(fd, data)
	unix.Close(fd)
	switch {
	case err != nil:
		return fmt.Errorf("write %q to %s: %w", data, path, err)
	case n != len(data):
		return fmt.Errorf("write %q to %s: %d bytes written of %d", data, path, n, len(data))
	}
	return nil
}

// forkUsernsHolder clones this thread into a new process in a new user
// namespace, which runs usernsHolder with the pipe's ends r and w and the
// pid of this process, ppid. It returns the holder's pid, or clone's
// error. The caller holds its OS thread.
//
//go:nosplit
//go:norace
func forkUsernsHolder(r, w, ppid int) (int, syscall.Errno) {
	pid, e := rawfork.Fork(unix.CLONE_NEWUSER | uintptr(unix.SIGCHLD))
	if e == 0 && pid == 0 {
		usernsHolder(r, w, ppid)
	}
	rawfork.Done()
	return pid, e
}

// usernsHolder is the holder's whole life, in the child of a Fork (raw
// system calls only, see package rawfork): it dies with the thread that
// forked it, closes every descriptor but r, the read end of the pipe
// whose write end its parent closes when it is done with the namespace,
// reads r until its end or an error, and exits with status 0. Its signals
// stay blocked: only SIGKILL (and SIGSTOP) reach it.
//
//go:nosplit
//go:norace
func usernsHolder(r, w, ppid int) {
	syscall.RawSyscall(unix.SYS_PRCTL, unix.PR_SET_PDEATHSIG, uintptr(unix.SIGKILL), 0)
	if p, _, _ := syscall.RawSyscall(unix.SYS_GETPPID, 0, 0, 0); int(p) != ppid {
		// The parent died before the death signal was set.
		rawfork.Exit(1)
	}
	// The copy of the write end must go, or the read never ends; the
	// others (this process's pipes and files, copied by the clone) are
	// dropped so that the holder delays no one's end of file.
	syscall.RawSyscall(unix.SYS_CLOSE, uintptr(w), 0, 0)
	if r > 0 {
		syscall.RawSyscall(unix.SYS_CLOSE_RANGE, 0, uintptr(r-1), 0)
	}
	syscall.RawSyscall(unix.SYS_CLOSE_RANGE, uintptr(r+1), math.MaxUint32, 0)
	var b [1]byte
	for {
		n, _, e := syscall.RawSyscall(unix.SYS_READ, uintptr(r), uintptr(unsafe.Pointer(&b[0])), 1)
		if e == syscall.EINTR {
			continue
		}
		if e != 0 || n == 0 {
			break
		}
	}
	rawfork.Exit(0)
}
