package policy

import (
	"runtime"
	"time"

	"github.com/b10x/harness/cgroup"
)

// Policy is the user's settings: what a policy file or a command line
// gives. Each field is filled by one row of the table (Settings), named in
// its comment by the row's key. What a command decides at run time (a
// named agent's narrowing, the one tool a call asks for) is not here:
// session.Policy carries it beside a Policy.
//
// The zero Policy is not usable: Defaults gives the values every command
// starts from. A Policy is a plain value, safe to copy; its slices and maps
// are shared by copies, so a copy that is changed should replace them, not
// edit them.
type Policy struct {
	Workspace     string        // workspace: the only place tools read and write
	Record        string        // record: the run record file ("": none)
	Confine       Confine       // confine
	ApproveUpTo   Risk          // approve_up_to: the highest risk that runs unattended
	Approve       Approve       // approve: who decides calls above it
	WriteScope    []string      // write_scope: GLOB=allowed|partial-only|denied, first match wins
	ReadScope     []string      // read_scope: GLOB=allowed|denied, first match wins, then gate.DefaultReadScope
	ScopeAnnounce ScopeAnnounce // scope_announce
	Hooks         []string      // hook: pre-call programs (argv split on spaces)
	HookTimeout   time.Duration // hook_timeout
	MaxCalls      int           // max_calls: calls allowed in the session (0: unlimited)
	MaxParallel   int           // max_parallel: run calls of the session at once, at least 1
	MaxResult     int64         // max_result: largest tool result, in bytes
	Programs      []string      // allow_program: what run may start as argv[0]
	Surface       Surface       // surface
	Quiet         bool          // quiet: no notes on stderr (what the host lacks, what a session did at start)
	Run           RunPolicy
	Agent         Agent

	// File is the policy file the values came from (nil: none); the record
	// names it and its SHA-256.
	File *FileRef
	// UserDefaults is the user defaults file the values came from too
	// (nil: none was read); the record names it and its SHA-256 apart
	// from File.
	UserDefaults *FileRef
	// Sources says where each key's value came from ("flag --confine",
	// "ci.toml:3:1"); a key it does not name has its default. A limit
	// (a setting with a Controller) named here must hold: see Required.
	Sources map[string]string
}

// RunPolicy is what bounds each run call (and exec's command).
type RunPolicy struct {
	Timeout time.Duration // timeout: of each tool call (0: the session's default; exec: none)
	// Grace (grace) is how long a program has to end after it was sent
	// SIGTERM (a call cancelled, a signal to exec) before its whole tree
	// is killed; 0 kills at once.
	Grace     time.Duration
	MemoryMax int64   // memory_max: memory.max of each call's cgroup (0: none)
	TmpSize   int64   // tmp_size: cap of each call's /tmp and /dev/shm
	PidsMax   int64   // pids_max (0: none)
	CPUMax    float64 // cpu_max: CPUs (0: unlimited)
	Net       Net     // net (any AllowDomain implies NetProxy: NetMode)
	// The proxy's rules (net proxy): allow_domain, deny_domain (exact
	// names or *.suffix) and allow_cidr (addresses that may be reached as
	// literals, or that a name may resolve to though not global).
	AllowDomain []string
	DenyDomain  []string
	AllowCIDR   []string
	// LimitsFrom (limits_from) is where run calls' pids, memory and cpu
	// limits come from: a cgroup leaf of their own per call, or the
	// harness's own cgroup (a pod's, a container's) for every call
	// together, no leaves made.
	LimitsFrom LimitsFrom
	// LimitsMode (limits) is what a limit given that the host cannot enforce
	// does: refuse to start (required, the default) or run without it,
	// saying so once and recording it (best-effort).
	LimitsMode Limits
	// The proxy's limits, per call: net_max_conns open at once (0: the
	// default, 64), net_idle_timeout (0: 5m), net_max_bytes over all of a
	// call's connections (0: no cap).
	NetMaxConns    int
	NetIdleTimeout time.Duration
	NetMaxBytes    int64
	AllowRead      []string // allow_read: extra paths run calls may read
	AllowWrite     []string // allow_write: extra paths run calls may write
	PassEnv        []string // pass_env: variables passed to run calls
	PassEnvStrict  bool     // pass_env_strict: a pass_env item that matches nothing refuses to start
	SetEnv         []string // setenv: NAME=VALUE for run calls, after pass_env's
	MaxOutput      int64    // max_output: cap of each of stdout and stderr of a run call
	// MaxDenials (max_denials) is how many kernel denials inside a run
	// call's child are listed and recorded one by one; the rest are
	// counted.
	MaxDenials int
	// ChildUID (child_uid) is who the program is inside its user
	// namespace: the host ids it runs as (caller) or root of it.
	ChildUID ChildUID
}

