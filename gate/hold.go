package gate

import (
	"fmt"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/b10x/harness/tools"
	"github.com/b10x/harness/workspace"
)

// The gate's promises bind run too (docs/decisions/0039): what the file
// tools refuse to change, a run call's program must not change either.
//
// Before a run call the gate reads the paths the call must not change:
// each protected path (.git, .b10x and Config.Protected, unless a
// write_scope rule naming it explicitly allows it), and, when a rule is
// denied or partial-only, every workspace path whose first matching rule is
// one of those (one walk of the workspace). Those that exist are held by
// the kernel in the child's view (tools.Hold): files and directories
// read-only, directories that later rules may admit paths beneath anchored
// in place. After the call it reads them again: a path that did not exist
// and now does is removed (never following a link), and every change is
// reported in the outcome (failed, protected_path or denied_path) and the
// record, naming the path and the rule, with whether it was undone.
//
// Case-insensitive directories (fold.go): a protected path is read and
// held by its own name, which the kernel looks up as the filesystem does,
// so whatever spelling a program gives .git on a directory that folds case
// is the path read and held; the walk sees names as stored and matches
// the restricting rules against them with case folded too.

// RunHeldSummary says in one paragraph what a run child is held to, for
// doctor and the run tool's description.
const RunHeldSummary = "A run call's program cannot change what file_write and file_edit may not: " +
	".git, .b10x, and the hook programs, the record file and the agent files that lie in the workspace are held read-only " +
	"by the kernel in its view (bound read-only over themselves; they and the directories above them cannot be renamed or removed), " +
	"and so is every path a denied or partial-only write_scope rule matches (up to 256 per call; beyond that they are checked after the call). " +
	"What it creates there (a protected path that did not exist yet, a new file a denied rule matches) is removed after the call, " +
	"and the call fails (protected_path or denied_path), naming each path and rule. " +
	"In its view, the entries of /etc that not every user of the host may read (/etc/shadow, private keys) and the workspace files " +
	"the read scope denies (by default .env, *.pem, *.key, .netrc and SSH private keys) read as empty and cannot be replaced."

// MaxReadMasks bounds the files a run call's view masks for the read
// scope; a workspace with more fails the call (fail closed: the files
// beyond could not be hidden).
const MaxReadMasks = 1024

// MaxScopeHolds bounds the write-scope paths one run call holds by a bind.
// Matches beyond it are checked after the call only: a change to one of
// them is reported, but it cannot be undone.
const MaxScopeHolds = 256

// Violation is one path a run call's program created or changed although
// the policy forbids it.
type Violation struct {
	Path   string `json:"path"`   // canonical workspace-relative path
	Rule   string `json:"rule"`   // "protected (.git)" or the write-scope rule as written
	Change string `json:"change"` // created, changed, replaced, removed
	Undone bool   `json:"undone"` // what the program left was removed again
	Error  string `json:"error,omitempty"`
}

func (v Violation) String() string {
	s := fmt.Sprintf("%s (%s): %s", v.Path, v.Rule, v.Change)
	switch {
	case v.Undone:
		s += ", removed again"
	case v.Change == "created":
		s += ", could NOT be removed"
	default:
		s += ", could NOT be undone"
	}
	return s
}

// holdEntry is one path a run call must not change, as it was before.
type holdEntry struct {
	rel    string
	why    string
	prot   bool
	before workspace.EntryState
	err    error // reading it failed (a link on the way)
	held   bool  // held by a bind: only its identity can change
	whole  bool  // a directory held read-only with everything beneath it
}

