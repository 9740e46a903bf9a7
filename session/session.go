package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/b10x/harness/confine"
	"github.com/b10x/harness/gate"
	"github.com/b10x/harness/policy"
	"github.com/b10x/harness/record"
	"github.com/b10x/harness/surface"
	"github.com/b10x/harness/workspace"
)

// Options are how a session reports and whom it asks; the zero value
// discards notes and chooses the approver from the policy.
type Options struct {
	// Command names what opened the session, for the record ("call",
	// "run", "mcp").
	Command string
	// Version is the harness's version, for the record.
	Version string
	// Logf receives the notes a session says once, at start (what this
	// host lacks, an approval fallback, stale cgroup leaves removed). Nil:
	// discarded. The text may quote file names: render it safely.
	Logf func(format string, args ...any)
	// Name words a policy key in the notes, as the session's user sets
	// it: cmd gives the key's flag (--approve-up-to). Nil: the key
	// itself (approve_up_to).
	Name func(key string) string
	// Approver decides calls above the ceiling instead of the one the
	// policy's approve mode chooses (a terminal for auto and prompt). An
	// MCP server asks its client; nil: the policy decides.
	Approver gate.Approver
	// Prestart keeps run sandboxes started ahead of the next run calls
	// (spawn.BrokerOptions.Prestart): for sessions whose calls come from
	// a model, which takes its turn between two calls. As many are kept
	// as max_parallel lets run at once, at most spawn.MaxPrestartPool
	// (decision 0092). A session of one call gains nothing from it.
	// False: every call starts cold.
	Prestart bool
}

// Session is one policy made real: an open workspace, the confinement the
// host holds, the harness's own domain applied, a gate, a surface and a
// record. It is safe for concurrent Calls (the gate is); End and Close
// must be called once, after the last call.
type Session struct {
	policy   Policy
	host     *record.RunsOn // run_start's, read at start
	ws       *workspace.Workspace
	gate     *gate.Gate
	surface  *surface.Surface
	rec      *gate.Recorder
	conf     *confinement
	cleanup  cleanup
	start    time.Time
	notes    []note
	approver gate.Approver
	prestart bool
	slots    *runSlots       // the run calls' slots (max_parallel)
	wsCase   gate.CaseReport // whether the workspace folds case (decision 0073)
}

// cleanup undoes what Open did, last first.
type cleanup []func()

func (c *cleanup) add(f func()) { *c = append(*c, f) }

func (c *cleanup) run() {
	for i := len(*c) - 1; i >= 0; i-- {
		(*c)[i]()
	}
	*c = nil
}

// Open makes p real: it validates p (and refuses a user defaults file
// inside the workspace, as UseUserDefaults does), opens the workspace,
// probes the host, confines the harness's own writes and reads (after
// which nothing beyond the workspace is readable or writable by this
// process), builds the tools the host can confine, the gate and the
// surface, and writes the record's run_start. An error is an *Error when
// the policy cannot be used as given (nothing was started); any other
// error is a failure of the host. The process stays confined after Close:
// open one session per process.
func Open(ctx context.Context, p Policy, o Options) (*Session, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if err := checkUserDefaults(p.userDefaults, p.Workspace, o.name); err != nil {
		return nil, err
	}
	// host is read before anything confines the harness: its own
	// Landlock domain hides /proc/self from it.
	s := &Session{policy: p, start: time.Now(), prestart: o.Prestart, host: hostFacts()}
	ok := false
	defer func() {
		if !ok {
			s.cleanup.run()
		}
	}()
	rules, reads, err := scopeRules(p)
	if err != nil {
		return nil, err
	}
	hooks, err := findHooks(p)
	if err != nil {
		return nil, err
	}
	ws, err := workspace.Open(p.Workspace)
	if err != nil {
		return nil, &Error{Key: "workspace", Value: p.Workspace, Err: err, Usage: true}
	}
	s.ws = ws
	s.cleanup.add(func() { ws.Close() })
	if err := s.checkCase(p); err != nil {
		return nil, err
	}

	approver := o.Approver
	if approver == nil {
		var n string
		if approver, n, err = chooseApprover(p, o.name); err != nil {
			return nil, err
		}
		if n != "" {
			s.notes = append(s.notes, note{text: n, ifAbove: true})
		}
	}
	s.approver = approver

	conf, err := confineSession(ctx, &s.policy, hooks, ws, s)
	if err != nil {
		return nil, err
	}
	s.conf = conf

	// The record file is opened before the harness confines its own writes.
	torn, err := s.openRecord(p.Record)
	if err != nil {
		return nil, err
	}
	protected := protectedPaths(ws.Dir(), p, hooks, conf.protected)

	if err := conf.restrict(); err != nil {
		return nil, err
	}
	if AfterRestrictForTest != nil {
		AfterRestrictForTest(ws.Dir())
	}
	if conf.tmpDir != "" {
		for i := range hooks {
			hooks[i].Env = append(os.Environ(), "TMPDIR="+conf.tmpDir)
		}
	}

	if err := s.build(p, conf, rules, reads, protected, hooks); err != nil {
		return nil, err
	}
	if err := s.rec.Write(s.runStart(o, torn)); err != nil {
		return nil, err
	}
	s.sayNotes(p, o)
	if o.Prestart {
		// A model's session: its first run call finds the workspace's
		// directories read already.
		s.gate.WarmRunHold()
	}
	ok = true
	return s, nil
}

