package spawn

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/b10x/harness/confine"
	"github.com/b10x/harness/confine/spawn/internal/seccomp"
	"github.com/b10x/harness/internal/testenv"
)

// The escapes a red team found from a run child (issue 19), each attacked
// for real: the child was host root, the view's mounts could be cloned with
// a system call the filter did not know, and unknown system calls went
// through.

// TestChildNeverHostRoot: the program runs as an unprivileged host id (the
// workspace owner's as root, the harness's own otherwise), holds no
// capability in any set, has no_new_privs, and cannot leave a set-id file
// or a file capability behind.
func TestChildNeverHostRoot(t *testing.T) {
	wantUID := os.Geteuid()
	if wantUID == 0 {
		wantUID = testOwner
	}
	for name, r := range runners(t) {
		ws := workspace(t)
		res, out, err := run(t, r, probeSpec(t, ws, "status:CapInh", "status:CapPrm", "status:CapEff", "status:CapBnd", "status:CapAmb",
			"status:NoNewPrivs", "chmod-setid:"+ws))
		if err != nil {
			t.Fatalf("%s: %v\n%s", name, err, out)
		}
		p := probes(out)
		for _, set := range []string{"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"} {
			if got := p["status:"+set]; got != "0000000000000000" {
				t.Errorf("%s: %s = %q, want no capability at all", name, set, got)
			}
		}
		if p["status:NoNewPrivs"] != "1" {
			t.Errorf("%s: NoNewPrivs = %q, want 1", name, p["status:NoNewPrivs"])
		}
		want := "chmod-EPERM,fchmodat-EPERM,fchmodat2-EPERM,fchmod-EPERM,open-EPERM,mknodat-EPERM,setcap-EPERM"
		if got := p["chmod-setid:"+ws]; got != want {
			t.Errorf("%s: set-id and capability attempts: %s, want %s", name, got, want)
		}
		if res.HostUID != wantUID || res.HostUID == 0 || res.HostGID == 0 {
			t.Errorf("%s: the program ran as host uid %d gid %d, want uid %d and never 0", name, res.HostUID, res.HostGID, wantUID)
		}
		// What the child left, seen from the host.
		err = filepath.Walk(ws, func(path string, fi os.FileInfo, err error) error {
			if err != nil {
				return err
			}
			st := fi.Sys().(*syscall.Stat_t)
			if fi.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
				t.Errorf("%s: %s has mode %v on the host", name, path, fi.Mode())
			}
			if path != ws && int(st.Uid) != wantUID {
				t.Errorf("%s: the child's file %s is owned by uid %d on the host, want %d", name, path, st.Uid, wantUID)
			}
			if _, err := unix.Lgetxattr(path, "security.capability", nil); err == nil {
				t.Errorf("%s: %s carries file capabilities", name, path)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(res.Layers, confine.LayerUserNS) != res.LockedView {
			t.Errorf("%s: layers %v but LockedView %v: a user namespace must lock the view", name, res.Layers, res.LockedView)
		}
	}
}

// TestMountCallsRefused: every mount call, the old and the new API
// (open_tree_attr is Linux 6.15's), fails for the program against every
// kind of mount of its view: a read-only system directory, a mask over a
// file, the masks' parent, its /proc.
func TestMountCallsRefused(t *testing.T) {
	var probes_ []string
	targets := []string{"/etc", "/usr", "/proc", "/"}
	masks, err := sharedMasks.get()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range masks {
		targets = append(targets, strings.TrimSuffix(m, "/")) // every mask of the view
	}
	for _, target := range targets {
		for _, call := range []string{"open_tree", "open_tree_attr", "mount_setattr", "move_mount", "umount2", "fspick", "remount-rw"} {
			probes_ = append(probes_, call+":"+target)
		}
	}
	probes_ = append(probes_, "fsopen", "fsmount")
	for name, r := range runners(t) {
		ws := workspace(t)
		_, out, err := run(t, r, probeSpec(t, ws, probes_...))
		if err != nil {
			t.Fatalf("%s: %v\n%s", name, err, out)
		}
		p := probes(out)
		for _, k := range probes_ {
			if p[k] != "EPERM" {
				t.Errorf("%s: %s = %q, want EPERM (the filter denies the mount family by number)", name, k, p[k])
			}
		}
	}
}

// TestUnknownSyscallsRefused: every number from the highest the filter
// knows up to 64 above it fails with ENOSYS inside the child, whatever this
// kernel implements there, and open_tree_attr (467) is refused even on a
// kernel that predates it.
func TestUnknownSyscallsRefused(t *testing.T) {
	var ps []string
	for nr := seccomp.MaxKnownSyscall + 1; nr <= seccomp.MaxKnownSyscall+64; nr++ {
		ps = append(ps, "nr:"+strconv.Itoa(nr))
	}
	ps = append(ps, "nr:"+strconv.Itoa(unix.SYS_OPEN_TREE_ATTR))
	for name, r := range runners(t) {
		ws := workspace(t)
		_, out, err := run(t, r, probeSpec(t, ws, ps...))
		if err != nil {
			t.Fatalf("%s: %v\n%s", name, err, out)
		}
		p := probes(out)
		for _, k := range ps[:64] {
			if p[k] != "ENOSYS" {
				t.Errorf("%s: system call %s = %q, want ENOSYS", name, k, p[k])
			}
		}
		if k := ps[64]; p[k] != "EPERM" {
			t.Errorf("%s: open_tree_attr by number = %q, want EPERM", name, p[k])
		}
	}
}

// lockProbeC enters a process's user and mount namespaces with every
// capability of that user namespace (as a fully privileged attacker there
// would be, past seccomp and Landlock) and tries to undo the view. It is C
// because a multithreaded process (any Go program) cannot enter a user
// namespace.
const lockProbeC = `
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <stdint.h>
struct attr { uint64_t set, clr, prop, userns; };
static void say(const char *what, long r) { printf("%s=%s\n", what, r < 0 ? strerrorname_np(errno) : "ok"); }
int main(int argc, char **argv) {
	int u = open(argv[1], O_RDONLY), m = open(argv[2], O_RDONLY);
	if (u < 0 || m < 0 || setns(u, CLONE_NEWUSER) || setns(m, CLONE_NEWNS) || chdir("/")) { perror("enter"); return 2; }
	say("umount-mask", umount2(argv[3], MNT_DETACH));
	say("bind-parent", mount(argv[4], "/tmp", NULL, MS_BIND, NULL));
	say("open_tree-parent", syscall(428, AT_FDCWD, argv[4], 1 | O_CLOEXEC));
	say("remount-rw", mount(NULL, "/usr", NULL, MS_REMOUNT | MS_BIND, NULL));
	struct attr a = {0, 1, 0, 0};
	say("mount_setattr-rw", syscall(442, AT_FDCWD, "/usr", 0, &a, sizeof a));
	say("open_tree_attr-rw", syscall(467, AT_FDCWD, "/usr", 1 | O_CLOEXEC | 0x8000, &a, sizeof a));
	return 0;
}
`

// TestViewLockedByKernel proves the lock itself, not the filter in front
// of it: from outside, fully privileged in the program's user namespace,
// no mount of the view can be removed, cloned without what covers it, or
// made writable. The control does the same in the helper's namespaces,
// where the view was built and nothing is locked, and must succeed: the
// attack is real.
func TestViewLockedByKernel(t *testing.T) {
	testenv.Require(t, os.Geteuid() == 0, "running as root (to enter a call's namespaces)", testenv.ShapeNoUserns)
	gcc, err := exec.LookPath("gcc")
	testenv.Require(t, err == nil, "gcc (to build the namespace-entering probe)", testenv.InGuest()...)
	requireSpawn(t)
	testenv.Require(t, childGetsUserns(t), "user namespaces for run children", testenv.ShapeNoUserns)

	dir := t.TempDir()
	src := filepath.Join(dir, "lock.c")
	bin := filepath.Join(dir, "lock")
	if err := os.WriteFile(src, []byte(lockProbeC), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(gcc, "-O1", "-o", bin, src).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	mask := maskedFile(t)

	ws := workspace(t)
	sleep := uniqueSleep()
	s := Spec{Program: pin(t, lookPath(t, "sleep")), Argv: []string{"sleep", sleep}, Dir: ws, Workspace: pin(t, ws), Timeout: time.Minute}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := NewDirect(testOptions()).Run(ctx, s, Stdio{}); done <- err }()
	defer func() { cancel(); <-done }()
	var prog int
	for start := time.Now(); prog == 0 && time.Since(start) < 10*time.Second; time.Sleep(20 * time.Millisecond) {
		if pids := processesWith(sleep); len(pids) == 1 {
			prog = pids[0]
		}
	}
	if prog == 0 {
		t.Fatal("the call's program never appeared")
	}
	init := parentOf(t, prog)

	probe := func(pid int) map[string]string {
		ns := "/proc/" + strconv.Itoa(pid) + "/ns/"
		out, err := exec.Command(bin, ns+"user", ns+"mnt", mask, filepath.Dir(mask)).CombinedOutput()
		if err != nil {
			t.Fatalf("probe in pid %d: %v\n%s", pid, err, out)
		}
		m := map[string]string{}
		for _, l := range strings.Split(string(out), "\n") {
			if k, v, ok := strings.Cut(l, "="); ok {
				m[k] = v
			}
		}
		return m
	}
	got := probe(prog)
	want := map[string]string{
		"umount-mask": "EINVAL", "bind-parent": "EINVAL", "open_tree-parent": "EINVAL",
		"remount-rw": "EPERM", "mount_setattr-rw": "EPERM", "open_tree_attr-rw": "EPERM",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("in the program's namespaces: %s = %q, want %s (a locked mount)", k, got[k], v)
		}
	}
	// The control: the helper's own namespaces, where the view was made.
	ctl := probe(init)
	for _, k := range []string{"umount-mask", "bind-parent", "remount-rw"} {
		if ctl[k] != "ok" {
			t.Errorf("control, in the helper's namespaces: %s = %q, want ok (the probe must be able to undo an unlocked view)", k, ctl[k])
		}
	}
}

// maskedFile returns a file of /etc that the view masks.
func maskedFile(t *testing.T) string {
	t.Helper()
	masks, err := sharedMasks.get()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range masks {
		if !strings.HasSuffix(m, "/") {
			return m
		}
	}
	t.Fatalf("no file of %s is masked here: %v", maskedRoot, masks)
	return ""
}

// parentOf returns the parent pid of pid.
func parentOf(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "PPid:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no PPid for %d", pid)
	return 0
}