// runHold is a run call's hold: what was read before, and what the child
// got held.
type runHold struct {
	ws      *workspace.Workspace
	rules   []ScopeRule
	match   scope // rules, with their folded globs
	prot    []*holdEntry
	scope   map[string]*holdEntry
	walked  bool
	skipped int // directories the walk could not enter
	capped  int // scope matches beyond MaxScopeHolds
	// maskOverflow counts the files the read scope denies beyond
	// MaxReadMasks: the call is refused rather than show them.
	maskOverflow int
	// masking is set when the read scope denies anything, so the walk
	// looked for files to mask; unwalked names the first directory it
	// could not read or enter (the masks' walk only). A masking walk that
	// skipped a directory refuses the call: a denied file beneath it could
	// not be masked.
	masking  bool
	unwalked string
	hold     tools.Hold
	heldList []string // scope paths held, for the note to the model
}

// restricting reports whether a for run means "must not change".
func restricting(a Access) bool { return a == Denied || a == PartialOnly }

// runProtected lists the protected paths a run child must not change: all
// of them but those the first rule matching the path itself names
// explicitly and allows.
func (g *Gate) runProtected() []string {
	var out []string
	sc := newScope(g.cfg.WriteScope)
	for _, p := range append(protectedPrefixes[:len(protectedPrefixes):len(protectedPrefixes)], g.cfg.Protected...) {
		v := sc.match(p)
		if v.Access == Allowed && explicitFor(g.cfg.WriteScope[v.Rule].Glob, p) {
			continue
		}
		out = append(out, p)
	}
	return out
}

// RunHeld says, for doctor and the run tool's description, what a run
// child is held to: the protected paths and the restricting rules.
func (g *Gate) RunHeld() (protected []string, rules []ScopeRule) {
	for _, r := range g.cfg.WriteScope {
		if restricting(r.Access) {
			rules = append(rules, r)
		}
	}
	return g.runProtected(), rules
}

// coveredBy reports whether rel is p or beneath it.
func coveredBy(rel, p string) bool { return rel == p || strings.HasPrefix(rel, p+"/") }

// holdBefore reads what the call must not change and decides what the
// child gets held.
func (g *Gate) holdBefore() (*runHold, error) {
	h := &runHold{ws: g.cfg.Workspace, rules: g.cfg.WriteScope, match: newScope(g.cfg.WriteScope), scope: map[string]*holdEntry{}}
	for _, p := range g.runProtected() {
		st, err := h.ws.Lstat(p)
		e := &holdEntry{rel: p, why: "protected (" + p + ")", prot: true, before: st, err: err}
		if err == nil && (st.IsDir() || st.IsRegular()) {
			e.held, e.whole = true, st.IsDir()
			h.hold.ReadOnly = append(h.hold.ReadOnly, p)
			h.identify(p, st)
		}
		h.prot = append(h.prot, e)
	}
	any := false
	for _, r := range h.rules {
		any = any || restricting(r.Access)
	}
	masking := false
	for _, r := range g.reads.rules {
		masking = masking || r.Access == Denied
	}
	if !any && !masking {
		return h, nil
	}
	h.masking = masking
	if !any {
		// The masks alone: unchanged directories are taken from the
		// gate's listings (maskwalk.go).
		return h, g.walkMasks(h)
	}
	h.walked = any
	n := 0
	readVerdict := g.reads.verdicts()
	skipped, err := h.ws.Walk(func(rel string, typ uint8, stat func() workspace.EntryState) bool {
		if h.protectedCovers(rel) {
			return false
		}
		if masking && (typ == unix.DT_REG || typ == unix.DT_UNKNOWN) {
			if _, denied := readVerdict(rel); denied {
				if st := stat(); st.IsRegular() {
					h.mask(rel, st)
				}
			}
		}
		if !any {
			return typ == unix.DT_DIR
		}
		v := h.match.match(rel)
		if !restricting(v.Access) {
			return typ == unix.DT_DIR
		}
		e := &holdEntry{rel: rel, why: v.Text, before: stat()}
		h.scope[rel] = e
		switch {
		case !e.before.IsDir() && !e.before.IsRegular():
			// A link or a special file cannot be held by a bind: checked
			// after the call only.
			return false
		case n >= MaxScopeHolds:
			h.capped++
			return e.before.IsDir()
		case e.before.IsDir() && wholeDir(h.rules, v.Rule, rel):
			e.held, e.whole = true, true
			h.hold.ReadOnly = append(h.hold.ReadOnly, rel)
		case e.before.IsDir():
			e.held = true
			h.hold.Anchored = append(h.hold.Anchored, rel)
		default:
			e.held = true
			h.hold.ReadOnly = append(h.hold.ReadOnly, rel)
		}
		h.identify(rel, e.before)
		n++
		h.heldList = append(h.heldList, rel+" ("+v.Text+")")
		return e.before.IsDir() && !e.whole
	})
	h.skipped = skipped
	return h, err
}

