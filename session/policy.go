// Package session composes the system: it turns one Policy into a Session
// (the workspace opened, the host probed, the harness confined, the tools,
// the gate and the run record built) for every command and server that
// gives a model or a CI step the tools: call, run, tools, mcp, and exec's
// one command (Prepare).
//
// A Policy is a plain value; its zero value is not usable (Defaults gives
// the defaults every command starts from). Validate checks it once; Open
// validates it again and refuses, with an *Error naming the setting, what
// this host cannot enforce.
package session

import (
	"errors"
	"fmt"
	"math"
	"net/netip"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/b10x/harness/cgroup"
	"github.com/b10x/harness/confine"
	"github.com/b10x/harness/confine/spawn"
	"github.com/b10x/harness/egress"
	"github.com/b10x/harness/gate"
	"github.com/b10x/harness/surface"
)

// Approve modes: who decides calls above the risk ceiling.
const (
	ApproveAuto   = "auto"   // ask on the terminal when there is one, else deny
	ApprovePrompt = "prompt" // require a way to ask (a terminal; a client that can be asked)
	ApproveDeny   = "deny"
	ApproveAll    = "all" // no person is watching: every call that asks is approved
)

// Policy is everything that decides what a session publishes, how it
// confines and what it records. Keys are named in the comments as a policy
// file spells them.
type Policy struct {
	Workspace     string        // workspace: the only place tools read and write
	Record        string        // record: the run record file ("": none)
	Confine       confine.Mode  // confine: strict, auto or off
	ApproveUpTo   gate.Risk     // approve_up_to: the highest risk that runs unattended
	Approve       string        // approve: one of the Approve modes
	WriteScope    []string      // write_scope: GLOB=allowed|partial-only|denied, first match wins
	ScopeAnnounce string        // scope_announce: stated or silent
	Hooks         []string      // hook: pre-call programs (argv split on spaces)
	HookTimeout   time.Duration // hook_timeout
	MaxCalls      int           // max_calls: calls allowed in the session (0: unlimited)
	MaxParallel   int           // max_parallel: run calls of the session at once, at least 1 (see runSlots)
	MaxResult     int64         // max_result: largest tool result, in bytes
	Programs      []string      // allow_program: what run may start as argv[0]
	Surface       surface.Kind  // surface: flat or verbs
	Run           RunPolicy

	// Required names the resource limits that must hold or the session
	// refuses to start ("pids_max", "memory_max", "cpu_max"): those a user
	// gave. A limit not named here degrades, with a note, where the host
	// cannot enforce it.
	Required map[string]bool

	// What commands set, never a policy file:

	// Narrow is a named agent's tools: publication is narrowed to them
	// (nil: no narrowing).
	Narrow []string
	// OnlyTool is the one entry a single call will ask for ("": any).
	// Nothing of run is probed or started for a call of another entry.
	OnlyTool string
	// Protect names further files or directories the harness reads (agent
	// definitions); those inside the workspace are protected from the write
	// tools.
	Protect []string
	// ProviderNetwork says the session talks to a model provider over the
	// network: the harness's own domain then lets it read the resolver's
	// files, and CA certificates are loaded before the domain holds.
	ProviderNetwork bool
	// File is the policy file the values came from (nil: none); the record
	// names it and its SHA-256.
	File *FileRef
	// Sources says where each key's value came from ("default", "flag
	// --confine", "ci.toml:3:1"), for the record and `policy show`.
	Sources map[string]string
}

