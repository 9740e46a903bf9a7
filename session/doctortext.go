package session

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/b10x/harness/confine"
	"github.com/b10x/harness/gate"
	"github.com/b10x/harness/internal/termsafe"
	"github.com/b10x/harness/policy"
	"github.com/b10x/harness/tools"
)

// WriteText writes d for a person: the table of its layers, what it says
// of this host and of workspace's run children, how to get each missing
// layer, and what each confine mode does here. name words a policy key as
// the reader sets it (cmd gives each key's flag); nil, the key itself.
// Every text that can hold a name of the workspace or a file's text is
// written terminal-safe (termsafe). The error is the first write's.
func (d DoctorReport) WriteText(w io.Writer, workspace string, name func(key string) string) error {
	if name == nil {
		name = func(key string) string { return key }
	}
	ew := termsafe.NewWriter(w)
	d.writeLayers(ew)
	d.writeHost(ew, workspace, name)
	d.writeRemedies(ew)
	for _, m := range d.Modes {
		m.writeText(ew, name)
	}
	return ew.Err()
}

// writeLayers writes the table of d's layers: each available or not, and
// why.
func (d DoctorReport) writeLayers(out io.Writer) {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
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
	w.Flush() // its only error is out's, which out keeps
}

// writeHost writes what d says of this host and of workspace's run
// children: the helper, the container, who they run as, what is held
// from them, their network.
func (d DoctorReport) writeHost(w io.Writer, workspace string, name func(string) string) {
	fmt.Fprintf(w, "\nrun helper: %s\n", d.Helper)
	if d.Container.Runtime != "" {
		fmt.Fprintf(w, "container: %s (%s)\n", d.Container.Runtime, termsafe.Line(d.Container.Evidence))
	}
	if d.RunAs != "" {
		fmt.Fprintf(w, "run children of %s: %s\n", termsafe.Line(workspace), termsafe.Message(d.RunAs))
	} else {
		// The reason can name a file of the workspace: escaped.
		fmt.Fprintf(w, "run children of %s: cannot run: %s\n", termsafe.Line(workspace), termsafe.Message(d.RunAsError))
	}
	fmt.Fprintf(w, "protected from run children: %s\n", d.Held)
	if wc := d.WorkspaceCase; wc != nil {
		fmt.Fprintf(w, "workspace case: %s (%s: %s)\n", wc.Casing, wc.FS, termsafe.Message(wc.Why))
	}
	fmt.Fprintf(w, "read by the harness itself: %s\n", d.SelfReads)
	fmt.Fprintf(w, "unix sockets of run children: %s\n", d.UnixSockets)
	fmt.Fprintf(w, "read as empty by run children: %s\n", termsafe.Message(d.Masked))
	fmt.Fprintf(w, "kernel denials of run children: %s\n", tools.KernelDenials())
	fmt.Fprintf(w, "seccomp refusals of run children: %s\n", tools.SeccompDenials())
	fmt.Fprintf(w, "no-route refusals of run children: %s\n", tools.NoRouteDenials())
	fmt.Fprintf(w, "masked files read by run children: %s\n", tools.MaskedOpens())
	fmt.Fprintf(w, "writes of run children outside their write paths: %s\n", tools.ViewWrites())
	for _, n := range d.Network {
		avail := "yes"
		if !n.Available {
			avail = "NO"
		}
		fmt.Fprintf(w, "network of run calls, %s %s: %s: %s\n", name("net"), n.Mode, avail, n.Enforces)
	}
}

// writeRemedies writes how to get each required layer that is missing,
// in this container and on the host, when d knows.
func (d DoctorReport) writeRemedies(w io.Writer) {
	var remedies []confine.Row
	for _, r := range d.Layers {
		if !r.Available && r.Required && (r.Remedy != "" || d.ContainerFixes[r.Layer] != "") {
			remedies = append(remedies, r)
		}
	}
	if len(remedies) == 0 {
		return
	}
	fmt.Fprintln(w, "\nHow to get what is missing:")
	for _, r := range remedies {
		if fix := d.ContainerFixes[r.Layer]; fix != "" {
			fmt.Fprintf(w, "  %s: in this %s container: %s", r.Layer, d.Container.Runtime, fix)
			if r.Remedy != "" {
				fmt.Fprintf(w, "; on the host: %s", r.Remedy)
			}
			fmt.Fprintln(w)
			continue
		}
		fmt.Fprintf(w, "  %s: %s\n", r.Layer, r.Remedy)
	}
}

// writeText writes what confine m.Mode does here: why it refuses to
// start, or what it publishes, withholds and enforces.
func (m ModeReport) writeText(w io.Writer, name func(string) string) {
	fmt.Fprintf(w, "\n%s %s: ", name("confine"), m.Mode)
	if !m.Starts {
		if strings.HasPrefix(m.Refusal, RunStartPrefix) {
			fmt.Fprintf(w, "refuses to start: %s\n", termsafe.Message(m.Refusal)) // names the workspace
		} else {
			fmt.Fprintf(w, "refuses to start on this host (the layers above marked NO are missing)\n")
		}
		return
	}
	fmt.Fprintf(w, "publishes %v\n", m.Publishes)
	for _, en := range gate.Catalogue {
		if why, ok := m.Withholds[en.Name]; ok {
			fmt.Fprintf(w, "  not %s: %s\n", en.Name, termsafe.Message(why)) // can name a file of the workspace
		}
	}
	if len(m.Plan.Enforced) > 0 {
		fmt.Fprintf(w, "  enforces: %v\n", m.Plan.Enforced)
	}
	if m.Plan.ConfinedExecution {
		fmt.Fprintf(w, "  whole-tree kill: %s; resource limits: %v\n", m.Plan.WholeTreeKill, m.Plan.ResourceLimits)
		if m.Plan.WholeTreeKill == "cgroup.kill" {
			// What cannot be avoided, said once (issue 18, item 11).
			fmt.Fprintln(w, "  a harness killed with SIGKILL leaves its cgroup directory (its processes die with it); the next harness that starts run calls here removes it, never one of a harness still running")
		}
		tmp, _ := policy.Lookup("tmp_size")
		fmt.Fprintf(w, "  private /tmp and /dev/shm: tmpfs, each capped at %s (default %s)\n", name("tmp_size"), tmp.Default)
	}
}
