package cgroup

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
)

// diagnose decides, for each managed controller, whether leaves get it and,
// when not, why and how to get it. It reads the hierarchy's state only, so
// Open and Attach, looking at the same parent, report the same.
//
// base is the cgroup whose children are harness parents. parent is the
// harness parent whose children are the leaves; "" predicts (for
// ProbeHost) what Open would achieve, counting a controller usable when
// Open could enable it: present in base's cgroup.controllers and base being
// the hierarchy root or holding no process but self.
func diagnose(loc location, base, parent string, self int) (usable, missing []string, err error) {
	mountCtl, err := readList(filepath.Join(loc.mount, "cgroup.controllers"))
	if err != nil {
		return nil, nil, err
	}
	baseCtl, err := readList(filepath.Join(base, "cgroup.controllers"))
	if err != nil {
		return nil, nil, err
	}
	baseSub, err := readList(filepath.Join(base, "cgroup.subtree_control"))
	if err != nil {
		return nil, nil, err
	}
	baseRoot := isRootCgroup(base)
	var baseProcs []int
	if !baseRoot {
		if baseProcs, err = readPids(filepath.Join(base, "cgroup.procs")); err != nil {
			return nil, nil, err
		}
	}
	others := 0
	for _, p := range baseProcs {
		if p != self {
			others++
		}
	}
	var parentSub []string
	if parent != "" {
		if parentSub, err = readList(filepath.Join(parent, "cgroup.subtree_control")); err != nil {
			return nil, nil, err
		}
	}
	for _, c := range managed {
		switch {
		case parent != "" && slices.Contains(parentSub, c):
			usable = append(usable, c)
			continue
		case parent == "" && slices.Contains(baseSub, c):
			usable = append(usable, c)
			continue
		case parent == "" && slices.Contains(baseCtl, c) && (baseRoot || others == 0):
			usable = append(usable, c)
			continue
		}
		var why string
		switch {
		case !slices.Contains(mountCtl, c):
			why = notOffered(c, loc, mountCtl)
		case !slices.Contains(baseCtl, c):
			why = fmt.Sprintf("not delegated to %s (its parent cgroup does not enable it in cgroup.subtree_control); "+
				"to get it, enable it along the path from the hierarchy root, e.g. run the harness in a systemd unit with Delegate=yes", base)
		case !slices.Contains(baseSub, c) && !baseRoot && len(baseProcs) > 0:
			why = fmt.Sprintf("%s holds processes that are not this harness's, and cgroup v2 lets a non-root cgroup enable controllers "+
				"for its children only while it holds no process (the harness moves itself aside only when it is alone there); "+
				"to get it, start the harness alone in a cgroup of its own with the controller delegated, e.g. "+
				"systemd-run --scope -p Delegate=yes b10x-harness ...", base)
		case !slices.Contains(baseSub, c):
			why = fmt.Sprintf("could not be enabled in %s; check that this user may write it", filepath.Join(base, "cgroup.subtree_control"))
		default:
			why = fmt.Sprintf("could not be enabled in %s; check that this user may write it", filepath.Join(parent, "cgroup.subtree_control"))
		}
		missing = append(missing, c+" controller: "+why)
	}
	return usable, missing, nil
}

// notOffered explains a controller the cgroup2 mount does not offer at all.
func notOffered(c string, loc location, mountCtl []string) string {
	offers := strings.Join(mountCtl, " ")
	if offers == "" {
		offers = "nothing"
	}
	for _, m := range loc.v1 {
		if slices.Contains(strings.Split(m.SuperOptions, ","), c) {
			return fmt.Sprintf("not offered by the cgroup2 hierarchy at %s (it offers: %s) because it is bound to the cgroup v1 hierarchy at %s; "+
				"to get it, boot with systemd.unified_cgroup_hierarchy=1 (pure cgroup v2) or cgroup_no_v1=%s", loc.mount, offers, m.MountPoint, c)
		}
	}
	return fmt.Sprintf("not offered by the cgroup2 hierarchy at %s (it offers: %s); "+
		"to get it, use a kernel built with the controller and do not bind it to a cgroup v1 hierarchy", loc.mount, offers)
}
