package confine

import (
	"fmt"
	"slices"
	"strings"

	"github.com/b10x/harness/cgroup"
)

// LayerName names a confinement layer: one of the Layer constants below.
type LayerName string

// Layer names: the fixed list of confinement layers, in the order Layers,
// Table and Plan report them. The constants are untyped, so that code
// holding layer names as plain strings (Layer.Name, Plan.Enforced,
// spawn.Requirements) takes them as well as code holding a LayerName.
const (
	// LayerLandlockSelf: the harness's own Landlock domain, which limits
	// its writes to the workspace, the record's directory and its temporary
	// directory (RestrictSelf). It makes the "confined workspace".
	LayerLandlockSelf = "landlock-self"
	// LayerLandlockChild: a fresh Landlock domain for each run child.
	LayerLandlockChild = "landlock-child"
	// LayerUserNS: a user namespace for each run child; required only when
	// the harness is not root (uid 0 with CAP_SYS_ADMIN).
	LayerUserNS = "userns"
	// LayerPidNS, LayerMountNS, LayerNetNS, LayerIPCNS, LayerUTSNS: the run
	// child's PID, mount, network, IPC and UTS namespaces.
	LayerPidNS   = "pidns"
	LayerMountNS = "mountns"
	LayerNetNS   = "netns"
	LayerIPCNS   = "ipcns"
	LayerUTSNS   = "utsns"
	// LayerNoNewPrivs: no_new_privs on the run child.
	LayerNoNewPrivs = "no-new-privs"
	// LayerSeccomp: a seccomp filter on the run child.
	LayerSeccomp = "seccomp"
	// LayerCgroupLeaf: a cgroup v2 leaf per run call that can be created
	// and killed as a whole (cgroup.kill).
	LayerCgroupLeaf = "cgroup-leaf"
	// LayerPidsLimit, LayerMemoryLimit, LayerCPULimit: the pids, memory and
	// cpu controllers usable in that leaf.
	LayerPidsLimit   = "pids-limit"
	LayerMemoryLimit = "memory-limit"
	LayerCPULimit    = "cpu-limit"
	// LayerPidsRlimit: a call without a cgroup leaf bounded by
	// RLIMIT_NPROC in its own user namespace (limits_from enclosing,
	// decision 0091). A per-call layer, not a host's: doctor's list
	// (LayerNames) does not hold it.
	LayerPidsRlimit = "pids-rlimit"
)

var layerNames = []string{
	LayerLandlockSelf, LayerLandlockChild,
	LayerUserNS, LayerPidNS, LayerMountNS, LayerNetNS, LayerIPCNS, LayerUTSNS,
	LayerNoNewPrivs, LayerSeccomp,
	LayerCgroupLeaf, LayerPidsLimit, LayerMemoryLimit, LayerCPULimit,
}

// LayerNames returns the fixed list of layer names, in report order. The
// slice is a fresh copy.
func LayerNames() []string { return slices.Clone(layerNames) }

// Layer is one confinement layer as this host offers it. A plain value with
// stable JSON names; the zero value names no layer and is not available.
type Layer struct {
	Name      string `json:"name"`
	Available bool   `json:"available"` // the probe found it working
	// Required is false only for userns when the harness is root: strict
	// then does not need it, and it is not applied.
	Required bool   `json:"required"`
	Detail   string `json:"detail"`           // what was found
	Remedy   string `json:"remedy,omitempty"` // how to get it; empty when available
}

// Layers evaluates every layer of LayerNames against the report, in that
// order. An item the probe could not decide (Inconclusive) or did not probe
// counts as unavailable: confinement is never assumed.
func (r Report) Layers() []Layer {
	out := make([]Layer, 0, len(layerNames))
	for _, name := range layerNames {
		out = append(out, r.layer(name))
	}
	return out
}

