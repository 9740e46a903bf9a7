package session

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/b10x/harness/cgroup"
	"github.com/b10x/harness/confine"
	"github.com/b10x/harness/confine/audit"
	"github.com/b10x/harness/confine/spawn"
	"github.com/b10x/harness/egress"
	"github.com/b10x/harness/internal/setting"
	"github.com/b10x/harness/policy"
	"github.com/b10x/harness/record"
	"github.com/b10x/harness/tools"
	"github.com/b10x/harness/workspace"
)

// Execution is one command prepared under a policy's confinement (exec,
// for a CI step): the runner and the spec it will run. It holds the
// workspace and the cgroup parent until Close.
type Execution struct {
	host   *record.RunsOn // run_start's, read at start when there is a record
	Runner spawn.Runner
	Spec   spawn.Spec
	// Egress is the proxy's policy when the command's network is the
	// proxy (nil otherwise): the caller serves it on an egress.Channel
	// whose Child is the spawn's Stdio.Proxy.
	Egress *egress.Policy
	// Notes are said once before the command starts, unless Quiet.
	Notes []string
	// Quiet is the policy's quiet: the caller says no notes.
	Quiet bool
	// MissingWhy, when not empty, is why the command gets no cgroup leaf
	// (the cgroup's error), for the one note that names what it ran
	// without (Missing).
	MissingWhy string
	// Grace is how long the command has to end after the caller forwarded
	// it a terminating signal (the policy's grace) before the caller ends
	// the run's context, which kills its whole tree at once: Spec.Grace is
	// 0, since exec forwards the signals it gets itself (Stdio.Signals)
	// rather than have the runner send SIGTERM.
	Grace     time.Duration
	limits    cgroup.Limits
	record    string            // the policy's record file ("" none)
	effective []policy.KeyValue // the policy as run_start records it
	file      *policy.FileRef   // the policy file, if any
	dir       string            // the workspace's canonical path
	enclosing bool
	// denials attributes the command's Landlock denials (nil where they
	// are not attributable), at most maxDenials listed.
	denials    *audit.Reader
	maxDenials int
	cleanup    cleanup
}

// WarmExec begins loading the run helper's image on another goroutine
// (spawn.WarmHelper): every Execution's command starts from it, whatever
// its policy. exec calls it as soon as its command line names it, before
// parsing the rest, so that the load runs beside the parsing and Prepare
// rather than after them. It returns at once; a command line that turns
// out not to run anything costs the load and nothing else.
func WarmExec() { spawn.WarmHelper() }

// Prepare readies argv to run under p's confinement: the workspace and the
// extra paths pinned, the program resolved (a name through PATH, an
// absolute path, or a path with a slash from the working directory that
// resolves inside the workspace), the cgroup parent opened. Strict probes
// every layer first and refuses (a usage *Error) when one is missing;
// auto does not probe: the spawn applies every layer the baseline requires
// and fails closed, naming the step. Confine off is refused: the command
// never runs unconfined.
func Prepare(p Policy, argv []string) (*Execution, error) {
	if p.mode() == confine.Off {
		return nil, policyErr("confine", "off", "exec never runs a command unconfined: use strict or auto")
	}
	// The command starts from the helper image whatever the policy says:
	// its load runs beside the preparing (begun already when exec called
	// WarmExec).
	spawn.WarmHelper()
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if err := checkPassEnv(&p); err != nil {
		return nil, err
	}
	lim, err := p.limits()
	if err != nil {
		return nil, err
	}
	x := &Execution{limits: lim, Grace: p.Run.Grace, Quiet: p.Quiet, record: p.Record, effective: p.EffectiveFor(policy.Exec), file: p.File}
	if p.Record != "" {
		// run_start's runs_on, read only for a record. Read before
		// anything confines the harness: its own Landlock domain hides
		// /proc/self from it.
		x.host = hostFacts()
	}
	ok := false
	defer func() {
		if !ok {
			x.Close()
		}
	}()
	enclosing := p.Run.LimitsFrom == "enclosing"
	x.enclosing = enclosing
	plan := confine.Plan{WholeTreeKill: "cgroup.kill"}
	if enclosing {
		plan.WholeTreeKill = "pid namespace"
	}
	if p.mode() == confine.Strict {
		if _, _, plan, err = planConfinement(p.mode(), true, "", enclosing, p.Run.PidsMax); err != nil {
			return nil, err
		}
	}
	ws, err := workspace.Open(p.Workspace)
	if err != nil {
		return nil, &Error{Key: "workspace", Value: p.Workspace, Err: err, Usage: true}
	}
	x.cleanup.add(func() { ws.Close() })
	x.dir = ws.Dir()
	view, err := pinView(&p, ws)
	if err != nil {
		return nil, err
	}
	program, err := resolveProgram(argv[0], ws.Dir(), view)
	if err != nil {
		return nil, err
	}
	// No deadline unless the policy gives one: a CI job has its own, and
	// a build may take as long as it takes.
	timeout := p.Run.Timeout
	dir, err := execDir(ws.Dir())
	if err != nil {
		return nil, err
	}
	if enclosing {
		x.Notes = append(x.Notes, enclosingNote(p.Run.PidsMax))
	}
	if x.Egress, err = p.egress(); err != nil {
		return nil, err
	}
	mgr, err := openCgroup(p.mode(), plan, &x.cleanup, func(n string) {
		if strings.HasPrefix(n, noLeafNote) {
			// Said once, with the layers it costs, after the command
			// (MissingWhy).
			x.MissingWhy = strings.TrimPrefix(n, noLeafNote)
			return
		}
		x.Notes = append(x.Notes, n)
	})
	if err != nil {
		return nil, err
	}
	if err := p.checkRequired(mgr, ""); err != nil {
		return nil, err
	}
	x.Runner = spawn.NewDirect(spawn.Options{Cgroup: mgr, Require: Requirements(p.mode(), enclosing)})
	x.Spec = spawn.Spec{
		Program: program, Argv: argv, Env: ChildEnv(p.Run.PassEnv, p.Run.SetEnv), Dir: dir, Workspace: view.Workspace,
		ReadPaths: view.Read, WritePaths: view.Write, Net: p.Run.NetMode() == "host", Limits: lim, Timeout: timeout,
		TmpSize: p.Run.TmpSize, CallerIDs: p.Run.ChildUID != policy.ChildRoot, NProc: enclosingNProc(&p),
	}
	if x.Egress != nil {
		x.Spec.ProxyPort = egress.Port
		x.Spec.Env = egress.WithEnv(x.Spec.Env)
	}
	x.maxDenials = p.Run.MaxDenials
	if audit.Probe().Attributable {
		if r, err := audit.Open(); err == nil {
			x.denials = r
			x.cleanup.add(func() { r.Close() })
		} else {
			x.Notes = append(x.Notes, "kernel denials of the command are not attributed: "+err.Error())
		}
	}
	ok = true
	return x, nil
}