// Agent is what only the model loop reads (run; mcp names agents too).
type Agent struct {
	Dirs       []string      // agents_dir: directories of named agent definitions
	Plugins    []string      // plugin: plugin directories whose agents/ holds definitions
	Name       string        // agent: the named agent to run ("": none)
	MaxTurns   int           // max_turns: model turns allowed (0: unlimited)
	RunTimeout time.Duration // run_timeout: of the whole run (0: none)
}

// FileRef names a policy file and its content's SHA-256.
type FileRef struct {
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
}

// DefaultGrace is grace's default: about what a CI runner waits between
// its SIGTERM and its SIGKILL (GitHub Actions 7.5 s, Kubernetes 30 s).
const DefaultGrace = 10 * time.Second

// DefaultMaxParallel is max_parallel's default: the CPUs this process may
// run on (runtime.NumCPU), and at least MinDefaultParallel, so that one
// long run call never holds every other one back and the calls a model
// sends in one turn run together (docs/decisions/0098).
func DefaultMaxParallel() int { return max(runtime.NumCPU(), MinDefaultParallel) }

// MinDefaultParallel is the least max_parallel's default may be: the
// calls of a model's turn (Claude Code sent five in one), and the
// largest pool of pre-started sandboxes (spawn.MaxPrestartPool).
const MinDefaultParallel = 4

// Defaults is the policy every command starts from: each setting's
// Default (or HostDefault), and no sources.
func Defaults() Policy {
	var p Policy
	for _, s := range settings {
		if err := s.Set(&p, s.defaultValue()); err != nil {
			panic("policy: the default of " + s.Key + ": " + err.Error()) // a bug of the table; TestTable checks every default
		}
	}
	return p
}

// Given reports whether key's value was given (Sources names where it came
// from), rather than left at its default.
func (p *Policy) Given(key string) bool {
	s := p.Sources[key]
	return s != "" && s != "default"
}

// Required reports whether the limit key must hold or the session refuses
// to start: a setting with a Controller whose value was given. A limit at
// its default degrades, with a note, where the host cannot enforce it.
func (p *Policy) Required(key string) bool {
	s, ok := Lookup(key)
	return ok && s.Controller != "" && p.Given(key)
}

// NetMode is the network run calls get: Net, except that an allow rule
// (allow_domain, allow_cidr) with net none means the proxy.
func (r *RunPolicy) NetMode() Net {
	if r.Net == NetNone && len(r.AllowDomain)+len(r.AllowCIDR) > 0 {
		return NetProxy
	}
	return r.Net
}

// Limits are the cgroup limits each run call asks for (zero where unset
// or invalid: Validate reports bad values).
func (r *RunPolicy) Limits() cgroup.Limits {
	lim := cgroup.Limits{PidsMax: max(r.PidsMax, 0), MemoryMax: max(r.MemoryMax, 0)}
	if r.CPUMax > 0 && r.CPUMax <= maxCPUs {
		lim.CPUPeriod = cgroup.DefaultCPUPeriod
		lim.CPUQuota = time.Duration(r.CPUMax * float64(cgroup.DefaultCPUPeriod))
	}
	return lim
}
