package testenv

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// LandlockABI asks the kernel for its Landlock ABI version with the raw
// system call (landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION)),
// independently of the code under test. It returns 0 when the kernel has
// no Landlock or runs it disabled (ENOSYS, EOPNOTSUPP); any other error is
// returned as is.
func LandlockABI() (int, error) {
	const createRulesetVersion = 1
	v, _, e := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, createRulesetVersion)
	switch e {
	case 0:
		return int(v), nil
	case unix.ENOSYS, unix.EOPNOTSUPP:
		return 0, nil
	}
	return 0, e
}

// Cgroups is the cgroup layout this process sees, read from
// /proc/self/mountinfo, /proc/self/cgroup and the cgroup2 files directly,
// independently of the code under test. It is what a host's expectations
// are derived from on ShapeHost. A plain value.
type Cgroups struct {
	// V2Mount is the mount point of the cgroup2 hierarchy ("" when none).
	V2Mount string
	// V1 lists the controllers (and names, name=...) of the mounted
	// cgroup v1 hierarchies; empty when there are none.
	V1 []string
	// Self is this process's cgroup directory beneath V2Mount.
	Self string
	// Offered and Enabled are Self's cgroup.controllers and
	// cgroup.subtree_control; SiblingOffered is what a new cgroup beside
	// Self is offered (its parent's cgroup.subtree_control; Self's own
	// controllers when Self is the root, where a new cgroup goes beneath).
	Offered, Enabled, SiblingOffered []string
	// RootOffered is the hierarchy root's cgroup.controllers: the
	// controllers bound to cgroup v2 at all on this machine.
	RootOffered []string
	// Root is true when Self is the hierarchy's root; Alone when Self
	// holds no process but this one.
	Root, Alone bool
}

// HostLacks is a lackingIn list for Require: ShapeHost when lacks is true
// (an independent probe found the feature missing on this machine, which
// a host may legitimately be), nothing otherwise.
func HostLacks(lacks bool) []string {
	if lacks {
		return []string{ShapeHost}
	}
	return nil
}

// LimitControllersLack reports whether this machine's cgroup v2 lacks any
// of the pids, memory and cpu controllers (not mounted, or bound to
// cgroup v1 hierarchies instead).
func (c Cgroups) LimitControllersLack() bool {
	for _, ctl := range []string{"pids", "memory", "cpu"} {
		if !slices.Contains(c.RootOffered, ctl) {
			return true
		}
	}
	return false
}

// Usable reports whether a cgroup manager opened in this process could give
// its leaves controller ctl: Self offers it and either enables it for its
// children already or could (Self is the root, or this process is alone
// in it; cgroup v2 lets no other cgroup enable controllers while it holds
// processes).
func (c Cgroups) Usable(ctl string) bool {
	return slices.Contains(c.Offered, ctl) && (slices.Contains(c.Enabled, ctl) || c.Root || c.Alone)
}

// UsableAlone reports whether a process started alone in a new cgroup
// beside this one (as the tests start a harness) could give its leaves
// controller ctl.
func (c Cgroups) UsableAlone(ctl string) bool { return slices.Contains(c.SiblingOffered, ctl) }

// ProbeCgroups reads the layout. Missing files leave fields empty.
func ProbeCgroups() (Cgroups, error) {
	var c Cgroups
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return c, err
	}
	for _, l := range strings.Split(string(mi), "\n") {
		f := strings.Fields(l)
		sep := slices.Index(f, "-")
		if sep < 0 || sep+3 >= len(f) || len(f) < 5 {
			continue
		}
		switch f[sep+1] {
		case "cgroup2":
			if c.V2Mount == "" && f[3] == "/" {
				c.V2Mount = f[4]
			}
		case "cgroup":
			for _, o := range strings.Split(f[sep+3], ",") {
				if o != "rw" && o != "ro" && !strings.HasPrefix(o, "release_agent") && o != "clone_children" && o != "xattr" && o != "noprefix" && o != "cpuset_v2_mode" {
					c.V1 = append(c.V1, o)
				}
			}
		}
	}
	if c.V2Mount == "" {
		return c, nil
	}
	cg, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return c, err
	}
	rel := ""
	for _, l := range strings.Split(string(cg), "\n") {
		if p, ok := strings.CutPrefix(l, "0::"); ok {
			rel = p
		}
	}
	c.Self = filepath.Join(c.V2Mount, rel)
	c.RootOffered = fieldsOf(filepath.Join(c.V2Mount, "cgroup.controllers"))
	c.Root = rel == "/"
	c.Offered = fieldsOf(filepath.Join(c.Self, "cgroup.controllers"))
	c.Enabled = fieldsOf(filepath.Join(c.Self, "cgroup.subtree_control"))
	if c.Root {
		c.SiblingOffered = c.Offered
	} else {
		c.SiblingOffered = fieldsOf(filepath.Join(filepath.Dir(c.Self), "cgroup.subtree_control"))
	}
	procs := fieldsOf(filepath.Join(c.Self, "cgroup.procs"))
	c.Alone = len(procs) == 1 && procs[0] == strconv.Itoa(os.Getpid())
	return c, nil
}

func fieldsOf(path string) []string {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	return strings.Fields(string(b))
}
