package gate

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Case folding (docs/decisions/0073-case-insensitive-directories.md).
//
// A workspace may lie, wholly or in part, on a directory that looks names
// up without regard to case: ext4 or f2fs with the casefold attribute
// (chattr +F), tmpfs mounted with casefold, vfat, exFAT, an NTFS or SMB
// mount of a Windows volume. There ".GIT/config" is .git/config, and a
// write-scope rule "secrets/**=denied" must hold for "SECRETS/key" too.
// The gate does not depend on knowing which directories fold (DetectCase
// tells the session, for the record): on every host it matches protected
// paths, and the write-scope rules that restrict, with case folded as well
// as byte for byte, and takes the stricter answer. Allow rules are matched
// byte for byte only, so folding can only make the gate refuse more.
//
// The fold is foldKey: Unicode simple case folding (what strings.EqualFold
// uses), plus what Linux's utf8 casefold (NFD, then full case folding from
// CaseFolding.txt's C and F lines, with default-ignorable code points
// dropped) does to reach an ASCII name: the full foldings whose result is
// ASCII (ß and ẞ to "ss", the ligatures ﬀ ﬁ ﬂ ﬃ ﬄ ﬅ ﬆ), the two canonical
// decompositions to ASCII punctuation (U+037E to ";", U+1FEF to "`"), and
// the default-ignorable code points dropped (".g\u200dit" is .git on such a
// directory). On a path, and on a protected name, it also drops what vfat
// and Windows drop at the end of a name (dots and spaces) and an NTFS
// stream suffix (":..."). So every spelling the kernel's casefold takes for
// an ASCII name is caught. What it does not do is NFD in general: for a
// name with letters beyond ASCII, a precomposed "é" and "e\u0301" are the
// same on a casefold directory and different keys here; and vfat, exFAT,
// NTFS and SMB servers fold with their own tables (a code page, an upcase
// table), which for letters beyond ASCII may differ from Unicode's. 8.3
// short names are matched for .git and .b10x only (GIT~1, B10X~1; git
// itself refuses git~1 on every platform).

// foldExpand maps the characters whose Linux casefold (NFD and full case
// folding) is an ASCII string of another length or another character to
// that string, before the simple fold.
var foldExpand = map[rune]string{
	'\u00df': "ss", // ß
	'\u1e9e': "ss", // ẞ
	'\ufb00': "ff",
	'\ufb01': "fi",
	'\ufb02': "fl",
	'\ufb03': "ffi",
	'\ufb04': "ffl",
	'\ufb05': "st",
	'\ufb06': "st",
	'\u037e': ";", // GREEK QUESTION MARK, canonically ';'
	'\u1fef': "`", // GREEK VARIA, canonically '`'
}

// ignorable reports whether r is dropped by the fold: Unicode's default
// ignorable code points (the format characters, Other_Default_Ignorable_
// Code_Point and the variation selectors; a few more format characters than
// the derived property holds, which only makes the fold coarser).
func ignorable(r rune) bool {
	return unicode.Is(unicode.Cf, r) || unicode.Is(unicode.Other_Default_Ignorable_Code_Point, r) || unicode.Is(unicode.Variation_Selector, r)
}

// foldRune returns the representative of r's simple case folding orbit
// (its smallest member): two runes fold alike exactly when
// strings.EqualFold says they are equal.
func foldRune(r rune) rune {
	if r < utf8.RuneSelf {
		if 'a' <= r && r <= 'z' {
			r -= 'a' - 'A'
		}
		return r
	}
	m := r
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		m = min(m, f)
	}
	return m
}

// foldString writes the fold of s to b (no segment rules).
func foldString(b *strings.Builder, s string) {
	for _, r := range s {
		if e, ok := foldExpand[r]; ok {
			for _, x := range e {
				b.WriteRune(foldRune(x))
			}
			continue
		}
		if r >= utf8.RuneSelf && ignorable(r) {
			continue
		}
		b.WriteRune(foldRune(r))
	}
}

// asciiPlain reports whether s is ASCII and no segment ends in a dot or a
// space or holds a colon: its key is its upper case.
func asciiPlain(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= utf8.RuneSelf, c == ':':
			return false
		case c == '.' || c == ' ':
			if i+1 == len(s) || s[i+1] == '/' {
				return false
			}
		}
	}
	return true
}

// foldKey is the key of a workspace-relative path (or a protected name)
// under which two spellings that a case-insensitive directory may take for
// the same name are equal: each segment folded (foldString), cut at its
// first colon (an NTFS stream), and stripped of trailing dots and spaces.
// A segment made only of dots and spaces keeps them (the canonical paths
// compared hold no "." or ".." segment; "..." stays "...").
func foldKey(rel string) string {
	if asciiPlain(rel) {
		return strings.ToUpper(rel)
	}
	var b strings.Builder
	b.Grow(len(rel))
	for i, seg := range strings.Split(rel, "/") {
		if i > 0 {
			b.WriteByte('/')
		}
		if c := strings.IndexByte(seg, ':'); c >= 0 {
			seg = seg[:c]
		}
		if t := strings.TrimRight(seg, ". "); t != "" {
			seg = t
		}
		foldString(&b, seg)
	}
	return b.String()
}

// foldPattern is the folded form of a write-scope glob, matched against
// foldKey of a path: every character folded as foldString does, the glob's
// own syntax (ASCII punctuation) untouched. A class range whose folded ends
// are out of order makes the pattern invalid: it then matches nothing
// folded, and the rule still applies byte for byte.
func foldPattern(glob string) string {
	var b strings.Builder
	b.Grow(len(glob))
	foldString(&b, glob)
	return b.String()
}

// shortAliases are the 8.3 short-name stems of the built-in protected
// names: vfat and Windows give ".git" the short name GIT~1 (GIT~2, ... on a
// collision), by which it can be opened.
var shortAliases = map[string]string{".git": "GIT~", ".b10x": "B10X~"}

// isShortAlias reports whether the folded segment k is an 8.3 short name
// with stem (k is stem followed by one or more digits).
func isShortAlias(k, stem string) bool {
	rest, ok := strings.CutPrefix(k, stem)
	if !ok || rest == "" {
		return false
	}
	for i := 0; i < len(rest); i++ {
		if rest[i] < '0' || rest[i] > '9' {
			return false
		}
	}
	return true
}

// foldCovers reports whether the path whose key is k is at or beneath the
// protected path p, with case folded (and, for the built-in names, through
// an 8.3 short name of p).
func foldCovers(k, p string) bool {
	if coveredBy(k, foldKey(p)) {
		return true
	}
	stem, ok := shortAliases[p]
	if !ok {
		return false
	}
	first, _, _ := strings.Cut(k, "/")
	return isShortAlias(first, stem)
}