// RunPolicy is what bounds each run call (and exec's command).
type RunPolicy struct {
	Timeout time.Duration // timeout: of each tool call (0: DefaultCallTimeout; exec: 10m)
	// Grace (grace) is how long a program has to end after it was sent
	// SIGTERM (a call cancelled, a signal to exec) before its whole tree
	// is killed; 0 kills at once.
	Grace     time.Duration
	MemoryMax int64   // memory_max: memory.max of each call's cgroup (0: none)
	TmpSize   int64   // tmp_size: cap of each call's /tmp and /dev/shm
	PidsMax   int64   // pids_max (0: none)
	CPUMax    float64 // cpu_max: CPUs (0: unlimited)
	Net       string  // net: none, host or proxy (any AllowDomain implies proxy)
	// The proxy's rules (net proxy): allow_domain, deny_domain (exact
	// names or *.suffix) and allow_cidr (addresses that may be reached as
	// literals, or that a name may resolve to though not global).
	AllowDomain []string
	DenyDomain  []string
	AllowCIDR   []string
	// The proxy's limits, per call: net_max_conns open at once (0: the
	// default, 64), net_idle_timeout (0: 5m), net_max_bytes over all of a
	// call's connections (0: no cap).
	// LimitsFrom is where run calls' pids, memory and cpu limits come from
	// (limits_from): "call" (a cgroup leaf of its own per call, the
	// default) or "enclosing" (the harness's own cgroup, a pod's or a
	// container's, bounds every call together; no leaves are made and
	// the whole tree dies through its PID namespace). Strict with
	// enclosing requires that cgroup to set pids.max, memory.max and
	// cpu.max instead of per-call leaves.
	LimitsFrom     string
	NetMaxConns    int
	NetIdleTimeout time.Duration
	NetMaxBytes    int64
	AllowRead      []string // allow_read: extra paths run calls may read
	AllowWrite     []string // allow_write: extra paths run calls may write
	PassEnv        []string // pass_env: variables passed to run calls
	MaxOutput      int64    // max_output: cap of each of stdout and stderr of a run call
}

// FileRef names a policy file and its content's SHA-256.
type FileRef struct {
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
}

// Defaults is the policy every command starts from.
func Defaults() Policy {
	return Policy{
		Workspace:     ".",
		Confine:       confine.Auto,
		ApproveUpTo:   gate.Low,
		Approve:       ApproveAuto,
		ScopeAnnounce: "stated",
		HookTimeout:   10 * time.Second,
		MaxResult:     256 << 10,
		MaxParallel:   DefaultMaxParallel(),
		Surface:       surface.Flat,
		Run: RunPolicy{
			Grace:      DefaultGrace,
			MemoryMax:  2 << 30,
			TmpSize:    spawn.DefaultTmpSize,
			PidsMax:    512,
			Net:        "none",
			MaxOutput:  64 << 10,
			LimitsFrom: "call",
		},
	}
}

// DefaultGrace is grace's default: about what a CI runner waits between
// its SIGTERM and its SIGKILL (GitHub Actions 7.5 s, Kubernetes 30 s).
const DefaultGrace = 10 * time.Second

// DefaultMaxParallel is max_parallel's default: the CPUs this process may
// run on (runtime.NumCPU), and at least 2, so that one long run call
// never holds every other one back.
func DefaultMaxParallel() int { return max(runtime.NumCPU(), 2) }

// maxParallelWant is what a bad max_parallel is told.
const maxParallelWant = "must be at least 1 (run calls of the session at once; default: the number of CPUs, at least 2)"