// scopeRules parses the policy's write-scope rules (checked by Validate)
// and its read-scope rules, followed by the default read scope.
func scopeRules(p Policy) (writes, reads []gate.ScopeRule, err error) {
	for _, r := range p.WriteScope {
		rule, _ := gate.ParseScopeRule(r) // checked by Validate
		writes = append(writes, rule)
	}
	reads, err = gate.ReadScopeRules(p.ReadScope)
	if err != nil {
		return nil, nil, &Error{Key: "read_scope", Err: err, Usage: true}
	}
	return writes, reads, nil
}

// openRecord opens the record file, when the policy names one, and makes
// the session's recorder (one that writes nothing without a file). It
// returns the bytes of a torn last line it found, which the session says
// in a note and run_start records.
func (s *Session) openRecord(path string) (torn int64, err error) {
	s.rec = gate.NewRecorder(nil)
	if path == "" {
		return 0, nil
	}
	f, torn, err := openRecordFile(path)
	if err != nil {
		return 0, err
	}
	s.cleanup.add(func() { f.Close() })
	if torn > 0 {
		s.note(fmt.Sprintf("the record %s ended in a torn line (%d bytes after its last newline: a write cut short, by a full disk for one); this run starts on a fresh line", path, torn))
	}
	s.rec = gate.NewRecorder(f)
	return torn, nil
}

// protectedPaths adds to what the confinement protects the workspace paths
// of the record, the hooks' programs and the policy's protect list: a call
// must not change what decides or proves the session.
func protectedPaths(dir string, p Policy, hooks []gate.Hook, protected []string) []string {
	paths := []string{p.Record}
	for _, h := range hooks {
		paths = append(paths, h.Argv[0])
	}
	paths = append(paths, p.Protect...)
	if ud := policy.UserDefaultsPath(os.Getenv); ud != "" {
		// Whether or not the file is there or was read: a model must not
		// write the policy of a later session, whose workspace may lie
		// elsewhere.
		paths = append(paths, ud)
	}
	for _, path := range paths {
		if path == "" {
			continue
		}
		if rel, inside := RelInside(dir, path); inside {
			protected = append(protected, rel)
		}
	}
	return protected
}

// build makes the session's gate and surface over the confined tools.
// Every run call of the session, whichever surface or MCP client it comes
// by, takes one of max_parallel slots (parallel.go).
func (s *Session) build(p Policy, conf *confinement, writes, reads []gate.ScopeRule, protected []string, hooks []gate.Hook) error {
	s.slots = newRunSlots(p.MaxParallel)
	g, err := gate.New(gate.Config{
		Workspace:   s.ws,
		Tools:       withSlots(conf.tools, s.slots),
		Host:        conf.host,
		ApproveUpTo: p.risk(),
		Approver:    s.approver,
		WriteScope:  writes,
		ReadScope:   reads,
		Protected:   protected,
		Hooks:       hooks,
		MaxResult:   int(p.MaxResult),
		MaxCalls:    p.MaxCalls,
		CallTimeout: CallTimeout(p.Run.Timeout),
		Allow:       p.Narrow,
		Recorder:    s.rec,
	})
	if err != nil {
		return err
	}
	s.gate = g
	s.cleanup.add(g.Close)
	sf, err := surface.New(p.kind(), g, surface.Options{SilentScope: p.ScopeAnnounce == "silent"})
	if err != nil {
		return &Error{Key: "surface", Err: err, Usage: true}
	}
	s.surface = sf
	return nil
}

