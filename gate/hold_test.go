package gate

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/b10x/harness/tools"
)

func TestWholeDir(t *testing.T) {
	rule := func(s string) ScopeRule {
		r, err := ParseScopeRule(s)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	for _, c := range []struct {
		rules []string
		rel   string
		want  bool
	}{
		{[]string{"tests/**=denied"}, "tests", true},
		{[]string{"tests/**=denied"}, "tests/unit", true},
		{[]string{"**=denied"}, "a", true},
		{[]string{"keys/*=denied"}, "keys/sub", false},                             // not every descendant matches
		{[]string{"tests/fixtures/**=allowed", "tests/**=denied"}, "tests", false}, // an earlier allow beneath
		{[]string{"tests/fixtures/**=allowed", "tests/**=denied"}, "tests/unit", true},
		{[]string{"**/*.go=allowed", "tests/**=denied"}, "tests", false},
		{[]string{"src/**=allowed", "tests/**=denied"}, "tests", true},
		{[]string{"tests=allowed", "tests/**=denied"}, "tests/a", true},
		{[]string{"docs/*.md=partial-only", "**=denied"}, "docs", true}, // an earlier restricting rule is fine
	} {
		var rules []ScopeRule
		for _, r := range c.rules {
			rules = append(rules, rule(r))
		}
		v := matchScope(rules, c.rel)
		if v.Rule < 0 {
			t.Fatalf("%v %s: no match", c.rules, c.rel)
		}
		if got := wholeDir(rules, v.Rule, c.rel); got != c.want {
			t.Errorf("wholeDir(%v, %s) = %v, want %v", c.rules, c.rel, got, c.want)
		}
	}
}

// TestHoldCheck runs the check without a child: the changes a child could
// make where nothing was bound are found, and creations are removed.
func TestHoldCheck(t *testing.T) {
	dir := t.TempDir()
	w := func(rel, body string) {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	w("keys/k.pem", "K")
	w("keys/gone.pem", "G")
	w("tests/a_test.go", "A")
	w("hook.sh", "H")
	w("src/x.go", "X")
	ws, err := tools.OpenWorkspace(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	var rules []ScopeRule
	for _, s := range []string{"keys/*.pem=denied", "tests/**=denied", "src/*.go=allowed"} {
		r, _ := ParseScopeRule(s)
		rules = append(rules, r)
	}
	g := &Gate{cfg: Config{Workspace: ws, WriteScope: rules, Protected: []string{"hook.sh"}}}
	h, err := g.holdBefore()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(h.hold.ReadOnly, ","); got != "hook.sh,keys/gone.pem,keys/k.pem,tests" {
		t.Errorf("read-only: %s", got)
	}
	// What a child could do to paths that were not bound (here: nothing
	// was), and creations.
	w(".git/hooks/post-checkout", "P")
	w("keys/new.pem", "N")
	w("keys/k.pem.new", "CHANGED") // a new file renamed over it
	if err := os.Rename(filepath.Join(dir, "keys/k.pem.new"), filepath.Join(dir, "keys/k.pem")); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(dir, "keys/gone.pem"))
	w("src/y.go", "Y")
	vs := h.after()
	var got []string
	for _, v := range vs {
		got = append(got, v.String())
	}
	want := []string{
		".git (protected (.git)): created, removed again",
		"keys/gone.pem (keys/*.pem=denied): removed, could NOT be undone",
		"keys/k.pem (keys/*.pem=denied): replaced, could NOT be undone",
		"keys/new.pem (keys/*.pem=denied): created, removed again",
	}
	// The order of removed paths follows the map; compare as sets.
	if len(got) != len(want) {
		t.Fatalf("violations:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, w := range want {
		found := false
		for _, g := range got {
			found = found || g == w
		}
		if !found {
			t.Errorf("missing %q in\n%s", w, strings.Join(got, "\n"))
		}
	}
	for _, rel := range []string{".git", "keys/new.pem"} {
		if _, err := os.Lstat(filepath.Join(dir, rel)); err == nil {
			t.Errorf("%s was not removed", rel)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "src/y.go")); err != nil {
		t.Errorf("src/y.go, which a rule allows, was touched: %v", err)
	}
	if r := violationReason(vs); r != tools.ReasonProtectedPath {
		t.Errorf("reason %s", r)
	}
}
