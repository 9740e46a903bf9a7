package cgroup

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// selfLeaf is the leaf of a parent that holds the harness itself when Open
// had to move it out of its own cgroup. Leaf names may not start with '_'.
const selfLeaf = "_harness"

// probeInfix marks the throw-away child ProbeHost creates.
const probeInfix = "probe"

// location is a cgroup2 mount and a directory in it.
type location struct {
	mount     string       // mount point of the cgroup2 filesystem
	mountRoot string       // the mount's root within the hierarchy (mountinfo field 4)
	dir       string       // absolute directory of the cgroup
	rel       string       // the cgroup relative to the mount, "/" for the mount's root
	v1        []mountEntry // cgroup v1 mounts, for explaining missing controllers
}

// locateSelf finds the cgroup2 mount and this process's cgroup directory.
// mountOverride, when not "", is used instead of probing mountinfo for the
// mount point.
func locateSelf(mountOverride string) (location, error) {
	mi, err := readFile("/proc/self/mountinfo")
	if err != nil {
		return location{}, errorf("read mount table: %w", err)
	}
	mounts, err := parseMountInfo(mi)
	if err != nil {
		return location{}, errorf("parse /proc/self/mountinfo: %w", err)
	}
	pc, err := readFile("/proc/self/cgroup")
	if err != nil {
		return location{}, errorf("read own cgroup: %w", err)
	}
	own, ok, err := parseProcCgroup(pc)
	if err != nil {
		return location{}, errorf("parse /proc/self/cgroup: %w", err)
	}
	var loc location
	for _, m := range mounts {
		if m.FSType == "cgroup" {
			loc.v1 = append(loc.v1, m)
		}
	}
	if !ok {
		return loc, errorf("/proc/self/cgroup has no cgroup v2 (\"0::\") line: %w", ErrNotSupported)
	}
	return resolveLocation(loc, mounts, own, mountOverride)
}

// resolveLocation picks the cgroup2 mount that holds the cgroup path own
// (as in /proc/self/cgroup) and computes the cgroup's directory.
func resolveLocation(loc location, mounts []mountEntry, own, mountOverride string) (location, error) {
	var cands []mountEntry
	for _, m := range mounts {
		if m.FSType != "cgroup2" {
			continue
		}
		if mountOverride != "" && filepath.Clean(m.MountPoint) != filepath.Clean(mountOverride) {
			continue
		}
		cands = append(cands, m)
	}
	if mountOverride != "" && len(cands) == 0 {
		// Not in our mount table (e.g. a path through a symlink): accept it
		// when it really is a cgroup2 filesystem, seen from its root.
		if err := checkCgroup2(mountOverride); err != nil {
			return loc, err
		}
		cands = append(cands, mountEntry{Root: "/", MountPoint: filepath.Clean(mountOverride), FSType: "cgroup2"})
	}
	if len(cands) == 0 {
		return loc, errorf("no cgroup2 mount in /proc/self/mountinfo: %w", ErrNotSupported)
	}
	for _, m := range cands {
		rel, ok := within(own, m.Root)
		if !ok {
			continue
		}
		loc.mount = m.MountPoint
		loc.mountRoot = m.Root
		loc.rel = rel
		loc.dir = filepath.Join(m.MountPoint, rel)
		return loc, nil
	}
	return loc, errorf("own cgroup %q is not visible through the cgroup2 mount at %s (mount root %q): %w",
		own, cands[0].MountPoint, cands[0].Root, ErrNotSupported)
}

// within returns path relative to root ("/" when equal), both absolute
// cgroup paths, and whether path lies at or beneath root.
func within(path, root string) (string, bool) {
	path, root = filepath.Clean(path), filepath.Clean(root)
	if root == "/" {
		return path, true
	}
	if path == root {
		return "/", true
	}
	if rest, ok := strings.CutPrefix(path, root+"/"); ok {
		return "/" + rest, true
	}
	return "", false
}

// checkCgroup2 reports whether dir is on a cgroup2 filesystem.
func checkCgroup2(dir string) error {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return errorf("statfs %s: %w", dir, err)
	}
	if st.Type != unix.CGROUP2_SUPER_MAGIC {
		return errorf("%s is not on a cgroup2 filesystem (filesystem magic %#x): %w", dir, st.Type, ErrNotSupported)
	}
	return nil
}