func (r Report) layer(name string) Layer {
	if r.NotProbed != "" && name != LayerLandlockSelf {
		return Layer{Name: name, Detail: "not probed: " + r.NotProbed}
	}
	l := Layer{Name: name, Required: true}
	switch name {
	case LayerLandlockSelf, LayerLandlockChild:
		ll := r.Landlock
		l.Available = ll.OK() && ll.ABI >= 1
		if !l.Available {
			l.Detail = ll.describe()
			l.Remedy = landlockRemedy(ll)
			break
		}
		if name == LayerLandlockSelf {
			l.Detail = fmt.Sprintf("Landlock ABI %d: the harness reads and writes only the workspace, /dev/null and /dev/tty, and with hooks a private temporary directory; it reads the system directories and hook programs only when hooks are declared, the resolver's files only for a network provider or net = proxy (rights handled: %s)",
				ll.ABI, strings.Join(rightNames(selfRights(ll.ABI)), ","))
		} else {
			l.Detail = fmt.Sprintf("Landlock ABI %d for each run child: %s", ll.ABI, childLandlockNote(ll.LandlockInfo))
		}
	case LayerUserNS:
		f := r.Namespace("user")
		l.Available = f.OK()
		l.Required = !r.Privilege.Root
		l.Detail = f.describe()
		if !l.Required {
			l.Detail = "not required: running as root (uid 0 with CAP_SYS_ADMIN); probe: " + l.Detail
		}
		if !l.Available {
			l.Remedy = "set sysctl user.max_user_namespaces above 0 (e.g. 15000); on Debian and Ubuntu kernels also kernel.unprivileged_userns_clone=1, and on Ubuntu 23.10+ kernel.apparmor_restrict_unprivileged_userns=0; or run the harness as root"
		}
	case LayerPidNS, LayerMountNS, LayerNetNS, LayerIPCNS, LayerUTSNS:
		kind, _ := namespaceKindByName(nsOfLayer[name])
		f := r.Namespace(kind.name)
		l.Available = f.OK()
		l.Detail = f.describe()
		if !l.Available {
			l.Remedy = nsRemedy(kind, r)
		}
	case LayerNoNewPrivs:
		f := r.Seccomp.NoNewPrivs
		l.Available, l.Detail = f.OK(), f.describe()
		if !l.Available {
			l.Remedy = "Linux 3.5 or later; if a container runtime runs the harness, allow prctl(PR_SET_NO_NEW_PRIVS) in its policy"
		}
	case LayerSeccomp:
		f := r.Seccomp.Filter
		l.Available, l.Detail = f.OK(), f.describe()
		if !l.Available {
			l.Remedy = "Linux 4.14 or later built with CONFIG_SECCOMP_FILTER=y; if a container runtime runs the harness, allow seccomp(2) in its policy"
		}
	case LayerCgroupLeaf:
		l.Available, l.Detail, l.Remedy = r.cgroupLeaf()
	case LayerPidsLimit, LayerMemoryLimit, LayerCPULimit:
		l.Available, l.Detail, l.Remedy = r.cgroupController(string(controllerOfLayer(name)))
	default:
		panic("confine: bug: unknown layer " + name)
	}
	if l.Available {
		l.Remedy = ""
	}
	return l
}

var nsOfLayer = map[string]string{LayerPidNS: "pid", LayerMountNS: "mount", LayerNetNS: "net", LayerIPCNS: "ipc", LayerUTSNS: "uts"}

// limitLayers is the one table from the cgroup controller a limit needs
// (cgroup.Limits.Needs) to the layer that reports and requires it, in
// report order.
var limitLayers = []struct {
	ctl   cgroup.Controller
	layer LayerName
}{
	{cgroup.ControllerPids, LayerPidsLimit},
	{cgroup.ControllerMemory, LayerMemoryLimit},
	{cgroup.ControllerCPU, LayerCPULimit},
}

// LimitLayer returns the layer of the limits that need controller c:
// LayerPidsLimit for cgroup.ControllerPids, LayerMemoryLimit for
// cgroup.ControllerMemory, LayerCPULimit for cgroup.ControllerCPU; "" for
// any other controller.
func LimitLayer(c cgroup.Controller) LayerName {
	for _, e := range limitLayers {
		if e.ctl == c {
			return e.layer
		}
	}
	return ""
}

