package gate

import (
	"fmt"
	"path"
	"strings"

	"github.com/bmatcuk/doublestar/v4"
)

// Access is what a write-scope rule admits on the paths it matches.
type Access int

// Write-scope values, as the spec names them.
const (
	Allowed     Access = iota + 1 // whole-file writes and exact edits
	PartialOnly                   // exact edits only; whole-file replacement refused
	Denied                        // no write tool may change the path
)

func (a Access) String() string {
	switch a {
	case Allowed:
		return "allowed"
	case PartialOnly:
		return "partial-only"
	case Denied:
		return "denied"
	}
	return fmt.Sprintf("access(%d)", int(a))
}

// ScopeRule is one write_scope declaration: a doublestar glob matched
// against the canonical workspace-relative path, and what it admits.
type ScopeRule struct {
	Glob   string
	Access Access
}

func (r ScopeRule) String() string { return r.Glob + "=" + r.Access.String() }

// ParseScopeRule parses "GLOB=allowed|partial-only|denied". The glob must be
// a valid doublestar pattern, relative (no leading "/"), without "." or ".."
// segments (it is matched against canonical paths, which never hold them).
func ParseScopeRule(s string) (ScopeRule, error) {
	return parseRule("write-scope", s, writeAccess)
}

// ruleAccess is one kind of rule's values: the access each value gives,
// and the values in the order an error lists them.
type ruleAccess struct {
	access map[string]Access
	names  []string
}

var (
	writeAccess = ruleAccess{map[string]Access{"allowed": Allowed, "partial-only": PartialOnly, "denied": Denied}, []string{"allowed", "partial-only", "denied"}}
	readAccess  = ruleAccess{map[string]Access{"allowed": Allowed, "denied": Denied}, []string{"allowed", "denied"}}
)

// parseRule parses "GLOB=VALUE" for a kind of rule ("write-scope"), whose
// name its errors begin with.
func parseRule(kind, s string, values ruleAccess) (ScopeRule, error) {
	i := strings.LastIndexByte(s, '=')
	if i < 0 {
		return ScopeRule{}, fmt.Errorf("%s rule %q: want GLOB=%s", kind, s, strings.Join(values.names, "|"))
	}
	glob, val := s[:i], s[i+1:]
	a, ok := values.access[val]
	if !ok {
		last := len(values.names) - 1
		return ScopeRule{}, fmt.Errorf("%s rule %q: value %q is not %s or %s", kind, s, val, strings.Join(values.names[:last], ", "), values.names[last])
	}
	if glob == "" {
		return ScopeRule{}, fmt.Errorf("%s rule %q: empty glob", kind, s)
	}
	if strings.ContainsRune(glob, 0) {
		return ScopeRule{}, fmt.Errorf("%s rule %q: NUL byte in glob", kind, s)
	}
	if strings.HasPrefix(glob, "/") {
		return ScopeRule{}, fmt.Errorf("%s rule %q: glob must be relative to the workspace", kind, s)
	}
	for _, seg := range strings.Split(glob, "/") {
		if seg == "." || seg == ".." {
			return ScopeRule{}, fmt.Errorf("%s rule %q: %q segments never match a canonical path", kind, s, seg)
		}
	}
	if !doublestar.ValidatePattern(glob) {
		return ScopeRule{}, fmt.Errorf("%s rule %q: invalid glob", kind, s)
	}
	return ScopeRule{Glob: glob, Access: a}, nil
}

// ScopeVerdict is the result of matching a path against the rules.
type ScopeVerdict struct {
	Rule   int    // index of the first matching rule; -1 when none matched
	Text   string // the rule as written, or the protection that applied
	Access Access // 0 when no rule matched (unrestricted)
	// Folded is true when the verdict is the folded match's (a restricting
	// rule matches the path only with case folded, see fold.go), stricter
	// than the byte-for-byte one; false for a byte-for-byte verdict.
	Folded bool
}

// strictness orders accesses for writing: no rule and Allowed admit
// everything, PartialOnly less, Denied nothing.
func strictness(a Access) int {
	switch a {
	case PartialOnly:
		return 1
	case Denied:
		return 2
	}
	return 0
}

// scope is the write-scope rules, each glob compiled byte for byte and in
// its folded form.
type scope struct {
	rules  []ScopeRule
	globs  []glob // each rule's glob
	folded []glob // foldPattern of each rule's glob
}

func newScope(rules []ScopeRule) scope {
	s := scope{rules: rules, globs: make([]glob, len(rules)), folded: make([]glob, len(rules))}
	for i, r := range rules {
		s.globs[i] = compileGlob(r.Glob)
		s.folded[i] = compileGlob(foldPattern(r.Glob))
	}
	return s
}

// matchBytes returns the first rule matching rel byte for byte.
func (s scope) matchBytes(rel string) ScopeVerdict {
	sub := newSubject(rel)
	for i, r := range s.rules {
		if s.globs[i].matches(sub) {
			return ScopeVerdict{Rule: i, Text: r.String(), Access: r.Access}
		}
	}
	return ScopeVerdict{Rule: -1}
}

// match returns the verdict of the rules on a canonical relative path: the
// first rule matching it byte for byte, unless the first rule matching it
// with case folded (its foldKey against each folded glob) is stricter, in
// which case that one (Folded). An allow rule thus admits only the
// spelling it names, and a restricting rule holds for every spelling a
// case-insensitive directory takes for the same name.
func (s scope) match(rel string) ScopeVerdict { return s.stricter(s.matchBytes(rel), rel) }

// stricter returns v, the byte-for-byte verdict on rel (matchBytes), or
// the folded match's when it is stricter (see match).
func (s scope) stricter(v ScopeVerdict, rel string) ScopeVerdict {
	if v.Access == Denied {
		return v
	}
	k := newSubject(foldKey(rel))
	for i, r := range s.rules {
		if s.folded[i].matches(k) {
			if strictness(r.Access) > strictness(v.Access) {
				return ScopeVerdict{Rule: i, Text: r.String(), Access: r.Access, Folded: true}
			}
			break
		}
	}
	return v
}

// matchScope returns the verdict of rules on a canonical relative path
// (scope.match).
func matchScope(rules []ScopeRule, rel string) ScopeVerdict { return newScope(rules).match(rel) }

// protectedPrefixes are workspace paths the harness itself depends on, or
// that make a later program execute code (git hooks and config). A write tool
// may change them only when the path spells the protected name byte for
// byte and the first rule matching it byte for byte names them explicitly
// (its glob starts with the protected name) and admits the write. Every
// other spelling a case-insensitive directory takes for them is refused
// (fold.go).
var protectedPrefixes = []string{".git", ".b10x"}

// protection reports whether rel is protected, and by what. extra holds
// further protected relative paths (the record file, hook programs, agent
// files when they live in the workspace). exact is true when rel spells
// the protected path p byte for byte; false when it reaches p only with
// case folded (foldKey, or an 8.3 short name of a built-in name).
func protection(rel string, extra []string) (p string, exact, ok bool) {
	all := append(protectedPrefixes[:len(protectedPrefixes):len(protectedPrefixes)], extra...)
	for _, p := range all {
		if coveredBy(rel, p) {
			return p, true, true
		}
	}
	k := foldKey(rel)
	for _, p := range all {
		if foldCovers(k, p) {
			return p, false, true
		}
	}
	return "", false, false
}

// explicitFor reports whether a rule's glob names the protected path p
// literally rather than reaching it through a wildcard.
func explicitFor(glob, p string) bool {
	return glob == p || strings.HasPrefix(glob, p+"/") || path.Clean(glob) == p
}
