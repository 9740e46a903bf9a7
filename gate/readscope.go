package gate

import (
	"fmt"
	"path"
	"sync"

	"github.com/b10x/harness/tools"
)

// Read scope (read_scope): what the model must not be shown of the
// workspace. Rules are "GLOB=allowed|denied", matched as write_scope's are
// (doublestar globs on canonical workspace-relative paths, first match
// wins, a denial holding for every case spelling: fold.go); a path no rule
// matches takes the verdict of its nearest ancestor a rule matches, so a
// denied directory denies what lies beneath it. DefaultReadScope follows
// the caller's rules: an earlier allowed rule admits what it names, and
// "**=allowed" turns the defaults off. See docs/decisions/0079-read-scope.md.
//
// The gate refuses file_read and file_edit of a denied path (denied_path,
// naming the rule); dir_list and find name a denied path, marked, without
// its size; search skips it, saying so; a run call's child sees each denied
// file that exists when the call starts as an empty file (the view binds
// an empty file of the call's own over it, locked like the rest of the
// view), and the call's result lists each one its program read.
//
// What it does not protect against: a second name of the same file (a
// hard link that already exists under a name no rule denies), a file that
// appears during a run call (the child's own), what a run child derives
// from the path otherwise (its size through stat, its name), and a process
// outside the session's run calls (the user, another harness) renaming
// directories while a call's masks are found and bound: the session's
// other run calls are paused meanwhile (spawn.Spec.Hold; decision 0097).
// A run call whose masks' walk cannot enter a directory is refused
// (readHold).

// DefaultReadScope is what read_scope denies unless a rule before it
// decides: environment files and private keys, with their usual public
// companions (an example .env, a public key) allowed.
var DefaultReadScope = []string{
	"**/.env.example=allowed", "**/.env.sample=allowed", "**/.env.template=allowed", "**/*.pub=allowed",
	"**/.env=denied", "**/.env.*=denied", "**/*.pem=denied", "**/*.key=denied", "**/.netrc=denied",
	"**/id_rsa*=denied", "**/id_dsa*=denied", "**/id_ecdsa*=denied", "**/id_ed25519*=denied",
}

// ParseReadRule parses "GLOB=allowed|denied", as ParseScopeRule parses a
// write-scope rule.
func ParseReadRule(s string) (ScopeRule, error) {
	return parseRule("read-scope", s, readAccess)
}

// ReadScopeRules parses rules and appends DefaultReadScope.
func ReadScopeRules(rules []string) ([]ScopeRule, error) {
	var out []ScopeRule
	for _, s := range append(append([]string(nil), rules...), DefaultReadScope...) {
		r, err := ParseReadRule(s)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// readScope is the read rules with their folded forms.
type readScope struct{ scope }

// verdict is the read scope's verdict on the canonical relative path rel:
// the first rule matching rel, else its nearest ancestor's (see above).
func (r readScope) verdict(rel string) (rule string, denied bool) {
	if len(r.rules) == 0 {
		return "", false
	}
	for p := rel; ; p = path.Dir(p) {
		if v := r.match(p); v.Rule >= 0 {
			return v.Text, v.Access == Denied
		}
		if p == "." || p == "/" || p == "" {
			return "", false
		}
	}
}

// verdicts returns verdict for the paths of one walk: each directory's
// verdict is kept, so the ancestors shared by the paths beneath them are
// matched once for the walk, not once for each path. It is safe for
// concurrent use; what it keeps grows with the directories asked about,
// so it lives as long as one call.
func (r readScope) verdicts() tools.ReadVerdict {
	type verdict struct {
		rule   string
		denied bool
	}
	var mu sync.Mutex
	dirs := map[string]verdict{}
	var of func(p string) verdict
	of = func(p string) verdict {
		if v := r.match(p); v.Rule >= 0 {
			return verdict{v.Text, v.Access == Denied}
		}
		if p == "." || p == "/" || p == "" {
			return verdict{}
		}
		d := path.Dir(p)
		v, ok := dirs[d]
		if !ok {
			v = of(d)
			dirs[d] = v
		}
		return v
	}
	return func(rel string) (string, bool) {
		if len(r.rules) == 0 {
			return "", false
		}
		mu.Lock()
		defer mu.Unlock()
		v := of(rel)
		return v.rule, v.denied
	}
}

// checkReads is the read-scope step: a call that names what it reads is
// refused when one of them is denied; a call that walks is given the
// verdict.
func (g *Gate) checkReads(prep tools.Prepared, rec *CallRecord) (Outcome, bool) {
	if r, ok := prep.(tools.Reader); ok {
		for _, rel := range r.Reads() {
			if rule, denied := g.reads.verdict(rel); denied {
				return refuseStep(rec, "read scope", tools.ReasonDeniedPath,
					fmt.Sprintf("%s: its content is denied by read_scope rule %s; it is not shown to the model", rel, rule), nil), true
			}
		}
	}
	if f, ok := prep.(tools.ReadFilterer); ok {
		f.FilterReads(g.reads.verdicts())
	}
	return Outcome{}, false
}