// Validate checks every value of p that can be checked without the host.
// The first wrong one is returned as an *Error naming its key.
func (p *Policy) Validate() error {
	switch p.Approve {
	case ApproveAuto, ApprovePrompt, ApproveDeny, ApproveAll:
	default:
		return policyErr("approve", p.Approve, "want auto, prompt, deny or all")
	}
	for _, r := range p.WriteScope {
		if _, err := gate.ParseScopeRule(r); err != nil {
			return &Error{Key: "write_scope", Err: err, Usage: true}
		}
	}
	switch p.ScopeAnnounce {
	case "stated", "silent":
	default:
		return policyErr("scope_announce", p.ScopeAnnounce, "want stated or silent")
	}
	for _, h := range p.Hooks {
		if _, err := gate.ParseHook(h); err != nil {
			return &Error{Key: "hook", Err: err, Usage: true}
		}
	}
	if p.HookTimeout <= 0 {
		return policyErr("hook_timeout", p.HookTimeout.String(), "must be positive")
	}
	if p.MaxCalls < 0 {
		return policyErr("max_calls", strconv.Itoa(p.MaxCalls), "must not be negative")
	}
	if p.MaxResult <= 0 {
		return policyErr("max_result", "", "must be positive")
	}
	if p.Run.Grace < 0 {
		return policyErr("grace", p.Run.Grace.String(), "must not be negative (0 kills at once)")
	}
	if p.MaxParallel < 1 {
		return policyErr("max_parallel", strconv.Itoa(p.MaxParallel), "%s", maxParallelWant)
	}
	if _, err := surface.ParseKind(string(p.Surface)); err != nil {
		return &Error{Key: "surface", Err: err, Usage: true}
	}
	if _, err := p.Run.limits(); err != nil {
		return err
	}
	// net none given (by a flag or the file), not defaulted, means no
	// network: rules for the proxy beside it are a contradiction, never a
	// reason to open one.
	if src := p.Sources["net"]; src != "" && src != "default" && p.Run.Net == "none" &&
		len(p.Run.AllowDomain)+len(p.Run.DenyDomain)+len(p.Run.AllowCIDR) > 0 {
		return policyErr("net", "none", "was given, and contradicts allow_domain, deny_domain and allow_cidr (which need net proxy): drop one of them")
	}
	if p.Run.LimitsFrom == "enclosing" {
		for _, k := range []string{"pids_max", "memory_max", "cpu_max"} {
			if p.Required[k] {
				return policyErr(k, "", "given with limits_from enclosing, which gives calls no limits of their own (the enclosing cgroup's apply): drop one of them")
			}
		}
	}
	return nil
}

// limits checks every limit (tmp_size included, which is not a cgroup
// limit) and returns the cgroup limits of each call.
func (r *RunPolicy) limits() (cgroup.Limits, error) {
	if r.Timeout < 0 {
		return cgroup.Limits{}, policyErr("timeout", r.Timeout.String(), "must not be negative")
	}
	if r.PidsMax < 0 {
		return cgroup.Limits{}, policyErr("pids_max", strconv.FormatInt(r.PidsMax, 10), "must not be negative")
	}
	if math.IsNaN(r.CPUMax) || r.CPUMax < 0 || r.CPUMax > 1024 {
		return cgroup.Limits{}, policyErr("cpu_max", strconv.FormatFloat(r.CPUMax, 'g', -1, 64), "want a number of CPUs between 0 and 1024")
	}
	if r.MemoryMax < 0 {
		return cgroup.Limits{}, policyErr("memory_max", strconv.FormatInt(r.MemoryMax, 10), "must not be negative")
	}
	if r.TmpSize <= 0 {
		// tmpfs reads size=0 as "no cap", so 0 is refused rather than passed on.
		return cgroup.Limits{}, policyErr("tmp_size", strconv.FormatInt(r.TmpSize, 10), "must be a positive size, e.g. 64MiB")
	}
	if r.MaxOutput <= 0 {
		return cgroup.Limits{}, policyErr("max_output", "", "must be positive")
	}
	switch r.LimitsFrom {
	case "", "call", "enclosing":
	default:
		return cgroup.Limits{}, policyErr("limits_from", r.LimitsFrom, "want call or enclosing")
	}
	switch r.Net {
	case "none", "host", "proxy":
	default:
		return cgroup.Limits{}, policyErr("net", r.Net, "want none, host or proxy")
	}
	if _, err := r.Egress(); err != nil {
		return cgroup.Limits{}, err
	}
	for _, n := range r.PassEnv {
		if n == "" || strings.ContainsAny(n, "=\x00") {
			return cgroup.Limits{}, policyErr("pass_env", strconv.Quote(n), "not a variable name")
		}
	}
	return r.asked(), nil
}

