// Package session composes the system: it turns one Policy into a Session
// (the workspace opened, the host probed, the harness confined, the tools,
// the gate and the run record built) for every command and server that
// gives a model or a CI step the tools: call, run, tools, mcp, and exec's
// one command (Prepare).
//
// A Policy is the user's settings (a policy.Policy: what a flag or a
// policy file gives) and what a command decides at run time beside them.
// Its zero value is not usable (Defaults gives the defaults every command
// starts from). Validate checks it once; Open validates it again and
// refuses, with an *Error naming the setting, what this host cannot
// enforce.
package session

import (
	"errors"
	"net/netip"
	"slices"
	"strings"

	"github.com/b10x/harness/cgroup"
	"github.com/b10x/harness/confine"
	"github.com/b10x/harness/egress"
	"github.com/b10x/harness/gate"
	"github.com/b10x/harness/policy"
	"github.com/b10x/harness/surface"
)

// Approve modes: who decides calls above the risk ceiling.
const (
	ApproveAuto   = policy.ApproveAuto   // ask on the terminal when there is one, else deny
	ApprovePrompt = policy.ApprovePrompt // require a way to ask (a terminal; a client that can be asked)
	ApproveDeny   = policy.ApproveDeny
	ApproveAll    = policy.ApproveAll // no person is watching: every call that asks is approved
)

// Policy is everything that decides what a session publishes, how it
// confines and what it records: the user's settings (policy.Policy, whose
// fields name their keys) and what the command sets, never a policy file.
type Policy struct {
	policy.Policy

	// Narrow is a named agent's tools: publication is narrowed to them
	// (nil: no narrowing).
	Narrow []string
	// OnlyTool is the one entry a single call will ask for ("": any).
	// Nothing of run is probed or started for a call of another entry.
	OnlyTool string
	// Protect names further files or directories the harness reads (agent
	// definitions); those inside the workspace are protected from the write
	// tools, and a run call's program cannot change them. Open protects
	// the user defaults file's path (policy.UserDefaultsPath) as well.
	Protect []string
	// ProviderNetwork says the session talks to a model provider over the
	// network: the harness's own domain then lets it read the resolver's
	// files, and CA certificates are loaded before the domain holds.
	ProviderNetwork bool

	// userDefaults is the user defaults file UseUserDefaults took, which
	// Open judges against the workspace again (nil: none).
	userDefaults *LoadedFile
}

// RunPolicy is what bounds each run call (and exec's command).
type RunPolicy = policy.RunPolicy

// FileRef names a policy file and its content's SHA-256.
type FileRef = policy.FileRef

// KeyValue is one key of an effective policy and where its value came
// from.
type KeyValue = policy.KeyValue

// Defaults is the policy every command starts from.
func Defaults() Policy { return Policy{Policy: policy.Defaults()} }

// DefaultGrace is grace's default.
const DefaultGrace = policy.DefaultGrace

// DefaultMaxParallel is max_parallel's default: the number of CPUs, at
// least 4 (docs/decisions/0098).
func DefaultMaxParallel() int { return policy.DefaultMaxParallel() }

// Checks are the parsers of the policy's values whose syntax belongs to
// the packages that use them: write-scope rules and hooks (gate), domain
// patterns (egress).
var Checks = policy.Checks{
	policy.ScopeRule: func(s string) error { _, err := gate.ParseScopeRule(s); return err },
	policy.ReadRule:  func(s string) error { _, err := gate.ParseReadRule(s); return err },
	policy.HookLine:  func(s string) error { _, err := gate.ParseHook(s); return err },
	policy.Domain:    func(s string) error { _, err := egress.ParsePattern(s); return err },
}

// Validate checks every value of p that can be checked without the host
// (policy.Policy.Validate, with Checks). The first wrong one is returned
// as an *Error naming its key.
func (p *Policy) Validate() error { return p.Policy.Validate(Checks) }