// childGetsUserns reports whether a call here gets a user namespace.
func childGetsUserns(t *testing.T) bool {
	ws := workspace(t)
	res, _, err := run(t, NewDirect(testOptions()), Spec{Program: pin(t, lookPath(t, "true")), Argv: []string{"true"}, Dir: ws, Workspace: pin(t, ws)})
	return err == nil && slices.Contains(res.Layers, confine.LayerUserNS)
}

// TestRootOwnedWorkspace: as root, a workspace root owns is bound
// idmapped, so the program (uid 65534 on the host) writes it and what it
// creates belongs to root on disk, without a set-id bit; where the
// filesystem cannot be idmapped (tmpfs before Linux 6.3) the call is
// refused at its identity step, naming the remedy, and nothing runs.
func TestRootOwnedWorkspace(t *testing.T) {
	testenv.Require(t, os.Geteuid() == 0, "running as root", testenv.ShapeNoUserns)
	for name, r := range runners(t) {
		ws, err := filepath.EvalSymlinks(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ws, "root-file"), []byte("root's\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		extra := t.TempDir() // an --allow-write directory root owns, idmapped too
		spec := probeSpec(t, ws, "write:"+filepath.Join(ws, "new"), "read:"+filepath.Join(ws, "root-file"), "chmod-setid:"+ws, "write:"+filepath.Join(extra, "new"))
		spec.WritePaths = []Pinned{pin(t, extra)}
		res, out, err := run(t, r, spec)
		var st unix.Statfs_t
		if serr := unix.Statfs(ws, &st); serr != nil {
			t.Fatal(serr)
		}
		if st.Type == unix.TMPFS_MAGIC && !kernelAtLeast(t, 6, 3) {
			if !errors.Is(err, ErrRootWorkspace) || !strings.Contains(err.Error(), "chown") {
				t.Fatalf("%s: root-owned workspace on tmpfs before 6.3: %v, want a refusal naming the remedy", name, err)
			}
			if _, serr := os.Stat(filepath.Join(ws, "new")); serr == nil {
				t.Fatalf("%s: the program ran", name)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v\n%s", name, err, out)
		}
		p := probes(out)
		if p["write:"+filepath.Join(ws, "new")] != "ok" || !strings.HasPrefix(p["read:"+filepath.Join(ws, "root-file")], "data:") || p["write:"+filepath.Join(extra, "new")] != "ok" {
			t.Errorf("%s: the program cannot use its root-owned workspace: %v", name, p)
		}
		if res.HostUID != idmapUID {
			t.Errorf("%s: ran as host uid %d, want %d", name, res.HostUID, idmapUID)
		}
		for _, f := range []string{filepath.Join(ws, "new"), filepath.Join(ws, "setid"), filepath.Join(extra, "new")} {
			fi, err := os.Lstat(f)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if st := fi.Sys().(*syscall.Stat_t); st.Uid != 0 || fi.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
				t.Errorf("%s: %s is uid %d mode %v on disk, want root's without set-id bits", name, f, st.Uid, fi.Mode())
			}
		}
	}
}

// TestInitIsPID1: the program is not PID 1 of its namespace (issue 12): a
// shell's `kill -KILL $$` ends it, orphans are reaped by the init instead
// of staying zombies, its exit is reported as the program's, and its
// cgroup namespace hides the host's cgroup paths.
func TestInitIsPID1(t *testing.T) {
	script := `(sleep 0.2 &); (sleep 0.2 &); sleep 1; ` +
		`echo zombies=$(grep -l '^State:.*Z' /proc/[0-9]*/status 2>/dev/null | wc -l); ` +
		`echo cgroup=$(cat /proc/self/cgroup); kill -KILL $$; echo survived`
	for name, r := range runners(t) {
		ws := workspace(t)
		res, out, err := run(t, r, shSpec(t, ws, script))
		if err != nil {
			t.Fatalf("%s: %v\n%s", name, err, out)
		}
		got := string(out.stdout.Bytes())
		if !strings.Contains(got, "zombies=0\n") {
			t.Errorf("%s: orphans left as zombies: %q", name, got)
		}
		_, cg, _ := strings.Cut(got, "cgroup=")
		cg, _, _ = strings.Cut(cg, "\n")
		for _, l := range strings.Fields(cg) {
			if !strings.HasSuffix(l, ":/") {
				t.Errorf("%s: the child sees a cgroup path outside its own namespace: %q", name, l)
			}
		}
		if strings.TrimSpace(cg) == "" {
			t.Errorf("%s: /proc/self/cgroup is empty", name)
		}
		if strings.Contains(got, "survived") || res.Signal != "SIGKILL" {
			t.Errorf("%s: kill -KILL $$: %+v, output %q; want the shell killed by SIGKILL", name, res, got)
		}
	}
}

// TestIdmappedSetIDRefused: a root-owned workspace holding a set-user-ID
// file of root's (or one with file capabilities) is not bound idmapped: a
// run child would own it through the mount, and a write through a shared
// mapping keeps its bits (a red-team finding). The call is refused at its
// identity step naming the file, and the program never runs.
func TestIdmappedSetIDRefused(t *testing.T) {
	testenv.Require(t, os.Geteuid() == 0, "running as root", testenv.ShapeNoUserns)
	for name, r := range runners(t) {
		ws, err := filepath.EvalSymlinks(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		suid := filepath.Join(ws, "sub", "suid")
		if err := os.MkdirAll(filepath.Dir(suid), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(suid, []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(suid, 0o755|os.ModeSetuid); err != nil {
			t.Fatal(err)
		}
		_, out, err := run(t, r, probeSpec(t, ws, "write:"+filepath.Join(ws, "ran")))
		if !errors.Is(err, ErrRootWorkspace) || !strings.Contains(err.Error(), suid) {
			t.Fatalf("%s: a root-owned workspace with a setuid file: %v, want a refusal naming %s\n%s", name, err, suid, out)
		}
		if _, err := os.Stat(filepath.Join(ws, "ran")); err == nil {
			t.Fatalf("%s: the program ran", name)
		}
	}
}

// TestReadPathFollowsOwnership: a path the caller names is bound without
// the /etc masks, but the program reads it as its own unprivileged host id:
// a file only root may read stays unreadable, as it is to any other user.
func TestReadPathFollowsOwnership(t *testing.T) {
	testenv.Require(t, os.Geteuid() == 0, "running as root", testenv.ShapeNoUserns)
	dir := t.TempDir()
	secret, public := filepath.Join(dir, "secret"), filepath.Join(dir, "public")
	if err := os.WriteFile(secret, []byte("ROOT-ONLY\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(public, []byte("anyone\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, r := range runners(t) {
		ws := workspace(t)
		s := probeSpec(t, ws, "read:"+secret, "read:"+public)
		s.ReadPaths = []Pinned{pin(t, dir)}
		_, out, err := run(t, r, s)
		if err != nil {
			t.Fatalf("%s: %v\n%s", name, err, out)
		}
		p := probes(out)
		if p["read:"+secret] != "EACCES" || !strings.HasPrefix(p["read:"+public], "data:") {
			t.Errorf("%s: read path: secret %q, public %q; want EACCES and the data", name, p["read:"+secret], p["read:"+public])
		}
	}
}
