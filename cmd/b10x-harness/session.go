package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/b10x/harness/gate"
	"github.com/b10x/harness/internal/termsafe"
	"github.com/b10x/harness/record"
	"github.com/b10x/harness/surface"
	"github.com/b10x/harness/tools"
)

// session is one policy made real: an open workspace, the confinement the
// host holds, a gate and its record.
type session struct {
	ws      *tools.Workspace
	gate    *gate.Gate
	rec     *gate.Recorder
	recFile *os.File
	// tornBytes is the length of the torn line the record ended in when
	// it was opened (0: none); a newline was appended after it.
	tornBytes int64
	closers   []func()
	start     time.Time
	notes     []string // said once on stderr at start
}

func (s *session) Close() {
	for i := len(s.closers) - 1; i >= 0; i-- {
		s.closers[i]()
	}
	s.closers = nil
}

// openSession turns policy flags into a gate. command names the
// subcommand for the record.
func openSession(p *policyFlags, command string, kind surface.Kind, e *env) (*session, error) {
	s := &session{start: time.Now()}
	ok := false
	defer func() {
		if !ok {
			s.Close()
		}
	}()

	ceiling, err := gate.ParseRisk(p.ApproveUpTo)
	if err != nil {
		return nil, usageError{err}
	}
	var rules []gate.ScopeRule
	for _, r := range p.WriteScope {
		rule, err := gate.ParseScopeRule(r)
		if err != nil {
			return nil, usageError{err}
		}
		rules = append(rules, rule)
	}
	var hooks []gate.Hook
	for _, h := range p.Hook {
		hook, err := gate.ParseHook(h)
		if err != nil {
			return nil, usageError{err}
		}
		// The program is found once, now, from the harness's working
		// directory and PATH, as a shell would: a relative path means the
		// same thing here as where the user typed it (hooks run in the
		// workspace), and a missing program is a usage error at start, not
		// a refusal of every call.
		prog, err := exec.LookPath(hook.Argv[0])
		if err == nil {
			prog, err = filepath.Abs(prog)
		}
		if err != nil {
			return nil, usagef("--hook %s: %v", h, err) // escaped where it is printed (realMain)
		}
		hook.Argv[0] = prog
		hook.Timeout = p.HookTimeout
		hooks = append(hooks, hook)
	}
	if p.MaxCalls < 0 {
		return nil, usagef("--max-calls %d: must not be negative", p.MaxCalls)
	}
	if p.MaxResult <= 0 {
		return nil, usagef("--max-result must be positive")
	}
	if _, err := p.limitFlags.limits(); err != nil {
		return nil, err // checked here too: without a program they are not used, but still wrong
	}

	ws, err := tools.OpenWorkspace(p.Workspace)
	if err != nil {
		return nil, usagef("--workspace %s: %v", p.Workspace, err)
	}
	s.ws = ws
	s.closers = append(s.closers, func() { ws.Close() })

	approver, note, err := chooseApprover(p, ceiling, e)
	if err != nil {
		return nil, err
	}
	if note != "" {
		s.notes = append(s.notes, note)
	}

	conf, err := confineSession(p, hooks, ws, s)
	if err != nil {
		return nil, err
	}

	// The record file is opened before the harness confines its own writes.
	if p.Record != "" {
		f, torn, err := record.Open(p.Record)
		if err != nil {
			var nr *record.NotRegularError
			if errors.As(err, &nr) {
				return nil, usagef("--record %s", err)
			}
			if _, ok := err.(*os.PathError); ok {
				return nil, usagef("--record: %v", err)
			}
			return nil, fmt.Errorf("--record %v", err)
		}
		s.recFile = f
		s.tornBytes = torn
		s.closers = append(s.closers, func() { f.Close() })
		if torn > 0 {
			s.notes = append(s.notes, fmt.Sprintf("--record %s ended in a torn line (%d bytes after its last newline: a write cut short, by a full disk for one); this run starts on a fresh line", p.Record, torn))
		}
	}
	s.rec = gate.NewRecorder(nil)
	if s.recFile != nil {
		s.rec = gate.NewRecorder(s.recFile)
	}
	protected := conf.protected
	if p.Record != "" {
		if rel, inside := relInside(ws.Dir(), p.Record); inside {
			protected = append(protected, rel)
		}
	}
	for _, h := range hooks {
		if rel, inside := relInside(ws.Dir(), h.Argv[0]); inside {
			protected = append(protected, rel)
		}
	}
	for _, p := range p.protect {
		if rel, inside := relInside(ws.Dir(), p); inside {
			protected = append(protected, rel)
		}
	}

	if err := conf.restrict(); err != nil {
		return nil, err
	}
	if afterRestrictForTest != nil {
		afterRestrictForTest(ws.Dir(), e.stderr)
	}
	if conf.tmpDir != "" {
		for i := range hooks {
			hooks[i].Env = append(os.Environ(), "TMPDIR="+conf.tmpDir)
		}
	}

	g, err := gate.New(gate.Config{
		Workspace:   ws,
		Tools:       conf.tools,
		Host:        conf.host,
		ApproveUpTo: ceiling,
		Approver:    approver,
		WriteScope:  rules,
		Protected:   protected,
		Hooks:       hooks,
		MaxResult:   int(p.MaxResult),
		MaxCalls:    p.MaxCalls,
		CallTimeout: callTimeout(p.Timeout),
		Allow:       p.allow,
		Recorder:    s.rec,
	})
	if err != nil {
		return nil, err
	}
	s.gate = g

	chosen := p.Approve
	if p.Yes {
		chosen = "all"
	}
	pol := record.Policy{ApproveUpTo: ceiling.String(), Approve: chosen, Approver: approver.Name(), WriteScope: p.WriteScope,
		ScopeAnnounce: p.ScopeAnnounce, Hooks: p.Hook, MaxResult: int(p.MaxResult), MaxCalls: p.MaxCalls, Programs: conf.programNames}
	var pub []record.Published
	for _, en := range g.Published() {
		pub = append(pub, record.Published{Name: en.Name, Operation: en.Operation, Risk: en.Risk.String()})
	}
	if err := s.rec.Write(record.RunStart{Event: "run_start", RecordVersion: record.Version, TornBytes: s.tornBytes, Time: s.start.UTC(), Version: version, Command: command,
		Workspace: ws.Dir(), Surface: string(kind), Confinement: conf.record, Published: pub, Unpublished: g.Unpublished(), Policy: pol}); err != nil {
		return nil, err
	}
	// The approval fallback matters only when something above the ceiling
	// is published; with the read tools alone there is nothing to ask.
	// A call names its one entry: the note is said only when that entry
	// would ask (a plain file_read never does).
	above := false
	for _, en := range g.Published() {
		if p.onlyTool == "" || en.Name == p.onlyTool {
			above = above || en.Risk > ceiling
		}
	}
	for _, n := range s.notes {
		if !above && strings.HasPrefix(n, "no terminal") {
			continue
		}
		fmt.Fprintln(e.stderr, "b10x-harness: "+termsafe.Message(n))
	}
	ok = true
	return s, nil
}

// end writes run_end and closes the session.
func (s *session) end(endedBy string) {
	if s.rec != nil {
		_ = s.rec.Write(record.RunEnd{Event: "run_end", Time: time.Now().UTC(), EndedBy: endedBy})
	}
	s.Close()
}

// afterRestrictForTest is nil in the harness. The test binary sets it to
// stand for a broken path resolver: code of the harness that, once the
// session's own domain holds, reads what no tool should (see
// TestHarnessCannotReadBesideWorkspace).
var afterRestrictForTest func(workspace string, stderr io.Writer)

// relInside reports p's path relative to root when p lies beneath it.
func relInside(root, p string) (string, bool) {
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
