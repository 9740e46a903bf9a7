package policy

import (
	"errors"
	"math"
	"net/netip"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/b10x/harness/cgroup"
)

// settings is the table: one row per setting, in the order policy show
// prints them and a command lists their flags. Everything about a setting
// is here or in the code that uses its field; see the package doc.
var settings = []Setting{
	{
		Key: "workspace", Kind: String, Default: ".", Path: true, Commands: Session | Exec,
		Help:     "The workspace root: the only place tools read and write. Relative to the directory the harness starts in.",
		FlagHelp: "The workspace root: the only place tools read and write.",
		For:      []Variant{{Commands: Exec, Help: "The workspace root: the only place the command may write (besides --allow-write and its private /tmp)."}},
		Field:    func(p *Policy) any { return &p.Workspace },
	},
	{
		Key: "record", Kind: String, Placeholder: "FILE", Commands: Session | Exec,
		Help:  "Write the run record (JSON Lines) to this file.",
		For:   []Variant{{Commands: Exec, Help: "Write a run record (JSON Lines: run_start, one net line per connection attempt through the proxy, run_end) to this file."}},
		Field: func(p *Policy) any { return &p.Record },
	},
	{
		Key: "confine", Kind: Enum, Default: "auto", Commands: Session | Exec,
		Help: "Kernel confinement: strict (every layer or refuse to start), auto (what the host offers), off (only the read tools).",
		For: []Variant{{Commands: Exec, Enum: []string{"strict", "auto"},
			Help: "strict: every layer or refuse to start; auto: the layers this host offers (the command never runs unconfined)."}},
		Field: func(p *Policy) any { return &p.Confine },
	},
	{
		Key: "approve_up_to", Kind: Enum, Default: "low", Commands: Session,
		Help:  "Highest risk that runs unattended.",
		Field: func(p *Policy) any { return &p.ApproveUpTo },
	},
	{
		Key: "approve", Kind: Enum, Default: "auto", Commands: Session,
		Help:     "Who decides calls above the ceiling: auto (ask when someone can be asked, else deny), prompt (require a way to ask), deny, all.",
		FlagHelp: "Who decides calls above the ceiling: auto (ask when someone can be asked: /dev/tty, or under mcp the client by elicitation; else deny), prompt (require a way to ask: a terminal, or under mcp a client that supports elicitation), deny, all.",
		Alias:    &Alias{Flag: "yes", Value: "all", Help: "Approve every call that asks (the same as --approve all): declares that no person is watching."},
		Field:    func(p *Policy) any { return &p.Approve },
	},
	{
		Key: "write_scope", Kind: List, Placeholder: "RULE", Syntax: ScopeRule, Commands: Session,
		Help:     "Write rules GLOB=allowed|partial-only|denied; ordered, first match wins.",
		FlagHelp: "Restrict writes: GLOB=allowed|partial-only|denied; ordered, first match wins.",
		Field:    func(p *Policy) any { return &p.WriteScope },
	},
	{
		Key: "read_scope", Kind: List, Placeholder: "RULE", Syntax: ReadRule, Commands: Session,
		Help:     "Read rules GLOB=allowed|denied; ordered, first match wins, then the defaults (.env, .env.*, *.pem, *.key, .netrc, SSH private keys denied; .env.example and *.pub allowed); **=allowed turns the defaults off. A denied file's content is shown by no tool, and a run call's program reads it as empty.",
		FlagHelp: "Hide content from the model: GLOB=allowed|denied; ordered, first match wins, then the defaults (.env, .env.*, *.pem, *.key, .netrc, SSH private keys denied; .env.example and *.pub allowed); **=allowed turns them off. file_read and file_edit refuse a denied path, search skips it, dir_list and find mark it, and a run call's program reads it as empty.",
		Field:    func(p *Policy) any { return &p.ReadScope },
	},
	{
		Key: "scope_announce", Kind: Enum, Default: "stated", Commands: Session,
		Help:  "Tell the model the write-scope rules (stated) or keep them silent.",
		Field: func(p *Policy) any { return &p.ScopeAnnounce },
	},
	{
		Key: "hook", Kind: List, Placeholder: "PROGRAM", Syntax: HookLine, Commands: Session,
		Help:     "Pre-call programs (argv, no shell), found at start from the working directory and PATH.",
		FlagHelp: "A pre-call program (argv, no shell; found at start from the working directory and PATH, a missing one is an error): it gets the call as JSON on stdin and runs in the workspace; exit 0 continues (or prints a decision), 2 blocks with its stderr, anything else blocks. Everything it starts dies with it; under landlock-self it writes only the workspace and a private TMPDIR.",
		Field:    func(p *Policy) any { return &p.Hooks },
	},
	{
		Key: "hook_timeout", Kind: Duration, Default: "10s", Commands: Session,
		Help:  "How long a hook may take before it blocks the call.",
		Check: positive("must be positive"),
		Field: func(p *Policy) any { return &p.HookTimeout },
	},
	{
		Key: "max_calls", Kind: Int, Commands: Session,
		Help:  "Calls allowed in the run; past it every call is budget_exhausted (0: unlimited).",
		Check: notNegative(""),
		Field: func(p *Policy) any { return &p.MaxCalls },
	},
	{
		Key: "max_parallel", Kind: Int, HostDefault: func() string { return strconv.Itoa(DefaultMaxParallel()) }, Min: 1, Placeholder: "N", Commands: Session,
		Help:     "Run calls of the session that run at once (every MCP client of the session together); a call beyond it waits for a slot, first come first served, within its own timeout (default: the number of CPUs, at least 4).",
		FlagHelp: "Run calls of the session that run at once (every MCP client of the session together); a call beyond it waits for a slot, first come first served, within its own --timeout (default: the number of CPUs, at least 4).",
		Check:    atLeast(1, "must be at least 1 (run calls of the session at once; default: the number of CPUs, at least 4)"),
		Field:    func(p *Policy) any { return &p.MaxParallel },
	},
	{
		Key: "max_result", Kind: Size, Default: "256KiB", Commands: Session,
		Help:     "Largest tool result returned to the model (under mcp, 32KiB unless given: what the MCP clients tested pass their model whole).",
		FlagHelp: "Largest tool result returned to the model. A larger read result is a failed outcome; a write's or run's (which has acted) is shortened with a note saying what was cut. Never cut silently.",
		For: []Variant{{Commands: MCP, Default: "32KiB",
			Help: "Largest tool result returned to the model: 32KiB unless given, what Claude Code, Codex CLI and Gemini CLI pass their model whole (docs/mcp.md). A larger read result is a failed outcome with a hint to read a part; a write's or run's (which has acted) is shortened with a note saying what was cut. Never cut silently."}},
		Check: positive("must be a positive size"),
		Field: func(p *Policy) any { return &p.MaxResult },
	},
	{
		Key: "allow_program", Kind: List, Placeholder: "PROGRAM", Commands: Session,
		Help:     "Programs the run tool may start as argv[0] (a name resolved through PATH at start, or an absolute path).",
		FlagHelp: "A program the run tool may start as argv[0] (name resolved through PATH at start, or an absolute path); repeatable.",
		Field:    func(p *Policy) any { return &p.Programs },
	},
	{
		Key: "timeout", Kind: Duration, Commands: Session | Exec,
		Help:     "Wall-clock limit of each tool call (default 2m), and of exec's command (default: none; a CI job has its own).",
		FlagHelp: "Wall-clock limit of each tool call, for every tool (default 2m), and of exec's command (default: none; a CI job has its own). A call past it is stopped and reported as timeout.",
		Check:    notNegative(""),
		Field:    func(p *Policy) any { return &p.Run.Timeout },
	},
	{
		Key: "child_uid", Kind: Enum, Default: "caller", Commands: Session | Exec,
		Help:     "Who a run call's program is inside its user namespace: caller, the host uid and gid it runs as (the harness's own, or the workspace owner's when the harness is root), so id(1) and the owner of what it makes tell the truth; or root, uid 0 of that namespace. The same host id and no capability either way (docs/decisions/0083-child-uid.md).",
		FlagHelp: "Who a run call's program is inside its user namespace: caller (the host uid and gid it runs as, so id -u tells the truth) or root (uid 0 of that namespace); the same host id and no capability either way.",
		Field:    func(p *Policy) any { return &p.Run.ChildUID },
	},
	{
		Key: "quiet", Kind: Bool, Commands: Session | Exec,
		Help:     "Say no notes on stderr (what the host lacks, what was degraded, stale cgroup leaves removed), and under run print only the final summary. Errors and refusals are still said, and the record holds everything.",
		FlagHelp: "Say no notes on stderr (what the host lacks, what was degraded); run prints only its final summary. Errors and refusals are still said, and the record holds everything.",
		Field:    func(p *Policy) any { return &p.Quiet },
	},
	{
		Key: "grace", Kind: Duration, Default: DefaultGrace.String(), Commands: Session | Exec,
		Help:     "How long a program has to end after SIGTERM (a run call cancelled, a signal to exec, which forwards it) before its whole process tree is killed; 0: at once.",
		FlagHelp: "How long a program has to end after SIGTERM (a run call cancelled; exec forwards the signals it gets, SIGINT and SIGTERM among them) before its whole process tree is killed; 0: at once.",
		Check:    notNegative(" (0 kills at once)"),
		Field:    func(p *Policy) any { return &p.Run.Grace },
	},
	{
		Key: "memory_max", Kind: Size, Default: "2GiB", Commands: Session | Exec,
		Controller: cgroup.ControllerMemory, Layer: "memory-limit",
		Help:     "memory.max of each run call's cgroup; given here, it must be enforceable or the harness refuses to start.",
		FlagHelp: "memory.max of each run call's cgroup. The default degrades with a note where the host has no memory controller; a value given here refuses to start there.",
		Check:    notNegative(""),
		Field:    func(p *Policy) any { return &p.Run.MemoryMax },
	},
	{
		// The default is confine/spawn's own cap (a test holds them equal).
		Key: "tmp_size", Kind: Size, Default: "512MiB", Commands: Session | Exec,
		Help:     "Size cap of each of a run call's private /tmp and /dev/shm.",
		FlagHelp: "Size cap of each of a run call's private /tmp and /dev/shm (tmpfs, held in memory); a write past it fails with ENOSPC. A cap above the host's memory is accepted and bounds nothing.",
		// tmpfs reads size=0 as "no cap", so 0 is refused rather than passed on.
		Check: positive("must be a positive size, e.g. 64MiB"),
		Field: func(p *Policy) any { return &p.Run.TmpSize },
	},
	{
		Key: "pids_max", Kind: Int, Default: "512", Commands: Session | Exec,
		Controller: cgroup.ControllerPids, Layer: "pids-limit",
		Help:     "pids.max of each run call's cgroup (0: no pids limit); given here, it must be enforceable or the harness refuses to start. Under limits_from enclosing, each call's RLIMIT_NPROC in its own user namespace instead.",
		FlagHelp: "pids.max of each run call's cgroup (0: no pids limit). The default degrades with a note where the host has no pids controller; a value given here refuses to start there. Under --limits-from enclosing, each call's RLIMIT_NPROC instead.",
		Check:    notNegative(""),
		Field:    func(p *Policy) any { return &p.Run.PidsMax },
	},
	{
		Key: "cpu_max", Kind: Float, Commands: Session | Exec,
		Controller: cgroup.ControllerCPU, Layer: "cpu-limit",
		Help:     "CPUs each run call may use (cpu.max), e.g. 1.5; 0: unlimited.",
		FlagHelp: "CPUs each run call may use (cpu.max), e.g. 1.5; 0: unlimited. Refuses to start where the host has no cpu controller.",
		Check:    checkCPUs,
		Field:    func(p *Policy) any { return &p.Run.CPUMax },
	},
	{
		Key: "net", Kind: Enum, Default: "none", Commands: Session | Exec,
		Help:     "Network for run calls: none (an empty network namespace), host, or proxy (an empty namespace whose only way out is the harness's proxy, which admits the allow_domain names and allow_cidr addresses). Any allow_domain or allow_cidr implies proxy.",
		FlagHelp: "Network for run calls: none (an empty network namespace), host, or proxy (an empty namespace whose one way out is the harness's proxy, which admits only --allow-domain names and --allow-cidr addresses). Any --allow-domain or --allow-cidr implies proxy.",
		Implied: func(p *Policy) (string, string, bool) {
			if m := p.Run.NetMode(); m != p.Run.Net {
				if len(p.Run.AllowDomain) == 0 {
					return string(m), "allow_cidr (implies proxy)", true
				}
				return string(m), "allow_domain (implies proxy)", true
			}
			return "", "", false
		},
		Field: func(p *Policy) any { return &p.Run.Net },
	},
	{
		Key: "allow_domain", Kind: List, Placeholder: "PATTERN", Syntax: Domain, Commands: Session | Exec,
		Help:     "Names run calls may reach through the proxy: exact (proxy.golang.org) or *.suffix (which does not match the bare suffix); case-insensitive, IDNs in ASCII form.",
		FlagHelp: "A name run calls may reach through the proxy: exact (proxy.golang.org) or *.suffix (not the bare suffix); case-insensitive; repeatable.",
		Field:    func(p *Policy) any { return &p.Run.AllowDomain },
	},
	{
		Key: "deny_domain", Kind: List, Placeholder: "PATTERN", Syntax: Domain, Commands: Session | Exec,
		Help:     "Names the proxy refuses whatever allow_domain says (deny wins).",
		FlagHelp: "A name the proxy refuses whatever --allow-domain says; repeatable.",
		Field:    func(p *Policy) any { return &p.Run.DenyDomain },
	},
	{
		Key: "allow_cidr", Kind: List, Placeholder: "CIDR", Commands: Session | Exec,
		Help:     "Addresses run calls may reach as IP literals, and non-global addresses a name may resolve to (loopback, private); e.g. 10.0.0.0/8.",
		FlagHelp: "Addresses run calls may reach as IP literals, and non-global addresses (loopback, private) a name may resolve to, e.g. 10.0.0.0/8; repeatable.",
		Item:     checkCIDR,
		Field:    func(p *Policy) any { return &p.Run.AllowCIDR },
	},
	{
		Key: "limits_from", Kind: Enum, Default: "call", Commands: Session | Exec,
		Help:     "Where run calls' pids, memory and cpu limits come from: call (a cgroup leaf of its own per call) or enclosing (the harness's own cgroup, a pod's or a container's, bounds every call together; strict then requires it to set pids.max, memory.max and cpu.max).",
		FlagHelp: "Where run calls' pids, memory and cpu limits come from: call (a cgroup leaf per call) or enclosing (the harness's own cgroup, a pod's or a container's, bounds every call together, for where no leaf can be made; strict then requires it to set pids.max, memory.max and cpu.max).",
		Field:    func(p *Policy) any { return &p.Run.LimitsFrom },
	},
	{
		Key: "limits", Kind: Enum, Default: "required", Commands: Session | Exec,
		Help:  "What a pids_max, memory_max or cpu_max given here does where the host cannot enforce it: required (refuse to start, naming it) or best-effort (apply what the host can; say once, and record, what it could not). strict requires every limit whatever this says.",
		Field: func(p *Policy) any { return &p.Run.LimitsMode },
	},
	{
		Key: "net_max_conns", Kind: Int, Commands: Session | Exec,
		Help:  "Proxy connections a run call may hold open at once (0: 64).",
		Check: notNegative(""),
		Field: func(p *Policy) any { return &p.Run.NetMaxConns },
	},
	{
		Key: "net_idle_timeout", Kind: Duration, Commands: Session | Exec,
		Help:     "A proxy connection on which nothing moved for this long is closed (0: 5m).",
		FlagHelp: "Close a proxy connection idle this long (0: 5m).",
		Check:    notNegative(""),
		Field:    func(p *Policy) any { return &p.Run.NetIdleTimeout },
	},
	{
		Key: "net_max_bytes", Kind: Size, Commands: Session | Exec,
		Help:     "Bytes a run call's proxy connections may move in all, both ways (0: no cap).",
		FlagHelp: "Bytes a run call's proxy connections may move in all (0: no cap).",
		Check:    notNegative(""),
		Field:    func(p *Policy) any { return &p.Run.NetMaxBytes },
	},
	{
		Key: "allow_read", Kind: List, Placeholder: "PATH", Commands: Session | Exec,
		Help:     "Extra paths run calls may read (outside the workspace, resolved once at start).",
		FlagHelp: "An extra path run calls may read; outside the workspace, resolved once at start (a later rename or link there makes calls fail).",
		Field:    func(p *Policy) any { return &p.Run.AllowRead },
	},
	{
		Key: "allow_write", Kind: List, Placeholder: "PATH", Commands: Session | Exec,
		Help:     "Extra paths run calls may write (outside the workspace, resolved once at start).",
		FlagHelp: "An extra path run calls may write; outside the workspace, resolved once at start (a later rename or link there makes calls fail).",
		Field:    func(p *Policy) any { return &p.Run.AllowWrite },
	},
	{
		Key: "pass_env", Kind: List, Placeholder: "NAME", Commands: Session | Exec,
		Help:     "Environment variables passed to run calls: names, or globs of names (GITHUB_*, as path.Match reads them).",
		FlagHelp: "An environment variable passed to run calls, or a glob of names (GITHUB_*); repeatable.",
		Item:     checkVarPattern,
		Field:    func(p *Policy) any { return &p.Run.PassEnv },
	},
	{
		Key: "pass_env_strict", Kind: Bool, Commands: Session | Exec,
		Help:     "Refuse to start when a pass_env name or glob matches no variable of the harness's environment (a CI secret that was not set, a misspelt name), instead of passing nothing for it.",
		FlagHelp: "Refuse to start when a --pass-env name or glob matches no variable of the environment, instead of passing nothing for it.",
		Field:    func(p *Policy) any { return &p.Run.PassEnvStrict },
	},
	{
		Key: "setenv", Kind: List, Placeholder: "NAME=VALUE", Commands: Session | Exec,
		Help:     "Environment variables set for run calls, NAME=VALUE, after pass_env's (so a value here wins).",
		FlagHelp: "An environment variable set for run calls, NAME=VALUE (wins over --pass-env); repeatable.",
		Item:     checkAssignment,
		Field:    func(p *Policy) any { return &p.Run.SetEnv },
	},
	{
		// Not exec's: it gives the program the harness's own stdout and
		// stderr, which it does not capture.
		Key: "max_output", Kind: Size, Default: "64KiB", Commands: Session,
		Help:  "Cap on each of stdout and stderr of a run call (head and tail kept).",
		Check: positive("must be a positive size"),
		Field: func(p *Policy) any { return &p.Run.MaxOutput },
	},
	{
		Key: "max_denials", Kind: Int, Default: "32", Commands: Session | Exec,
		Help:     "Kernel denials inside a run call's child (where this host can attribute them: doctor says) that are listed and recorded one by one; those beyond are counted.",
		FlagHelp: "Kernel denials of a run call listed and recorded one by one; the rest are counted.",
		Check:    positive("must be at least 1"),
		Field:    func(p *Policy) any { return &p.Run.MaxDenials },
	},
	{
		Key: "surface", Kind: Enum, Default: "flat", Commands: Session,
		Help: "The shape the model sees: flat (one tool per entry) or verbs (tool_search, tool_describe, tool_invoke).",
		For: []Variant{
			{Commands: Call, Help: "The shape the call arrives in; with verbs, TOOL is tool_search, tool_describe or tool_invoke."},
			{Commands: MCP, Help: "The shape the client's model sees: flat (one tool per entry) or verbs (tool_search, tool_describe, tool_invoke)."},
			{Commands: Show, Help: "The shape the model sees: flat or verbs."},
		},
		Field: func(p *Policy) any { return &p.Surface },
	},
	{
		Key: "max_turns", Kind: Int, Default: "50", Commands: Run,
		Help:     "Model turns allowed in the run (0: unlimited) (run).",
		FlagHelp: "Model turns allowed in the run (0: unlimited).",
		Check:    notNegative(""),
		Field:    func(p *Policy) any { return &p.Agent.MaxTurns },
	},
	{
		Key: "run_timeout", Kind: Duration, Default: "1h", Commands: Run,
		Help:     "Wall-clock limit of the whole run (0: none) (run).",
		FlagHelp: "Wall-clock limit for the whole run (0: none). --timeout is the limit of each run tool call.",
		Check:    notNegative(""),
		Field:    func(p *Policy) any { return &p.Agent.RunTimeout },
	},
	{
		Key: "agents_dir", Kind: List, Placeholder: "DIR", Commands: Run | MCP,
		Help:     "Directories of named agent definitions (run).",
		FlagHelp: "A directory of named agent definitions (*.md with a front matter); repeatable.",
		Field:    func(p *Policy) any { return &p.Agent.Dirs },
	},
	{
		Key: "plugin", Kind: List, Placeholder: "DIR", Commands: Run | MCP,
		Help:     "Plugin directories whose agents/ holds named agent definitions (run).",
		FlagHelp: "A plugin directory whose agents/ holds named agent definitions; repeatable.",
		Field:    func(p *Policy) any { return &p.Agent.Plugins },
	},
	{
		Key: "agent", Kind: String, Placeholder: "NAME", Commands: Run | MCP,
		Help:     "The named agent to run: its instructions, and the tools narrowed to its declared ones (run).",
		FlagHelp: "Run this named agent: its instructions, and the parent's tools narrowed to its declared tools.",
		Field:    func(p *Policy) any { return &p.Agent.Name },
	},
}

