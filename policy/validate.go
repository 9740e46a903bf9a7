package policy

import (
	"encoding"
	"strconv"
)

// Validate checks every value of p that can be checked without the host,
// each by its setting's row (its kind's words, Check, Item, and checks for
// the syntaxes others own), then the rules that relate settings to each
// other. The first wrong value is returned as an *Error naming its key and
// the value ("max_calls -3: must not be negative").
func (p *Policy) Validate(checks Checks) error {
	for _, s := range settings {
		if err := s.validate(p, checks); err != nil {
			return err
		}
	}
	for _, rule := range rules {
		if err := rule(p); err != nil {
			return err
		}
	}
	return nil
}

// validate checks p's value of s.
func (s Setting) validate(p *Policy, checks Checks) error {
	v := s.Get(p)
	switch s.Kind {
	case Enum:
		if err := s.checkWord(v.(string)); err != nil {
			return &Error{Key: s.Key, Err: err, Usage: true}
		}
	case List:
		for _, item := range v.([]string) {
			if err := s.checkItem(item, checks); err != nil {
				return err
			}
		}
	default:
		if s.Check != nil {
			if err := s.Check(v); err != nil {
				return &Error{Key: s.Key, Value: text(v), Err: err, Usage: true}
			}
		}
	}
	return nil
}

// checkWord refuses a word the enum does not have; its zero value is a
// word when it stands for one (LimitsFrom's).
func (s Setting) checkWord(w string) error {
	f := s.Field(&Policy{})
	if w == "" {
		if z, ok := f.(interface{ String() string }); ok && z.String() != "" {
			return nil
		}
	}
	return f.(encoding.TextUnmarshaler).UnmarshalText([]byte(w))
}

// checkItem checks one element of a list: by Item (the error names the
// element) and by the check of its Syntax (whose error names it itself).
func (s Setting) checkItem(item string, checks Checks) *Error {
	if s.Item != nil {
		if err := s.Item(item); err != nil {
			return &Error{Key: s.Key, Value: strconv.Quote(item), Err: err, Usage: true}
		}
	}
	if c := checks[s.Syntax]; s.Syntax != "" && c != nil {
		if err := c(item); err != nil {
			return &Error{Key: s.Key, Err: err, Usage: true}
		}
	}
	return nil
}

// rules relate settings to each other; Validate applies them in order
// after every setting's own checks.
var rules = []func(p *Policy) error{
	// net none given (by a flag or the file), not defaulted, means no
	// network: rules for the proxy beside it are a contradiction, never a
	// reason to open one.
	func(p *Policy) error {
		if p.Given("net") && p.Run.Net == NetNone && proxyRules(p) {
			return errorf("net", "none", "was given, and contradicts allow_domain, deny_domain and allow_cidr (which need net proxy): drop one of them")
		}
		return nil
	},
	// A deny rule narrows what an allow rule admits; alone it denies what
	// the proxy denies already, which is everything.
	func(p *Policy) error {
		if len(p.Run.DenyDomain) > 0 && len(p.Run.AllowDomain)+len(p.Run.AllowCIDR) == 0 {
			return errorf("deny_domain", p.Run.DenyDomain[0], "without allow_domain or allow_cidr denies what the proxy denies already (it admits only what an allow rule names): give what to allow, then what of it to deny")
		}
		return nil
	},
	func(p *Policy) error {
		if p.Run.Net == NetHost && proxyRules(p) {
			return errorf("net", "host", "contradicts allow_domain, deny_domain and allow_cidr, which need net proxy (the host's network admits everything)")
		}
		return nil
	},
	// Enclosing limits give calls no cgroup limits of their own: a memory
	// or cpu limit given beside them would be a promise nothing keeps.
	// pids_max is kept, as each call's RLIMIT_NPROC (decision 0091).
	func(p *Policy) error {
		if p.Run.LimitsFrom != LimitsEnclosing {
			return nil
		}
		for _, s := range LimitSettings() {
			if s.Key != "pids_max" && p.Required(s.Key) {
				return errorf(s.Key, "", "given with limits_from enclosing, which gives calls no memory or cpu limit of their own (the enclosing cgroup's apply): drop one of them")
			}
		}
		return nil
	},
}

func proxyRules(p *Policy) bool {
	return len(p.Run.AllowDomain)+len(p.Run.DenyDomain)+len(p.Run.AllowCIDR) > 0
}