// LimitLayers returns the layers a call with limits l needs besides
// LayerCgroupLeaf: one for each limit set in l, in report order (pids,
// memory, cpu). The zero Limits needs none (nil).
func LimitLayers(l cgroup.Limits) []LayerName {
	var out []LayerName
	for _, n := range l.Needs() {
		out = append(out, LimitLayer(n.Controller))
	}
	return out
}

// controllerOfLayer returns the controller a limit layer stands for ("" for
// a layer that is not a limit layer).
func controllerOfLayer(name string) cgroup.Controller {
	for _, e := range limitLayers {
		if string(e.layer) == name {
			return e.ctl
		}
	}
	return ""
}

func landlockRemedy(ll LandlockReport) string {
	if ll.Status == Inconclusive {
		return "find out why landlock_create_ruleset failed (see the error; a container's seccomp policy can block it); Landlock needs Linux 5.13 or later"
	}
	return "Linux 5.13 or later built with CONFIG_SECURITY_LANDLOCK=y, with landlock in the lsm= boot parameter (e.g. lsm=landlock,lockdown,yama,integrity,apparmor,bpf)"
}

// childLandlockNote says what the child domain covers at this ABI.
func childLandlockNote(ll LandlockInfo) string {
	parts := []string{"read and execute on system directories, read and write on the workspace and a private /tmp"}
	// No Landlock TCP rules at any ABI: they are per port, not per address,
	// so the call's own network namespace is the boundary (decision 0032).
	parts = append(parts, "no TCP rules (the call's own network namespace isolates the network; loopback works inside it)")
	if ll.Has(FeatureScope) {
		parts = append(parts, "signals and abstract unix sockets scoped")
	} else {
		parts = append(parts, "no signal or abstract-socket scoping below ABI 6 (the PID namespace isolates signals instead)")
	}
	return strings.Join(parts, "; ")
}

func nsRemedy(kind namespaceKind, r Report) string {
	if !r.Privilege.Root && !r.Namespace("user").OK() {
		return "needs a user namespace first, since the harness is not root (see userns), or run the harness as root"
	}
	var parts []string
	if kind.config != "" {
		parts = append(parts, "a kernel built with "+kind.config+"=y")
	}
	parts = append(parts, "sysctl "+kind.sysctl+" above 0")
	if !r.Privilege.Root {
		parts = append(parts, "or run the harness as root")
	}
	return strings.Join(parts, "; ")
}

func (r Report) cgroupLeaf() (ok bool, detail, remedy string) {
	c := r.Cgroup
	switch {
	case c.Mount == "":
		detail = "no cgroup v2 hierarchy mounted"
		if c.V1 {
			detail += " (cgroup v1 only)"
		}
		remedy = "mount cgroup v2: boot with systemd.unified_cgroup_hierarchy=1 (or cgroup_no_v1=all), or mount -t cgroup2 none /sys/fs/cgroup"
	case !c.CanCreate:
		detail = fmt.Sprintf("cgroup v2 at %s, but no child cgroup can be created under %s", c.Mount, c.Self)
		remedy = "delegate a cgroup to the harness: run it under systemd-run --scope -p Delegate=yes, or chown its cgroup directory to the harness's user"
	case !c.Kill:
		detail = fmt.Sprintf("cgroup v2 at %s without cgroup.kill", c.Mount)
		remedy = "Linux 5.14 or later (cgroup.kill)"
	default:
		return true, fmt.Sprintf("cgroup v2 at %s, leaves creatable under %s, cgroup.kill present", c.Mount, c.Self), ""
	}
	if first, _, _ := strings.Cut(c.Problem, "; "); first != "" {
		// Problem covers every cgroup issue, controllers included; its
		// first clause is the one about the hierarchy itself.
		detail += " (" + first + ")"
	}
	return false, detail, remedy
}

