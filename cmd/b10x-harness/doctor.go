package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/b10x/harness/confine"
	"github.com/b10x/harness/confine/spawn"
	"github.com/b10x/harness/egress"
	"github.com/b10x/harness/gate"
	"github.com/b10x/harness/internal/termsafe"
	"github.com/b10x/harness/record"
	"github.com/b10x/harness/session"
	"github.com/b10x/harness/tools"
)

type doctorCmd struct {
	JSON      bool   `help:"Print the probe, the layers and each mode's plan as JSON."`
	Workspace string `help:"The workspace whose run children doctor describes (who they run as, whether a run call starts there). Given, it also decides what each mode publishes and whether strict starts (the exit status); the default, the current directory, is only described." placeholder:"DIR"`
}

// modeReport is what one --confine mode would do on this host.
type modeReport struct {
	Mode      string            `json:"mode"`
	Starts    bool              `json:"starts"`
	Refusal   string            `json:"refusal,omitempty"`
	Plan      confine.Plan      `json:"plan"`
	Publishes []string          `json:"publishes"`
	Withholds map[string]string `json:"withholds"`
}

type doctorReport struct {
	Probe  confine.Report `json:"probe"`
	Layers []confine.Row  `json:"layers"`
	Modes  []modeReport   `json:"modes"`
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
	// Network is what each --net mode gives a run call here.
	Network []netModeReport `json:"run_network"`
	// WorkspaceCase is whether the workspace looks names up without regard
	// to case (decision 0073).
	WorkspaceCase *record.WorkspaceCase `json:"workspace_case,omitempty"`
}

// netModeReport is one --net mode: whether a run call can get it here and
// what it enforces.
type netModeReport struct {
	Mode      string `json:"mode"`
	Available bool   `json:"available"`
	Enforces  string `json:"enforces"`
}

// netModes says what each --net mode enforces; netns is whether run calls
// get a network namespace of their own here, runs whether a run call
// (with the proxy's listener) starts.
func netModes(netns, runs bool) []netModeReport {
	return []netModeReport{
		{"none", netns && runs, "an empty network namespace of the call's own, loopback up: nothing outside the call is reachable (AF_PACKET and AF_VSOCK refused by seccomp; raw sockets need a capability the program lacks)"},
		{"proxy", netns && runs, fmt.Sprintf("the same empty namespace, whose one way out is the harness's proxy listening inside it at 127.0.0.1:%d (HTTP CONNECT, absolute-URI HTTP, SOCKS5): a destination is admitted by name (--deny-domain first, then --allow-domain), an IP literal only by --allow-cidr, and only addresses it checked are dialled (a name resolving to a loopback, private or other non-global address is refused without a CIDR rule); every attempt is recorded; a program that ignores the proxy variables reaches nothing", egress.Port)},
		{"host", runs, "the host's network, unfiltered"},
	}
}

// selfReadsSummary says what selfReadPaths and confine.RestrictSelf leave
// the harness able to read.
const selfReadsSummary = "Under landlock-self the harness (and every hook it starts) can read only the workspace, " +
	"/dev/null and /dev/tty; with --hook also a private temporary directory, the system directories a run child sees " +
	"(/usr, /bin, /sbin, /lib*, /opt and the entries of /etc every user may read), each hook's program, the existing " +
	"absolute paths among its arguments and the harness's own executable (and /proc for reading when the harness " +
	"cannot give its hooks a PID namespace: not root, or root without CAP_SYS_ADMIN); with a network provider or --net proxy also /etc/resolv.conf, /etc/hosts, /etc/nsswitch.conf " +
	"and /etc/services (the CA certificates are loaded before the domain holds). Not /proc, not /sys, not the home directory."

