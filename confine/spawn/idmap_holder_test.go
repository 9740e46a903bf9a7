package spawn

import (
	"errors"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/b10x/harness/internal/testenv"
)

// TestHoldUserns: the holder's namespace is a user namespace other than
// this process's, owned by this process's user, that maps root and only
// root onto the id asked for, uids and gids alike: a tmpfs idmapped with it
// shows root's file as that id's and another id's file as the overflow id
// (from Linux 6.3, which idmaps tmpfs).
// When a map cannot be written, the error names it. Either way the holder
// is reaped before holdUserns returns, and no descriptor is left open but
// the namespace's. In the no-userns shape the clone is refused, and the
// error says so, leaving nothing behind either.
func TestHoldUserns(t *testing.T) {
	testenv.Require(t, os.Geteuid() == 0, "running as root (to map root onto another id)", testenv.ShapeNoUserns)
	const uid = 4242 // not the overflow id, 65534
	noChildren(t)
	before := fdSet(t)

	ns, err := holdUserns(uid)
	if testenv.Shape() == testenv.ShapeNoUserns {
		if err == nil {
			ns.Close()
			t.Fatal("a user namespace was made in the no-userns shape")
		}
		if !strings.Contains(err.Error(), "clone(CLONE_NEWUSER)") {
			t.Fatalf("error: %v, want the clone's", err)
		}
		checkNothingLeft(t, before)
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	if child, err := waitChild(); err != nil || child {
		t.Errorf("holdUserns returned with a child of this process unreaped (%v)", err)
	}
	link, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(int(ns.Fd())))
	if err != nil {
		t.Fatal(err)
	}
	own, err := os.Readlink("/proc/self/ns/user")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(link, "user:[") || link == own {
		t.Errorf("the holder's namespace is %s; this process's is %s", link, own)
	}
	if owner, err := unix.IoctlGetUint32(int(ns.Fd()), unix.NS_GET_OWNER_UID); err != nil || owner != 0 {
		t.Errorf("NS_GET_OWNER_UID: %d, %v; want 0, this process's euid", owner, err)
	}
	// tmpfs takes idmapped mounts from Linux 6.3: the map itself is
	// checked on the host and in the shapes on 6.12 and 6.18.
	if kernelAtLeast(t, 6, 3) {
		checkIdmap(t, ns, uid)
	}
	ns.Close()
	checkNothingLeft(t, before)

	// A map the kernel refuses (an id of -1): the error names the map,
	// and the holder is killed and reaped.
	ns, err = holdUserns(-1)
	if err == nil {
		ns.Close()
		t.Fatal("a uid_map of host id -1 was written")
	}
	if !strings.Contains(err.Error(), "uid_map") {
		t.Errorf("error: %v, want the uid_map write's", err)
	}
	checkNothingLeft(t, before)
}

// checkIdmap idmaps a fresh tmpfs, detached and never attached anywhere,
// with ns, and checks what its files' owners become: a file of root's
// (uid and gid 0) is uid's, a file of id 1's the overflow id's.
func checkIdmap(t *testing.T, ns *os.File, uid int) {
	t.Helper()
	fsfd, err := unix.Fsopen("tmpfs", unix.FSOPEN_CLOEXEC)
	if err != nil {
		t.Fatalf("fsopen tmpfs: %v", err)
	}
	defer unix.Close(fsfd)
	if err := unix.FsconfigCreate(fsfd); err != nil {
		t.Fatalf("fsconfig create: %v", err)
	}
	mfd, err := unix.Fsmount(fsfd, unix.FSMOUNT_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("fsmount: %v", err)
	}
	defer unix.Close(mfd)
	for name, id := range map[string]int{"root": 0, "one": 1} {
		fd, err := unix.Openat(mfd, name, unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
		if err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
		err = unix.Fchown(fd, id, id)
		unix.Close(fd)
		if err != nil {
			t.Fatalf("chown %s: %v", name, err)
		}
	}
	attr := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_IDMAP, Userns_fd: uint64(ns.Fd())}
	if err := unix.MountSetattr(mfd, "", unix.AT_EMPTY_PATH, attr); err != nil {
		t.Fatalf("mount_setattr MOUNT_ATTR_IDMAP: %v", err)
	}
	for name, want := range map[string]uint32{"root": uint32(uid), "one": 65534} {
		var st unix.Stat_t
		if err := unix.Fstatat(mfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			t.Fatalf("stat %s: %v", name, err)
		}
		if st.Uid != want || st.Gid != want {
			t.Errorf("through the idmapped mount, %s's file is owned by %d:%d, want %d:%d", name, st.Uid, st.Gid, want, want)
		}
	}
}

// noChildren waits until this process has no child (an earlier test's
// may still be ending), so that a child found later is the holder.
func noChildren(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(leakSettle)
	for {
		child, err := waitChild()
		if err != nil {
			t.Fatal(err)
		}
		if !child {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("a child of this process is still there after %v, before the test", leakSettle)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// fdSet returns this process's open descriptors and what they link to.
func fdSet(t *testing.T) map[string]string {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	fds := map[string]string{}
	for _, e := range ents {
		// os.ReadDir's own descriptor is closed by now: left out.
		if link, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil {
			fds[e.Name()] = link
		}
	}
	return fds
}

// checkNothingLeft fails the test when this process has a child, or a
// descriptor that was not open before.
func checkNothingLeft(t *testing.T, before map[string]string) {
	t.Helper()
	if child, err := waitChild(); err != nil || child {
		t.Errorf("a child of this process is left (%v)", err)
	} else if _, err := unix.Wait4(-1, nil, unix.WNOHANG|unix.WALL, nil); !errors.Is(err, unix.ECHILD) {
		// Asked only when waitid, which reaps nothing, saw no child.
		t.Errorf("wait4(-1, WNOHANG): %v, want ECHILD", err)
	}
	after := fdSet(t)
	for _, fd := range slices.Sorted(maps.Keys(after)) {
		if link, ok := before[fd]; !ok || link != after[fd] {
			t.Errorf("descriptor %s (%s) left open", fd, after[fd])
		}
	}
}
