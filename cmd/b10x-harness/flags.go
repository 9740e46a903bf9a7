package main

import (
	"time"

	"github.com/b10x/harness/confine"
	"github.com/b10x/harness/gate"
	"github.com/b10x/harness/session"
	"github.com/b10x/harness/surface"
)

// byteSize is a size flag: a plain number of bytes or a number with a
// suffix (session.ParseSize).
type byteSize int64

// UnmarshalText implements encoding.TextUnmarshaler for kong.
func (b *byteSize) UnmarshalText(text []byte) error {
	n, err := session.ParseSize(string(text))
	if err != nil {
		return err
	}
	*b = byteSize(n)
	return nil
}

// policyFlags are shared by every subcommand that builds a policy.
type policyFlags struct {
	Policy        string        `help:"Read the policy from this TOML file (see examples/policies/ and b10x-harness policy schema); a flag given here overrides the file's key of the same name, key by key." placeholder:"FILE" type:"path"`
	Workspace     string        `default:"." help:"The workspace root: the only place tools read and write." type:"path"`
	Record        string        `help:"Write the run record (JSON Lines) to this file." placeholder:"FILE"`
	MaxResult     byteSize      `default:"256KiB" help:"Largest tool result returned to the model. A larger read result is a failed outcome; a write's or run's (which has acted) is shortened with a note saying what was cut. Never cut silently."`
	Confine       string        `default:"auto" enum:"strict,auto,off" help:"Kernel confinement: strict (every layer or refuse to start), auto (what the host offers), off (only the read tools)."`
	ApproveUpTo   string        `default:"low" enum:"low,medium,high" help:"Highest risk that runs unattended."`
	Approve       string        `default:"auto" enum:"auto,prompt,deny,all" help:"Who decides calls above the ceiling: auto (ask when someone can be asked: /dev/tty, or under mcp the client by elicitation; else deny), prompt (require a way to ask: a terminal, or under mcp a client that supports elicitation), deny, all."`
	Yes           bool          `help:"Approve every call that asks (the same as --approve all): declares that no person is watching."`
	WriteScope    []string      `sep:"none" help:"Restrict writes: GLOB=allowed|partial-only|denied; ordered, first match wins." placeholder:"RULE"`
	ScopeAnnounce string        `default:"stated" enum:"stated,silent" help:"Tell the model the write-scope rules (stated) or keep them silent."`
	Hook          []string      `sep:"none" help:"A pre-call program (argv, no shell; found at start from the working directory and PATH, a missing one is an error): it gets the call as JSON on stdin and runs in the workspace; exit 0 continues (or prints a decision), 2 blocks with its stderr, anything else blocks. Everything it starts dies with it; under landlock-self it writes only the workspace and a private TMPDIR." placeholder:"PROGRAM"`
	HookTimeout   time.Duration `default:"10s" help:"How long a hook may take before it blocks the call."`
	MaxCalls      int           `help:"Calls allowed in the run; past it every call is budget_exhausted (0: unlimited)."`
	MaxParallel   int           `help:"Run calls of the session that run at once (every MCP client of the session together); a call beyond it waits for a slot, first come first served, within its own --timeout (default: the number of CPUs, at least 2)." placeholder:"N"`
	AllowProgram  []string      `sep:"none" help:"A program the run tool may start as argv[0] (name resolved through PATH at start, or an absolute path); repeatable." placeholder:"PROGRAM"`
	limitFlags
	// MaxOutput belongs to the run tool only: exec gives the program the
	// harness's own stdout and stderr, which it does not capture.
	MaxOutput byteSize `default:"64KiB" help:"Cap on each of stdout and stderr of a run call (head and tail kept)."`
}