// identify records rel's identity as read (st) for the child's view to
// bind rel only while it is that file (tools.Hold.IDs).
func (h *runHold) identify(rel string, st workspace.EntryState) {
	if h.hold.IDs == nil {
		h.hold.IDs = map[string]tools.FileID{}
	}
	h.hold.IDs[rel] = tools.FileID{Dev: st.Dev, Ino: st.Ino}
}

// mask adds the regular file rel, read as st, to the files the child sees
// empty; past MaxReadMasks it is counted in maskOverflow.
func (h *runHold) mask(rel string, st workspace.EntryState) {
	if len(h.hold.Masked) == MaxReadMasks {
		h.maskOverflow++
		return
	}
	h.hold.Masked = append(h.hold.Masked, rel)
	h.identify(rel, st)
}

// protectedCovers reports whether rel is at or beneath a protected path.
func (h *runHold) protectedCovers(rel string) bool {
	for _, e := range h.prot {
		if coveredBy(rel, e.rel) {
			return true
		}
	}
	return false
}

// wholeDir reports whether every path beneath the directory rel has rule
// i as its first match, whatever its name: rule i's glob ends in "/**" (or
// is "**") and matches rel, so it matches everything beneath; and no
// earlier rule that allows writing can match anything beneath rel. Then
// the whole directory can be held read-only with one bind.
func wholeDir(rules []ScopeRule, i int, rel string) bool {
	g := rules[i].Glob
	if g != "**" && !strings.HasSuffix(g, "/**") {
		return false
	}
	relSegs := strings.Split(rel, "/")
	for _, r := range rules[:i] {
		if restricting(r.Access) {
			continue
		}
		if mayMatchBeneath(r.Glob, relSegs) {
			return false
		}
	}
	return true
}

