package session

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/b10x/harness/cgroup"
	"github.com/b10x/harness/confine"
	"github.com/b10x/harness/confine/spawn"
	"github.com/b10x/harness/egress"
	"github.com/b10x/harness/gate"
	"github.com/b10x/harness/record"
)

// ModeReport is what one confine mode would do on this host.
type ModeReport struct {
	Mode      string            `json:"mode"`
	Starts    bool              `json:"starts"`
	Refusal   string            `json:"refusal,omitempty"`
	Plan      confine.Plan      `json:"plan"`
	Publishes []string          `json:"publishes"`
	Withholds map[string]string `json:"withholds"`
}

// DoctorReport is what doctor says of this host: the probe, the layers,
// what each confine mode would publish and enforce, and what run children
// of a workspace would be.
type DoctorReport struct {
	Probe  confine.Report `json:"probe"`
	Layers []confine.Row  `json:"layers"`
	Modes  []ModeReport   `json:"modes"`
	// Helper is what each run call's helper is executed from.
	Helper string `json:"run_helper"`
	// RunAs is who run children of the workspace are on the host, or why
	// none can run there (RunAsError).
	RunAs      string `json:"run_as,omitempty"`
	RunAsError string `json:"run_as_error,omitempty"`
	// Held is what a run child may not change in the workspace.
	Held string `json:"run_held"`
	// SelfReads is what the harness itself may still read once its own
	// Landlock domain holds (landlock-self).
	SelfReads string `json:"self_reads"`
	// Container is the container runtime found around the harness, and
	// ContainerFixes how to get each missing layer in it (by layer).
	Container      confine.Container `json:"container"`
	ContainerFixes map[string]string `json:"container_fixes,omitempty"`
	// UnixSocketsScoped says whether run children are refused pathname
	// Unix sockets made outside their call (Landlock ABI 9), UnixSockets
	// says so in words (docs/decisions/0047-unix-sockets.md).
	UnixSocketsScoped bool   `json:"run_unix_sockets_scoped"`
	UnixSockets       string `json:"run_unix_sockets"`
	// Network is what each net mode gives a run call here.
	Network []NetModeReport `json:"run_network"`
	// Masked is what a run call's program reads as empty here: the
	// entries of /etc not every user may read (MaskedPaths, as a call's
	// start finds them now) and the files the read scope denies.
	Masked      string   `json:"run_masked"`
	MaskedPaths []string `json:"run_masked_paths"`
	// WorkspaceCase is whether the workspace looks names up without regard
	// to case (decision 0073).
	WorkspaceCase *record.WorkspaceCase `json:"workspace_case,omitempty"`
}

// NetModeReport is one net mode: whether a run call can get it here and
// what it enforces.
type NetModeReport struct {
	Mode      string `json:"mode"`
	Available bool   `json:"available"`
	Enforces  string `json:"enforces"`
}

// maskedSummary says what a run call's program reads as empty here;
// leaves is whether run calls get cgroup leaves here that the kernel can
// freeze (the turn of decision 0097).
func maskedSummary(leaves bool) (string, []string) {
	scope := "the workspace files the read scope denies (by default .env, .env.*, *.pem, *.key, .netrc and SSH private keys), " +
		"as the check at each call's start finds them (a call is refused when the check cannot see into a directory), "
	if leaves {
		scope += "while every other run call of the session is paused (its cgroup leaf frozen)"
	} else {
		scope += "while other run calls of the session may run on (calls get no cgroup leaf here that can be paused: a program of one could hide a file from another's check by renaming directories meanwhile; max_parallel 1 closes that)"
	}
	scope += ", each masked only while it is the file the check found (a call whose file something moved meanwhile fails, or starts afresh)"
	paths, err := spawn.MaskedSystemPaths()
	if err != nil {
		return "the /etc scan failed (" + err.Error() + "), so no run call starts; " + scope, []string{}
	}
	if len(paths) == 0 {
		return "nothing in /etc (every entry is readable by every user); " + scope, []string{}
	}
	return strings.Join(paths, ", ") + " (the entries of /etc not every user may read, as each call's start finds them); " + scope, paths
}

// NetModes says what each net mode enforces; netns is whether run calls
// get a network namespace of their own here, runs whether a run call
// (with the proxy's listener) starts.
func NetModes(netns, runs bool) []NetModeReport {
	return []NetModeReport{
		{"none", netns && runs, "an empty network namespace of the call's own, loopback up: nothing outside the call is reachable (AF_PACKET and AF_VSOCK refused by seccomp; raw sockets need a capability the program lacks)"},
		{"proxy", netns && runs, fmt.Sprintf("the same empty namespace, whose one way out is the harness's proxy listening inside it at 127.0.0.1:%d (HTTP CONNECT, absolute-URI HTTP, SOCKS5): a destination is admitted by name (deny_domain first, then allow_domain), an IP literal only by allow_cidr, and only addresses it checked are dialled (a name resolving to a loopback, private or other non-global address is refused without a CIDR rule); every attempt is recorded; a program that ignores the proxy variables reaches nothing", egress.Port)},
		{"host", runs, "the host's network, unfiltered"},
	}
}

// selfReadsSummary says what selfReadPaths and confine.RestrictSelf leave
// the harness able to read.
const selfReadsSummary = "Under landlock-self the harness (and every hook it starts) can read only the workspace, " +
	"/dev/null and /dev/tty; with hooks also a private temporary directory, the system directories a run child sees " +
	"(/usr, /bin, /sbin, /lib*, /opt and the entries of /etc every user may read), each hook's program, the existing " +
	"absolute paths among its arguments and the harness's own executable (and /proc for reading when the harness " +
	"cannot give its hooks a PID namespace: not root, or root without CAP_SYS_ADMIN); with a network provider or net = proxy also /etc/resolv.conf, /etc/hosts, /etc/nsswitch.conf " +
	"and /etc/services (the CA certificates are loaded before the domain holds). Not /proc, not /sys, not the home directory."

