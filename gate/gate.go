package gate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/b10x/harness/record"
	"github.com/b10x/harness/tools"
	"github.com/b10x/harness/workspace"
)

// Status is how a call ended (the record's statuses, see record.Status).
type Status = record.Status

// Statuses. Refused: a gate step said no before anything ran (the tool never
// acted). Failed: the tool ran, or was attempted, and did not succeed, or its
// result was unusable. Both are errors to the model; only Executed is success.
const (
	Executed = record.Executed
	Refused  = record.Refused
	Failed   = record.Failed
)

// DefaultMaxResult is the result cap when Config.MaxResult is zero.
const DefaultMaxResult = 256 << 10

// DefaultMaxArgs is the argument size cap when Config.MaxArgs is zero.
const DefaultMaxArgs = 8 << 20

// DefaultCallTimeout is the deadline of each call's execution when
// Config.CallTimeout is zero.
const DefaultCallTimeout = 2 * time.Minute

// runGrace is how long after Config.CallTimeout the gate's own deadline of a
// run call passes: run enforces the same limit itself, by killing the
// program's whole tree and returning what it printed; the gate's deadline
// is the backstop that holds when it does not.
const runGrace = 5 * time.Second

// MaxMessage caps each message, cause and step detail in the record: an
// error can quote what the model sent (a 7 MB invalid pattern) and the
// record needs none of it three times. An outcome's own message is capped
// at Config.MaxResult, like a result (a failed run call's message carries
// the program's output), but never below MaxMessage. A longer text keeps
// its head and says how much was cut.
const MaxMessage = 4 << 10

// Host says which capability classes the host's confinement holds, and why
// not when it does not. The zero value holds nothing: only the read tools can
// be published.
type Host struct {
	ConfinedWorkspace bool
	WorkspaceWhy      string // why the workspace is not confined
	ConfinedExecution bool
	ExecutionWhy      string // why execution is not confined
	Programs          int    // number of allow_program declarations
}

// Config configures a Gate. The zero value of each field is documented and
// safe: no tools, nothing published, deny every call above low, 256 KiB cap.
type Config struct {
	Workspace   *workspace.Workspace // required
	Tools       []tools.Tool         // implementations; an entry without one is unpublished
	Host        Host
	ApproveUpTo Risk        // highest risk that runs unattended; zero value: Low
	Approver    Approver    // decides above the ceiling; nil: DenyAll
	WriteScope  []ScopeRule // ordered, first match wins; none: unrestricted
	// ReadScope is read_scope's rules, DefaultReadScope included
	// (ReadScopeRules): ordered, first match wins; none: every path's
	// content may be shown (readscope.go).
	ReadScope   []ScopeRule
	Protected   []string      // extra protected workspace-relative paths (record file, hooks)
	Hooks       []Hook        // pre-call programs, run in order
	MaxResult   int           // result cap in bytes; 0: DefaultMaxResult
	MaxArgs     int           // argument cap in bytes; 0: DefaultMaxArgs
	MaxCalls    int           // calls per run; 0: unlimited
	CallTimeout time.Duration // deadline of each call's execution step; 0: DefaultCallTimeout
	Allow       []string      // named-agent narrowing: nil means no narrowing
	Recorder    *Recorder     // nil: no record
	Now         func() time.Time
}

// Gate is the chokepoint. It is safe for concurrent use.
type Gate struct {
	cfg         Config
	tools       map[string]tools.Tool
	published   map[string]bool
	unpublished map[string]string
	reads       readScope
	masks       maskListings // the masks' walk's findings, kept across run calls

	mu       sync.Mutex
	seq      int64
	calls    int
	standing map[string]bool
	broken   error
}

// Outcome is what a call produced. Message is for the model; it never holds
// internal causes (those go to the record).
type Outcome struct {
	Status  Status         `json:"status"`
	Entry   string         `json:"entry"`
	Reason  tools.Reason   `json:"reason,omitempty"`
	Message string         `json:"message,omitempty"`
	Result  string         `json:"result,omitempty"`
	Meta    map[string]any `json:"meta,omitempty"`
	Seq     int64          `json:"seq"`
}

// IsError reports whether the model must see this outcome as an error.
func (o Outcome) IsError() bool { return o.Status != Executed }

