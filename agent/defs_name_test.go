package agent

import (
	"regexp"
	"strings"
	"testing"
)

// TestValidDefNameMatchesRule checks the hand-written name check against
// the rule as a regular expression, over every short string of a telling
// alphabet and some long ones.
func TestValidDefNameMatchesRule(t *testing.T) {
	rule := regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,63}$`)
	alphabet := []string{"a", "z", "0", "9", "_", ".", "-", "A", " ", "/", "é", "\x00"}
	check := func(s string) {
		if got, want := validDefName(s), rule.MatchString(s); got != want {
			t.Fatalf("validDefName(%q) = %v, the rule says %v", s, got, want)
		}
	}
	var gen func(prefix string, n int)
	gen = func(prefix string, n int) {
		check(prefix)
		if n == 0 {
			return
		}
		for _, c := range alphabet {
			gen(prefix+c, n-1)
		}
	}
	gen("", 3)
	for _, n := range []int{63, 64, 65, 200} {
		check(strings.Repeat("a", n))
		check("a" + strings.Repeat("-", n-1))
		check("-" + strings.Repeat("a", n-1))
	}
}
