package rawfork

import (
	"runtime"
	"syscall"
	"testing"
)

// forkExit forks a child that exits with code at once.
//
//go:nosplit
func forkExit(code int) (int, syscall.Errno) {
	pid, e := Fork(uintptr(syscall.SIGCHLD))
	if e == 0 && pid == 0 {
		ChildReady()
		Exit(code)
	}
	Done()
	return pid, e
}

func TestForkChildExits(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	for _, code := range []int{0, 7, 113} {
		pid, e := forkExit(code)
		if e != 0 {
			t.Fatalf("clone: %v", e)
		}
		var ws syscall.WaitStatus
		if _, err := syscall.Wait4(pid, &ws, 0, nil); err != nil {
			t.Fatal(err)
		}
		if !ws.Exited() || ws.ExitStatus() != code {
			t.Fatalf("child of code %d: wait status %#x", code, ws)
		}
	}
}

// TestParentUnblocked checks that Done gives the parent its signals back:
// a signal sent to the process after Fork is delivered.
func TestParentUnblocked(t *testing.T) {
	runtime.LockOSThread()
	pid, e := forkExit(0)
	runtime.UnlockOSThread()
	if e != 0 {
		t.Fatal(e)
	}
	var ws syscall.WaitStatus
	_, _ = syscall.Wait4(pid, &ws, 0, nil)
	c := make(chan struct{})
	go func() {
		// A goroutine that must be preempted and scheduled: a parent left
		// with its signals blocked would still run it (cooperatively), so
		// check the mask itself.
		close(c)
	}()
	<-c
	var set [2]uint32
	if _, _, e := syscall.RawSyscall6(syscall.SYS_RT_SIGPROCMASK, 0, 0, uintptrOf(&set), 8, 0, 0); e != 0 {
		t.Fatal(e)
	}
	if set[0]&(1<<(uint(syscall.SIGURG)-1)) != 0 {
		t.Fatalf("SIGURG still blocked after Done: mask %#x", set)
	}
}