// New builds a gate and decides publication.
func New(cfg Config) (*Gate, error) {
	if cfg.Workspace == nil {
		return nil, errors.New("gate: no workspace")
	}
	if cfg.Approver == nil {
		cfg.Approver = DenyAll{}
	}
	if cfg.MaxResult <= 0 {
		cfg.MaxResult = DefaultMaxResult
	}
	if cfg.MaxArgs <= 0 {
		cfg.MaxArgs = DefaultMaxArgs
	}
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = DefaultCallTimeout
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	g := &Gate{cfg: cfg, tools: map[string]tools.Tool{}, published: map[string]bool{}, unpublished: map[string]string{}, standing: map[string]bool{},
		reads: readScope{newScope(cfg.ReadScope)}}
	for _, t := range cfg.Tools {
		if _, ok := Lookup(t.Name()); !ok {
			return nil, fmt.Errorf("gate: tool %q is not in the catalogue", t.Name())
		}
		g.tools[t.Name()] = t
	}
	var allow map[string]bool
	if cfg.Allow != nil {
		allow = map[string]bool{}
		for _, n := range cfg.Allow {
			if _, ok := Lookup(n); !ok {
				return nil, fmt.Errorf("gate: narrowing names %q, which is not a catalogue entry", n)
			}
			allow[n] = true
		}
	}
	for _, e := range Catalogue {
		why := g.availability(e)
		if why == "" && allow != nil && !allow[e.Name] {
			why = "not among the named agent's tools"
		}
		if why == "" {
			g.published[e.Name] = true
		} else {
			g.unpublished[e.Name] = why
		}
	}
	return g, nil
}

// availability says why g does not publish e ("" when it does): what
// the host withholds, else a tool with no implementation.
func (g *Gate) availability(e Entry) string {
	if why := g.cfg.Host.Withholds(e); why != "" {
		return why
	}
	if _, ok := g.tools[e.Name]; !ok {
		return "no implementation was configured"
	}
	return ""
}

// Withholds says why a gate on h does not publish e for what the host
// gives ("" when h gives all e needs): the reason a gate's Unpublished and
// doctor's report both give.
func (h Host) Withholds(e Entry) string {
	// The host's reason first: it is the true one whatever else is
	// missing (a session that cannot confine run configures no
	// implementation for it, and may not have looked at its programs).
	switch e.Needs {
	case ConfinedWorkspace:
		if !h.ConfinedWorkspace {
			return "needs a confined workspace: " + orUnknown(h.WorkspaceWhy)
		}
	case ConfinedExecution:
		if !h.ConfinedExecution && h.ExecutionWhy != "" {
			return "needs confined execution: " + h.ExecutionWhy
		}
		if h.Programs == 0 {
			// The spec's rule, whatever the host: an empty program set
			// publishes no run tool.
			return "no program is allowed (the allow_program setting is empty)"
		}
		if !h.ConfinedExecution {
			return "needs confined execution: " + orUnknown(h.ExecutionWhy)
		}
	}
	return ""
}

func orUnknown(s string) string {
	if s == "" {
		return "not available"
	}
	return s
}

// Published lists the published entries in catalogue order.
func (g *Gate) Published() []Entry {
	var out []Entry
	for _, e := range Catalogue {
		if g.published[e.Name] {
			out = append(out, e)
		}
	}
	return out
}

// Unpublished maps each unpublished entry to why it is not published.
func (g *Gate) Unpublished() map[string]string {
	out := make(map[string]string, len(g.unpublished))
	for k, v := range g.unpublished {
		out[k] = v
	}
	return out
}

// Tool returns the implementation of a published entry.
func (g *Gate) Tool(name string) (tools.Tool, bool) {
	if !g.published[name] {
		return nil, false
	}
	t, ok := g.tools[name]
	return t, ok
}

// Scope returns the write-scope rules (for announcing them to the model).
func (g *Gate) Scope() []ScopeRule { return g.cfg.WriteScope }

// Config returns the gate's configuration with defaults filled in.
func (g *Gate) Config() Config { return g.cfg }

// Call is one tool call as a surface resolved it.
type Call struct {
	Surface string          // the surface's name, as the record carries it: "flat" or "verbs"
	Via     string          // "tool_invoke" when resolved from the verbs envelope
	Name    string          // the resolved catalogue entry name
	Args    json.RawMessage // the arguments object

	// Unpresented marks a call to a name the surface never showed the model
	// (a catalogue entry called directly under the verbs surface). It is
	// refused as unpublished.
	Unpresented bool

	// Ignored lists, as NAME=VALUE, arguments the caller removed from Args
	// before the gate because a client adds them to every tool and no tool
	// takes them (Gemini CLI's wait_for_previous, under mcp). The record
	// says so: a first step "client", verdict pass, detail "ignored ...".
	// nil: nothing was removed.
	Ignored []string

	// Progress, when not nil, is told the output a run call's program has
	// produced so far as it arrives (tools.Report.Progress): an MCP
	// client's progress notifications.
	Progress func(outBytes int64)
}

// clientStep is the record's step for c.Ignored, if any.
func clientStep(c Call) []StepVerdict {
	if len(c.Ignored) == 0 {
		return nil
	}
	return []StepVerdict{{Step: "client", Verdict: "pass", Detail: capText("ignored "+strings.Join(c.Ignored, ", ")+" (added by the client to every tool; no tool takes it)", MaxMessage)}}
}

