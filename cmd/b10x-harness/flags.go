package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/b10x/harness/cgroup"
	"github.com/b10x/harness/gate"
)

// byteSize is a size flag: a plain number of bytes or a number with a
// suffix: K, KB, KiB, M, MB, MiB, G, GB, GiB (all binary multiples).
type byteSize int64

func parseByteSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	mult := int64(1)
	lower := strings.ToLower(t)
	for _, suf := range []struct {
		s string
		m int64
	}{{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30}, {"kb", 1 << 10}, {"mb", 1 << 20}, {"gb", 1 << 30}, {"k", 1 << 10}, {"m", 1 << 20}, {"g", 1 << 30}, {"b", 1}} {
		if strings.HasSuffix(lower, suf.s) {
			mult = suf.m
			t = t[:len(t)-len(suf.s)]
			break
		}
	}
	n, err := strconv.ParseInt(strings.TrimSpace(t), 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("invalid size %q: want a number of bytes, optionally with KiB, MiB or GiB", s)
	}
	return n * mult, nil
}

// UnmarshalText implements encoding.TextUnmarshaler for kong.
func (b *byteSize) UnmarshalText(text []byte) error {
	n, err := parseByteSize(string(text))
	if err != nil {
		return err
	}
	*b = byteSize(n)
	return nil
}

// limits turns the limit flags into cgroup limits, after checking every
// limit flag (--tmp-size included, which is not a cgroup limit).
func (l *limitFlags) limits() (cgroup.Limits, error) {
	if l.Timeout < 0 {
		// As --run-timeout: a negative limit is a mistake, not "the default".
		return cgroup.Limits{}, usagef("--timeout %s: must not be negative", l.Timeout)
	}
	if l.PidsMax < 0 {
		return cgroup.Limits{}, usagef("--pids-max %d: must not be negative", l.PidsMax)
	}
	if l.CPUMax < 0 || l.CPUMax > 1024 {
		return cgroup.Limits{}, usagef("--cpu-max %g: want a number of CPUs between 0 and 1024", l.CPUMax)
	}
	if l.TmpSize <= 0 {
		// tmpfs reads size=0 as "no cap", so 0 is refused rather than passed on.
		return cgroup.Limits{}, usagef("--tmp-size %d: must be a positive size, e.g. 64MiB", l.TmpSize)
	}
	lim := l.asked()
	for _, n := range l.PassEnv {
		if n == "" || strings.ContainsAny(n, "=\x00") {
			return cgroup.Limits{}, usagef("--pass-env %q: not a variable name", n)
		}
	}
	return lim, nil
}

// policyFlags are shared by every subcommand that builds a policy.
type policyFlags struct {
	Workspace     string        `default:"." help:"The workspace root: the only place tools read and write." type:"path"`
	Record        string        `help:"Write the run record (JSON Lines) to this file." placeholder:"FILE"`
	MaxResult     byteSize      `default:"256KiB" help:"Largest tool result returned to the model. A larger read result is a failed outcome; a write's or run's (which has acted) is shortened with a note saying what was cut. Never cut silently."`
	Confine       string        `default:"auto" enum:"strict,auto,off" help:"Kernel confinement: strict (every layer or refuse to start), auto (what the host offers), off (only the read tools)."`
	ApproveUpTo   string        `default:"low" enum:"low,medium,high" help:"Highest risk that runs unattended."`
	Approve       string        `default:"auto" enum:"auto,prompt,deny,all" help:"Who decides calls above the ceiling: auto (ask on /dev/tty when there is one, else deny), prompt (require a terminal), deny, all."`
	Yes           bool          `help:"Approve every call that asks (the same as --approve all): declares that no person is watching."`
	WriteScope    []string      `sep:"none" help:"Restrict writes: GLOB=allowed|partial-only|denied; ordered, first match wins." placeholder:"RULE"`
	ScopeAnnounce string        `default:"stated" enum:"stated,silent" help:"Tell the model the write-scope rules (stated) or keep them silent."`
	Hook          []string      `sep:"none" help:"A pre-call program (argv, no shell; found at start from the working directory and PATH, a missing one is an error): it gets the call as JSON on stdin and runs in the workspace; exit 0 continues (or prints a decision), 2 blocks with its stderr, anything else blocks. Everything it starts dies with it; under landlock-self it writes only the workspace and a private TMPDIR." placeholder:"PROGRAM"`
	HookTimeout   time.Duration `default:"10s" help:"How long a hook may take before it blocks the call."`
	MaxCalls      int           `help:"Calls allowed in the run; past it every call is budget_exhausted (0: unlimited)."`
	AllowProgram  []string      `sep:"none" help:"A program the run tool may start as argv[0] (name resolved through PATH at start, or an absolute path); repeatable." placeholder:"PROGRAM"`
	limitFlags
	// MaxOutput belongs to the run tool only: exec gives the program the
	// harness's own stdout and stderr, which it does not capture.
	MaxOutput byteSize `default:"64KiB" help:"Cap on each of stdout and stderr of a run call (head and tail kept)."`

	// allow narrows publication for a named agent (nil: no narrowing). It
	// is set by the run command from the agent's declared tools, never by
	// a flag.
	allow []string `kong:"-"`
	// onlyTool, set by call, is the one entry the session will be asked
	// for (empty: any, as for run, or tool_invoke whose target is in its
	// arguments): the no-terminal approval note is said only when that
	// entry is above the risk ceiling.
	onlyTool string `kong:"-"`

	// protect names further files or directories the harness reads (agent
	// definitions); those inside the workspace are protected from write
	// tools. Set by commands, never by a flag.
	protect []string `kong:"-"`

	// network says the session talks to a model provider over the
	// network: the harness's own Landlock domain then lets it read the
	// resolver's files, and the CA certificates are loaded before the
	// domain is applied. Set by run, never by a flag.
	network bool `kong:"-"`
}