// publication says which entries a plan lets the gate publish, assuming at
// least one allow_program for run, and why it withholds the others (the
// gate's own words, gate.Host.Withholds).
func publication(plan confine.Plan) ([]string, map[string]string) {
	host := gate.Host{ConfinedWorkspace: plan.ConfinedWorkspace, ConfinedExecution: plan.ConfinedExecution, Programs: 1}
	if plan.Mode == confine.Off {
		host.WorkspaceWhy, host.ExecutionWhy = "confine off", "confine off"
	} else {
		host.WorkspaceWhy = "this host lacks " + confine.LayerLandlockSelf
		var missing []string
		for _, l := range plan.Missing {
			if confine.IsExecutionLayer(l.Name) {
				missing = append(missing, l.Name)
			}
		}
		host.ExecutionWhy = "this host lacks " + strings.Join(missing, ", ")
		if len(missing) == 0 {
			host.ExecutionWhy = "this host has no whole-tree kill (" + confine.LayerCgroupLeaf + " or " + confine.LayerPidNS + ")"
		}
	}
	var pub []string
	with := map[string]string{}
	for _, e := range gate.Catalogue {
		why := host.Withholds(e)
		switch {
		case why != "":
			with[e.Name] = why
		case e.Needs == gate.ConfinedExecution:
			pub = append(pub, e.Name+" (with allow_program)")
		default:
			pub = append(pub, e.Name)
		}
	}
	return pub, with
}

// RunStartPrefix starts what Doctor says when run calls of a workspace
// cannot start.
const RunStartPrefix = "run calls of "

// Doctor probes this host and says what each confine mode would do on
// it, and what run children of workspace would be. With explicit (the
// workspace was named), a workspace where no run call can start withholds
// run and makes strict refuse, as they would; otherwise it is only
// described. StrictStarts reports whether strict would start.
func Doctor(workspace string, explicit bool) (d DoctorReport, strictStarts bool) {
	rep := confine.Probe()
	d = DoctorReport{Probe: rep, Layers: rep.Table(), Helper: spawn.HelperSource(), Held: gate.RunHeldSummary, SelfReads: selfReadsSummary}
	leaves := false
	for _, l := range rep.Layers() {
		leaves = leaves || (l.Name == confine.LayerCgroupLeaf && l.Available)
	}
	d.Masked, d.MaskedPaths = maskedSummary(leaves && cgroup.CanFreeze())
	abi := ChildLandlockABI(rep)
	d.UnixSocketsScoped, d.UnixSockets = spawn.PathnameSocketsScoped(abi), spawn.PathnameSockets(abi)
	d.Container = confine.DetectContainer()
	for _, r := range d.Layers {
		if fix := d.Container.Fix(r.Layer, rep.Landlock.Status == confine.Inconclusive); !r.Available && r.Required && fix != "" {
			if d.ContainerFixes == nil {
				d.ContainerFixes = map[string]string{}
			}
			d.ContainerFixes[r.Layer] = fix
		}
	}
	if ws, err := filepath.Abs(workspace); err == nil {
		cr, err := gate.DetectCase(ws)
		if err != nil {
			cr = gate.CaseReport{Dir: ws, Casing: gate.CaseUnknown, Why: err.Error()}
		}
		d.WorkspaceCase = cr.Record()
	}
	if ws, err := filepath.Abs(workspace); err != nil {
		d.RunAsError = err.Error()
	} else if id, err := spawn.ProbeIdentity(ws); err != nil {
		d.RunAsError = err.Error()
	} else if err := ProbeRunHere(rep, ws); err != nil {
		d.RunAsError = err.Error()
	} else {
		d.RunAs = id.String()
		if rep.Namespace("user").OK() {
			d.RunAs += "; the view's mounts are locked (built in a more privileged user namespace)"
		} else {
			d.RunAs += "; without user namespaces the program switches to these ids and the view is not locked (with no capability it cannot mount)"
		}
	}
	d.Network = NetModes(rep.Namespace("net").OK(), d.RunAsError == "")
	for _, m := range []confine.Mode{confine.Strict, confine.Auto, confine.Off} {
		plan, err := rep.Plan(m)
		mr := ModeReport{Mode: m.String(), Starts: err == nil, Plan: plan}
		if err != nil {
			mr.Refusal = err.Error()
		} else {
			mr.Publishes, mr.Withholds = publication(plan)
		}
		if err == nil && plan.ConfinedExecution && d.RunAsError != "" && explicit {
			// The layers hold, but no run call of this workspace can
			// start: run is withheld, and strict refuses, as they would.
			why := RunStartPrefix + workspace + " cannot start: " + strings.TrimPrefix(d.RunAsError, RunStartHere)
			if m == confine.Strict {
				mr.Starts, mr.Refusal, mr.Publishes, mr.Withholds, err = false, why, nil, nil, errors.New(why)
			} else {
				mr.Publishes = slices.DeleteFunc(mr.Publishes, func(n string) bool { return strings.HasPrefix(n, "run") })
				mr.Withholds["run"] = why
			}
		}
		if m == confine.Strict {
			strictStarts = err == nil
		}
		d.Modes = append(d.Modes, mr)
	}
	return d, strictStarts
}