// Record writes the record line of a call a surface decided itself
// (tool_search, tool_describe, a malformed tool_invoke envelope) and returns
// the outcome with its sequence number. Such calls never act on the
// workspace and are not counted against the call budget.
func (g *Gate) Record(c Call, out Outcome) Outcome {
	g.mu.Lock()
	g.seq++
	out.Seq = g.seq
	g.mu.Unlock()
	out.Entry = c.Name
	out.Message = capText(out.Message, g.messageCap())
	verdict := "pass"
	if out.Status != Executed {
		verdict = "refuse"
	}
	rec := CallRecord{Intent: record.Intent{Event: "call", Seq: out.Seq, Time: g.cfg.Now().UTC(), Surface: c.Surface, Via: c.Via, Entry: c.Name,
		Args: record.Args(c.Args), Steps: append(clientStep(c), StepVerdict{Step: "surface", Verdict: verdict, Detail: capText(out.Message, MaxMessage)})},
		Status: out.Status, Reason: string(out.Reason), Message: capText(out.Message, MaxMessage), Meta: out.Meta, ResultSize: len(out.Result)}
	if err := g.cfg.Recorder.Write(rec); err != nil {
		g.setBroken(err)
		return unrecorded(out, false, err)
	}
	return out
}

// Call passes one call through every gate step and records it. It never
// returns an Executed outcome for anything but a tool that ran and produced
// a usable result.
//
// A call that reaches execution is recorded twice: an intent line (event
// "intent": the entry, its arguments and every verdict so far) is written
// before the tool acts, and the call line (event "call", the same fields
// and the outcome) after; so a harness killed at any moment leaves no
// effect without a line. A call refused before execution has only its
// call line. When a record line cannot be written, the call does not run
// (intent) or its outcome stands with a note saying so (call line), and
// every later call is refused with ReasonRecordFailed.
func (g *Gate) Call(ctx context.Context, c Call) Outcome {
	start := g.cfg.Now()
	g.mu.Lock()
	g.seq++
	seq := g.seq
	g.calls++
	ncalls := g.calls
	broken := g.broken
	g.mu.Unlock()

	rec := CallRecord{Intent: record.Intent{Event: "call", Seq: seq, Time: start.UTC(), Surface: c.Surface, Via: c.Via, Entry: c.Name, Args: record.Args(c.Args),
		Steps: append(make([]StepVerdict, 0, 8), clientStep(c)...)}}
	acted := false
	out := g.decide(ctx, c, ncalls, broken, &rec, &acted)
	out.Seq, out.Entry = seq, c.Name
	out.Message = capText(out.Message, g.messageCap())

	rec.Status, rec.Reason, rec.Message = out.Status, string(out.Reason), capText(out.Message, MaxMessage)
	rec.Cause = capText(rec.Cause, MaxMessage)
	for i := range rec.Steps {
		rec.Steps[i].Detail = capText(rec.Steps[i].Detail, MaxMessage)
	}
	rec.Meta = out.Meta
	rec.ResultSize = len(out.Result)
	rec.DurationUS = g.cfg.Now().Sub(start).Microseconds()
	if err := g.cfg.Recorder.Write(rec); err != nil {
		g.setBroken(err)
		return unrecorded(out, acted, err)
	}
	return out
}

// Close releases what the gate holds between calls: the watches of its
// masks' walk (maskwatch.go). Calls after it work, without them.
func (g *Gate) Close() { g.masks.close() }

// messageCap is the cap of an outcome's message (see MaxMessage).
func (g *Gate) messageCap() int { return max(g.cfg.MaxResult, MaxMessage) }

func (g *Gate) setBroken(err error) {
	g.mu.Lock()
	if g.broken == nil {
		g.broken = err
	}
	g.mu.Unlock()
}

// recordTrouble is the public part of a record write error: the errno
// (no space left on device, quota exceeded), never the record's path.
func recordTrouble(err error) string {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno.Error()
	}
	return "the write failed"
}

// unrecorded is the outcome of a call whose record line could not be
// written. A call that did not act is refused; a call that acted keeps its
// outcome (its effect happened: reporting it as failed would invite a retry
// that doubles it), with a note saying the record could not be written.
func unrecorded(out Outcome, acted bool, err error) Outcome {
	if !acted {
		msg := "the run record could not be written (" + recordTrouble(err) + "); the call did not run, and no further calls are accepted"
		return Outcome{Status: Refused, Entry: out.Entry, Seq: out.Seq, Reason: tools.ReasonRecordFailed, Message: msg}
	}
	note := "the call ran and the outcome above stands, but the run record could not be written (" + recordTrouble(err) +
		"): its intent line is the last the record holds; no further calls are accepted"
	if out.Message == "" {
		out.Message = note
	} else {
		out.Message += "\n" + note
	}
	if out.Status == Executed {
		out.Result += "\n--- note ---\n" + note + "\n"
	}
	meta := make(map[string]any, len(out.Meta)+1)
	for k, v := range out.Meta {
		meta[k] = v
	}
	meta["record_error"] = recordTrouble(err)
	out.Meta = meta
	return out
}

