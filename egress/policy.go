// Package egress is the harness's side of a run child's network: a proxy
// (HTTP CONNECT for TLS, absolute-URI forwarding for plain HTTP, and SOCKS5
// with host names) that decides every connection by the destination's name
// and the address it resolves to, and reports each attempt.
//
// The child runs in an empty network namespace whose only way out is a
// listening socket the run helper opens at 127.0.0.1:Port inside that
// namespace and hands to the harness (see confine/spawn, Stdio.Proxy); the
// harness serves it with Serve. A program that ignores the proxy variables
// reaches nothing: the namespace has no route but loopback.
//
// Decisions, in order: an IP literal is refused unless an allowed CIDR
// contains it; a name is normalised (lower case, no trailing dot, IDNs in
// their ASCII form); a deny pattern that matches refuses; an allow pattern
// that matches admits; anything else is refused. An admitted name is
// resolved by the harness, and only addresses that the IANA special-purpose
// registries call globally reachable (or inside an allowed CIDR) are
// dialled (see Policy.Reachable) — the address checked is the address
// connected to, so a name that rebinds to 127.0.0.1 between a check and a
// connect cannot slip through.
package egress

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"golang.org/x/net/idna"
)

// Port is where the proxy listens inside each child's network namespace.
// The namespace is the call's own, so a fixed port collides with nothing.
const Port = 3128

// Pattern is a destination name rule: an exact name ("proxy.golang.org") or
// a suffix ("*.golang.org", which matches every name below golang.org but
// not golang.org itself). Build one with ParsePattern.
type Pattern struct {
	name   string // ASCII, lower case, without "*."
	suffix bool
}

// ParsePattern parses an exact name or "*.suffix", case-insensitively; an
// IDN is compared in its ASCII (punycode) form.
func ParsePattern(s string) (Pattern, error) {
	t := strings.TrimSpace(s)
	suffix := false
	if rest, ok := strings.CutPrefix(t, "*."); ok {
		suffix, t = true, rest
	}
	name, err := normalize(t)
	if err != nil {
		return Pattern{}, fmt.Errorf("domain pattern %q: %v", s, err)
	}
	if strings.Contains(name, "*") {
		return Pattern{}, fmt.Errorf("domain pattern %q: a wildcard is allowed only as a leading \"*.\"", s)
	}
	if _, err := netip.ParseAddr(name); err == nil {
		return Pattern{}, fmt.Errorf("domain pattern %q: an address, not a name: allow it with a CIDR rule", s)
	}
	return Pattern{name: name, suffix: suffix}, nil
}

// String is the pattern as it would be given.
func (p Pattern) String() string {
	if p.suffix {
		return "*." + p.name
	}
	return p.name
}

// Match reports whether the normalised name matches.
func (p Pattern) Match(name string) bool {
	if p.suffix {
		return strings.HasSuffix(name, "."+p.name)
	}
	return name == p.name
}

// normalize is a destination name as rules compare it: lower case, without
// a trailing dot, an IDN in its ASCII form, an address without brackets;
// and normalize of what it returns returns it again. Brackets must hold an
// address. An address scoped to an interface (a zone) is refused, as is a
// name with an empty label: "a..b", "a.xn--" or "a。" (IDNA maps the
// ideographic full stop to ".").
func normalize(host string) (string, error) {
	h := strings.TrimSuffix(strings.ToLower(strings.TrimSpace(host)), ".")
	if h == "" {
		return "", errors.New("empty name")
	}
	bracketed := strings.HasPrefix(h, "[") && strings.HasSuffix(h, "]")
	if bracketed {
		h = h[1 : len(h)-1]
	}
	if a, err := netip.ParseAddr(h); err == nil {
		if a.Zone() != "" {
			return "", fmt.Errorf("%s is scoped to an interface, not a destination", h)
		}
		return h, nil
	}
	if bracketed {
		return "", errors.New("not an address in brackets")
	}
	a, err := idna.Lookup.ToASCII(h)
	if err != nil {
		return "", fmt.Errorf("not a valid host name: %v", err)
	}
	if a == "" || strings.HasPrefix(a, ".") || strings.HasSuffix(a, ".") || strings.Contains(a, "..") {
		return "", errors.New("not a valid host name: an empty label")
	}
	if len(a) > 253 {
		return "", errors.New("name longer than 253 bytes")
	}
	return a, nil
}

