package spawn

import (
	"errors"
	"fmt"
	"os"
	"sync"

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
// refuses the call at its "identity" step, naming the remedy. So does a
// root-owned path holding a set-id or file-capability file (see
// checkNoPrivilegedFiles).
// See docs/decisions/0037-child-identity.md.

// idmapUID is the host id a program runs as in a root-owned workspace:
// nobody/nogroup.
const idmapUID = 65534

// treeFD is the descriptor number, in the helper, of a mount tree the
// parent prepared (the idmapped workspace): after the status and plan
// pipes and the helper image's slot, which is left empty when the image is
// not used.
const treeFD = imageFD + 1

// idmapNS holds the process's user namespaces whose ids map 0 to a host
// id, one per id: the idmappings of idmapped paths. Only a conclusive
// answer is kept.
var idmapNS struct {
	sync.Mutex
	f map[int]*os.File
}

// idmapUserns returns the user namespace of the idmapping of root onto
// uid (created once per process and id, by holdUserns: a clone of this
// process that waits in the new namespace while its maps are written and
// the namespace is opened, and runs no program).
func idmapUserns(uid int) (*os.File, error) {
	idmapNS.Lock()
	defer idmapNS.Unlock()
	if f := idmapNS.f[uid]; f != nil {
		return f, nil
	}
	f, err := holdUserns(uid)
	if err != nil {
		return nil, err
	}
	if idmapNS.f == nil {
		idmapNS.f = map[int]*os.File{}
	}
	idmapNS.f[uid] = f
	return f, nil
}

// idmappedTree returns a detached copy of the mount tree of the pinned
// path ws (cloned from the checked descriptor, never by name), idmapped so
// that root on disk is uid, nosuid and nodev: ready for the helper to
// attach. The caller closes it. workspace says which path it is, for the
// error.
func idmappedTree(ws Pinned, uid int, workspace bool) (*os.File, error) {
	dir := ws.Path
	ns, err := idmapUserns(uid)
	if err != nil {
		return nil, notIdmapped(dir, workspace, err.Error())
	}
	if err := checkNoPrivilegedFiles(ws, workspace); err != nil {
		return nil, err
	}
	pfd, _, err := ws.open()
	if err != nil {
		return nil, err
	}
	fd, err := unix.OpenTree(pfd, "", unix.AT_EMPTY_PATH|unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE)
	unix.Close(pfd)
	if err != nil {
		why := fmt.Sprintf("open_tree(%s): %v", dir, err)
		if errors.Is(err, unix.EPERM) {
			why += " (cloning a mount needs CAP_SYS_ADMIN, which a root in a container usually lacks: there, run the container as an unprivileged user, e.g. --user 1000)"
		}
		return nil, notIdmapped(dir, workspace, why)
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
		return nil, notIdmapped(dir, workspace, "mount_setattr MOUNT_ATTR_IDMAP: "+why)
	}
	return tree, nil
}

// notIdmapped says that the root-owned writable path dir cannot be given
// to a run child here, and what to do.
func notIdmapped(dir string, workspace bool, why string) error {
	if workspace {
		return fmt.Errorf("%w (%s) and cannot be idmapped here: %s; a run child never runs as host root: give the workspace to an unprivileged user (chown -R USER %s) or run the harness as that user", ErrRootWorkspace, dir, why, dir)
	}
	return fmt.Errorf("the write path %s is owned by root and cannot be idmapped here: %s; a run child never runs as host root: give it to the user run children run as (see `b10x-harness doctor`)", dir, why)
}

// setIDClean holds the idmapped paths found free of set-id and
// file-capability files, by identity. A run child can add neither (the
// seccomp filter refuses set-id mode bits; setting a file capability needs
// CAP_SETFCAP, which it never holds), so one scan per process is enough.
var setIDClean sync.Map // [2]uint64{dev, ino} → struct{}

// checkNoPrivilegedFiles refuses an idmapped path that holds a set-user-ID
// or set-group-ID file, or a file with capabilities: through the idmapped
// mount such a file of root's is the program's own, and a write through a
// shared memory mapping changes its content without clearing its bits, so
// the program could turn it into host root.
func checkNoPrivilegedFiles(p Pinned, workspace bool) error {
	key := [2]uint64{p.Dev, p.Ino}
	if _, ok := setIDClean.Load(key); ok {
		return nil
	}
	found, err := privilegedFile(p)
	if err != nil {
		return scanError(p.Path, err)
	}
	if found != "" {
		what := "the write path " + p.Path
		if workspace {
			what = "the workspace " + p.Path
		}
		return fmt.Errorf("%w (%s would be bound idmapped) and %s: a run child, its owner through the idmapped mount, could rewrite it into host root; remove the bits (chmod u-s,g-s; setcap -r) or give %s to an unprivileged user", ErrRootWorkspace, what, found, p.Path)
	}
	setIDClean.Store(key, struct{}{})
	return nil
}

// earlyTree is a workspace's idmapped tree made on another goroutine while
// its call is planned (the namespace's holder, the set-id scan and the
// tree's clone take up to milliseconds, the planning as long). A nil
// *earlyTree holds none.
type earlyTree struct {
	ws   Pinned
	uid  int
	done chan struct{}
	tree *os.File
	err  error
}

// startEarlyTree begins the idmapped tree of s's workspace when the call
// will bind it so: the harness is root, a user namespace is there to map
// with, and root owns the workspace. It returns nil otherwise.
func (d *direct) startEarlyTree(s Spec) *earlyTree {
	if !d.root || d.userns.Load() == usernsMissing || s.Workspace.check("Spec.Workspace") != nil {
		return nil
	}
	uid, _, idmap, err := d.childIdentity(s.Workspace, true)
	if err != nil || !idmap {
		return nil
	}
	e := &earlyTree{ws: s.Workspace, uid: uid, done: make(chan struct{})}
	go func() {
		e.tree, e.err = idmappedTree(e.ws, e.uid, true)
		close(e.done)
	}()
	return e
}

// take returns the tree when it was made for ws and uid and its making
// succeeded, else nil (the caller makes one, and reports its error). The
// tree is the caller's from then on.
func (e *earlyTree) take(ws Pinned, uid int) *os.File {
	if e == nil || ws != e.ws || uid != e.uid {
		return nil
	}
	<-e.done
	t := e.tree
	e.tree = nil
	if e.err != nil {
		return nil
	}
	return t
}

// discard waits for the tree and closes it unless it was taken.
func (e *earlyTree) discard() {
	if e == nil {
		return
	}
	<-e.done
	if e.tree != nil {
		e.tree.Close()
		e.tree = nil
	}
}