// maxCPUs bounds cpu_max.
const maxCPUs = 1024

// The checks of the table. Each returns the reason only: the caller names
// the setting and the value.

// notNegative refuses a value below 0, saying "must not be negative" and
// then more.
func notNegative(more string) func(any) error {
	return func(v any) error {
		if sign(v) < 0 {
			return errors.New("must not be negative" + more)
		}
		return nil
	}
}

// positive refuses a value of 0 or less, saying why.
func positive(why string) func(any) error {
	return func(v any) error {
		if sign(v) <= 0 {
			return errors.New(why)
		}
		return nil
	}
}

// atLeast refuses an integer below n, saying why.
func atLeast(n int64, why string) func(any) error {
	return func(v any) error {
		if v.(int64) < n {
			return errors.New(why)
		}
		return nil
	}
}

func checkCPUs(v any) error {
	if f := v.(float64); math.IsNaN(f) || f < 0 || f > maxCPUs {
		return errors.New("want a number of CPUs between 0 and 1024")
	}
	return nil
}

func checkCIDR(s string) error {
	t := strings.TrimSpace(s)
	if _, err := netip.ParsePrefix(t); err == nil {
		return nil
	}
	if _, err := netip.ParseAddr(t); err == nil {
		return nil
	}
	return errors.New("want a CIDR such as 10.0.0.0/8 or an address")
}

// checkVarPattern checks a pass_env item: a name, or a glob of names.
func checkVarPattern(s string) error {
	if err := checkVarName(s); err != nil {
		return err
	}
	if _, err := path.Match(s, ""); err != nil {
		return errors.New("not a glob of variable names: " + err.Error())
	}
	return nil
}

// checkAssignment checks a setenv item: NAME=VALUE.
func checkAssignment(s string) error {
	name, _, ok := strings.Cut(s, "=")
	if !ok || checkVarName(name) != nil || strings.ContainsAny(name, "*?[") || strings.ContainsRune(s, 0) {
		return errors.New("want NAME=VALUE")
	}
	return nil
}

func checkVarName(s string) error {
	if s == "" || strings.ContainsAny(s, "=\x00") {
		return errors.New("not a variable name")
	}
	return nil
}

// sign is -1, 0 or 1 for a number of any of the kinds' types.
func sign(v any) int {
	var f float64
	switch n := v.(type) {
	case int64:
		f = float64(n)
	case float64:
		f = n
	case time.Duration:
		f = float64(n)
	}
	switch {
	case f < 0:
		return -1
	case f > 0:
		return 1
	}
	return 0
}