// Policy is what the proxy admits, and its limits. The zero value admits
// nothing.
type Policy struct {
	Allow []Pattern      // names that may be reached
	Deny  []Pattern      // names that may not, whatever Allow says
	CIDRs []netip.Prefix // addresses that may be reached as literals, and non-global addresses a name may resolve to
	// MaxConns bounds the connections served at once: those whose
	// destination is being resolved, dialled or moved to (0:
	// DefaultMaxConns). As many more may wait (their requests read, the
	// rules asked) for at most QueueWait each; past that the kernel's
	// listen backlog holds them, at no cost to the harness, until the
	// proxy can take them. Every connection ends with its own Event.
	MaxConns int
	// IdleTimeout closes a tunnel or a forwarded request on which nothing
	// moved either way for this long, and a keep-alive connection that
	// sends no next request for this long (0: DefaultIdleTimeout).
	IdleTimeout time.Duration
	// MaxBytes bounds the bytes moved, both ways, over all connections of
	// one Serve (0: unlimited). The read that would cross it is not
	// passed on and its connection is closed; once it is spent, every new
	// request is refused (403, or SOCKS5 "not allowed by ruleset").
	MaxBytes int64
	// HandshakeTimeout bounds the time from accepting a connection to its
	// complete request (HTTP request headers, or the SOCKS5 greeting and
	// request), and a keep-alive connection's next request from its first
	// byte (0: DefaultHandshakeTimeout). It is apart from IdleTimeout, so
	// a slow or silent client holds no slot, and its place in the queue
	// only this long.
	HandshakeTimeout time.Duration
	// QueueWait bounds how long a connection whose request was read waits
	// for one of MaxConns slots; past it the connection is refused (HTTP
	// 503, SOCKS5 "general failure") (0: DefaultQueueWait).
	QueueWait time.Duration
}

// Defaults of Policy's limits.
const (
	DefaultMaxConns         = 64
	DefaultIdleTimeout      = 5 * time.Minute
	DefaultHandshakeTimeout = 5 * time.Second
	DefaultQueueWait        = 10 * time.Second
)

// Decision is the verdict on one destination before it is dialled.
type Decision struct {
	Allowed bool
	// Rule says what decided: "allow_domain *.golang.org", "deny_domain
	// x", "allow_cidr 10.0.0.0/8", "no allow_domain rule matches",
	// "an IP address outside every allow_cidr".
	Rule string
	Name string // the normalised name or address
}

// Decide judges a destination host (a name or an address) by the rules,
// before resolution.
func (p *Policy) Decide(host string) Decision {
	name, err := normalize(host)
	if err != nil {
		return Decision{Rule: err.Error(), Name: host}
	}
	if a, err := netip.ParseAddr(name); err == nil {
		for _, c := range p.CIDRs {
			if c.Contains(a.Unmap()) {
				return Decision{Allowed: true, Rule: "allow_cidr " + c.String(), Name: name}
			}
		}
		rule := "an IP address outside every allow_cidr (names only)"
		if v := p.judge(a); !v.ok {
			rule += "; " + a.String() + " is " + v.String()
		}
		return Decision{Rule: rule, Name: name}
	}
	for _, d := range p.Deny {
		if d.Match(name) {
			return Decision{Rule: "deny_domain " + d.String(), Name: name}
		}
	}
	for _, a := range p.Allow {
		if a.Match(name) {
			return Decision{Allowed: true, Rule: "allow_domain " + a.String(), Name: name}
		}
	}
	return Decision{Rule: "no allow_domain rule matches", Name: name}
}

