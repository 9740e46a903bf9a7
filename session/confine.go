package session

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/b10x/harness/cgroup"
	"github.com/b10x/harness/confine"
	"github.com/b10x/harness/confine/audit"
	"github.com/b10x/harness/confine/spawn"
	"github.com/b10x/harness/egress"
	"github.com/b10x/harness/gate"
	"github.com/b10x/harness/policy"
	"github.com/b10x/harness/tools"
	"github.com/b10x/harness/workspace"
)

// confinement is what the host's kernel confinement allows this session to
// publish, and the step that applies the harness's own domain.
type confinement struct {
	mode         confine.Mode
	report       confine.Report
	plan         confine.Plan
	tools        []tools.Tool
	host         gate.Host
	record       confinementRecord
	protected    []string // extra protected workspace paths
	programNames []string
	tmpDir       string
	cgroupBase   string        // the cgroup cgroup.Open moved the harness out of, if any
	restrict     func() error  // confines the harness's own reads and writes; called after the record is open
	denials      *audit.Reader // attributes the run children's Landlock denials; nil where they are not attributable
}

// confinementRecord is run_start's "confinement".
type confinementRecord struct {
	Mode          string           `json:"mode"`
	Enforced      []string         `json:"enforced"`
	Missing       []confine.Layer  `json:"missing"`
	WholeTreeKill string           `json:"whole_tree_kill,omitempty"`
	Self          *confine.Applied `json:"self,omitempty"`
	SelfError     string           `json:"self_error,omitempty"`
	NotProbed     string           `json:"not_probed,omitempty"` // why only the harness's own layer was probed
	RunAs         string           `json:"run_as,omitempty"`     // who run children are on the host
	// Enclosing are the limits of the harness's own cgroups, which bound
	// every run call together where calls get no limits of their own.
	Enclosing *cgroup.Enclosing `json:"enclosing_limits,omitempty"`
	// LimitsFrom is "enclosing" when run calls take their limits from the
	// harness's own cgroup by policy (no leaves).
	LimitsFrom string `json:"limits_from,omitempty"`
}

// planConfinement probes the host and applies --confine. Strict on a host
// that lacks a layer is a configuration error (exit 2) naming each layer.
// Without execution (no program declared) auto probes only the harness's
// own layer: nothing it would learn about namespaces, seccomp or cgroups
// could publish anything, and those probes are most of a short call's
// start-up. Strict always probes everything.
//
// With enclosing (limits_from enclosing), nproc is each call's
// RLIMIT_NPROC (pids_max; 0: none), which stands in for a pids.max the
// harness cannot see.
func planConfinement(m confine.Mode, execution bool, notProbed string, enclosing bool, nproc int64) (confine.Mode, confine.Report, confine.Plan, error) {
	if m == confine.Off {
		// Off enforces nothing, so there is nothing to probe.
		plan, err := confine.Report{}.Plan(m)
		return m, confine.Report{}, plan, err
	}
	var rep confine.Report
	if m == confine.Auto && !execution {
		rep = confine.ProbeSelf(notProbed)
	} else {
		rep = confine.Probe()
	}
	plan, err := rep.Plan(m)
	if enclosing {
		return planEnclosing(m, rep, plan, err, nproc)
	}
	if err != nil {
		var se *confine.StrictError
		if errors.As(err, &se) {
			return m, rep, plan, policyErr("confine", "strict", "this host cannot enforce every layer; refusing to start:\n%s\n(run `b10x-harness doctor` for the full picture)", se.Error())
		}
		return m, rep, plan, err
	}
	return m, rep, plan, nil
}