// capText returns s when it is at most max bytes, else its head cut on a
// character boundary and a note of how much was cut.
func capText(s string, max int) string {
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf("… [cut: the first %d of %d bytes are shown]", cut, len(s))
}

// errCallDeadline is the cause of a call's context ending at the gate's
// deadline (Config.CallTimeout).
var errCallDeadline = errors.New("the call's deadline passed")

// ended says why a call's execution context ended: ReasonCancelled when the
// caller cancelled it (a signal), ReasonTimeout when a deadline passed (the
// call's own, or one the caller set, such as a whole run's), "" when it did
// not end.
func ended(parent, exec context.Context) tools.Reason {
	switch {
	case errors.Is(parent.Err(), context.Canceled):
		return tools.ReasonCancelled
	case parent.Err() != nil, exec.Err() != nil:
		return tools.ReasonTimeout
	}
	return ""
}

// decide runs the gate steps of one call into rec; it sets *acted when the
// tool was started (its intent line written).
func (g *Gate) decide(ctx context.Context, c Call, ncalls int, broken error, rec *CallRecord, acted *bool) Outcome {
	if broken != nil {
		return refuseStep(rec, "record", tools.ReasonRecordFailed, "the run record could not be written ("+recordTrouble(broken)+"); no further calls are accepted", broken)
	}

	// 1 published?
	entry, o, refused := g.checkPublished(c, rec)
	if refused {
		return o
	}

	// budget
	if g.cfg.MaxCalls > 0 && ncalls > g.cfg.MaxCalls {
		return refuseStep(rec, "budget", tools.ReasonBudgetExhausted, fmt.Sprintf("the run's call budget (max_calls %d) is exhausted", g.cfg.MaxCalls), nil)
	}

	// 2 arguments and 3 paths
	prep, o, refused := g.prepareCall(c, rec)
	if refused {
		return o
	}
	if r, ok := prep.(tools.Releaser); ok {
		defer r.Release()
	}

	// read scope
	if o, refused := g.checkReads(prep, rec); refused {
		return o
	}

	// write scope
	writes := prep.Writes()
	for _, w := range writes {
		if o, refused := g.checkScope(w, rec); refused {
			return o
		}
	}

	// 4 hooks
	req := Request{Entry: entry, Args: prep.Args(), Writes: writes, Surface: c.Surface, Via: c.Via}
	hv, o, refused := g.runHooks(ctx, req, rec)
	if refused {
		return o
	}

	// 5 approval
	if o, refused := g.approve(ctx, entry, prep, req, hv, rec); refused {
		return o
	}

	// The intent line: once it is written the call may act.
	for i := range rec.Steps {
		rec.Steps[i].Detail = capText(rec.Steps[i].Detail, MaxMessage)
	}
	if err := g.cfg.Recorder.Write(rec.IntentLine()); err != nil {
		g.setBroken(err)
		return refuseStep(rec, "record", tools.ReasonRecordFailed, "the run record could not be written ("+recordTrouble(err)+"); the call did not run, and no further calls are accepted", err)
	}

	// 6 execute under the call's deadline; a run call's child is held to
	// what the file tools may not change (hold.go)
	timeout := g.cfg.CallTimeout
	if entry.Needs == ConfinedExecution {
		timeout += runGrace
	}
	execCtx, cancel := context.WithTimeoutCause(ctx, timeout, errCallDeadline)
	defer cancel()
	held := g.holdFor(prep, rec)
	*acted = true
	res, err := prep.Execute(execCtx, g.report(c, rec.Seq))
	if held != nil && held.err != nil {
		// The hold refused the call before its program started: it did
		// not act.
		*acted = false
		return held.refusal
	}
	stopped := ended(ctx, execCtx)
	if held != nil && held.hold == nil && err == nil {
		// Fail closed: a Holder that ran without reading its hold ran its
		// child without it.
		rec.Steps = append(rec.Steps, StepVerdict{Step: "hold", Verdict: "fail", Detail: "the call ran without reading the paths its child must not change"})
		return Outcome{Status: Failed, Reason: tools.ReasonToolError, Message: "bug: the call ran without reading the paths its child must not change; its outcome is not trusted"}
	}
	if err == nil && stopped != "" && entry.Needs == ConfinedExecution {
		// A program killed at the deadline or by a cancel did not run to
		// its end, whatever status it was given.
		err = &tools.Error{Reason: tools.ReasonToolError, Public: "the program was stopped before it ended\n" + res.Text}
	}
	if held != nil && held.hold != nil {
		if !held.checked {
			// The runner did not call after (its call ended before it
			// could): checked now, while other calls may run.
			held.vs = held.hold.after()
		}
		if o, failed := checkHeld(held.hold, held.vs, &res, err, rec); failed {
			return o
		}
	}
	if err != nil {
		return g.executeFailed(ctx, stopped, err, res, rec)
	}
	passStep(rec, "execute", "")

	// 7 result cap
	return g.capResult(entry, res, rec)
}