// asked returns the cgroup limits the policy sets (zero where unset or
// invalid: limits reports bad values).
func (r *RunPolicy) asked() cgroup.Limits {
	lim := cgroup.Limits{PidsMax: max(r.PidsMax, 0), MemoryMax: r.MemoryMax}
	if r.CPUMax > 0 {
		lim.CPUPeriod = cgroup.DefaultCPUPeriod
		lim.CPUQuota = time.Duration(r.CPUMax * float64(cgroup.DefaultCPUPeriod))
	}
	return lim
}

// ParseSize reads a size: a plain number of bytes or a number with a
// suffix: K, KB, KiB, M, MB, MiB, G, GB, GiB (all binary multiples).
func ParseSize(s string) (int64, error) {
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

// checkRequired refuses (a usage *Error naming the key) when a limit the
// policy requires cannot be enforced by the cgroup leaves here, naming the
// controller and how to get it. mgr nil means run calls get no leaf; why,
// when not empty, says why no run call gets anything at all.
func (p *Policy) checkRequired(mgr *cgroup.Manager, why string) error {
	keys := map[cgroup.Controller]string{cgroup.ControllerPids: "pids_max", cgroup.ControllerMemory: "memory_max", cgroup.ControllerCPU: "cpu_max"}
	for _, n := range p.Run.asked().Needs() {
		l := struct{ key, ctl string }{keys[n.Controller], string(n.Controller)}
		if !p.Required[l.key] {
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
		return &Error{Key: l.key, Usage: true, Phrase: true, Err: errors.New("was given but cannot be enforced: " + reason + " (see `b10x-harness doctor`; drop the setting to run without the limit)")}
	}
	return nil
}

// NetMode is the network run calls get: "none", "host" or "proxy" (net
// proxy, or any allow_domain with net none).
func (r *RunPolicy) NetMode() string {
	if r.Net == "none" && len(r.AllowDomain) > 0 {
		return "proxy"
	}
	return r.Net
}

// Egress is the proxy's policy (nil unless NetMode is proxy), each rule
// checked.
func (r *RunPolicy) Egress() (*egress.Policy, error) {
	if r.Net == "host" && (len(r.AllowDomain)+len(r.DenyDomain)+len(r.AllowCIDR) > 0) {
		return nil, policyErr("net", "host", "contradicts allow_domain, deny_domain and allow_cidr, which need net proxy (the host's network admits everything)")
	}
	if r.NetMaxConns < 0 {
		return nil, policyErr("net_max_conns", strconv.Itoa(r.NetMaxConns), "must not be negative")
	}
	if r.NetIdleTimeout < 0 {
		return nil, policyErr("net_idle_timeout", r.NetIdleTimeout.String(), "must not be negative")
	}
	if r.NetMaxBytes < 0 {
		return nil, policyErr("net_max_bytes", strconv.FormatInt(r.NetMaxBytes, 10), "must not be negative")
	}
	p := &egress.Policy{MaxConns: r.NetMaxConns, IdleTimeout: r.NetIdleTimeout, MaxBytes: r.NetMaxBytes}
	for _, s := range r.AllowDomain {
		pat, err := egress.ParsePattern(s)
		if err != nil {
			return nil, &Error{Key: "allow_domain", Err: err, Usage: true}
		}
		p.Allow = append(p.Allow, pat)
	}
	for _, s := range r.DenyDomain {
		pat, err := egress.ParsePattern(s)
		if err != nil {
			return nil, &Error{Key: "deny_domain", Err: err, Usage: true}
		}
		p.Deny = append(p.Deny, pat)
	}
	for _, s := range r.AllowCIDR {
		pf, err := netip.ParsePrefix(strings.TrimSpace(s))
		if err != nil {
			if a, aerr := netip.ParseAddr(strings.TrimSpace(s)); aerr == nil {
				pf, err = netip.PrefixFrom(a, a.BitLen()), nil
			}
		}
		if err != nil {
			return nil, policyErr("allow_cidr", strconv.Quote(s), "want a CIDR such as 10.0.0.0/8 or an address")
		}
		p.CIDRs = append(p.CIDRs, pf.Masked())
	}
	if r.NetMode() != "proxy" {
		return nil, nil
	}
	return p, nil
}