func (r Report) cgroupController(ctrl string) (ok bool, detail, remedy string) {
	c := r.Cgroup
	remedy = fmt.Sprintf("give cgroup v2 the %s controller and delegate it to the harness's cgroup: boot with systemd.unified_cgroup_hierarchy=1 (or cgroup_no_v1=%s so v1 releases it), then run under systemd-run --scope -p Delegate=yes", ctrl, ctrl)
	if leaf, leafDetail, _ := r.cgroupLeaf(); !leaf && (c.Mount == "" || !c.CanCreate) {
		return false, "no usable cgroup v2 leaf: " + leafDetail, remedy
	}
	if slices.Contains(c.Controllers, ctrl) {
		return true, fmt.Sprintf("%s controller available to leaves under %s%s", ctrl, c.Mount, c.Self), ""
	}
	// The cgroup package explains each missing controller on a line of
	// its own: "<ctrl> controller: <why>; to get it, <how>".
	for _, line := range c.Missing {
		if rest, ok := strings.CutPrefix(line, ctrl+" controller: "); ok {
			why, how, _ := strings.Cut(rest, "; to get it, ")
			if how == "" {
				how = remedy
			}
			return false, ctrl + " controller " + why, how
		}
	}
	have := "none"
	if len(c.Controllers) > 0 {
		have = strings.Join(c.Controllers, " ")
	}
	return false, fmt.Sprintf("cgroup v2 at %s offers leaves the controllers [%s], not %s", c.Mount, have, ctrl), remedy
}

// Row is one line of the doctor table: the Layer's fields under the names
// the table shows. A plain value with stable JSON names.
type Row struct {
	Layer     string `json:"layer"`
	Available bool   `json:"available"`
	Required  bool   `json:"required"`
	Detail    string `json:"detail"`
	Remedy    string `json:"remedy,omitempty"`
}

// Table returns one Row per layer, in LayerNames order: the data behind
// `doctor` (layer, available, detail, how to get it).
func (r Report) Table() []Row {
	var rows []Row
	for _, l := range r.Layers() {
		rows = append(rows, Row{Layer: l.Name, Available: l.Available, Required: l.Required, Detail: l.Detail, Remedy: l.Remedy})
	}
	return rows
}

// Plan is what one confine mode gives on this host: which capability
// classes hold, which layers are enforced and which are missing. A plain
// value with stable JSON names; the zero value holds nothing.
type Plan struct {
	Mode Mode `json:"mode"`
	// ConfinedWorkspace: the harness's own Landlock domain (landlock-self)
	// will be applied; file_write and file_edit may be published.
	ConfinedWorkspace bool `json:"confined_workspace"`
	// ConfinedExecution: each run child gets its Landlock domain, the
	// namespaces (a user namespace when not root), no_new_privs, a seccomp
	// filter and a whole-tree kill; run may be published.
	ConfinedExecution bool `json:"confined_execution"`
	// WholeTreeKill names how a run child's whole tree is killed:
	// "cgroup.kill", "pid namespace", or "" when neither is available.
	WholeTreeKill string `json:"whole_tree_kill,omitempty"`
	// ResourceLimits: pids, memory and cpu limits hold for run children
	// (requires ConfinedExecution).
	ResourceLimits bool `json:"resource_limits"`
	// Enforced lists the layers that will be in force, in LayerNames
	// order. Layers of a class that does not hold are not listed: nothing
	// runs under them.
	Enforced []string `json:"enforced"`
	// Missing lists the required layers this host lacks (all of them, in
	// every mode but Off), for the record and for doctor.
	Missing []Layer `json:"missing"`
}

// executionLayers must all be available for ConfinedExecution (userns only
// when required), together with a whole-tree kill.
var executionLayers = []string{
	LayerLandlockChild, LayerUserNS, LayerPidNS, LayerMountNS, LayerNetNS, LayerIPCNS, LayerUTSNS,
	LayerNoNewPrivs, LayerSeccomp,
}

