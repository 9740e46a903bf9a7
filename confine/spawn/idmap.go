package spawn

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"

	"github.com/b10x/harness/confine/spawn/internal/helper"
	"golang.org/x/sys/unix"
)

// A workspace owned by root, with the harness running as root (the usual
// case in a CI container), is bound into the view as an idmapped mount:
// what root owns on disk appears as owned by idmapUID, the unprivileged
// host id the program runs as, and what the program creates lands on disk
// owned by root. The program can then write its workspace without ever
// being root; it still cannot make a set-id file (the seccomp filter
// refuses the mode bits) nor give a file capabilities (it holds none). A
// filesystem without idmapped mounts (tmpfs before Linux 6.3, for one)
// refuses the call at its "identity" step, naming the remedy.
// See docs/decisions/0037-child-identity.md.

// idmapUID is the host id a program runs as in a root-owned workspace:
// nobody/nogroup.
const idmapUID = 65534

// treeFD is the descriptor number, in the helper, of a mount tree the
// parent prepared (the idmapped workspace): after the status and plan
// pipes and the helper image's slot, which is left empty when the image is
// not used.
const treeFD = imageFD + 1

// idmapNS holds the process's one user namespace whose ids map 0 to
// idmapUID, the idmapping of every idmapped workspace. Only a conclusive
// answer is kept.
var idmapNS struct {
	sync.Mutex
	f *os.File
}

// idmapUserns returns the user namespace of the idmapping (created once
// per process, by a short-lived child that waits in it).
func idmapUserns() (*os.File, error) {
	idmapNS.Lock()
	defer idmapNS.Unlock()
	if idmapNS.f != nil {
		return idmapNS.f, nil
	}
	cmd := exec.Command("/proc/self/exe")
	cmd.Args = []string{helper.Argv0Userns}
	cmd.Env = helperEnv
	cmd.Dir = "/"
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	idmap := []syscall.SysProcIDMap{{ContainerID: 0, HostID: idmapUID, Size: 1}}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  unix.CLONE_NEWUSER,
		UidMappings: idmap, GidMappings: idmap,
		Pdeathsig: syscall.SIGKILL,
	}
	if err := cmd.Start(); err != nil {
		in.Close()
		return nil, fmt.Errorf("start a user namespace for the idmapping: %w", err)
	}
	f, err := os.Open("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/ns/user")
	in.Close()
	werr := cmd.Wait()
	if err != nil {
		return nil, fmt.Errorf("open the idmapping's user namespace: %w", err)
	}
	if werr != nil {
		f.Close()
		return nil, fmt.Errorf("the idmapping's user namespace holder: %w", werr)
	}
	idmapNS.f = f
	return f, nil
}

// idmappedTree returns a detached copy of the mount tree at dir, idmapped
// so that root on disk is idmapUID, nosuid and nodev: ready for the helper
// to attach. The caller closes it.
func idmappedTree(dir string) (*os.File, error) {
	ns, err := idmapUserns()
	if err != nil {
		return nil, fmt.Errorf("%w (%s) and cannot be idmapped here: %v; a run child never runs as host root: give the workspace to an unprivileged user (chown -R USER %s) or run the harness as that user", ErrRootWorkspace, dir, err, dir)
	}
	fd, err := unix.OpenTree(unix.AT_FDCWD, dir, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE)
	if err != nil {
		return nil, fmt.Errorf("open_tree(%s): %w", dir, err)
	}
	tree := os.NewFile(uintptr(fd), dir)
	attr := &unix.MountAttr{
		Attr_set:  unix.MOUNT_ATTR_IDMAP | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV,
		Userns_fd: uint64(ns.Fd()),
	}
	if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, attr); err != nil {
		tree.Close()
		why := err.Error()
		if errors.Is(err, unix.EINVAL) {
			var st unix.Statfs_t
			if unix.Statfs(dir, &st) == nil {
				why = fmt.Sprintf("its filesystem (magic %#x) has no idmapped mounts on this kernel", st.Type)
			}
		}
		return nil, fmt.Errorf("%w (%s) and cannot be idmapped: mount_setattr MOUNT_ATTR_IDMAP: %s; a run child never runs as host root: give the workspace to an unprivileged user (chown -R USER %s) or run the harness as that user", ErrRootWorkspace, dir, why, dir)
	}
	return tree, nil
}
