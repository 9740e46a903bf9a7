// Package cgroup manages one cgroup v2 leaf per run call: finding the
// cgroup2 mount and a delegated parent, limits, atomic placement
// (CLONE_INTO_CGROUP), whole-tree kill, figures and cleanup.
//
// It knows nothing about Landlock.
package cgroup

// Info is what this host offers for per-call cgroups, as probed.
// The zero value means no cgroup v2 support was found.
type Info struct {
	Mount       string   // cgroup2 mount point from /proc/self/mountinfo; "" when none
	Self        string   // this process's cgroup, relative to Mount ("/" for the root)
	V1          bool     // cgroup v1 hierarchies are mounted
	CanCreate   bool     // a child cgroup can be created where leaves would go
	Controllers []string // controllers leaves can use (pids, memory, cpu, ...)
	Kill        bool     // cgroup.kill exists (Linux 5.14+)
	Problem     string   // why something above is missing, for doctor; "" when all is well
}

// ProbeHost probes the host. It never changes the host's hierarchies beyond
// creating and removing one empty child cgroup to test CanCreate.
func ProbeHost() Info {
	// Implemented by the cgroup package work; see issue 5.
	return Info{Problem: "cgroup probe not implemented yet"}
}
