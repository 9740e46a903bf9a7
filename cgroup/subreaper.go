package cgroup

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// SetChildSubreaper makes this process the subreaper of its descendants
// (prctl PR_SET_CHILD_SUBREAPER): a descendant orphaned by its parent (a
// double fork, setsid and exit) is re-parented to this process instead of
// to init, so the caller can reap it and see the whole tree go. The call is
// checked by reading the attribute back. It applies to the whole process;
// children created by fork do not inherit it, and execve keeps it. The
// caller must then reap children it did not start (wait4(-1, ...)), or
// they stay zombies. It does not make descendants die with this process:
// that is what the cgroup leaf's Kill is for.
func SetChildSubreaper() error {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("cgroup: prctl(PR_SET_CHILD_SUBREAPER, 1): %w", err)
	}
	v, err := getChildSubreaper()
	if err != nil {
		return fmt.Errorf("cgroup: prctl(PR_GET_CHILD_SUBREAPER): %w", err)
	}
	if v != 1 {
		return fmt.Errorf("cgroup: PR_GET_CHILD_SUBREAPER reads %d after setting it to 1", v)
	}
	return nil
}