// isRootCgroup reports whether dir is the root of its hierarchy. The root
// has no cgroup.type (nor cgroup.events, cgroup.kill); the rule that a
// cgroup with processes cannot enable controllers for its children does not
// apply to it.
func isRootCgroup(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, "cgroup.type"))
	return errors.Is(err, os.ErrNotExist)
}

// exists reports whether path exists; errors other than "not there" count
// as present so that a caller trying to use it sees the real error.
func exists(path string) bool {
	_, err := os.Lstat(path)
	return !errors.Is(err, os.ErrNotExist)
}

// readList reads a space-separated list file.
func readList(path string) ([]string, error) {
	b, err := readFile(path)
	if err != nil {
		return nil, errorf("%w", err)
	}
	return parseList(b), nil
}

// readPids reads a cgroup.procs file.
func readPids(path string) ([]int, error) {
	b, err := readFile(path)
	if err != nil {
		return nil, errorf("%w", err)
	}
	pids, err := parsePids(b)
	if err != nil {
		return nil, errorf("parse %s: %w", path, err)
	}
	return pids, nil
}

// writeFile writes value to an existing cgroup file in one write(2), which
// is how the kernel wants cgroup files written.
func writeFile(path, value string) error {
	fd, err := unix.Open(path, unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return errorf("open %s for writing: %w", path, err)
	}
	defer unix.Close(fd)
	return writeFD(fd, path, value)
}

// writeAt writes value to the file name in the directory dirfd (shown as
// dir in errors).
func writeAt(dirfd int, dir, name, value string) error {
	fd, err := unix.Openat(dirfd, name, unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return errorf("open %s for writing: %w", filepath.Join(dir, name), err)
	}
	defer unix.Close(fd)
	return writeFD(fd, filepath.Join(dir, name), value)
}

func writeFD(fd int, path, value string) error {
	for {
		n, err := unix.Write(fd, []byte(value))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return errorf("write %q to %s: %w", value, path, err)
		}
		if n != len(value) {
			return errorf("write %q to %s: short write (%d bytes)", value, path, n)
		}
		return nil
	}
}

// readAt reads the file name in the directory dirfd (shown as dir in
// errors).
func readAt(dirfd int, dir, name string) ([]byte, error) {
	b, err := readRaw(dirfd, name)
	if err != nil {
		return nil, errorf("%w", &os.PathError{Op: "read", Path: filepath.Join(dir, name), Err: err})
	}
	return b, nil
}

// readFile reads a small kernel file with plain system calls (no runtime
// poller registration, which kernfs files would otherwise get). Errors are
// *os.PathError, so errors.Is(err, os.ErrNotExist) works.
func readFile(path string) ([]byte, error) {
	b, err := readRaw(unix.AT_FDCWD, path)
	if err != nil {
		return nil, &os.PathError{Op: "read", Path: path, Err: err}
	}
	return b, nil
}

func readRaw(dirfd int, name string) ([]byte, error) {
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	b := make([]byte, 0, 512)
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := unix.Read(fd, b[len(b):cap(b)])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, err
		}
		if n == 0 {
			return b, nil
		}
		b = b[:len(b)+n]
	}
}

// rmdirRetry removes a cgroup directory, retrying for a short while on
// EBUSY: the kernel can report a cgroup busy for a moment after its last
// process exited.
func rmdirRetry(dir string) error {
	deadline := time.Now().Add(time.Second)
	for {
		err := unix.Rmdir(dir)
		if err == nil || err == unix.ENOENT {
			return nil
		}
		if err != unix.EBUSY || time.Now().After(deadline) {
			return errorf("remove %s: %w", dir, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// startTime returns the start time (clock ticks after boot) of process pid
// from /proc/<pid>/stat; with err wrapping os.ErrNotExist when the process
// is gone.
func startTime(pid int) (uint64, error) {
	b, err := readFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, errorf("read process start time: %w", err)
	}
	st, err := parseStartTime(b)
	if err != nil {
		return 0, errorf("parse /proc/%d/stat: %w", pid, err)
	}
	return st, nil
}

// subdirs lists the child cgroups of dir, sorted.
func subdirs(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, errorf("list %w", err)
	}
	var out []string
	for _, e := range ents {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	return out, nil
}
