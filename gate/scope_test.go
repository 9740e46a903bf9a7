package gate

import (
	"strings"
	"testing"

	"github.com/bmatcuk/doublestar/v4"
)

func TestParseScopeRule(t *testing.T) {
	good := map[string]ScopeRule{
		"src/**=allowed":             {"src/**", Allowed},
		"config/*.yaml=partial-only": {"config/*.yaml", PartialOnly},
		"**/*.pem=denied":            {"**/*.pem", Denied},
		"a=b=denied":                 {"a=b", Denied},
	}
	for in, want := range good {
		got, err := ParseScopeRule(in)
		if err != nil || got != want {
			t.Errorf("%q: %+v, %v", in, got, err)
		}
	}
	for _, bad := range []string{"src/**", "src/**=", "=allowed", "src/**=yes", "/etc/**=denied", "../x=allowed", "a/./b=denied", "[=denied", "a\x00=denied", "src/**=Allowed"} {
		if _, err := ParseScopeRule(bad); err == nil || !strings.Contains(err.Error(), "write-scope rule") {
			t.Errorf("%q: accepted or unclear error: %v", bad, err)
		}
	}
}

func TestFirstMatchWins(t *testing.T) {
	rules := []ScopeRule{{"src/**", Allowed}, {"**/*.pem", Denied}}
	if v := matchScope(rules, "src/a.pem"); v.Rule != 0 || v.Access != Allowed {
		t.Fatalf("%+v", v)
	}
	if v := matchScope(rules, "b.pem"); v.Rule != 1 || v.Access != Denied {
		t.Fatalf("%+v", v)
	}
	if v := matchScope(rules, "docs/x"); v.Rule != -1 || v.Access != 0 {
		t.Fatalf("%+v", v)
	}
}

func FuzzScopeRule(f *testing.F) {
	for _, s := range []string{"src/**=allowed", "**/*.pem=denied", "{a,b}/*=partial-only", "[a-=denied", "x=", "a\\=denied"} {
		f.Add(s, "src/a.pem")
	}
	f.Fuzz(func(t *testing.T, rule, path string) {
		r, err := ParseScopeRule(rule)
		if err != nil {
			return
		}
		if !doublestar.ValidatePattern(r.Glob) || r.Access < Allowed || r.Access > Denied {
			t.Fatalf("accepted invalid rule %q -> %+v", rule, r)
		}
		// Matching never panics; byte for byte it agrees with doublestar,
		// and with case folded it matches at least as much.
		sc := newScope([]ScopeRule{r})
		v := sc.matchBytes(path)
		ok, _ := doublestar.Match(r.Glob, path)
		if ok != (v.Rule == 0) {
			t.Fatalf("rule %q path %q: matched=%v, doublestar says %v", rule, path, v.Rule == 0, ok)
		}
		if ok && sc.match(path).Rule != 0 {
			t.Fatalf("rule %q path %q: matched byte for byte, not by match", rule, path)
		}
	})
}