// confineSession probes the host, applies --confine and decides which tools
// can exist.
func confineSession(ctx context.Context, p *Policy, hooks []gate.Hook, ws *workspace.Workspace, s *Session) (*confinement, error) {
	// A call that names another entry cannot use run: nothing of run is
	// probed or started for it (a run probe is a sandbox start).
	execution, notProbed := len(p.Programs) > 0, "no program is declared (allow_program), so run is not published"
	if execution && p.OnlyTool != "" && p.OnlyTool != "run" && p.OnlyTool != "tool_invoke" {
		execution, notProbed = false, "the call names "+p.OnlyTool+", so run is neither probed nor published"
	}
	if len(p.Programs) > 0 {
		if err := checkPassEnv(p); err != nil {
			return nil, err
		}
	}
	m, rep, plan, err := planConfinement(p.mode(), execution, notProbed, p.Run.LimitsFrom == "enclosing", p.Run.PidsMax)
	if err != nil {
		return nil, err
	}
	// The workspace and the extra paths are pinned now, once, whether or
	// not run is published: a bad --allow-read or --allow-write is refused
	// at start, never at the first call.
	view, err := pinView(p, ws)
	if err != nil {
		return nil, err
	}
	c := &confinement{mode: m, report: rep, plan: plan, tools: tools.ReadTools(), restrict: func() error { return nil }}
	c.record = confinementRecord{Mode: m.String(), Enforced: plan.Enforced, Missing: plan.Missing, WholeTreeKill: plan.WholeTreeKill, NotProbed: rep.NotProbed}
	if m == confine.Off {
		c.host.WorkspaceWhy = "confine off"
		c.host.ExecutionWhy = "confine off"
		if len(p.Programs) > 0 {
			// Checked all the same: a wrong declaration is wrong whatever
			// the mode, and says so before anything runs.
			if _, err := resolvePrograms(p.Programs, view); err != nil {
				return nil, err
			}
			if err := p.checkRequired(nil, "confine off publishes no run tool"); err != nil {
				return nil, err
			}
		}
		return c, nil
	}
	if p.Run.LimitsFrom == "enclosing" && m != confine.Off {
		c.record.LimitsFrom = "enclosing"
		enc, err := cgroup.EnclosingLimits()
		if err == nil {
			c.record.Enclosing = &enc
			s.note("limits_from enclosing: run calls get no cgroup leaf of their own; the harness's own cgroup bounds them together (" + enc.String() + ")" + nprocNote(p.Run.PidsMax) + " and each call's tree dies through its PID namespace")
		} else {
			s.note(enclosingUnreadNote(err, p.Run.PidsMax))
		}
	}
	if len(plan.Missing) > 0 {
		s.note(c.missingNote())
	}

	if !plan.ConfinedWorkspace {
		c.host.WorkspaceWhy = "this host cannot confine the harness's own writes (Landlock unavailable)"
	} else {
		c.restrict = func() error { return c.restrictSelf(p, hooks, ws, s) }
	}

	return c.startExecution(ctx, p, view, ws, s)
}

// missingNote is the one note of confine auto on a host that lacks
// layers: which, what is not published for it, and what bounds run calls
// instead of limits of their own.
func (c *confinement) missingNote() string {
	var names []string
	for _, l := range c.plan.Missing {
		names = append(names, l.Name)
	}
	note := fmt.Sprintf("confine auto: this host lacks %s (see `b10x-harness doctor`)", strings.Join(names, ", "))
	if !c.plan.ConfinedWorkspace {
		note += "; file_write and file_edit are not published"
	}
	switch {
	case !c.plan.ConfinedExecution:
		note += "; run is not published"
	case !c.plan.ResourceLimits:
		note += "; run calls get no pids, memory or cpu limits of their own"
		// What bounds them instead: the cgroups that hold the harness
		// (a container's or a pod's own limits), all calls together.
		if enc, err := cgroup.EnclosingLimits(); err == nil {
			c.record.Enclosing = &enc
			if enc.MemoryMax < 0 && enc.PidsMax < 0 && enc.CPUMax == "" {
				note += " (nor does the harness's own cgroup: it sets " + enc.String() + ")"
			} else {
				note += " (the harness's own cgroup bounds them together: " + enc.String() + ")"
			}
		}
	}
	return note
}