// report is what a call's execution reports through: the client's
// progress, and its child's connections and kernel denials as the
// record's lines of call seq. A failed write of these lines is the
// record's own failure, seen by the call line after the call.
func (g *Gate) report(c Call, seq int64) tools.Report {
	return tools.Report{Progress: c.Progress, Connection: func(n record.Net) {
		n.Seq = seq
		_ = g.cfg.Recorder.Write(n)
	}, Denial: func(d record.Denial) {
		d.Seq = seq
		_ = g.cfg.Recorder.Write(d)
	}}
}

// refuseStep records a refusing step in rec (and the internal cause, when
// there is one) and returns the refusal.
func refuseStep(rec *CallRecord, step string, reason tools.Reason, msg string, cause error) Outcome {
	rec.Steps = append(rec.Steps, StepVerdict{Step: step, Verdict: "refuse", Detail: msg})
	if cause != nil {
		rec.Cause = cause.Error()
	}
	return Outcome{Status: Refused, Reason: reason, Message: msg}
}

// passStep records a passed step in rec.
func passStep(rec *CallRecord, step, detail string) {
	rec.Steps = append(rec.Steps, StepVerdict{Step: step, Verdict: "pass", Detail: detail})
}

// checkPublished is step 1: the call names a published entry, and the
// surface presented it.
func (g *Gate) checkPublished(c Call, rec *CallRecord) (Entry, Outcome, bool) {
	entry, known := Lookup(c.Name)
	if known {
		rec.Operation, rec.Risk = entry.Operation, entry.Risk.String()
	}
	if !known || !g.published[c.Name] || c.Unpresented {
		msg := fmt.Sprintf("tool %q is not published in this run", c.Name)
		if why, ok := g.unpublished[c.Name]; ok {
			msg += ": " + why
		} else if c.Unpresented {
			msg = fmt.Sprintf("tool %q is not a tool of the %s surface; use tool_invoke", c.Name, c.Surface)
		}
		return entry, refuseStep(rec, "published", tools.ReasonUnpublished, msg, nil), true
	}
	passStep(rec, "published", "")
	return entry, Outcome{}, false
}

// prepareCall is steps 2 and 3: the arguments decode and their paths
// resolve. A Prepared it returns may need releasing (tools.Releaser).
func (g *Gate) prepareCall(c Call, rec *CallRecord) (tools.Prepared, Outcome, bool) {
	if len(c.Args) > g.cfg.MaxArgs {
		return nil, refuseStep(rec, "arguments", tools.ReasonInvalidArgument, fmt.Sprintf("arguments are %d bytes, above the %d-byte limit", len(c.Args), g.cfg.MaxArgs), nil), true
	}
	if g.cfg.Workspace.Gone() {
		// Checked first: every path of every tool is in the workspace,
		// and what a tool would say of one (not found, not a directory)
		// would hide why.
		why := "the workspace " + g.cfg.Workspace.Dir() + " was removed after the session started: no call can use it; start the session again on an existing directory"
		rec.Steps = append(rec.Steps, StepVerdict{Step: "paths", Verdict: "fail", Detail: why})
		return nil, Outcome{Status: Failed, Reason: tools.ReasonToolError, Message: why}, true
	}
	args := c.Args
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	prep, err := g.tools[c.Name].Prepare(g.cfg.Workspace, args)
	if err != nil {
		var te *tools.Error
		if !errors.As(err, &te) {
			te = &tools.Error{Reason: tools.ReasonInvalidArgument, Public: "invalid arguments", Cause: err}
		}
		step := "arguments"
		switch te.Reason {
		case tools.ReasonDeniedPath:
			passStep(rec, "arguments", "")
			step = "paths"
		case tools.ReasonInvalidArgument, tools.ReasonProgramNotAllowed:
		default:
			// The arguments were fine but the operation cannot proceed
			// (a missing file): the call failed, nothing refused it.
			passStep(rec, "arguments", "")
			rec.Steps = append(rec.Steps, StepVerdict{Step: "paths", Verdict: "fail", Detail: te.Public})
			if te.Cause != nil {
				rec.Cause = te.Cause.Error()
			}
			return nil, Outcome{Status: Failed, Reason: te.Reason, Message: te.Public}, true
		}
		return nil, refuseStep(rec, step, te.Reason, te.Public, te.Cause), true
	}
	passStep(rec, "arguments", "")
	passStep(rec, "paths", "")
	return prep, Outcome{}, false
}

