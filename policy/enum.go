package policy

import (
	"fmt"
	"slices"
	"strings"
)

// The enumerated settings. Each is a string type whose constants are the
// words a flag or a policy file gives; UnmarshalText accepts exactly those
// (no case folding) and refuses anything else naming the value and the
// words. The zero value "" is none of them (LimitsFrom's excepted: it means
// LimitsCall) and is refused by Validate.

// Confine is the confine setting: how the harness treats layers the host
// cannot provide.
type Confine string

// Confine modes.
const (
	ConfineStrict Confine = "strict" // every layer or refuse to start
	ConfineAuto   Confine = "auto"   // the layers the host offers, said once and recorded
	ConfineOff    Confine = "off"    // no kernel confinement: only the read tools
)

// Risk is approve_up_to: the highest risk of a catalogue entry that runs
// unattended. Risks order low < medium < high.
type Risk string

// Risks.
const (
	RiskLow    Risk = "low"
	RiskMedium Risk = "medium"
	RiskHigh   Risk = "high"
)

// Approve is who decides calls above the risk ceiling.
type Approve string

// Approve modes.
const (
	ApproveAuto   Approve = "auto"   // ask on the terminal (or an MCP client) when there is one, else deny
	ApprovePrompt Approve = "prompt" // require a way to ask
	ApproveDeny   Approve = "deny"
	ApproveAll    Approve = "all" // no person is watching: every call that asks is approved
)

// ScopeAnnounce is whether the model is told the write-scope rules.
type ScopeAnnounce string

// Scope announcements.
const (
	ScopeStated ScopeAnnounce = "stated"
	ScopeSilent ScopeAnnounce = "silent"
)

// Net is the network run calls get.
type Net string

// Networks.
const (
	NetNone  Net = "none"  // an empty network namespace
	NetHost  Net = "host"  // the host's network
	NetProxy Net = "proxy" // an empty namespace whose one way out is the harness's proxy
)

// LimitsFrom is where run calls' pids, memory and cpu limits come from.
type LimitsFrom string

// Where limits come from. The zero value means LimitsCall.
const (
	LimitsCall      LimitsFrom = "call"      // a cgroup leaf of its own per call
	LimitsEnclosing LimitsFrom = "enclosing" // the harness's own cgroup bounds every call together
)

// Limits says what a limit given (pids_max, memory_max, cpu_max) that the
// host cannot enforce does.
type Limits string

// What an unenforceable limit does. The zero value means LimitsRequired.
const (
	LimitsRequired   Limits = "required"    // the harness refuses to start, naming it
	LimitsBestEffort Limits = "best-effort" // it is applied where the host can, and said (once) and recorded where it cannot
)

// ChildUID is who a run call's program is inside its user namespace.
type ChildUID string

// Identities. The zero value means ChildCaller.
const (
	ChildCaller ChildUID = "caller" // the host uid and gid it runs as: id(1) tells the truth
	ChildRoot   ChildUID = "root"   // root of its namespace (no capability either way)
)

// Surface is the shape the model sees the tools in.
type Surface string

// Surfaces.
const (
	SurfaceFlat  Surface = "flat"  // one tool per catalogue entry
	SurfaceVerbs Surface = "verbs" // tool_search, tool_describe, tool_invoke
)

// enum is a setting type whose values are a fixed list of words.
type enum interface {
	words() []string
}

func (Confine) words() []string       { return []string{"strict", "auto", "off"} }
func (Risk) words() []string          { return []string{"low", "medium", "high"} }
func (Approve) words() []string       { return []string{"auto", "prompt", "deny", "all"} }
func (ScopeAnnounce) words() []string { return []string{"stated", "silent"} }
func (Net) words() []string           { return []string{"none", "host", "proxy"} }
func (LimitsFrom) words() []string    { return []string{"call", "enclosing"} }
func (Surface) words() []string       { return []string{"flat", "verbs"} }
func (Limits) words() []string        { return []string{"required", "best-effort"} }
func (ChildUID) words() []string      { return []string{"caller", "root"} }

// String returns the word.
func (c Confine) String() string { return string(c) }

// String returns the word.
func (r Risk) String() string { return string(r) }

// String returns the word.
func (a Approve) String() string { return string(a) }

// String returns the word.
func (s ScopeAnnounce) String() string { return string(s) }

// String returns the word.
func (n Net) String() string { return string(n) }

// String returns the word; the zero value is "call".
func (l LimitsFrom) String() string {
	if l == "" {
		return string(LimitsCall)
	}
	return string(l)
}

// String returns the word.
func (s Surface) String() string { return string(s) }

// String returns the word; the zero value is "required".
func (l Limits) String() string {
	if l == "" {
		return string(LimitsRequired)
	}
	return string(l)
}

// String returns the word; the zero value is "caller".
func (c ChildUID) String() string {
	if c == "" {
		return string(ChildCaller)
	}
	return string(c)
}

// UnmarshalText sets c from a word: `"x": want caller, root` otherwise.
func (c *ChildUID) UnmarshalText(b []byte) error { return parseEnum(c, b, "") }

// UnmarshalText sets l from a word: `"x": want required, best-effort`
// otherwise.
func (l *Limits) UnmarshalText(b []byte) error { return parseEnum(l, b, "") }

// UnmarshalText sets c from a word: "invalid confine mode "x": want one of
// strict, auto, off" otherwise.
func (c *Confine) UnmarshalText(b []byte) error {
	return parseEnum(c, b, "invalid confine mode %q: want one of strict, auto, off")
}

// UnmarshalText sets r from a word: "invalid risk "x": want low, medium or
// high" otherwise.
func (r *Risk) UnmarshalText(b []byte) error {
	return parseEnum(r, b, "invalid risk %q: want low, medium or high")
}

// UnmarshalText sets a from a word: `"x": want auto, prompt, deny, all`
// otherwise.
func (a *Approve) UnmarshalText(b []byte) error { return parseEnum(a, b, "") }

// UnmarshalText sets s from a word: `"x": want stated, silent` otherwise.
func (s *ScopeAnnounce) UnmarshalText(b []byte) error { return parseEnum(s, b, "") }

// UnmarshalText sets n from a word: `"x": want none, host, proxy`
// otherwise.
func (n *Net) UnmarshalText(b []byte) error { return parseEnum(n, b, "") }

// UnmarshalText sets l from a word: `"x": want call, enclosing` otherwise.
func (l *LimitsFrom) UnmarshalText(b []byte) error { return parseEnum(l, b, "") }

// UnmarshalText sets s from a word: "invalid surface "x": want flat or
// verbs" otherwise.
func (s *Surface) UnmarshalText(b []byte) error {
	return parseEnum(s, b, "invalid surface %q: want flat or verbs")
}

// parseEnum sets *p to the word b when it is one of p's words; otherwise
// the error is invalid (a format of the value) or, "", `"x": want a, b`.
func parseEnum[T interface {
	~string
	enum
}](p *T, b []byte, invalid string) error {
	s := string(b)
	if slices.Contains((*p).words(), s) {
		*p = T(s)
		return nil
	}
	if invalid != "" {
		return fmt.Errorf(invalid, s)
	}
	return fmt.Errorf("%q: want %s", s, strings.Join((*p).words(), ", "))
}