// restrictSelf confines the harness's own reads and writes (landlock-self)
// to the workspace and what it needs besides (the hooks' tmp, the cgroup
// it moved to); under auto a failure withholds the write tools instead.
func (c *confinement) restrictSelf(p *Policy, hooks []gate.Hook, ws *workspace.Workspace, s *Session) error {
	var write []string
	if len(hooks) > 0 {
		// Hooks inherit the domain and need a TMPDIR it lets them
		// write (tmpdir.go); nothing else of the harness does.
		tmp, err := privateTmp(&s.cleanup)
		if err != nil {
			return err
		}
		c.tmpDir = tmp
		write = append(write, tmp)
	}
	if c.cgroupBase != "" {
		// Open moved the harness aside in a cgroup it was alone in;
		// Close must move it back and remove the parent there.
		write = append(write, c.cgroupBase)
	}
	read, err := selfReadPaths(p, hooks)
	if err != nil {
		return err
	}
	applied, err := confine.RestrictSelf(confine.SelfPolicy{
		Workspace:  ws.Dir(),
		WritePaths: write,
		ReadPaths:  read,
		Devices:    confine.DefaultDevices(),
		// A hook init without a PID namespace of its own (not
		// root, or root without CAP_SYS_ADMIN, as in a container)
		// finds what its hook left behind in /proc.
		Proc: len(hooks) > 0 && !gate.HooksHavePIDNamespace(),
	})
	if err != nil {
		if c.mode == confine.Strict {
			return stepErr("confine", "strict", fmt.Errorf("confining the harness's own writes failed: %w", err))
		}
		c.record.SelfError = err.Error()
		c.host.WorkspaceWhy = "confining the harness's own writes failed: " + err.Error()
		s.note("confine auto: " + c.host.WorkspaceWhy + "; file_write and file_edit are not published")
		return nil
	}
	c.record.Self = &applied
	c.host.ConfinedWorkspace = true
	c.tools = append(c.tools, tools.WriteTools()...)
	return nil
}

// startExecution resolves the programs and, where run can be confined,
// starts the run broker, checks who a run child is and probes one call,
// publishing run only when all of it holds (under strict, refusing
// otherwise).
func (c *confinement) startExecution(ctx context.Context, p *Policy, view tools.RunView, ws *workspace.Workspace, s *Session) (*confinement, error) {
	progs, err := resolvePrograms(p.Programs, view)
	if err != nil {
		return nil, err
	}
	c.programNames = progs.Names()
	c.host.Programs = len(progs)
	if c.report.NotProbed != "" {
		if len(progs) > 0 {
			c.host.ExecutionWhy = c.report.NotProbed
		}
		return c, nil // no program: the gate says why run is unpublished
	}
	if !c.plan.ConfinedExecution {
		c.host.ExecutionWhy = "this host cannot confine run calls (see `b10x-harness doctor`)"
		if len(progs) > 0 {
			if err := p.checkRequired(nil, "this host cannot confine run calls"); err != nil {
				return nil, err
			}
		}
		return c, nil
	}
	if len(progs) == 0 {
		return c, nil // the gate says why run is unpublished
	}
	broker, err := c.startBroker(p, s)
	if err != nil {
		return nil, err
	}
	if broker == nil {
		return c, nil
	}
	// Who the program runs as depends on the workspace's owner; a
	// workspace that cannot be given to a run child here (root's, on a
	// filesystem without idmapped mounts) means run cannot work.
	id, err := spawn.ProbeIdentity(ws.Dir())
	if err != nil {
		if c.mode == confine.Strict {
			return nil, policyErr("confine", "strict", "run calls cannot use this workspace: %v", err)
		}
		c.withhold(s, "run calls cannot use this workspace: "+err.Error())
		return c, nil
	}
	c.record.RunAs = id.String()
	c.openDenials(s)
	cfg, err := c.runConfig(p, progs, broker, view)
	if err != nil {
		return nil, err
	}
	return c.publishRun(ctx, p, cfg, s)
}

// withhold leaves run unpublished under auto, saying why.
func (c *confinement) withhold(s *Session, why string) {
	c.host.ExecutionWhy = why
	s.note("confine auto: " + why + "; run is not published")
}