// approve is step 5: a hook's allow, a standing approval, the approver for
// a call above the ceiling (or one a hook asked about), or nothing needed.
func (g *Gate) approve(ctx context.Context, entry Entry, prep tools.Prepared, req Request, hv hookVerdict, rec *CallRecord) (Outcome, bool) {
	switch {
	case hv == hookAllow:
		rec.Approval = "hook-allowed"
		passStep(rec, "approval", "allowed by a hook")
	case entry.Risk > g.cfg.ApproveUpTo || hv == hookAsk:
		rec.Approver = g.cfg.Approver.Name()
		g.mu.Lock()
		standing := g.standing[entry.Name]
		g.mu.Unlock()
		if standing {
			rec.Approval = "approved-standing"
			passStep(rec, "approval", "standing approval for "+entry.Name)
		} else {
			if pv, ok := prep.(tools.Previewer); ok {
				req.Preview = pv.Preview()
			}
			d, err := g.cfg.Approver.Approve(ctx, req)
			if err != nil || !d.Approved {
				rec.Approval = "rejected"
				msg := d.Reason
				if msg == "" {
					msg = "the approver rejected the call"
				}
				return refuseStep(rec, "approval", tools.ReasonApprovalRejected, fmt.Sprintf("%s (risk %s is above the unattended ceiling %s)", msg, entry.Risk, g.cfg.ApproveUpTo), err), true
			}
			rec.Approval = "approved"
			if d.Standing {
				rec.Approval = "approved-standing"
				g.mu.Lock()
				g.standing[entry.Name] = true
				g.mu.Unlock()
			}
			passStep(rec, "approval", d.Reason)
		}
	default:
		rec.Approval = "not-needed"
		passStep(rec, "approval", fmt.Sprintf("risk %s within ceiling %s", entry.Risk, g.cfg.ApproveUpTo))
	}
	return Outcome{}, false
}

// heldRead is what a Holder's hold function read: the hold, or the
// refusal that stopped the call before its program started.
type heldRead struct {
	hold    *runHold
	err     error
	refusal Outcome
	// checked is set when the runner called after, with its other calls
	// paused: vs is what the check then found.
	checked bool
	vs      []Violation
}

// holdFor hands a call whose Prepared is a tools.Holder the function that
// reads the paths its child must not change; the call reads them when its
// view is built, while no other run call's program runs (spawn.Spec.Hold),
// and checks them again after, likewise (spawn.Spec.After). It returns
// where that reading is kept, nil for any other call.
func (g *Gate) holdFor(prep tools.Prepared, rec *CallRecord) *heldRead {
	h, ok := prep.(tools.Holder)
	if !ok {
		return nil
	}
	hr := &heldRead{}
	h.Hold(func() (tools.Hold, error) {
		hold, o, failed := g.readHold(rec)
		if failed {
			hr.refusal = o
			hr.err = &tools.Error{Reason: o.Reason, Public: o.Message}
			return tools.Hold{}, hr.err
		}
		hr.hold = hold
		h := hold.hold
		// Only a walk of the workspace needs the other calls paused.
		h.CheckAfter = hold.walked
		return h, nil
	}, func() {
		if hr.hold != nil {
			hr.vs, hr.checked = hr.hold.after(), true
		}
	})
	return hr
}

// readHold reads the paths a run call's child must not change. It fails
// the call (true) when they cannot be read, or when the read scope's
// masks cannot be complete.
func (g *Gate) readHold(rec *CallRecord) (*runHold, Outcome, bool) {
	hold, herr := g.holdBefore()
	if herr != nil {
		rec.Steps = append(rec.Steps, StepVerdict{Step: "hold", Verdict: "fail", Detail: "the paths the call must not change could not be read"})
		rec.Cause = herr.Error()
		return nil, Outcome{Status: Failed, Reason: tools.ReasonToolError, Message: "the paths the call must not change could not be read; the program did not run"}, true
	}
	if hold.masking && hold.skipped > 0 {
		where := hold.unwalked
		if where == "" {
			where = fmt.Sprintf("%d directories", hold.skipped)
		}
		msg := fmt.Sprintf("read_scope could not be checked beneath %s: a file there it denies could not be hidden from the program, so the program did not run (make the directory readable to the harness, or move it within %d levels of the workspace root)", where, workspace.MaxWalkDepth)
		rec.Steps = append(rec.Steps, StepVerdict{Step: "hold", Verdict: "fail", Detail: msg})
		return nil, Outcome{Status: Failed, Reason: tools.ReasonDeniedPath, Message: msg}, true
	}
	if hold.maskOverflow > 0 {
		msg := fmt.Sprintf("read_scope denies %d files of the workspace, more than the %d a run call's view can mask; the program did not run (narrow read_scope, or allow what need not be hidden)", len(hold.hold.Masked)+hold.maskOverflow, MaxReadMasks)
		rec.Steps = append(rec.Steps, StepVerdict{Step: "hold", Verdict: "fail", Detail: msg})
		return nil, Outcome{Status: Failed, Reason: tools.ReasonDeniedPath, Message: msg}, true
	}
	detail := fmt.Sprintf("%d paths held read-only, %d directories anchored", len(hold.hold.ReadOnly), len(hold.hold.Anchored))
	if len(hold.hold.Masked) > 0 {
		detail += fmt.Sprintf(", %d files masked (read_scope)", len(hold.hold.Masked))
	}
	if hold.capped > 0 {
		detail += fmt.Sprintf(", %d matches beyond the cap of %d checked after the call only", hold.capped, MaxScopeHolds)
	}
	if hold.skipped > 0 {
		detail += fmt.Sprintf(", %d directories could not be walked", hold.skipped)
	}
	passStep(rec, "hold", detail)
	return hold, Outcome{}, false
}