// sayNotes logs the session's notes, unless the policy is quiet. The
// approval fallback matters only when something above the ceiling is
// published; with the read tools alone there is nothing to ask. A call
// names its one entry: the note is said only when that entry would ask (a
// plain file_read never does).
func (s *Session) sayNotes(p Policy, o Options) {
	if o.Logf == nil || p.Quiet {
		return
	}
	above := false
	for _, en := range s.gate.Published() {
		if p.OnlyTool == "" || en.Name == p.OnlyTool {
			above = above || en.Risk > p.risk()
		}
	}
	for _, n := range s.notes {
		if !above && n.ifAbove {
			continue
		}
		o.Logf("%s", n.text)
	}
}

// findHooks parses the policy's hooks and finds each program once, now,
// from the working directory and PATH, as a shell would: a relative path
// means the same thing here as where the user typed it (hooks run in the
// workspace), and a missing program is a usage error at start, not a
// refusal of every call.
func findHooks(p Policy) ([]gate.Hook, error) {
	var hooks []gate.Hook
	for _, h := range p.Hooks {
		hook, err := gate.ParseHook(h)
		if err != nil {
			return nil, &Error{Key: "hook", Err: err, Usage: true}
		}
		prog, err := exec.LookPath(hook.Argv[0])
		if err == nil {
			prog, err = filepath.Abs(prog)
		}
		if err != nil {
			return nil, &Error{Key: "hook", Value: h, Err: err, Usage: true} // escaped where it is printed
		}
		hook.Argv[0] = prog
		hook.Timeout = p.HookTimeout
		hooks = append(hooks, hook)
	}
	return hooks, nil
}

// runStart is the record's first line of this session.
func (s *Session) runStart(o Options, torn int64) record.RunStart {
	p, g := s.policy, s.gate
	pol := record.Policy{ApproveUpTo: p.ApproveUpTo.String(), Approve: string(p.Approve), Approver: s.approver.Name(), WriteScope: p.WriteScope,
		ScopeAnnounce: string(p.ScopeAnnounce), Hooks: p.Hooks, MaxResult: int(p.MaxResult), MaxCalls: p.MaxCalls, Programs: s.conf.programNames}
	if eff, err := json.Marshal(p.Effective()); err == nil {
		pol.Effective = eff
	}
	if p.File != nil {
		pol.File = &record.PolicyFile{Path: p.File.Path, SHA256: p.File.SHA256}
	}
	if u := p.UserDefaults; u != nil {
		pol.UserDefaults = &record.PolicyFile{Path: u.Path, SHA256: u.SHA256}
	}
	var pub []record.Published
	for _, en := range g.Published() {
		pub = append(pub, record.Published{Name: en.Name, Operation: en.Operation, Risk: en.Risk.String()})
	}
	return record.RunStart{Event: "run_start", RecordVersion: record.Version, TornBytes: torn, Time: s.start.UTC(), Version: o.Version, Command: o.Command,
		Workspace: s.ws.Dir(), WorkspaceCase: s.wsCase.Record(), Surface: string(p.Surface), Confinement: s.conf.record, Published: pub, Unpublished: g.Unpublished(), Policy: pol, RunsOn: s.host}
}