// Reachable reports whether an address a name resolved to may be dialled:
// one inside an allowed CIDR, or one the table of special-purpose
// addresses calls globally reachable (special.go: the IANA registries,
// most specific row first). An address that carries an IPv4 address
// (IPv4-mapped, NAT64, 6to4) is judged as that address. Otherwise it
// returns what the address is and the row that refused it:
// "site-local, not globally reachable: fec0::/10 (Deprecated site-local,
// RFC 3879)".
//
// It judges an address, not a network: a CIDR rule admits whatever is
// routed there, and a global address may still lead to the host (a
// public address of the machine itself, or a NAT that forwards to it).
func (p *Policy) Reachable(a netip.Addr) (bool, string) {
	v := p.judge(a)
	if v.ok {
		return true, ""
	}
	return false, v.String()
}

// verdict is the judgement of one address: admitted, or what it is and
// the row of the table that refused it.
type verdict struct {
	ok  bool
	why string   // "loopback", "the NAT64 form of 10.0.0.1, which is private"
	row *special // the row that refused it; nil when admitted or when no row did
}

// String is why, with the row that refused: "site-local, not globally
// reachable: fec0::/10 (Deprecated site-local, RFC 3879)".
func (v verdict) String() string {
	if v.row == nil {
		return v.why
	}
	return v.why + ", not globally reachable: " + v.row.String()
}

func (p *Policy) judge(a netip.Addr) verdict {
	for _, c := range p.CIDRs {
		if c.Contains(a) {
			return verdict{ok: true}
		}
	}
	switch {
	case !a.IsValid():
		return verdict{why: "not an address"}
	case a.Zone() != "":
		return verdict{why: "scoped to the interface " + a.Zone()}
	}
	r := specialFor(a)
	switch {
	case r == nil && a.Is4():
		return verdict{ok: true} // in no row: a global IPv4 address
	case r == nil:
		return verdict{why: "in no row of the special-purpose table (a bug: its IPv6 rows cover every address)"}
	case r.form != "":
		v4 := r.carried(a)
		if v := p.judge(v4); !v.ok {
			return verdict{why: r.form + " of " + v4.String() + ", which is " + v.why, row: v.row}
		}
		return verdict{ok: true}
	case r.reach != reachTrue:
		return verdict{why: r.kind, row: r}
	}
	return verdict{ok: true}
}

// WithEnv returns env with the proxy's variables (Env) in place of any of
// the same names it held: a variable passed from the harness's own
// environment cannot point a child elsewhere.
func WithEnv(env []string) []string {
	proxy := Env()
	names := map[string]bool{}
	for _, kv := range proxy {
		n, _, _ := strings.Cut(kv, "=")
		names[n] = true
	}
	out := make([]string, 0, len(env)+len(proxy))
	for _, kv := range env {
		if n, _, _ := strings.Cut(kv, "="); !names[n] {
			out = append(out, kv)
		}
	}
	return append(out, proxy...)
}

// Env is the environment a child needs to find the proxy, in the forms
// common clients read: upper- and lower-case HTTP_PROXY, HTTPS_PROXY,
// ALL_PROXY (SOCKS5 with names resolved by the proxy) and NO_PROXY for
// loopback; npm's own variables; and JAVA_TOOL_OPTIONS for the JVM (and
// Gradle and Maven on it), which reads no proxy variable.
func Env() []string {
	http := fmt.Sprintf("http://127.0.0.1:%d", Port)
	socks := fmt.Sprintf("socks5h://127.0.0.1:%d", Port)
	noProxy := "localhost,127.0.0.1,::1"
	env := []string{}
	for _, kv := range [][2]string{{"HTTP_PROXY", http}, {"HTTPS_PROXY", http}, {"ALL_PROXY", socks}, {"NO_PROXY", noProxy}} {
		env = append(env, kv[0]+"="+kv[1], strings.ToLower(kv[0])+"="+kv[1])
	}
	env = append(env, "npm_config_proxy="+http, "npm_config_https_proxy="+http,
		fmt.Sprintf("JAVA_TOOL_OPTIONS=-Dhttp.proxyHost=127.0.0.1 -Dhttp.proxyPort=%d -Dhttps.proxyHost=127.0.0.1 -Dhttps.proxyPort=%d -Dhttp.nonProxyHosts=localhost|127.0.0.1", Port, Port))
	return env
}