// publication says which entries a plan lets the gate publish, assuming at
// least one --allow-program for run.
func publication(plan confine.Plan) ([]string, map[string]string) {
	host := gate.Host{ConfinedWorkspace: plan.ConfinedWorkspace, ConfinedExecution: plan.ConfinedExecution, Programs: 1}
	var pub []string
	with := map[string]string{}
	for _, e := range gate.Catalogue {
		switch {
		case e.Needs == gate.ConfinedWorkspace && !host.ConfinedWorkspace:
			with[e.Name] = "needs a confined workspace (landlock-self)"
		case e.Needs == gate.ConfinedExecution && !host.ConfinedExecution:
			with[e.Name] = "needs confined execution (landlock-child, namespaces, no-new-privs, seccomp, a whole-tree kill)"
		default:
			pub = append(pub, e.Name)
		}
	}
	if host.ConfinedExecution {
		for i, n := range pub {
			if n == "run" {
				pub[i] = "run (with --allow-program)"
			}
		}
	}
	return pub, with
}

// runStartPrefix starts what doctor says when run calls of a workspace
// cannot start.
const runStartPrefix = "run calls of "

func (c *doctorCmd) Run(e *env) error {
	rep := confine.Probe()
	d := doctorReport{Probe: rep, Layers: rep.Table(), Helper: spawn.HelperSource(), Held: gate.RunHeldSummary, SelfReads: selfReadsSummary}
	abi := session.ChildLandlockABI(rep)
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
	explicit := c.Workspace != ""
	if !explicit {
		c.Workspace = "."
	}
	if ws, err := filepath.Abs(c.Workspace); err == nil {
		cr, err := gate.DetectCase(ws)
		if err != nil {
			cr = gate.CaseReport{Dir: ws, Casing: gate.CaseUnknown, Why: err.Error()}
		}
		d.WorkspaceCase = cr.Record()
	}
	if ws, err := filepath.Abs(c.Workspace); err != nil {
		d.RunAsError = err.Error()
	} else if id, err := spawn.ProbeIdentity(ws); err != nil {
		d.RunAsError = err.Error()
	} else if err := session.ProbeRunHere(rep, ws); err != nil {
		d.RunAsError = err.Error()
	} else {
		d.RunAs = id.String()
		if rep.Namespace("user").OK() {
			d.RunAs += "; the view's mounts are locked (built in a more privileged user namespace)"
		} else {
			d.RunAs += "; without user namespaces the program switches to these ids and the view is not locked (with no capability it cannot mount)"
		}
	}
	d.Network = netModes(rep.Namespace("net").OK(), d.RunAsError == "")
	strictOK := false
	for _, m := range []confine.Mode{confine.Strict, confine.Auto, confine.Off} {
		plan, err := rep.Plan(m)
		mr := modeReport{Mode: m.String(), Starts: err == nil, Plan: plan}
		if err != nil {
			mr.Refusal = err.Error()
		} else {
			mr.Publishes, mr.Withholds = publication(plan)
		}
		if err == nil && plan.ConfinedExecution && d.RunAsError != "" && explicit {
			// The layers hold, but no run call of this workspace can
			// start: run is withheld, and strict refuses, as they would.
			why := runStartPrefix + c.Workspace + " cannot start: " + strings.TrimPrefix(d.RunAsError, session.RunStartHere)
			if m == confine.Strict {
				mr.Starts, mr.Refusal, mr.Publishes, mr.Withholds, err = false, why, nil, nil, errors.New(why)
			} else {
				mr.Publishes = slices.DeleteFunc(mr.Publishes, func(n string) bool { return strings.HasPrefix(n, "run") })
				mr.Withholds["run"] = why
			}
		}
		if m == confine.Strict {
			strictOK = err == nil
		}
		d.Modes = append(d.Modes, mr)
	}
	if c.JSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(d); err != nil {
			return err
		}
	} else {
		w := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "LAYER\tAVAILABLE\tDETAIL")
		for _, r := range d.Layers {
			avail := "yes"
			if !r.Available {
				avail = "NO"
				if !r.Required {
					avail = "no (not required)"
				}
			}
			fmt.Fprintf(w, "%s\t%s\t%s\n", r.Layer, avail, r.Detail)
		}
		w.Flush()
		var remedies []confine.Row
		for _, r := range d.Layers {
			if !r.Available && r.Required && (r.Remedy != "" || d.ContainerFixes[r.Layer] != "") {
				remedies = append(remedies, r)
			}
		}
		fmt.Fprintf(e.stdout, "\nrun helper: %s\n", d.Helper)
		if d.Container.Runtime != "" {
			fmt.Fprintf(e.stdout, "container: %s (%s)\n", d.Container.Runtime, termsafe.Line(d.Container.Evidence))
		}
		if d.RunAs != "" {
			fmt.Fprintf(e.stdout, "run children of %s: %s\n", termsafe.Line(c.Workspace), termsafe.Message(d.RunAs))
		} else {
			// The reason can name a file of the workspace: escaped.
			fmt.Fprintf(e.stdout, "run children of %s: cannot run: %s\n", termsafe.Line(c.Workspace), termsafe.Message(d.RunAsError))
		}
		fmt.Fprintf(e.stdout, "protected from run children: %s\n", d.Held)
		if wc := d.WorkspaceCase; wc != nil {
			fmt.Fprintf(e.stdout, "workspace case: %s (%s: %s)\n", wc.Casing, wc.FS, termsafe.Message(wc.Why))
		}
		fmt.Fprintf(e.stdout, "read by the harness itself: %s\n", d.SelfReads)
		fmt.Fprintf(e.stdout, "unix sockets of run children: %s\n", d.UnixSockets)
		fmt.Fprintf(e.stdout, "kernel denials of run children: %s\n", tools.KernelDenials())
		for _, n := range d.Network {
			avail := "yes"
			if !n.Available {
				avail = "NO"
			}
			fmt.Fprintf(e.stdout, "network of run calls, --net %s: %s: %s\n", n.Mode, avail, n.Enforces)
		}
		if len(remedies) > 0 {
			fmt.Fprintln(e.stdout, "\nHow to get what is missing:")
			for _, r := range remedies {
				if fix := d.ContainerFixes[r.Layer]; fix != "" {
					fmt.Fprintf(e.stdout, "  %s: in this %s container: %s", r.Layer, d.Container.Runtime, fix)
					if r.Remedy != "" {
						fmt.Fprintf(e.stdout, "; on the host: %s", r.Remedy)
					}
					fmt.Fprintln(e.stdout)
					continue
				}
				fmt.Fprintf(e.stdout, "  %s: %s\n", r.Layer, r.Remedy)
			}
		}
		for _, m := range d.Modes {
			fmt.Fprintf(e.stdout, "\n--confine %s: ", m.Mode)
			if !m.Starts {
				if strings.HasPrefix(m.Refusal, runStartPrefix) {
					fmt.Fprintf(e.stdout, "refuses to start: %s\n", termsafe.Message(m.Refusal))
				} else {
					fmt.Fprintf(e.stdout, "refuses to start on this host (the layers above marked NO are missing)\n")
				}
				continue
			}
			fmt.Fprintf(e.stdout, "publishes %v\n", m.Publishes)
			for _, en := range gate.Catalogue {
				if why, ok := m.Withholds[en.Name]; ok {
					fmt.Fprintf(e.stdout, "  not %s: %s\n", en.Name, termsafe.Message(why)) // can name a file of the workspace
				}
			}
			if len(m.Plan.Enforced) > 0 {
				fmt.Fprintf(e.stdout, "  enforces: %v\n", m.Plan.Enforced)
			}
			if m.Plan.ConfinedExecution {
				fmt.Fprintf(e.stdout, "  whole-tree kill: %s; resource limits: %v\n", m.Plan.WholeTreeKill, m.Plan.ResourceLimits)
				if m.Plan.WholeTreeKill == "cgroup.kill" {
					// What cannot be avoided, said once (issue 18, item 11).
					fmt.Fprintln(e.stdout, "  a harness killed with SIGKILL leaves its cgroup directory (its processes die with it); the next harness that starts run calls here removes it, never one of a harness still running")
				}
				fmt.Fprintf(e.stdout, "  private /tmp and /dev/shm: tmpfs, each capped at --tmp-size (default %s)\n", tmpSizeDefault)
			}
		}
	}
	if !strictOK {
		return exitError{exitFailed}
	}
	return nil
}
