// Package seccomp builds the container seccomp profile the project ships,
// deploy/seccomp/b10x-harness.json, from two data files beside it:
// upstream-default.json (a pinned copy of the container runtime's default
// profile, see README.md) and additions.json (what the harness needs on
// top of it). Generate is the only way the shipped file is made:
//
//	go run ./deploy/seccomp/gen           # rewrite b10x-harness.json
//	go run ./deploy/seccomp/gen -check    # exit 1 when it is stale
//
// The shipped profile is the upstream one with the rules named in
// additions.json "remove" taken out and the rules in "add" appended at the
// end; nothing else changes, byte for byte (the upstream file is written
// by Go's json.MarshalIndent with tabs, and so is the result).
//
// The package does not judge whether an addition is safe; README.md
// justifies each one, and the tests check that every added syscall has a
// row there naming the harness code that makes it.
package seccomp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// Profile is a runtime seccomp profile (the moby/containers JSON format)
// with each rule kept as its exact JSON text, so that unchanged rules are
// written back unchanged. A field this type does not know makes decoding
// fail: a newer upstream format is refused, not silently dropped.
type Profile struct {
	DefaultAction string            `json:"defaultAction"`
	ArchMap       json.RawMessage   `json:"archMap"`
	Syscalls      []json.RawMessage `json:"syscalls"`
}

// Rule is one entry of a profile's "syscalls" list, with every field the
// upstream format writes, in its order.
type Rule struct {
	Names    []string        `json:"names"`
	Action   string          `json:"action"`
	ErrnoRet *uint           `json:"errnoRet,omitempty"`
	Args     []Arg           `json:"args"`
	Comment  string          `json:"comment"`
	Includes json.RawMessage `json:"includes"`
	Excludes json.RawMessage `json:"excludes"`
}

// Arg is one argument condition of a Rule.
type Arg struct {
	Index    uint   `json:"index"`
	Value    uint64 `json:"value"`
	ValueTwo uint64 `json:"valueTwo,omitempty"`
	Op       string `json:"op"`
}

// Additions is the content of additions.json: upstream rules to take out
// (each must match exactly one upstream rule, compared as JSON values) and
// rules to append.
type Additions struct {
	Comment string            `json:"comment"`
	Remove  []json.RawMessage `json:"remove"`
	Add     []json.RawMessage `json:"add"`
}

// Decode parses a profile strictly (unknown fields are an error).
func Decode(b []byte) (Profile, error) {
	var p Profile
	if err := strictDecode(b, &p); err != nil {
		return Profile{}, fmt.Errorf("seccomp profile: %w", err)
	}
	if p.DefaultAction == "" || len(p.Syscalls) == 0 {
		return Profile{}, errors.New("seccomp profile: no defaultAction or no syscalls")
	}
	for i, r := range p.Syscalls {
		if _, err := DecodeRule(r); err != nil {
			return Profile{}, fmt.Errorf("seccomp profile: rule %d: %w", i, err)
		}
	}
	return p, nil
}

// DecodeRule parses one rule strictly.
func DecodeRule(b []byte) (Rule, error) {
	var r Rule
	if err := strictDecode(b, &r); err != nil {
		return Rule{}, err
	}
	if len(r.Names) == 0 || r.Action == "" {
		return Rule{}, errors.New("a rule needs names and an action")
	}
	return r, nil
}

// DecodeAdditions parses additions.json strictly.
func DecodeAdditions(b []byte) (Additions, error) {
	var a Additions
	if err := strictDecode(b, &a); err != nil {
		return Additions{}, fmt.Errorf("additions: %w", err)
	}
	for i, r := range append(append([]json.RawMessage{}, a.Remove...), a.Add...) {
		if _, err := DecodeRule(r); err != nil {
			return Additions{}, fmt.Errorf("additions: rule %d: %w", i, err)
		}
	}
	return a, nil
}

func strictDecode(b []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return err
	}
	if d.More() {
		return errors.New("trailing data after the JSON value")
	}
	return nil
}

// SameJSON reports whether a and b are the same JSON value (key order and
// white space aside).
func SameJSON(a, b []byte) (bool, error) {
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		return false, err
	}
	if err := json.Unmarshal(b, &y); err != nil {
		return false, err
	}
	cx, _ := json.Marshal(x)
	cy, _ := json.Marshal(y)
	return bytes.Equal(cx, cy), nil
}

// Generate returns the shipped profile: upstream with adds.Remove taken
// out and adds.Add appended, written as upstream is (tabs, no final
// newline). It fails when a removal matches no upstream rule or more than
// one, when an added rule is already in upstream, or when upstream is not
// written the way Generate writes it (then unchanged rules could not stay
// byte for byte the same).
func Generate(upstream, additions []byte) ([]byte, error) {
	p, err := Decode(upstream)
	if err != nil {
		return nil, err
	}
	if again, err := Encode(p); err != nil || !bytes.Equal(again, upstream) {
		return nil, errors.New("upstream profile is not in json.MarshalIndent form with tabs; its rules would not stay byte for byte the same")
	}
	a, err := DecodeAdditions(additions)
	if err != nil {
		return nil, err
	}
	keep := make([]bool, len(p.Syscalls))
	for i := range keep {
		keep[i] = true
	}
	for _, rm := range a.Remove {
		hits := 0
		for i, r := range p.Syscalls {
			same, err := SameJSON(r, rm)
			if err != nil {
				return nil, err
			}
			if same {
				if !keep[i] {
					return nil, fmt.Errorf("removal %s matches a rule already removed", rm)
				}
				keep[i] = false
				hits++
			}
		}
		if hits != 1 {
			return nil, fmt.Errorf("removal %s matches %d upstream rules, want exactly 1 (has upstream changed?)", compact(rm), hits)
		}
	}
	var out []json.RawMessage
	for i, r := range p.Syscalls {
		if keep[i] {
			out = append(out, r)
		}
	}
	for _, add := range a.Add {
		for _, r := range p.Syscalls {
			if same, _ := SameJSON(r, add); same {
				return nil, fmt.Errorf("added rule %s is already upstream", compact(add))
			}
		}
		out = append(out, add)
	}
	p.Syscalls = out
	return Encode(p)
}

// Encode writes p as the upstream file is written.
func Encode(p Profile) ([]byte, error) {
	return json.MarshalIndent(p, "", "\t")
}

func compact(b []byte) string {
	var buf bytes.Buffer
	if json.Compact(&buf, b) != nil {
		return string(b)
	}
	return buf.String()
}