// startBroker opens the run calls' cgroup parent and starts the run
// broker. It does so now, before the harness confines its own writes: a
// Landlock-restricted process can never mount, and each run child needs
// fresh mounts (docs/decisions/0030-spawn-broker.md). A broker that cannot
// start refuses strict; under auto it returns nil and run is withheld.
func (c *confinement) startBroker(p *Policy, s *Session) (*spawn.Broker, error) {
	mgr, err := openCgroup(c.mode, c.plan, &s.cleanup, s.note)
	if err != nil {
		return nil, err
	}
	if err := p.checkRequired(mgr, ""); err != nil {
		return nil, err
	}
	if mgr != nil {
		c.cgroupBase = mgr.Moved()
	}
	broker, err := spawn.StartBroker(spawn.BrokerOptions{Cgroup: mgr, Require: Requirements(c.mode, p.Run.LimitsFrom == "enclosing"), RemoveParent: true, Prestart: s.prestart, PrestartPool: p.MaxParallel})
	if err != nil {
		if c.mode == confine.Strict {
			return nil, stepErr("confine", "strict", fmt.Errorf("starting the run broker: %w", err))
		}
		c.withhold(s, "the run broker could not start: "+err.Error())
		return nil, nil
	}
	s.cleanup.add(func() { broker.Close() })
	return broker, nil
}

// runConfig is the run tool's configuration from the policy: the
// programs, the broker, what a child is given and what bounds it.
func (c *confinement) runConfig(p *Policy, progs tools.Programs, broker *spawn.Broker, view tools.RunView) (tools.RunConfig, error) {
	lim, err := p.limits()
	if err != nil {
		return tools.RunConfig{}, err
	}
	egressPolicy, err := p.egress()
	if err != nil {
		return tools.RunConfig{}, err
	}
	timeout := p.Run.Timeout
	if timeout == 0 {
		timeout = 2 * time.Minute
	}
	return tools.RunConfig{
		Programs:   progs,
		Runner:     broker,
		Env:        ChildEnv(p.Run.PassEnv, p.Run.SetEnv),
		Timeout:    timeout,
		Grace:      p.Run.Grace,
		Limits:     lim,
		NProc:      enclosingNProc(p),
		TmpSize:    p.Run.TmpSize,
		Net:        p.Run.NetMode() == "host",
		CallerIDs:  p.Run.ChildUID != policy.ChildRoot,
		Egress:     egressPolicy,
		View:       view,
		MaxOutput:  int(p.Run.MaxOutput),
		Held:       gate.RunHeldSummary,
		Sockets:    spawn.PathnameSockets(ChildLandlockABI(c.report)),
		Denials:    c.denials,
		MaxDenials: p.Run.MaxDenials,
	}, nil
}

// openDenials starts the audit reader that attributes the run children's
// Landlock denials to their calls, where the kernel logs them (Landlock
// ABI 7 for the child's domain) and audit.Probe says this process can read
// them (decision 0080). Where it cannot start, each call says so.
func (c *confinement) openDenials(s *Session) {
	if ChildLandlockABI(c.report) < 7 || !audit.Probe().Attributable {
		return
	}
	r, err := audit.Open()
	if err != nil {
		s.note("kernel denials of run calls are not attributed: " + err.Error())
		return
	}
	s.cleanup.add(func() { r.Close() })
	c.denials = r
}

// publishRun probes one run call and publishes run when it starts.
// Probing is doing: a call is started here, up to its program's execve,
// so that a run tool that would fail on every call (a container that
// refuses a new /proc, a workspace the child cannot be given) is never
// shown to a model, and strict never starts. A single call (call run) is
// its own probe: a failure is its outcome, naming the step, and no model
// sees a list.
func (c *confinement) publishRun(ctx context.Context, p *Policy, cfg tools.RunConfig, s *Session) (*confinement, error) {
	if c.mode == confine.Strict || p.OnlyTool == "" {
		if err := tools.ProbeRun(ctx, cfg); err != nil {
			why := "a run call cannot be started here: " + err.Error() + containerHint(err)
			if c.mode == confine.Strict {
				return nil, stepErr("confine", "strict", errors.New(why))
			}
			c.withhold(s, why)
			return c, nil
		}
	}
	c.tools = append(c.tools, tools.RunTool(cfg))
	c.host.ConfinedExecution = true
	return c, nil
}

