package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/b10x/harness/gate"
	"github.com/b10x/harness/internal/termsafe"
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

// recordVersion is run_start's record_version: 2 adds the intent line
// written before each call acts (event "intent") and torn_line_bytes.
const recordVersion = 2

// runStart is the record's first line.
type runStart struct {
	Event         string            `json:"event"`
	RecordVersion int               `json:"record_version"`
	Time          time.Time         `json:"time"`
	Version       string            `json:"version"`
	Command       string            `json:"command"`
	Workspace     string            `json:"workspace"`
	Surface       string            `json:"surface,omitempty"`
	Confinement   any               `json:"confinement"`
	Published     []publishedEntry  `json:"published"`
	Unpublished   map[string]string `json:"unpublished"`
	Policy        policyRecord      `json:"policy"`
	// TornBytes is the length of the torn line the record ended in before
	// this run (see session.tornBytes).
	TornBytes int64 `json:"torn_line_bytes,omitempty"`
}

type publishedEntry struct {
	Name      string `json:"name"`
	Operation string `json:"operation"`
	Risk      string `json:"risk"`
}

type policyRecord struct {
	ApproveUpTo   string   `json:"approve_up_to"`
	Approver      string   `json:"approver"`
	WriteScope    []string `json:"write_scope,omitempty"`
	ScopeAnnounce string   `json:"scope_announce"`
	Hooks         []string `json:"hooks,omitempty"`
	MaxResult     int      `json:"max_result"`
	MaxCalls      int      `json:"max_calls,omitempty"`
	Programs      []string `json:"programs,omitempty"`
}

// runEnd is the record's last line.
type runEnd struct {
	Event   string    `json:"event"`
	Time    time.Time `json:"time"`
	EndedBy string    `json:"ended_by"`
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

	conf, err := confineSession(p, ws, s)
	if err != nil {
		return nil, err
	}

	// The record file is opened before the harness confines its own writes.
	if p.Record != "" {
		f, torn, err := openRecord(p.Record)
		if err != nil {
			return nil, err
		}
		s.recFile = f
		s.tornBytes = torn
		s.closers = append(s.closers, func() { f.Close() })
		if torn > 0 {
			s.notes = append(s.notes, fmt.Sprintf("--record %s ended in a torn line (%d bytes after its last newline, from a harness that stopped mid-write); this run starts on a fresh line", p.Record, torn))
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

	pol := policyRecord{ApproveUpTo: ceiling.String(), Approver: approver.Name(), WriteScope: p.WriteScope,
		ScopeAnnounce: p.ScopeAnnounce, Hooks: p.Hook, MaxResult: int(p.MaxResult), MaxCalls: p.MaxCalls, Programs: conf.programNames}
	var pub []publishedEntry
	for _, en := range g.Published() {
		pub = append(pub, publishedEntry{en.Name, en.Operation, en.Risk.String()})
	}
	if err := s.rec.Write(runStart{Event: "run_start", RecordVersion: recordVersion, TornBytes: s.tornBytes, Time: s.start.UTC(), Version: version, Command: command,
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

// openRecord opens the run record for appending. It refuses, in one line,
// anything but a regular file (a FIFO would block the harness at start or at
// its first line, a device would swallow the record), without blocking on a
// FIFO that has no reader. When the file ends in a torn line (a harness
// killed or a disk filled mid-write), it appends a newline, so this run's
// lines start fresh, and returns the torn line's length.
func openRecord(path string) (*os.File, int64, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND|syscall.O_NONBLOCK, 0o600)
	if err != nil {
		return nil, 0, usagef("--record %s: %v", path, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, usagef("--record %s: %v", path, err)
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, 0, usagef("--record %s: not a regular file (%s); the record must be a regular file", path, fileKind(fi.Mode()))
	}
	if err := unix.SetNonblock(int(f.Fd()), false); err != nil {
		f.Close()
		return nil, 0, usagef("--record %s: %v", path, err)
	}
	size := fi.Size()
	if size == 0 {
		return f, 0, nil
	}
	// The torn line's length: read back from the end to the last newline.
	var torn int64
	buf := make([]byte, 64<<10)
	for off := size; off > 0; {
		n := int64(len(buf))
		if off < n {
			n = off
		}
		off -= n
		if _, err := f.ReadAt(buf[:n], off); err != nil {
			f.Close()
			return nil, 0, usagef("--record %s: reading its end: %v", path, err)
		}
		if i := bytes.LastIndexByte(buf[:n], '\n'); i >= 0 {
			torn = size - (off + int64(i) + 1)
			break
		}
		torn = size - off
	}
	if torn > 0 {
		if _, err := f.Write([]byte("\n")); err != nil {
			f.Close()
			return nil, 0, fmt.Errorf("--record %s: it ends in a torn line and a newline could not be added after it: %v", path, err)
		}
	}
	return f, torn, nil
}

func fileKind(m os.FileMode) string {
	switch {
	case m&os.ModeNamedPipe != 0:
		return "a FIFO"
	case m&os.ModeCharDevice != 0:
		return "a character device"
	case m&os.ModeDevice != 0:
		return "a block device"
	case m&os.ModeSocket != 0:
		return "a socket"
	case m.IsDir():
		return "a directory"
	}
	return "mode " + m.String()
}

// end writes run_end and closes the session.
func (s *session) end(endedBy string) {
	if s.rec != nil {
		_ = s.rec.Write(runEnd{Event: "run_end", Time: time.Now().UTC(), EndedBy: endedBy})
	}
	s.Close()
}

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