// checkHeld fails the call (true) when its child changed what it was held
// to (vs, what hold.after found); otherwise it records that nothing held
// changed and adds the hold's note to the result.
func checkHeld(hold *runHold, vs []Violation, res *tools.Result, err error, rec *CallRecord) (Outcome, bool) {
	if len(vs) > 0 {
		msg := violationText(vs)
		if n := hold.note(); n != "" {
			msg += "\n" + n
		}
		var te *tools.Error
		if errors.As(err, &te) {
			msg += "\n" + te.Public
		} else if res.Text != "" {
			msg += "\n" + res.Text
		}
		if res.Meta == nil {
			res.Meta = map[string]any{}
		}
		res.Meta["violations"] = vs
		rec.Steps = append(rec.Steps, StepVerdict{Step: "held", Verdict: "fail", Detail: violationText(vs)})
		if err != nil {
			rec.Cause = err.Error()
		}
		return Outcome{Status: Failed, Reason: violationReason(vs), Message: msg, Meta: res.Meta}, true
	}
	passStep(rec, "held", "nothing held was changed")
	if n := hold.note(); n != "" {
		res.Text += "\n--- note ---\n" + n + "\n"
	}
	return Outcome{}, false
}

// executeFailed is the outcome of a tool that returned err: a cancel or a
// deadline that stopped it is named as such.
func (g *Gate) executeFailed(ctx context.Context, stopped tools.Reason, err error, res tools.Result, rec *CallRecord) Outcome {
	var te *tools.Error
	if !errors.As(err, &te) {
		te = &tools.Error{Reason: tools.ReasonToolError, Public: "the tool failed", Cause: err}
	}
	switch {
	case stopped == tools.ReasonCancelled && (te.Reason == tools.ReasonToolError || te.Reason == tools.ReasonTimeout || te.Reason == tools.ReasonCancelled):
		te = &tools.Error{Reason: tools.ReasonCancelled, Public: "the call was cancelled before it ended; what it did until then stands\n" + te.Public, Cause: err}
	case stopped == tools.ReasonTimeout && te.Reason == tools.ReasonToolError:
		which := fmt.Sprintf("the call's deadline (%s)", g.cfg.CallTimeout)
		if ctx.Err() != nil {
			which = "the deadline its caller set (a whole run's)"
		}
		te = &tools.Error{Reason: tools.ReasonTimeout, Public: which + " passed and the call was stopped; what it did until then stands\n" + te.Public, Cause: err}
	}
	rec.Steps = append(rec.Steps, StepVerdict{Step: "execute", Verdict: "fail", Detail: te.Public})
	if te.Cause != nil {
		rec.Cause = te.Cause.Error()
	}
	return Outcome{Status: Failed, Reason: te.Reason, Message: te.Public, Meta: res.Meta}
}

// capResult is step 7, the result cap. A read that changed nothing can be
// asked again, narrower: its oversized result is a failure. A write or a
// run has acted: its result is shortened, with a note, and the outcome
// stays executed (a failure would invite a retry that does it twice).
func (g *Gate) capResult(entry Entry, res tools.Result, rec *CallRecord) Outcome {
	if len(res.Text) > g.cfg.MaxResult {
		if entry.Needs == Always {
			msg := fmt.Sprintf("the result is %d bytes, above the %d-byte cap; nothing was returned. %s", len(res.Text), g.cfg.MaxResult, narrowHint(entry.Name))
			rec.Steps = append(rec.Steps, StepVerdict{Step: "result", Verdict: "fail", Detail: msg})
			return Outcome{Status: Failed, Reason: tools.ReasonOversizedResult, Message: msg, Meta: res.Meta}
		}
		text, shown := shorten(res.Text, g.cfg.MaxResult, entry.Name)
		meta := make(map[string]any, len(res.Meta)+2)
		for k, v := range res.Meta {
			meta[k] = v
		}
		meta["result_full_bytes"], meta["result_shown_bytes"] = len(res.Text), shown
		passStep(rec, "result", fmt.Sprintf("shortened: %d of %d bytes shown (cap %d); the call's effect is whole", shown, len(res.Text), g.cfg.MaxResult))
		return Outcome{Status: Executed, Result: text, Meta: meta}
	}
	passStep(rec, "result", "")
	return Outcome{Status: Executed, Result: res.Text, Meta: res.Meta}
}