// limitFlags are shared by the run tool and exec.
type limitFlags struct {
	Timeout        time.Duration `help:"Wall-clock limit of each tool call, for every tool (default 2m), and of exec's command (default 10m). A call past it is stopped and reported as timeout."`
	Grace          time.Duration `default:"10s" help:"How long a program has to end after SIGTERM (a run call cancelled; exec forwards the signals it gets, SIGINT and SIGTERM among them) before its whole process tree is killed; 0: at once."`
	MemoryMax      byteSize      `default:"2GiB" help:"memory.max of each run call's cgroup. The default degrades with a note where the host has no memory controller; a value given here refuses to start there."`
	TmpSize        byteSize      `default:"${tmp_size_default}" help:"Size cap of each of a run call's private /tmp and /dev/shm (tmpfs, held in memory); a write past it fails with ENOSPC. A cap above the host's memory is accepted and bounds nothing."`
	PidsMax        int64         `default:"512" help:"pids.max of each run call's cgroup. The default degrades with a note where the host has no pids controller; a value given here refuses to start there."`
	CPUMax         float64       `help:"CPUs each run call may use (cpu.max), e.g. 1.5; 0: unlimited. Refuses to start where the host has no cpu controller."`
	Net            string        `default:"none" enum:"none,host,proxy" help:"Network for run calls: none (an empty network namespace), host, or proxy (an empty namespace whose one way out is the harness's proxy, which admits only --allow-domain names). Any --allow-domain implies proxy."`
	AllowDomain    []string      `sep:"none" help:"A name run calls may reach through the proxy: exact (proxy.golang.org) or *.suffix (not the bare suffix); case-insensitive; repeatable." placeholder:"PATTERN"`
	DenyDomain     []string      `sep:"none" help:"A name the proxy refuses whatever --allow-domain says; repeatable." placeholder:"PATTERN"`
	AllowCIDR      []string      `name:"allow-cidr" sep:"none" help:"Addresses run calls may reach as IP literals, and non-global addresses (loopback, private) a name may resolve to, e.g. 10.0.0.0/8; repeatable." placeholder:"CIDR"`
	LimitsFrom     string        `default:"call" enum:"call,enclosing" help:"Where run calls' pids, memory and cpu limits come from: call (a cgroup leaf per call) or enclosing (the harness's own cgroup, a pod's or a container's, bounds every call together, for where no leaf can be made; strict then requires it to set pids.max, memory.max and cpu.max)."`
	NetMaxConns    int           `help:"Proxy connections a run call may hold open at once (0: 64)."`
	NetIdleTimeout time.Duration `help:"Close a proxy connection idle this long (0: 5m)."`
	NetMaxBytes    byteSize      `help:"Bytes a run call's proxy connections may move in all (0: no cap)."`
	AllowRead      []string      `sep:"none" help:"An extra path run calls may read; outside the workspace, resolved once at start (a later rename or link there makes calls fail)." placeholder:"PATH"`
	AllowWrite     []string      `sep:"none" help:"An extra path run calls may write; outside the workspace, resolved once at start (a later rename or link there makes calls fail)." placeholder:"PATH"`
	PassEnv        []string      `sep:"none" help:"An environment variable passed to run calls; repeatable." placeholder:"NAME"`
}

// policy is the flags as a session.Policy, with where each value came
// from.
func (p *policyFlags) policy(e *env, surf string) (session.Policy, error) {
	pol := session.Defaults()
	var err error
	if pol.Confine, err = confine.ParseMode(p.Confine); err != nil {
		return pol, usageError{err}
	}
	if pol.ApproveUpTo, err = gate.ParseRisk(p.ApproveUpTo); err != nil {
		return pol, usageError{err}
	}
	pol.Workspace, pol.Record = p.Workspace, p.Record
	pol.Approve = p.Approve
	if p.Yes {
		if p.Approve != session.ApproveAuto && p.Approve != session.ApproveAll {
			return pol, usagef("--yes means --approve all; it contradicts --approve %s", p.Approve)
		}
		pol.Approve = session.ApproveAll
	}
	pol.WriteScope, pol.ScopeAnnounce, pol.Hooks, pol.HookTimeout = p.WriteScope, p.ScopeAnnounce, p.Hook, p.HookTimeout
	pol.MaxCalls, pol.MaxResult, pol.Programs = p.MaxCalls, int64(p.MaxResult), p.AllowProgram
	// --max-parallel has no default tag: its default is the host's
	// (session.DefaultMaxParallel, already in pol), kept unless the
	// command line or the policy file gives one; 0 or less given is
	// refused by Validate, naming the flag or the file's line.
	if _, given := e.sources["max_parallel"]; given {
		pol.MaxParallel = p.MaxParallel
	}
	pol.Run = p.limitFlags.run()
	pol.Run.MaxOutput = int64(p.MaxOutput)
	if surf != "" {
		pol.Surface = surface.Kind(surf)
	}
	e.fill(&pol)
	return pol, nil
}

// run is the limit flags as a session.RunPolicy.
func (l *limitFlags) run() session.RunPolicy {
	return session.RunPolicy{Timeout: l.Timeout, Grace: l.Grace, MemoryMax: int64(l.MemoryMax), TmpSize: int64(l.TmpSize), PidsMax: l.PidsMax,
		CPUMax: l.CPUMax, Net: l.Net, AllowRead: l.AllowRead, AllowWrite: l.AllowWrite, PassEnv: l.PassEnv, MaxOutput: 64 << 10,
		AllowDomain: l.AllowDomain, DenyDomain: l.DenyDomain, AllowCIDR: l.AllowCIDR, NetMaxConns: l.NetMaxConns, LimitsFrom: l.LimitsFrom,
		NetIdleTimeout: l.NetIdleTimeout, NetMaxBytes: int64(l.NetMaxBytes)}
}