// containerHint says, for a run probe that a container's policy refused
// (EPERM at a step such as sethostname or mount), how to let that kind of
// container allow it; "" outside a container and for the failures whose
// own message names the fix (a refused /proc, a root-owned workspace).
func containerHint(err error) string {
	c := confine.DetectContainer()
	if c.Runtime == "" || spawn.ProcRefused(err) || errors.Is(err, spawn.ErrRootWorkspace) || !errors.Is(err, syscall.EPERM) {
		return ""
	}
	return "; in this " + c.Runtime + " container: " + c.Fix(confine.LayerSeccomp, false)
}

// resolverFiles are what Go's resolver reads, lazily and again every few
// seconds, to turn a provider's host name into an address.
var resolverFiles = []string{"/etc/resolv.conf", "/etc/hosts", "/etc/nsswitch.conf", "/etc/services"}

// selfReadPaths is what the harness's own domain lets it (and its hooks)
// read besides the workspace and its devices. Hook programs inherit the
// domain, so with hooks it holds what a run child reads of the system
// (the system directories, the entries of /etc every user may read), each
// hook's program, every argument of a hook that names an existing
// absolute path, and this executable (hooks start under its small init). With a network provider it holds the resolver's files;
// the CA certificates are loaded here, before the domain, and kept.
// Nothing else outside the workspace is readable once the domain holds.
func selfReadPaths(p *Policy, hooks []gate.Hook) ([]string, error) {
	var read []string
	if len(hooks) > 0 {
		sys, err := spawn.SystemReadPaths()
		if err != nil {
			return nil, fmt.Errorf("the system paths hooks read: %w", err)
		}
		read = append(read, sys...)
		// Hooks are started under a small init that is this executable.
		if exe, err := os.Executable(); err == nil {
			read = append(read, exe)
		}
		// Each program was found at start (openSession): Argv[0] is
		// absolute.
		for _, hook := range hooks {
			read = append(read, hook.Argv[0])
			for _, a := range hook.Argv[1:] {
				if filepath.IsAbs(a) {
					if _, err := os.Stat(a); err == nil {
						read = append(read, a)
					}
				}
			}
		}
	}
	if p.ProviderNetwork || p.Run.NetMode() == "proxy" {
		if _, err := x509.SystemCertPool(); err != nil {
			return nil, fmt.Errorf("loading the system's CA certificates: %w", err)
		}
		read = append(read, resolverFiles...)
	}
	return read, nil
}

// openCgroup opens the cgroup parent for run leaves when the plan uses
// cgroup.kill. In auto a failure falls back to the PID namespace's
// whole-tree kill (said once); in strict it is fatal.
// noLeafNote begins the note openCgroup says when there is no leaf.
const noLeafNote = "confine auto: no cgroup leaf for run calls "

func openCgroup(m confine.Mode, plan confine.Plan, cu *cleanup, note func(string)) (*cgroup.Manager, error) {
	if plan.WholeTreeKill != "cgroup.kill" {
		return nil, nil
	}
	mgr, err := cgroup.Open(cgroup.Options{})
	if err != nil {
		if m == confine.Strict {
			return nil, stepErr("confine", "strict", fmt.Errorf("cgroup: %w", err))
		}
		note(noLeafNote + "(" + err.Error() + "); the whole tree is killed through its PID namespace, without resource limits")
		return nil, nil
	}
	if removed, err := mgr.Sweep(); err == nil && len(removed) > 0 {
		note(fmt.Sprintf("removed %d stale cgroup leaf(s) of an earlier harness", len(removed)))
	}
	cu.add(func() { mgr.Close() })
	return mgr, nil
}

