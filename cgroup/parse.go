package cgroup

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"

	"github.com/b10x/harness/internal/mountinfo"
)

// mountEntry is one line of /proc/<pid>/mountinfo (proc(5)), with the
// octal escapes (\040 and friends) of the path fields undone.
type mountEntry struct {
	ID, Parent   int
	Root         string // the mount's root within its filesystem
	MountPoint   string
	Options      string // per-mount options
	FSType       string
	Source       string
	SuperOptions string // per-superblock options; lists the controllers of a cgroup v1 mount
}

// parseMountInfo parses the text of /proc/<pid>/mountinfo. A malformed line
// is an error naming its line number; empty lines are skipped.
func parseMountInfo(data []byte) ([]mountEntry, error) {
	var out []mountEntry
	for n, line := range strings.Split(string(data), "\n") {
		if line == "" {
			continue
		}
		fields := strings.Split(line, " ")
		sep := -1
		for i := 6; i < len(fields); i++ {
			if fields[i] == "-" {
				sep = i
				break
			}
		}
		if sep < 0 || len(fields) < sep+3 {
			return nil, fmt.Errorf("mountinfo line %d: want at least 6 fields, \"-\", fstype and source: %q", n+1, line)
		}
		id, err1 := strconv.Atoi(fields[0])
		parent, err2 := strconv.Atoi(fields[1])
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("mountinfo line %d: mount IDs are not numbers: %q", n+1, line)
		}
		e := mountEntry{
			ID:         id,
			Parent:     parent,
			Root:       mountinfo.Unescape(fields[3]),
			MountPoint: mountinfo.Unescape(fields[4]),
			Options:    fields[5],
			FSType:     fields[sep+1],
			Source:     mountinfo.Unescape(fields[sep+2]),
		}
		if len(fields) > sep+3 {
			e.SuperOptions = strings.Join(fields[sep+3:], " ")
		}
		// A mount of a namespace file (nsfs: ip netns add, unshare
		// --net=FILE) has a root such as "net:[4026532]": only a cgroup
		// mount's root must be a path, since only those are used here.
		cgroupFS := e.FSType == "cgroup" || e.FSType == "cgroup2"
		if (cgroupFS && !strings.HasPrefix(e.Root, "/")) || !strings.HasPrefix(e.MountPoint, "/") {
			return nil, fmt.Errorf("mountinfo line %d: root and mount point must be absolute: %q", n+1, line)
		}
		if e.FSType == "" {
			return nil, fmt.Errorf("mountinfo line %d: empty filesystem type: %q", n+1, line)
		}
		out = append(out, e)
	}
	return out, nil
}

// parseProcCgroup returns the cgroup v2 path from the text of
// /proc/<pid>/cgroup: the path of the "0::" line. ok is false when there is
// no such line (a host with cgroup v1 only). A path that is not absolute is
// an error.
func parseProcCgroup(data []byte) (path string, ok bool, err error) {
	for n, line := range strings.Split(string(data), "\n") {
		if line == "" {
			continue
		}
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			return "", false, fmt.Errorf("/proc/self/cgroup line %d: want ID:controllers:path: %q", n+1, line)
		}
		if parts[0] != "0" || parts[1] != "" {
			continue
		}
		if !strings.HasPrefix(parts[2], "/") {
			return "", false, fmt.Errorf("/proc/self/cgroup line %d: cgroup v2 path is not absolute: %q", n+1, line)
		}
		return parts[2], true, nil
	}
	return "", false, nil
}

// parseList parses a space-separated list such as cgroup.controllers or
// cgroup.subtree_control.
func parseList(data []byte) []string {
	return strings.Fields(string(data))
}

// parseFlatKeyed parses a cgroup "flat keyed" file (cgroup.events, cpu.stat,
// memory.events, pids.events): one "key value" pair per line, values being
// unsigned integers. A line of another shape is an error naming it.
func parseFlatKeyed(data []byte) (map[string]uint64, error) {
	out := map[string]uint64{}
	for n, line := range strings.Split(string(data), "\n") {
		if line == "" {
			continue
		}
		k, v, found := strings.Cut(line, " ")
		if !found || k == "" {
			return nil, fmt.Errorf("line %d: want \"key value\": %q", n+1, line)
		}
		u, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("line %d: value of %q is not an unsigned integer: %q", n+1, k, v)
		}
		out[k] = u
	}
	return out, nil
}

// parsePids parses cgroup.procs: one decimal process ID per line.
func parsePids(data []byte) ([]int, error) {
	var out []int
	for n, line := range strings.Split(string(data), "\n") {
		if line == "" {
			continue
		}
		pid, err := strconv.Atoi(line)
		if err != nil || pid <= 0 {
			return nil, fmt.Errorf("line %d: not a process ID: %q", n+1, line)
		}
		out = append(out, pid)
	}
	return out, nil
}

// parseSingleInt parses a file holding one integer or "max" (pids.max,
// memory.max, memory.swap.max, pids.peak, memory.peak). max is -1 for "max".
func parseSingleInt(data []byte) (int64, error) {
	s := strings.TrimSpace(string(data))
	if s == "max" {
		return -1, nil
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("want a non-negative integer or \"max\", got %q", s)
	}
	return v, nil
}

// parseStartTime returns field 22 (starttime, clock ticks after boot) of the
// text of /proc/<pid>/stat. The command name (field 2) may hold spaces and
// parentheses, so fields are counted after its last ')'.
func parseStartTime(data []byte) (uint64, error) {
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0, fmt.Errorf("no ')' closing the command name")
	}
	fields := strings.Fields(string(data[i+1:]))
	// fields[0] is field 3 (state); starttime is field 22.
	const idx = 22 - 3
	if len(fields) <= idx {
		return 0, fmt.Errorf("only %d fields after the command name, want more than %d", len(fields), idx)
	}
	v, err := strconv.ParseUint(fields[idx], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("starttime is not a number: %q", fields[idx])
	}
	return v, nil
}

// parseParentName reports whether name is "<prefix>-<pid>-<starttime>" and
// returns the two numbers.
func parseParentName(name, prefix string) (pid int, start uint64, ok bool) {
	rest, found := strings.CutPrefix(name, prefix+"-")
	if !found {
		return 0, 0, false
	}
	a, b, found := strings.Cut(rest, "-")
	if !found || a == "" || b == "" || a[0] == '+' || b[0] == '+' {
		return 0, 0, false
	}
	p, err1 := strconv.Atoi(a)
	s, err2 := strconv.ParseUint(b, 10, 64)
	if err1 != nil || err2 != nil || p <= 0 || strconv.Itoa(p) != a || strconv.FormatUint(s, 10) != b {
		return 0, 0, false
	}
	return p, s, true
}