// mayMatchBeneath reports whether glob could match a path strictly beneath
// the path whose segments are rel, judged by its literal leading segments:
// conservative (true when unsure; a literal segment agrees with rel's when
// they are equal with case folded, as on a case-insensitive directory).
func mayMatchBeneath(glob string, rel []string) bool {
	segs := strings.Split(glob, "/")
	for k, s := range segs {
		if strings.ContainsAny(s, `*?[]{}\`) {
			// A pattern from here on: it may match beneath rel if the
			// literal part so far agrees with rel.
			return true
		}
		if k >= len(rel) {
			return true // literal and longer than rel, and agreeing so far
		}
		if s != rel[k] && foldKey(s) != foldKey(rel[k]) {
			return false
		}
	}
	return false // a literal path that is rel or above it
}

// note is the line the model gets about scope paths held read-only.
func (h *runHold) note() string {
	if len(h.heldList) == 0 && h.capped == 0 {
		return ""
	}
	const show = 10
	list := h.heldList
	more := ""
	if len(list) > show {
		more = fmt.Sprintf(" and %d more", len(list)-show)
		list = list[:show]
	}
	s := "held read-only for this call by the write scope (writes fail with EROFS or EBUSY): " + strings.Join(list, ", ") + more
	if h.capped > 0 {
		s += fmt.Sprintf("; %d more matching paths are checked after the call", h.capped)
	}
	return s
}

// after reads everything again, removes what the child created where it
// must not, and returns each change.
func (h *runHold) after() []Violation {
	var vs []Violation
	for _, e := range h.prot {
		st, err := h.ws.Lstat(e.rel)
		v := Violation{Path: e.rel, Rule: e.why}
		switch {
		case e.err != nil || err != nil:
			// Read before and not after, or the reverse: changed. (Not
			// read either time: nothing to compare.)
			if (e.err == nil) != (err == nil) {
				v.Change = "changed"
				if err != nil {
					v.Error = err.Error()
				}
				vs = append(vs, v)
			}
		case !e.before.Exists && st.Exists:
			v.Change = "created"
			if rerr := h.ws.RemoveAll(e.rel); rerr != nil {
				v.Error = rerr.Error()
			} else {
				v.Undone = true
			}
			vs = append(vs, v)
		case e.held && !e.before.SameFile(st):
			v.Change = "replaced"
			if !st.Exists {
				v.Change = "removed"
			}
			vs = append(vs, v)
		case !e.held && !e.before.Same(st):
			v.Change = "changed"
			vs = append(vs, v)
		}
	}
	if !h.walked {
		return vs
	}
	seen := map[string]bool{}
	var created []Violation
	_, err := h.ws.Walk(func(rel string, typ uint8, stat func() workspace.EntryState) bool {
		if h.protectedCovers(rel) {
			return false
		}
		e, known := h.scope[rel]
		if known && e.whole {
			seen[rel] = true
			if st := stat(); !e.before.SameFile(st) {
				vs = append(vs, Violation{Path: rel, Rule: e.why, Change: "replaced"})
			}
			return false
		}
		v := h.match.match(rel)
		if !restricting(v.Access) {
			return typ == unix.DT_DIR
		}
		if !known {
			created = append(created, Violation{Path: rel, Rule: v.Text, Change: "created"})
			return false
		}
		seen[rel] = true
		st := stat()
		same := e.before.Same(st)
		if e.held || st.IsDir() {
			// A bind holds the content (or a directory's entries are
			// checked one by one): the identity and mode must stay.
			same = e.before.SameFile(st) && e.before.Mode == st.Mode
		}
		if !same {
			c := "changed"
			if !e.before.SameFile(st) {
				c = "replaced"
			}
			vs = append(vs, Violation{Path: rel, Rule: e.why, Change: c})
		}
		return typ == unix.DT_DIR
	})
	if err != nil {
		vs = append(vs, Violation{Path: ".", Rule: "write scope", Change: "could not be checked", Error: err.Error()})
	}
	for rel, e := range h.scope {
		if !seen[rel] && !h.beneathUnseen(rel, seen) {
			vs = append(vs, Violation{Path: rel, Rule: e.why, Change: "removed"})
		}
	}
	for _, c := range created {
		if rerr := h.ws.RemoveAll(c.Path); rerr != nil {
			c.Error = rerr.Error()
		} else {
			c.Undone = true
		}
		vs = append(vs, c)
	}
	return vs
}

// beneathUnseen reports whether rel lies beneath a held-whole directory
// (never walked, so never seen).
func (h *runHold) beneathUnseen(rel string, seen map[string]bool) bool {
	for p, e := range h.scope {
		if e.whole && p != rel && coveredBy(rel, p) {
			return true
		}
	}
	return false
}

// violationReason is the outcome's reason code for vs.
func violationReason(vs []Violation) tools.Reason {
	for _, v := range vs {
		if strings.HasPrefix(v.Rule, "protected (") {
			return tools.ReasonProtectedPath
		}
	}
	return tools.ReasonDeniedPath
}

// violationText is the outcome's message for vs.
func violationText(vs []Violation) string {
	var b strings.Builder
	b.WriteString("the program changed paths that run calls may not change; the call failed:")
	for _, v := range vs {
		b.WriteString("\n- ")
		b.WriteString(v.String())
	}
	return b.String()
}