func (g *Gate) checkScope(w tools.Write, rec *CallRecord) (Outcome, bool) {
	sc := newScope(g.cfg.WriteScope)
	b := sc.matchBytes(w.Path)
	v := sc.stricter(b, w.Path)
	refuse := func(msg string) (Outcome, bool) {
		sv := StepVerdict{Step: "scope", Verdict: "refuse", Detail: msg}
		if v.Rule >= 0 {
			i := v.Rule
			sv.Rule = &i
		}
		rec.Steps = append(rec.Steps, sv)
		return Outcome{Status: Refused, Reason: tools.ReasonDeniedPath, Message: msg}, true
	}
	if p, exact, ok := protection(w.Path, g.cfg.Protected); ok {
		// Only the exact spelling can be admitted, by a rule that matches
		// it byte for byte and names p (a folded match never admits).
		// Another spelling is refused by the protection alone: the record
		// names no rule as deciding it.
		if !exact {
			v.Rule = -1
		}
		switch {
		case !exact:
			return refuse(fmt.Sprintf("%s is protected (%s): on a case-insensitive directory it names %s, so it is refused on every filesystem; only the exact spelling %s can be admitted, by a write_scope rule naming it", w.Path, p, p, p))
		case b.Rule < 0 || v.Access == Denied || !explicitFor(g.cfg.WriteScope[b.Rule].Glob, p):
			return refuse(fmt.Sprintf("%s is protected (%s): the harness or later programs depend on it; only a write_scope rule naming %s explicitly can admit it", w.Path, p, p))
		}
	}
	folded := ""
	if v.Folded {
		folded = ", matched with case folded (a case-insensitive directory takes the path for one the rule names)"
	}
	switch v.Access {
	case Denied:
		return refuse(fmt.Sprintf("writing %s is denied by write-scope rule %d (%s)%s", w.Path, v.Rule+1, v.Text, folded))
	case PartialOnly:
		if w.Whole {
			return refuse(fmt.Sprintf("%s admits exact edits only (write-scope rule %d: %s%s); use file_edit", w.Path, v.Rule+1, v.Text, folded))
		}
	}
	sv := StepVerdict{Step: "scope", Verdict: "pass", Detail: w.Path + ": unrestricted"}
	if v.Rule >= 0 {
		i := v.Rule
		sv.Rule = &i
		sv.Detail = w.Path + ": " + v.Text + folded
	}
	rec.Steps = append(rec.Steps, sv)
	return Outcome{}, false
}

// shorten cuts the result of a call that acted to about max bytes: its head
// (where a write says what it changed) and its tail (where run says how the
// program ended), on line boundaries where one is near, with a note between
// them saying what was cut. It returns the text and how many bytes of the
// result it shows. The note is added even where it alone exceeds max.
func shorten(text string, max int, entry string) (string, int) {
	noteFor := func(shown int) string {
		return fmt.Sprintf("\n--- result shortened: %d of %d bytes shown (the result cap is %d bytes); the middle was cut, not the call: its effect happened in full ---\n", shown, len(text), max)
	}
	room := max - len(noteFor(len(text)))
	if room < 0 {
		room = 0
	}
	head := room * 3 / 4
	if entry != "run" {
		head = room * 7 / 8
	}
	tail := room - head
	h := text[:runeCut(text, head)]
	if i := strings.LastIndexByte(h, '\n'); i >= len(h)/2 {
		h = h[:i+1]
	}
	t := text[len(text)-tail:]
	for len(t) > 0 && !utf8.RuneStart(t[0]) {
		t = t[1:]
	}
	if i := strings.IndexByte(t, '\n'); i >= 0 && i < len(t)/2 {
		t = t[i+1:]
	}
	shown := len(h) + len(t)
	return h + noteFor(shown) + t, shown
}

// runeCut returns the largest n' <= n at which s can be cut without
// splitting a character.
func runeCut(s string, n int) int {
	if n >= len(s) {
		return len(s)
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return n
}

func narrowHint(name string) string {
	switch name {
	case "file_read":
		return "Read a part with offset and limit (lines)."
	case "search", "find":
		return "Narrow the call: a smaller max_results, a more specific pattern, a path or a glob."
	case "dir_list":
		return "List a subdirectory, or use find with a pattern."
	case "run":
		return "Reduce the program's output (e.g. pipe through head inside a script, or write to a file and read it in parts)."
	}
	return "Narrow the call."
}

// PublishedNames lists published entry names, sorted.
func (g *Gate) PublishedNames() []string {
	var n []string
	for k := range g.published {
		n = append(n, k)
	}
	sort.Strings(n)
	return n
}