// Requirements are the layers a run child must have: strict makes the
// whole-tree kill by cgroup and every limit fatal when missing.
func Requirements(m confine.Mode, enclosing bool) spawn.Requirements {
	if m != confine.Strict || enclosing {
		// With enclosing limits no call has a leaf; strict checked the
		// enclosing cgroup's limits at start (planEnclosing).
		return spawn.Requirements{}
	}
	return spawn.Requirements{Layers: []string{confine.LayerCgroupLeaf, confine.LayerPidsLimit, confine.LayerMemoryLimit, confine.LayerCPULimit}}
}

// SafePath is the PATH of every run child: system directories only, never
// the harness's own PATH (which may name the workspace).
const SafePath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// checkPassEnv refuses, under pass_env_strict, a pass_env name or glob
// that matches no variable of the harness's environment.
func checkPassEnv(p *Policy) error {
	if !p.Run.PassEnvStrict {
		return nil
	}
	for _, n := range p.Run.PassEnv {
		if len(passed(n)) == 0 {
			return policyErr("pass_env", n, "matches no variable of the environment, and pass_env_strict is set")
		}
	}
	return nil
}

// passed is what the pass_env item n (a name, or a glob of names) passes
// of the harness's environment, as NAME=VALUE.
func passed(n string) []string {
	if !strings.ContainsAny(n, "*?[") {
		if v, ok := os.LookupEnv(n); ok {
			return []string{n + "=" + v}
		}
		return nil
	}
	var out []string
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); name != "" {
			if ok, _ := path.Match(n, name); ok {
				out = append(out, kv)
			}
		}
	}
	return out
}

// ChildEnv is the complete environment of a run child: PATH, HOME (the
// child's private /tmp), LANG, TERM, and each --pass-env variable that is
// set. Nothing else of the harness's environment reaches it.
func ChildEnv(pass, set []string) []string {
	env := []string{"PATH=" + SafePath, "HOME=/tmp", "TMPDIR=/tmp"}
	lang := os.Getenv("LANG")
	if lang == "" {
		lang = "C.UTF-8"
	}
	env = append(env, "LANG="+lang)
	term := os.Getenv("TERM")
	if term == "" {
		term = "dumb"
	}
	env = append(env, "TERM="+term)
	for _, n := range pass {
		env = append(env, passed(n)...)
	}
	// setenv last, replacing what came before under its name.
	for _, kv := range set {
		name, _, _ := strings.Cut(kv, "=")
		env = slices.DeleteFunc(env, func(e string) bool { return strings.HasPrefix(e, name+"=") })
		env = append(env, kv)
	}
	return env
}

// ChildLandlockABI is the Landlock ABI of a run child's domain here: the
// probed one when the child gets a domain, 0 when it does not.
func ChildLandlockABI(rep confine.Report) int {
	for _, r := range rep.Table() {
		if r.Layer == confine.LayerLandlockChild && r.Available {
			return rep.Landlock.ABI
		}
	}
	return 0
}

// RunStartHere starts the error of a failed ProbeRunHere.
const RunStartHere = "a run call cannot start here: "

