package confine

import (
	"fmt"
	"strings"
)

// Mode is the --confine setting: how the harness treats layers the host
// cannot provide. The zero value is Auto, the command line's default.
// A Mode is a plain value, safe to copy and share.
type Mode int

const (
	// Auto enforces every layer the host offers; what needs a missing
	// layer is not published, and the missing layers are said once and
	// recorded.
	Auto Mode = iota
	// Strict requires every layer: with any one missing, Report.Plan
	// returns a *StrictError and the harness must not start.
	Strict
	// Off applies no kernel confinement; only the read tools are
	// published.
	Off
)

// modeNames is indexed by Mode.
var modeNames = [...]string{Auto: "auto", Strict: "strict", Off: "off"}

// String returns the flag spelling ("auto", "strict", "off"), or
// "Mode(N)" for a value outside the three.
func (m Mode) String() string {
	if m >= 0 && int(m) < len(modeNames) {
		return modeNames[m]
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// valid reports whether m is one of the three modes.
func (m Mode) valid() bool { return m >= 0 && int(m) < len(modeNames) }

// ParseMode reads a --confine value. It accepts exactly "strict", "auto" and
// "off" (no case folding, no abbreviations), and otherwise returns an error
// naming the bad value and the valid ones.
func ParseMode(s string) (Mode, error) {
	for m, name := range modeNames {
		if s == name {
			return Mode(m), nil
		}
	}
	return Auto, fmt.Errorf("invalid confine mode %q: want one of %s", s, strings.Join([]string{"strict", "auto", "off"}, ", "))
}

// MarshalText renders the mode as its flag spelling; an invalid Mode is an
// error.
func (m Mode) MarshalText() ([]byte, error) {
	if !m.valid() {
		return nil, fmt.Errorf("invalid confine mode %d", int(m))
	}
	return []byte(m.String()), nil
}

// UnmarshalText parses the flag spelling, as ParseMode does.
func (m *Mode) UnmarshalText(b []byte) error {
	v, err := ParseMode(string(b))
	if err != nil {
		return err
	}
	*m = v
	return nil
}