// checkCase finds out whether the workspace looks names up without regard
// to case. The gate matches protected paths and restricting write-scope
// rules with case folded whatever the answer (decision 0073); what it
// cannot match is a vfat-like filesystem's 8.3 short aliases beyond .git
// and .b10x, so strict refuses such a workspace. The answer is said once
// and recorded.
func (s *Session) checkCase(p Policy) error {
	cr, err := gate.DetectCase(s.ws.Dir())
	if err != nil {
		cr = gate.CaseReport{Dir: s.ws.Dir(), Casing: gate.CaseUnknown, Why: err.Error()}
	}
	s.wsCase = cr
	switch {
	case cr.Casing == gate.CaseInsensitive && cr.ShortNames && p.mode() == confine.Strict:
		return policyErr("workspace", p.Workspace, "is on %s, which looks names up without regard to case and gives names 8.3 short aliases (%s): the gate refuses every other case spelling of protected and restricted paths, but not their short aliases beyond .git and .b10x, so confine strict refuses it; use a workspace on another filesystem, or confine auto", cr.FS, cr.Why)
	case cr.Casing == gate.CaseInsensitive:
		s.note(fmt.Sprintf("the workspace %s looks names up without regard to case (%s): protected paths and denied or partial-only write-scope rules are matched with case folded, allow rules only as written (decision 0073)", s.ws.Dir(), cr.Why))
	case cr.Casing == gate.CaseUnknown:
		s.note(fmt.Sprintf("could not tell whether the workspace %s folds case (%s); protected paths and denied or partial-only write-scope rules are matched with case folded either way", s.ws.Dir(), cr.Why))
	}
	return nil
}

// Gate is the session's gate: its publication, its configuration.
func (s *Session) Gate() *gate.Gate { return s.gate }

// Surface is the published tools in the shape the policy names.
func (s *Session) Surface() *surface.Surface { return s.surface }

// Policy is the policy the session was opened with.
func (s *Session) Policy() Policy { return s.policy }

// Workspace is the workspace's canonical path.
func (s *Session) Workspace() string { return s.ws.Dir() }

// Network says run calls of this session reach the host's network.
func (s *Session) Network() bool {
	_, run := s.gate.Tool("run")
	return run && s.policy.Run.NetMode() != "none"
}

// Call passes one call, in the shape of the session's surface, through the
// gate: the one way a session acts.
func (s *Session) Call(ctx context.Context, name string, args json.RawMessage) gate.Outcome {
	return s.surface.Dispatch(ctx, name, args)
}

// End writes run_end (endedBy: "completed", "cancelled", ...) and closes
// the session.
func (s *Session) End(endedBy string) {
	if s.rec != nil {
		_ = s.rec.Write(record.RunEnd{Event: "run_end", Time: time.Now().UTC(), EndedBy: endedBy})
	}
	s.Close()
}

// Close releases what Open started (the run broker, cgroups, the hooks'
// temporary directory) without writing run_end. It is safe to call twice.
func (s *Session) Close() { s.cleanup.run() }

// AfterRestrictForTest is nil in the harness. A test binary sets it to
// stand for a broken path resolver: code of the harness that, once the
// session's own domain holds, reads what no tool should (see
// TestHarnessCannotReadBesideWorkspace).
var AfterRestrictForTest func(workspace string)

// RelInside reports p's path relative to root when p lies beneath it.
func RelInside(root, p string) (string, bool) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", false
	}
	if r, err := filepath.EvalSymlinks(filepath.Dir(abs)); err == nil {
		abs = filepath.Join(r, filepath.Base(abs))
	}
	rel, err := filepath.Rel(root, abs)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") || rel == "." {
		return "", false
	}
	return rel, true
}

// CallTimeout is the deadline of each tool call: the policy's timeout, or
// the gate's default.
func CallTimeout(d time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return gate.DefaultCallTimeout
}

// openRecordFile opens the record file path for appending (record.Open):
// a *Error of the record setting when it cannot be, a usage one when the
// path is wrong rather than the host.
func openRecordFile(path string) (*os.File, int64, error) {
	f, n, err := record.Open(path)
	if err != nil {
		var nr *record.NotRegularError
		if errors.As(err, &nr) {
			return nil, 0, &Error{Key: "record", Err: err, Usage: true, Phrase: true}
		}
		if _, ok := err.(*os.PathError); ok {
			return nil, 0, &Error{Key: "record", Err: err, Usage: true}
		}
		return nil, 0, &Error{Key: "record", Err: err, Phrase: true}
	}
	return f, n, nil
}
