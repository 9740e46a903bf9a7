package gate

import (
	"fmt"
	"strings"
	"testing"

	"github.com/bmatcuk/doublestar/v4"
)

// globCases are names a walk meets: dot files, names the default rules
// name and nearly name, empty elements, and bytes that are not UTF-8.
var globCases = []string{
	".env", "a/.env", "a/b/.env.local", ".env.example", "x.pem", "deep/er/x.PEM", "x.pem.bak",
	"id_rsa", "keys/id_rsa.pub", "keys/id_ed25519", "a.key", "key", ".netrc", "netrc",
	".", "/", "", "a/", "/a", "a//b", "a/./b", "*", "a/*", "**", "\xff", "a/\xfe.pem",
	"\u017fecret.pem", "STRASSE", "src/main.go", "x.pem/y", "x.pem/", "a/b/c/d/e/f.key",
}

// TestGlobFastPath pins which patterns take the fast path (every default
// read-scope rule, byte for byte and folded) and that its answers are
// doublestar's on the names above.
func TestGlobFastPath(t *testing.T) {
	fast := 0
	var patterns []string
	for _, r := range DefaultReadScope {
		g := r[:strings.LastIndexByte(r, '=')]
		patterns = append(patterns, g, foldPattern(g))
	}
	for _, p := range patterns {
		if compileGlob(p).base == "" {
			t.Errorf("compileGlob(%q) takes doublestar's path; every default rule should take the fast one", p)
		} else {
			fast++
		}
	}
	for _, p := range []string{"src/**", "**/*.[ch]", "**/{a,b}", "**/a?", "**/a/b", "**/a**", "**/", "*.pem", "**/\\*", "**/\xff"} {
		if compileGlob(p).base != "" {
			t.Errorf("compileGlob(%q) takes the fast path; it must not", p)
		}
		patterns = append(patterns, p)
	}
	patterns = append(patterns, "**/*", "**/.*", "**/*.*", "**/a*b*c")
	for _, p := range patterns {
		g := compileGlob(p)
		for _, rel := range globCases {
			want, _ := doublestar.Match(p, rel)
			if got := g.match(rel); got != want {
				t.Errorf("compileGlob(%q).match(%+q) = %v, doublestar.Match = %v", p, rel, got, want)
			}
		}
	}
	if fast == 0 {
		t.Fatal("no pattern took the fast path")
	}
}

// FuzzGlobMatch: for any NAME and path, "**/NAME" (the fast path when NAME
// qualifies) and any other pattern match as doublestar.Match does.
func FuzzGlobMatch(f *testing.F) {
	for _, r := range DefaultReadScope {
		name := strings.TrimPrefix(r[:strings.LastIndexByte(r, '=')], "**/")
		for _, rel := range globCases {
			f.Add(name, rel)
		}
	}
	f.Add("a*b*", "aXbYb")
	f.Add("*a*a*a", "aaaaaaaaaaaaaaab")
	f.Add("x", "\xffx")
	f.Fuzz(func(t *testing.T, name, rel string) {
		for _, p := range []string{"**/" + name, name} {
			want, _ := doublestar.Match(p, rel)
			if got := compileGlob(p).match(rel); got != want {
				t.Fatalf("compileGlob(%+q).match(%+q) = %v, doublestar.Match = %v", p, rel, got, want)
			}
		}
	})
}

// FuzzReadVerdicts: the verdicts a walk is given are verdict's, for paths
// asked in any order, ancestors before or after the paths beneath them.
func FuzzReadVerdicts(f *testing.F) {
	rules, err := ReadScopeRules([]string{"secret/**=denied", "secret/open/**=allowed", "**/*.txt=allowed"})
	if err != nil {
		f.Fatal(err)
	}
	rs := readScope{newScope(rules)}
	for _, rel := range globCases {
		f.Add(rel, "a/b")
	}
	f.Add("secret/open/x.pem", "secret/open")
	f.Add("secret/x", "SECRET/x.txt")
	f.Add("a/.ENV/b", "a/.env")
	f.Fuzz(func(t *testing.T, a, b string) {
		vs := rs.verdicts()
		for _, rel := range []string{a, b, a + "/" + b, a, b + "/" + a} {
			rule, denied := vs(rel)
			wantRule, wantDenied := rs.verdict(rel)
			if rule != wantRule || denied != wantDenied {
				t.Fatalf("verdicts()(%+q) = %q, %v; verdict = %q, %v", rel, rule, denied, wantRule, wantDenied)
			}
		}
	})
}

// BenchmarkReadVerdictWalk is the read scope's cost over the paths of a
// tree (the default rules, 1,000 files in 100 directories three deep), as
// a run call's masks, search and find pay it: doublestar on every rule and
// ancestor (the old way) against the compiled rules with each directory's
// verdict kept.
func BenchmarkReadVerdictWalk(b *testing.B) {
	rules, err := ReadScopeRules(nil)
	if err != nil {
		b.Fatal(err)
	}
	rs := readScope{newScope(rules)}
	var paths []string
	for d := 0; d < 100; d++ {
		for f := 0; f < 10; f++ {
			paths = append(paths, fmt.Sprintf("pkg%d/internal/sub%d/file%d.go", d%10, d, f))
		}
	}
	// The old way: every glob through doublestar, every path's ancestors
	// matched again.
	old := newScope(rules)
	for i := range old.globs {
		old.globs[i].base, old.folded[i].base = "", ""
	}
	b.Run("doublestar", func(b *testing.B) {
		for b.Loop() {
			for _, p := range paths {
				readScope{old}.verdict(p)
			}
		}
	})
	b.Run("compiled", func(b *testing.B) {
		for b.Loop() {
			vs := rs.verdicts()
			for _, p := range paths {
				vs(p)
			}
		}
	})
}