// limitFlags are shared by the run tool and exec.
type limitFlags struct {
	Timeout    time.Duration `help:"Wall-clock limit of each tool call, for every tool (default 2m), and of exec's command (default 10m). A call past it is stopped and reported as timeout."`
	MemoryMax  byteSize      `default:"2GiB" help:"memory.max of each run call's cgroup. The default degrades with a note where the host has no memory controller; a value given here refuses to start there."`
	TmpSize    byteSize      `default:"${tmp_size_default}" help:"Size cap of each of a run call's private /tmp and /dev/shm (tmpfs, held in memory); a write past it fails with ENOSPC. A cap above the host's memory is accepted and bounds nothing."`
	PidsMax    int64         `default:"512" help:"pids.max of each run call's cgroup. The default degrades with a note where the host has no pids controller; a value given here refuses to start there."`
	CPUMax     float64       `help:"CPUs each run call may use (cpu.max), e.g. 1.5; 0: unlimited. Refuses to start where the host has no cpu controller."`
	Net        string        `default:"none" enum:"none,host" help:"Network for run calls: none (an empty network namespace) or host."`
	AllowRead  []string      `sep:"none" help:"An extra path run calls may read; outside the workspace, resolved once at start (a later rename or link there makes calls fail)." placeholder:"PATH"`
	AllowWrite []string      `sep:"none" help:"An extra path run calls may write; outside the workspace, resolved once at start (a later rename or link there makes calls fail)." placeholder:"PATH"`
	PassEnv    []string      `sep:"none" help:"An environment variable passed to run calls; repeatable." placeholder:"NAME"`
}

// callTimeout is the deadline of each tool call: --timeout, or the gate's
// default.
func callTimeout(d time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return gate.DefaultCallTimeout
}

// askedLimits records which limit flags the command line gave explicitly
// (set by realMain): a limit the user asked for must hold or the harness
// refuses to start; a default may degrade with a note.
var askedLimits = map[string]bool{}

// noteAskedLimits scans args, up to a "--", for the limit flags.
func noteAskedLimits(args []string) {
	for _, a := range args {
		if a == "--" {
			return
		}
		for _, f := range []string{"--memory-max", "--pids-max", "--cpu-max"} {
			if a == f || strings.HasPrefix(a, f+"=") {
				askedLimits[f] = true
			}
		}
	}
}

// asked returns the limits the flags set (zero where unset or invalid:
// limits() reports bad values).
func (l *limitFlags) asked() cgroup.Limits {
	lim := cgroup.Limits{PidsMax: max(l.PidsMax, 0), MemoryMax: int64(l.MemoryMax)}
	if l.CPUMax > 0 {
		lim.CPUPeriod = cgroup.DefaultCPUPeriod
		lim.CPUQuota = time.Duration(l.CPUMax * float64(cgroup.DefaultCPUPeriod))
	}
	return lim
}

// checkAskedLimits refuses (a usage error, exit 2) when a limit flag the
// user gave cannot be enforced by the cgroup leaves here, naming the
// controller and how to get it. mgr nil means run calls get no leaf; why,
// when not empty, says why no run call gets anything at all.
func checkAskedLimits(mgr *cgroup.Manager, lim cgroup.Limits, why string) error {
	for _, l := range []struct {
		flag, ctl string
		set       bool
	}{
		{"--pids-max", "pids", lim.PidsMax > 0},
		{"--memory-max", "memory", lim.MemoryMax > 0},
		{"--cpu-max", "cpu", lim.CPUQuota > 0},
	} {
		if !askedLimits[l.flag] || !l.set {
			continue
		}
		if mgr != nil && slices.Contains(mgr.Controllers(), l.ctl) {
			continue
		}
		reason := why
		switch {
		case reason != "":
		case mgr == nil:
			reason = "run calls get no cgroup leaf here, so no " + l.ctl + " controller"
		default:
			reason = "the cgroup leaves here have no " + l.ctl + " controller"
			for _, m := range mgr.Missing() {
				if strings.HasPrefix(m, l.ctl+" ") {
					reason = m
				}
			}
		}
		return usagef("%s was given but cannot be enforced: %s (see `b10x-harness doctor`; drop the flag to run without the limit)", l.flag, reason)
	}
	return nil
}