// resolveProgram finds exec's program: a name through PATH, an absolute
// path, or a path with a slash from the working directory that must
// resolve inside the workspace (dir). It is pinned as a run tool's
// allowed program is, against the view, and returned pinned.
func resolveProgram(prog, dir string, view tools.RunView) (spawn.Pinned, error) {
	if strings.Contains(prog, "/") && !filepath.IsAbs(prog) {
		abs, err := filepath.Abs(prog)
		if err == nil {
			abs, err = filepath.EvalSymlinks(abs)
		}
		if err != nil {
			return spawn.Pinned{}, &Error{Key: "program", Value: prog, Err: err, Usage: true}
		}
		if _, inside := RelInside(dir, abs); !inside {
			return spawn.Pinned{}, policyErr("program", prog, "resolves to %s, outside the workspace %s: give an absolute path for a program elsewhere", abs, dir)
		}
		prog = abs
	}
	progs, err := tools.ResolvePrograms([]string{prog}, os.Getenv("PATH"), view)
	if err != nil {
		var se *setting.Error
		if errors.As(err, &se) {
			return spawn.Pinned{}, &Error{Key: "program", Value: se.Value, Err: se.Err, Usage: true}
		}
		if errors.Is(err, tools.ErrProgramNotFound) {
			// Said of the program, not of a flag exec's user never gave.
			return spawn.Pinned{}, &Error{Key: "program", Value: strconv.Quote(prog), Err: fmt.Errorf("%w in PATH", tools.ErrProgramNotFound), Usage: true}
		}
		return spawn.Pinned{}, &Error{Key: "program", Err: err, Usage: true}
	}
	return progs[prog], nil
}

// execDir is where exec's command starts: the working directory when it
// is inside the workspace (dir), the workspace otherwise.
func execDir(dir string) (string, error) {
	cwd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	if rel, inside := RelInside(dir, cwd); inside {
		return filepath.Join(dir, rel), nil
	}
	return dir, nil
}

// enclosingNote says, under limits_from enclosing, what bounds the
// command instead of a cgroup leaf of its own.
func enclosingNote(pidsMax int64) string {
	enc, err := cgroup.EnclosingLimits()
	if err != nil {
		return enclosingUnreadNote(err, pidsMax)
	}
	return "limits_from enclosing: the command gets no cgroup leaf of its own; the harness's own cgroup bounds it (" + enc.String() + ")" + nprocNote(pidsMax) + " and its tree dies through its PID namespace"
}

// enclosingUnreadNote is said under limits_from enclosing when the
// harness's own cgroup cannot be read (no cgroup v2 here): the limits
// that bound the command, if any, are the container's, unseen.
func enclosingUnreadNote(err error, pidsMax int64) string {
	return "limits_from enclosing: no cgroup leaf is made, and the harness cannot read the cgroup that bounds it (" + err.Error() + ")" + nprocNote(pidsMax) + "; each tree dies through its PID namespace"
}

// Missing names the whole-tree and limit layers the command asked for and
// did not get, from the layers a run applied.
func (x *Execution) Missing(applied []string) []string {
	if x.enclosing {
		return nil // by policy: the enclosing cgroup's limits, no leaf
	}
	want := append([]confine.LayerName{confine.LayerCgroupLeaf}, confine.LimitLayers(x.limits)...)
	var missing []string
	for _, l := range want {
		if !slices.Contains(applied, string(l)) {
			missing = append(missing, string(l))
		}
	}
	return missing
}

// Close releases the workspace and the cgroup parent.
func (x *Execution) Close() { x.cleanup.run() }
