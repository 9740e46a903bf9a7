package gate

import (
	"strings"
	"unicode/utf8"

	"github.com/bmatcuk/doublestar/v4"
)

// glob is one scope rule's doublestar pattern, ready to be matched against
// many paths. The read scope's rules are matched against every path a walk
// visits (search, find, and each run call's masks: the whole workspace,
// each path's ancestors too), and doublestar.Match parses its pattern
// again at every call: 13 default rules, byte for byte and folded, over a
// path and its ancestors cost about 10 µs a file, 0.13 s a run call in an
// 11,000-file tree. Most rules are "**/NAME" with NAME plain text and '*'
// (every default rule is), and such a pattern matches a path exactly when
// it matches the path's last element: those are matched here without
// doublestar. Every other pattern, and every path that is not a plain
// relative one, goes to doublestar.Match, so the answer is always
// doublestar's (FuzzGlobMatch compares the two).
type glob struct {
	pattern string
	// base is NAME of a "**/NAME" pattern whose NAME is UTF-8 with no '/',
	// '?', '[', ']', '{', '}', '\\', and no "**"; "" when the pattern takes
	// doublestar's path.
	base string
}

func compileGlob(pattern string) glob {
	g := glob{pattern: pattern}
	if name, ok := strings.CutPrefix(pattern, "**/"); ok && name != "" &&
		!strings.ContainsAny(name, "/?[]{}\\") && !strings.Contains(name, "**") && utf8.ValidString(name) {
		g.base = name
	}
	return g
}

// match reports whether rel matches the pattern, as doublestar.Match does;
// a malformed pattern matches nothing.
func (g glob) match(rel string) bool { return g.matches(newSubject(rel)) }

// subject is a path made ready to be matched against many globs: whether
// the fast path may take it, and its last element.
type subject struct {
	rel   string
	base  string
	plain bool // a relative path of non-empty elements, in UTF-8
}

func newSubject(rel string) subject {
	// doublestar compares runes, and every invalid byte decodes to the
	// same one: such a path goes to doublestar.
	plain := rel != "" && rel[0] != '/' && rel[len(rel)-1] != '/' && !strings.Contains(rel, "//") && utf8.ValidString(rel)
	return subject{rel: rel, base: rel[strings.LastIndexByte(rel, '/')+1:], plain: plain}
}

func (g glob) matches(s subject) bool {
	if g.base != "" && s.plain {
		return wildMatch(g.base, s.base)
	}
	ok, _ := doublestar.Match(g.pattern, s.rel)
	return ok
}

// wildMatch reports whether name matches pat, whose only special
// character is '*' (any run of bytes, name having no '/'). It is the
// classic greedy match with one backtrack point: linear in practice,
// O(len(pat)·len(name)) at worst.
func wildMatch(pat, name string) bool {
	p, n := 0, 0
	star, mark := -1, 0
	for n < len(name) {
		switch {
		case p < len(pat) && pat[p] == '*':
			star, mark = p, n
			p++
		case p < len(pat) && pat[p] == name[n]:
			p++
			n++
		case star >= 0:
			p = star + 1
			mark++
			n = mark
		default:
			return false
		}
	}
	for p < len(pat) && pat[p] == '*' {
		p++
	}
	return p == len(pat)
}