// ProbeRunHere starts a run call of ws up to its program's execve (see
// tools.ProbeRun), where auto would publish run: what doctor says of run
// children is what a call does, not what the layers promise.
func ProbeRunHere(rep confine.Report, ws string) error {
	// (its errors begin with RunStartHere)
	plan, err := rep.Plan(confine.Auto)
	if err != nil || !plan.ConfinedExecution {
		return errors.New("this host cannot confine run calls (see the layers marked NO)")
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	view, err := tools.PinRunView(ws, nil, nil)
	if err != nil {
		return err
	}
	// With the proxy's listener: a call with net proxy gets that too, and
	// net none the same namespace without it.
	prog, err := spawn.PinProgram(exe)
	if err != nil {
		return err
	}
	cfg := tools.RunConfig{Programs: tools.Programs{"probe": prog}, Runner: spawn.NewDirect(spawn.Options{}), View: view, Egress: &egress.Policy{}}
	if err := tools.ProbeRun(context.Background(), cfg); err != nil {
		return fmt.Errorf(RunStartHere+"%w%s", err, containerHint(err))
	}
	return nil
}

// enclosingNProc is each run call's RLIMIT_NPROC: pids_max under
// limits_from enclosing, else none (the call's leaf has pids.max).
func enclosingNProc(p *Policy) uint64 {
	if p.Run.LimitsFrom != "enclosing" || p.Run.PidsMax <= 0 {
		return 0
	}
	return uint64(p.Run.PidsMax)
}

// nprocNote says, under limits_from enclosing, the per-call bound on
// processes that stands in for a cgroup leaf's pids.max.
func nprocNote(n int64) string {
	if n <= 0 {
		return ""
	}
	return fmt.Sprintf(", each call's processes and threads are bounded by RLIMIT_NPROC %d in its own user namespace (pids_max)", n)
}

// limitLayers are the layers enclosing limits stand in for.
var limitLayers = []string{confine.LayerCgroupLeaf, confine.LayerPidsLimit, confine.LayerMemoryLimit, confine.LayerCPULimit}

// planEnclosing is the plan when run calls take their limits from the
// harness's own cgroup (limits_from enclosing): no call gets a leaf, the
// whole tree dies through its PID namespace, and strict, instead of
// per-call leaves and limits, requires the enclosing cgroup to set
// pids.max, memory.max and cpu.max (checked now, read from the cgroup v2
// files of the harness's cgroup and its ancestors). Every other layer
// strict requires is required as before.
//
// A pod's pids.max is set on the pod's cgroup, above the container's, and
// a container's cgroup namespace hides it; nproc (pids_max), applied to
// each call as RLIMIT_NPROC and proven by the helper (decision 0091),
// satisfies strict's pids bound instead.
func planEnclosing(m confine.Mode, rep confine.Report, plan confine.Plan, planErr error, nproc int64) (confine.Mode, confine.Report, confine.Plan, error) {
	if m == confine.Strict {
		var se *confine.StrictError
		if planErr != nil && !errors.As(planErr, &se) {
			return m, rep, plan, planErr
		}
		var missing []confine.Layer
		if se != nil {
			for _, l := range se.Missing {
				if !slices.Contains(limitLayers, l.Name) {
					missing = append(missing, l)
				}
			}
		}
		enc, err := cgroup.EnclosingLimits()
		var unset []string
		switch {
		case err != nil:
			unset = append(unset, "the harness's own cgroup could not be read ("+err.Error()+")")
		default:
			if enc.PidsMax < 0 && nproc <= 0 {
				unset = append(unset, "pids.max (and pids_max is 0, so no call gets a RLIMIT_NPROC of its own)")
			}
			if enc.MemoryMax < 0 {
				unset = append(unset, "memory.max")
			}
			if enc.CPUMax == "" {
				unset = append(unset, "cpu.max")
			}
		}
		if len(missing) > 0 || len(unset) > 0 {
			var why []string
			if len(missing) > 0 {
				why = append(why, (&confine.StrictError{Missing: missing}).Error())
			}
			if len(unset) > 0 {
				why = append(why, "limits_from enclosing: the harness's own cgroup ("+enc.Dir+") and its ancestors set no "+strings.Join(unset, ", ")+": give the pod or container resource limits")
			}
			return m, rep, plan, policyErr("confine", "strict", "this host cannot enforce every layer; refusing to start:\n%s\n(run `b10x-harness doctor` for the full picture)", strings.Join(why, "\n"))
		}
		auto, err := rep.Plan(confine.Auto)
		if err != nil {
			return m, rep, plan, err
		}
		plan = auto
		plan.Mode = confine.Strict
		plan.Missing = []confine.Layer{}
	}
	if plan.WholeTreeKill == "cgroup.kill" {
		plan.WholeTreeKill = "pid namespace"
	}
	plan.ResourceLimits = false
	plan.Missing = slices.DeleteFunc(plan.Missing, func(l confine.Layer) bool { return slices.Contains(limitLayers, l.Name) })
	plan.Enforced = slices.DeleteFunc(plan.Enforced, func(l string) bool { return slices.Contains(limitLayers, l) })
	if nproc > 0 {
		plan.Enforced = append(plan.Enforced, confine.LayerPidsRlimit)
	}
	return m, rep, plan, nil
}