// mode, risk and kind are p's confine mode, approval ceiling and surface
// in the types of the packages that enforce them (a valid policy's words
// are theirs: TestPolicyWords).
func (p *Policy) mode() confine.Mode {
	m, _ := confine.ParseMode(string(p.Confine))
	return m
}

func (p *Policy) risk() gate.Risk {
	r, _ := gate.ParseRisk(string(p.ApproveUpTo))
	return r
}

func (p *Policy) kind() surface.Kind { return surface.Kind(p.Surface) }

// limits checks the policy and returns the cgroup limits of each run call.
func (p *Policy) limits() (cgroup.Limits, error) {
	if err := p.Validate(); err != nil {
		return cgroup.Limits{}, err
	}
	return p.Run.Limits(), nil
}

// checkRequired refuses (a usage *Error naming the key) when a limit the
// policy requires cannot be enforced by the cgroup leaves here, naming the
// controller and how to get it. mgr nil means run calls get no leaf; why,
// when not empty, says why no run call gets anything at all.
func (p *Policy) checkRequired(mgr *cgroup.Manager, why string) error {
	if p.Run.LimitsMode == policy.LimitsBestEffort && p.Confine != policy.ConfineStrict {
		// Applied where the host can: what it cannot is said once and
		// recorded, as for a default limit.
		return nil
	}
	asked := p.Run.Limits().Needs()
	for _, s := range policy.LimitSettings() {
		ctl := string(s.Controller)
		if !p.Required(s.Key) || !slices.ContainsFunc(asked, func(n cgroup.Need) bool { return n.Controller == s.Controller }) {
			continue
		}
		if s.Key == "pids_max" && p.Run.LimitsFrom == policy.LimitsEnclosing {
			continue // each call's RLIMIT_NPROC, which the helper proves (decision 0091)
		}
		if mgr != nil && slices.Contains(mgr.Controllers(), ctl) {
			continue
		}
		reason := why
		switch {
		case reason != "":
		case mgr == nil:
			reason = "run calls get no cgroup leaf here, so no " + ctl + " controller"
		default:
			reason = "the cgroup leaves here have no " + ctl + " controller"
			for _, m := range mgr.Missing() {
				if strings.HasPrefix(m, ctl+" ") {
					reason = m
				}
			}
		}
		return &Error{Key: s.Key, Usage: true, Phrase: true, Err: errors.New("was given but cannot be enforced: " + reason + " (see `b10x-harness doctor`; drop the setting, or give limits best-effort, to run without the limit)")}
	}
	return nil
}

// egress is the proxy's policy (nil unless run calls' network is the
// proxy), each rule parsed; the policy is checked first.
func (p *Policy) egress() (*egress.Policy, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	r := &p.Run
	e := &egress.Policy{MaxConns: r.NetMaxConns, IdleTimeout: r.NetIdleTimeout, MaxBytes: r.NetMaxBytes}
	for _, s := range r.AllowDomain {
		pat, err := egress.ParsePattern(s)
		if err != nil {
			return nil, &Error{Key: "allow_domain", Err: err, Usage: true}
		}
		e.Allow = append(e.Allow, pat)
	}
	for _, s := range r.DenyDomain {
		pat, err := egress.ParsePattern(s)
		if err != nil {
			return nil, &Error{Key: "deny_domain", Err: err, Usage: true}
		}
		e.Deny = append(e.Deny, pat)
	}
	for _, s := range r.AllowCIDR {
		pf, err := netip.ParsePrefix(strings.TrimSpace(s))
		if err != nil {
			a, aerr := netip.ParseAddr(strings.TrimSpace(s))
			if aerr != nil {
				return nil, policyErr("allow_cidr", s, "want a CIDR such as 10.0.0.0/8 or an address")
			}
			pf = netip.PrefixFrom(a, a.BitLen())
		}
		e.CIDRs = append(e.CIDRs, pf.Masked())
	}
	if r.NetMode() != policy.NetProxy {
		return nil, nil
	}
	return e, nil
}