// IsExecutionLayer reports whether name is a layer that every run child
// needs for ConfinedExecution (the whole-tree kill aside).
func IsExecutionLayer(name string) bool { return slices.Contains(executionLayers, name) }

// Plan decides what mode m gives on this host.
//
//   - Strict: when any required layer is unavailable, Plan returns a Plan
//     that names the mode and the missing layers and holds nothing, and a
//     *StrictError with one line per missing layer (matching
//     ErrNotSupported); the caller must not start. Otherwise every class
//     holds and every required layer is enforced.
//   - Auto: the classes whose layers are all available hold; Enforced lists
//     the layers of those classes; Missing lists every unavailable required
//     layer, for the one warning at start and the record.
//   - Off: nothing holds, nothing is enforced, nothing is reported missing;
//     only the read tools may be published.
//
// An invalid Mode is an error. Plan is a pure function of the report.
func (r Report) Plan(m Mode) (Plan, error) {
	if !m.valid() {
		return Plan{}, fmt.Errorf("confine: plan for invalid mode %d", int(m))
	}
	if m == Off {
		return Plan{Mode: Off, Enforced: []string{}, Missing: []Layer{}}, nil
	}
	layers := r.Layers()
	byName := map[string]Layer{}
	p := Plan{Mode: m, Enforced: []string{}, Missing: []Layer{}}
	for _, l := range layers {
		byName[l.Name] = l
		if l.Required && !l.Available {
			p.Missing = append(p.Missing, l)
		}
	}
	if m == Strict && len(p.Missing) > 0 {
		return Plan{Mode: Strict, Enforced: []string{}, Missing: p.Missing}, &StrictError{Missing: p.Missing}
	}
	if m == Strict && r.NotProbed != "" {
		return Plan{Mode: Strict, Enforced: []string{}, Missing: []Layer{}}, fmt.Errorf("confine: strict needs every layer probed; this report probed only the harness's own (%s)", r.NotProbed)
	}
	usable := func(name string) bool { l := byName[name]; return l.Available || !l.Required }

	p.ConfinedWorkspace = usable(LayerLandlockSelf)
	switch {
	case byName[LayerCgroupLeaf].Available:
		p.WholeTreeKill = "cgroup.kill"
	case byName[LayerPidNS].Available:
		p.WholeTreeKill = "pid namespace"
	}
	p.ConfinedExecution = p.WholeTreeKill != ""
	for _, name := range executionLayers {
		p.ConfinedExecution = p.ConfinedExecution && usable(name)
	}
	p.ResourceLimits = p.ConfinedExecution && byName[LayerCgroupLeaf].Available
	for _, e := range limitLayers {
		p.ResourceLimits = p.ResourceLimits && byName[string(e.layer)].Available
	}

	for _, l := range layers {
		if !l.Available || !l.Required {
			continue
		}
		switch {
		case l.Name == LayerLandlockSelf:
			if p.ConfinedWorkspace {
				p.Enforced = append(p.Enforced, l.Name)
			}
		case p.ConfinedExecution:
			// Execution layers, the leaf and each available limit apply
			// to every run child.
			p.Enforced = append(p.Enforced, l.Name)
		}
	}
	return p, nil
}

// StrictError is Plan(Strict)'s refusal: the layers strict needs and this
// host lacks, in LayerNames order. It matches ErrNotSupported with
// errors.Is. A plain value; with no Missing layers its message is empty.
type StrictError struct {
	Missing []Layer
}

// Error has one line per missing layer: its name, what was found and how
// to get it. The command line prints it as is and exits with status 2.
func (e *StrictError) Error() string {
	lines := make([]string, 0, len(e.Missing))
	for _, l := range e.Missing {
		lines = append(lines, fmt.Sprintf("confine strict: layer %s missing: %s; to get it: %s", l.Name, l.Detail, l.Remedy))
	}
	return strings.Join(lines, "\n")
}

// Is reports whether target is ErrNotSupported.
func (e *StrictError) Is(target error) bool { return target == ErrNotSupported }
