// Package cgroup manages one cgroup v2 leaf per run call: finding the
// cgroup2 mount and a delegated parent, limits, atomic placement
// (CLONE_INTO_CGROUP), whole-tree kill, figures and cleanup.
//
// It knows nothing about Landlock.
//
// # Layout
//
// Open makes a harness parent BASE/NAME-PID-STARTTIME in the cgroup BASE the
// process runs in; NewLeaf makes one leaf per call beneath it. When BASE is
// not the hierarchy's root and the process is alone there, Open moves the
// process into PARENT/_harness so that BASE may enable controllers for its
// children (cgroup v2's no-internal-process rule), as runc and systemd do.
// When others share BASE, nothing is moved and leaves get no controllers.
// Sweep removes parents whose harness died.
//
// # Graceful degradation
//
// Leaves without controllers still give atomic placement, whole-tree kill
// and CPU figures; limits that need a missing controller are refused, never
// silently dropped. Manager.Missing and Info.Missing say, one line per
// controller, what is missing and how to get it. Without cgroup v2 at all,
// Open fails with an error matching ErrNotSupported.
package cgroup

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// Info is what this host offers for per-call cgroups, as probed.
// The zero value means no cgroup v2 support was found.
type Info struct {
	Mount       string   // cgroup2 mount point from /proc/self/mountinfo; "" when none
	Self        string   // this process's cgroup, relative to Mount ("/" for the root)
	V1          bool     // cgroup v1 hierarchies are mounted
	CanCreate   bool     // a child cgroup can be created where leaves would go
	Controllers []string // controllers leaves can use, among pids, memory, cpu (in that order)
	Kill        bool     // cgroup.kill exists (Linux 5.14+)
	Problem     string   // why something above is missing, for doctor; "" when all is well
	// Missing has one line for each of pids, memory and cpu that leaves
	// could not use, saying why and how to get it (the lines
	// Manager.Missing would report).
	Missing []string
}

// probeMu serialises ProbeHost calls, which share one probe directory name.
var probeMu sync.Mutex

// ProbeHost probes the host. It never changes the host's hierarchies beyond
// creating and removing one empty child cgroup to test CanCreate (named
// b10x-probe-PID-STARTTIME; Sweep removes it if the process died before
// removing it). Controllers predicts what Open in this process would give
// leaves: the managed controllers this process's cgroup offers and either
// already enables for its children or could enable (it is the hierarchy's
// root, or this process is alone in it). Safe for concurrent use; it never
// fails, reporting what it could not find in Problem.
func ProbeHost() Info {
	var info Info
	var problems []string
	loc, err := locateSelf("")
	info.V1 = len(loc.v1) > 0
	if err != nil {
		info.Problem = problem(err)
		return info
	}
	info.Mount, info.Self = loc.mount, loc.rel
	pid := os.Getpid()
	st, err := startTime(pid)
	if err != nil {
		info.Problem = problem(err)
		return info
	}
	probeMu.Lock()
	dir := filepath.Join(loc.dir, fmt.Sprintf("%s-%s-%d-%d", DefaultName, probeInfix, pid, st))
	if err := unix.Mkdir(dir, 0o755); err != nil {
		problems = append(problems, fmt.Sprintf("cannot create a child cgroup in %s: %v", loc.dir, err))
		info.Kill = !isRootCgroup(loc.dir) && exists(filepath.Join(loc.dir, "cgroup.kill"))
	} else {
		info.CanCreate = true
		info.Kill = exists(filepath.Join(dir, "cgroup.kill"))
		if err := rmdirRetry(dir); err != nil {
			problems = append(problems, problem(err))
		}
	}
	probeMu.Unlock()
	if !info.Kill {
		problems = append(problems, "no cgroup.kill (Linux 5.14+): whole-tree kill falls back to freezing and signalling each process")
	}
	usable, missing, err := diagnose(loc, loc.dir, "", pid)
	if err != nil {
		problems = append(problems, problem(err))
	}
	if info.CanCreate {
		info.Controllers = usable
	}
	info.Missing = missing
	problems = append(problems, missing...)
	info.Problem = strings.Join(problems, "; ")
	return info
}

// CanFreeze reports whether this kernel has the cgroup v2 freezer that
// Leaf.Freeze writes (cgroup.freeze, Linux 5.2+), judged by its release.
// Where it has not, Freeze fails with an error matching ErrNotSupported.
func CanFreeze() bool {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return false
	}
	return releaseAtLeast(unix.ByteSliceToString(u.Release[:]), 5, 2)
}

// releaseAtLeast reports whether a kernel release ("6.1.0-57-amd64") is
// major.minor or later; one it cannot read is not.
func releaseAtLeast(release string, major, minor int) bool {
	var ma, mi int
	if n, _ := fmt.Sscanf(release, "%d.%d", &ma, &mi); n != 2 {
		return false
	}
	return ma > major || (ma == major && mi >= minor)
}
