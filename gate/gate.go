package gate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/b10x/harness/tools"
)

// Status is how a call ended.
type Status string

// Statuses. Refused: a gate step said no before anything ran (the tool never
// acted). Failed: the tool ran, or was attempted, and did not succeed, or its
// result was unusable. Both are errors to the model; only Executed is success.
const (
	Executed Status = "executed"
	Refused  Status = "refused"
	Failed   Status = "failed"
)

// DefaultMaxResult is the result cap when Config.MaxResult is zero.
const DefaultMaxResult = 256 << 10

// DefaultMaxArgs is the argument size cap when Config.MaxArgs is zero.
const DefaultMaxArgs = 8 << 20

// Host says which capability classes the host's confinement holds, and why
// not when it does not. The zero value holds nothing: only the read tools can
// be published.
type Host struct {
	ConfinedWorkspace bool
	WorkspaceWhy      string // why the workspace is not confined
	ConfinedExecution bool
	ExecutionWhy      string // why execution is not confined
	Programs          int    // number of --allow-program declarations
}

// Config configures a Gate. The zero value of each field is documented and
// safe: no tools, nothing published, deny every call above low, 256 KiB cap.
type Config struct {
	Workspace   *tools.Workspace // required
	Tools       []tools.Tool     // implementations; an entry without one is unpublished
	Host        Host
	ApproveUpTo Risk        // highest risk that runs unattended; zero value: Low
	Approver    Approver    // decides above the ceiling; nil: DenyAll
	WriteScope  []ScopeRule // ordered, first match wins; none: unrestricted
	Protected   []string    // extra protected workspace-relative paths (record file, hooks)
	Hooks       []Hook      // pre-call programs, run in order
	MaxResult   int         // result cap in bytes; 0: DefaultMaxResult
	MaxArgs     int         // argument cap in bytes; 0: DefaultMaxArgs
	MaxCalls    int         // calls per run; 0: unlimited
	Allow       []string    // named-agent narrowing: nil means no narrowing
	Recorder    *Recorder   // nil: no record
	Now         func() time.Time
}

// Gate is the chokepoint. It is safe for concurrent use.
type Gate struct {
	cfg         Config
	tools       map[string]tools.Tool
	published   map[string]bool
	unpublished map[string]string

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
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	g := &Gate{cfg: cfg, tools: map[string]tools.Tool{}, published: map[string]bool{}, unpublished: map[string]string{}, standing: map[string]bool{}}
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

func (g *Gate) availability(e Entry) string {
	h := g.cfg.Host
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
			return "no program is allowed (--allow-program)"
		}
		if !h.ConfinedExecution {
			return "needs confined execution: " + orUnknown(h.ExecutionWhy)
		}
	}
	if _, ok := g.tools[e.Name]; !ok {
		return "no implementation was configured"
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
	Surface string          // "flat", "verbs", "mcp", "cli"
	Via     string          // "tool_invoke" when resolved from the verbs envelope
	Name    string          // the resolved catalogue entry name
	Args    json.RawMessage // the arguments object

	// Unpresented marks a call to a name the surface never showed the model
	// (a catalogue entry called directly under the verbs surface). It is
	// refused as unpublished.
	Unpresented bool
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
	verdict := "pass"
	if out.Status != Executed {
		verdict = "refuse"
	}
	rec := CallRecord{Event: "call", Seq: out.Seq, Time: g.cfg.Now().UTC(), Surface: c.Surface, Via: c.Via, Entry: c.Name,
		Args: redact(c.Args), Steps: []StepVerdict{{Step: "surface", Verdict: verdict, Detail: out.Message}},
		Status: out.Status, Reason: string(out.Reason), Message: out.Message, Meta: out.Meta, ResultSize: len(out.Result)}
	if err := g.cfg.Recorder.Write(rec); err != nil {
		g.mu.Lock()
		g.broken = err
		g.mu.Unlock()
		return Outcome{Status: Failed, Entry: c.Name, Seq: out.Seq, Reason: tools.ReasonToolError, Message: "the run record could not be written; no further calls will be accepted"}
	}
	return out
}

// Call passes one call through every gate step and records it. It never
// returns an Executed outcome for anything but a tool that ran and produced
// a usable result.
func (g *Gate) Call(ctx context.Context, c Call) Outcome {
	start := g.cfg.Now()
	g.mu.Lock()
	g.seq++
	seq := g.seq
	g.calls++
	ncalls := g.calls
	broken := g.broken
	g.mu.Unlock()

	rec := CallRecord{Event: "call", Seq: seq, Time: start.UTC(), Surface: c.Surface, Via: c.Via, Entry: c.Name, Args: redact(c.Args),
		Steps: make([]StepVerdict, 0, 8)}
	out := g.decide(ctx, c, ncalls, broken, &rec)
	out.Seq, out.Entry = seq, c.Name

	rec.Status, rec.Reason, rec.Message = out.Status, string(out.Reason), out.Message
	rec.Meta = out.Meta
	rec.ResultSize = len(out.Result)
	rec.DurationUS = g.cfg.Now().Sub(start).Microseconds()
	if err := g.cfg.Recorder.Write(rec); err != nil {
		g.mu.Lock()
		g.broken = err
		g.mu.Unlock()
		return Outcome{Status: Failed, Entry: c.Name, Seq: seq, Reason: tools.ReasonToolError,
			Message: "the run record could not be written; no further calls will be accepted"}
	}
	return out
}

func (g *Gate) decide(ctx context.Context, c Call, ncalls int, broken error, rec *CallRecord) Outcome {
	refuse := func(step string, reason tools.Reason, msg string, cause error) Outcome {
		rec.Steps = append(rec.Steps, StepVerdict{Step: step, Verdict: "refuse", Detail: msg})
		if cause != nil {
			rec.Cause = cause.Error()
		}
		return Outcome{Status: Refused, Reason: reason, Message: msg}
	}
	pass := func(step, detail string) {
		rec.Steps = append(rec.Steps, StepVerdict{Step: step, Verdict: "pass", Detail: detail})
	}
	if broken != nil {
		return refuse("record", tools.ReasonToolError, "the run record could not be written; no further calls are accepted", broken)
	}

	// 1 published?
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
		return refuse("published", tools.ReasonUnpublished, msg, nil)
	}
	pass("published", "")

	// budget
	if g.cfg.MaxCalls > 0 && ncalls > g.cfg.MaxCalls {
		return refuse("budget", tools.ReasonBudgetExhausted, fmt.Sprintf("the run's call budget (--max-calls %d) is exhausted", g.cfg.MaxCalls), nil)
	}

	// 2 arguments and 3 paths
	if len(c.Args) > g.cfg.MaxArgs {
		return refuse("arguments", tools.ReasonInvalidArgument, fmt.Sprintf("arguments are %d bytes, above the %d-byte limit", len(c.Args), g.cfg.MaxArgs), nil)
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
			pass("arguments", "")
			step = "paths"
		case tools.ReasonInvalidArgument, tools.ReasonProgramNotAllowed:
		default:
			// The arguments were fine but the operation cannot proceed
			// (a missing file): the call failed, nothing refused it.
			pass("arguments", "")
			rec.Steps = append(rec.Steps, StepVerdict{Step: "paths", Verdict: "fail", Detail: te.Public})
			if te.Cause != nil {
				rec.Cause = te.Cause.Error()
			}
			return Outcome{Status: Failed, Reason: te.Reason, Message: te.Public}
		}
		return refuse(step, te.Reason, te.Public, te.Cause)
	}
	if r, ok := prep.(tools.Releaser); ok {
		defer r.Release()
	}
	pass("arguments", "")
	pass("paths", "")

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
	switch {
	case hv == hookAllow:
		rec.Approval = "hook-allowed"
		pass("approval", "allowed by a hook")
	case entry.Risk > g.cfg.ApproveUpTo || hv == hookAsk:
		rec.Approver = g.cfg.Approver.Name()
		g.mu.Lock()
		standing := g.standing[entry.Name]
		g.mu.Unlock()
		if standing {
			rec.Approval = "approved-standing"
			pass("approval", "standing approval for "+entry.Name)
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
				return refuse("approval", tools.ReasonApprovalRejected, fmt.Sprintf("%s (risk %s is above the unattended ceiling %s)", msg, entry.Risk, g.cfg.ApproveUpTo), err)
			}
			rec.Approval = "approved"
			if d.Standing {
				rec.Approval = "approved-standing"
				g.mu.Lock()
				g.standing[entry.Name] = true
				g.mu.Unlock()
			}
			pass("approval", d.Reason)
		}
	default:
		rec.Approval = "not-needed"
		pass("approval", fmt.Sprintf("risk %s within ceiling %s", entry.Risk, g.cfg.ApproveUpTo))
	}

	// 6 execute; a run call's child is held to what the file tools may
	// not change (hold.go)
	var hold *runHold
	if h, ok := prep.(tools.Holder); ok {
		var herr error
		hold, herr = g.holdBefore()
		if herr != nil {
			rec.Steps = append(rec.Steps, StepVerdict{Step: "hold", Verdict: "fail", Detail: "the paths the call must not change could not be read"})
			rec.Cause = herr.Error()
			return Outcome{Status: Failed, Reason: tools.ReasonToolError, Message: "the paths the call must not change could not be read; the program did not run"}
		}
		h.Hold(hold.hold)
		detail := fmt.Sprintf("%d paths held read-only, %d directories anchored", len(hold.hold.ReadOnly), len(hold.hold.Anchored))
		if hold.capped > 0 {
			detail += fmt.Sprintf(", %d matches beyond the cap of %d checked after the call only", hold.capped, MaxScopeHolds)
		}
		if hold.skipped > 0 {
			detail += fmt.Sprintf(", %d directories could not be walked", hold.skipped)
		}
		pass("hold", detail)
	}
	res, err := prep.Execute(ctx)
	if hold != nil {
		if vs := hold.after(); len(vs) > 0 {
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
			return Outcome{Status: Failed, Reason: violationReason(vs), Message: msg, Meta: res.Meta}
		}
		pass("held", "nothing held was changed")
		if n := hold.note(); n != "" {
			res.Text += "\n--- note ---\n" + n + "\n"
		}
	}
	if err != nil {
		var te *tools.Error
		if !errors.As(err, &te) {
			te = &tools.Error{Reason: tools.ReasonToolError, Public: "the tool failed", Cause: err}
		}
		if ctx.Err() != nil && te.Reason == tools.ReasonToolError {
			te = &tools.Error{Reason: tools.ReasonTimeout, Public: "the call was cancelled: " + ctx.Err().Error(), Cause: err}
		}
		rec.Steps = append(rec.Steps, StepVerdict{Step: "execute", Verdict: "fail", Detail: te.Public})
		if te.Cause != nil {
			rec.Cause = te.Cause.Error()
		}
		return Outcome{Status: Failed, Reason: te.Reason, Message: te.Public, Meta: res.Meta}
	}
	pass("execute", "")

	// 7 result cap
	if len(res.Text) > g.cfg.MaxResult {
		msg := fmt.Sprintf("the result is %d bytes, above the %d-byte cap; nothing was returned. %s", len(res.Text), g.cfg.MaxResult, narrowHint(entry.Name))
		rec.Steps = append(rec.Steps, StepVerdict{Step: "result", Verdict: "fail", Detail: msg})
		return Outcome{Status: Failed, Reason: tools.ReasonOversizedResult, Message: msg, Meta: res.Meta}
	}
	pass("result", "")
	return Outcome{Status: Executed, Result: res.Text, Meta: res.Meta}
}

func (g *Gate) checkScope(w tools.Write, rec *CallRecord) (Outcome, bool) {
	v := matchScope(g.cfg.WriteScope, w.Path)
	refuse := func(msg string) (Outcome, bool) {
		sv := StepVerdict{Step: "scope", Verdict: "refuse", Detail: msg}
		if v.Rule >= 0 {
			i := v.Rule
			sv.Rule = &i
		}
		rec.Steps = append(rec.Steps, sv)
		return Outcome{Status: Refused, Reason: tools.ReasonDeniedPath, Message: msg}, true
	}
	if p, ok := protection(w.Path, g.cfg.Protected); ok {
		if v.Rule < 0 || v.Access == Denied || !explicitFor(g.cfg.WriteScope[v.Rule].Glob, p) {
			return refuse(fmt.Sprintf("%s is protected (%s): the harness or later programs depend on it; only a --write-scope rule naming %s explicitly can admit it", w.Path, p, p))
		}
	}
	switch v.Access {
	case Denied:
		return refuse(fmt.Sprintf("writing %s is denied by write-scope rule %d (%s)", w.Path, v.Rule+1, v.Text))
	case PartialOnly:
		if w.Whole {
			return refuse(fmt.Sprintf("%s admits exact edits only (write-scope rule %d: %s); use file_edit", w.Path, v.Rule+1, v.Text))
		}
	}
	sv := StepVerdict{Step: "scope", Verdict: "pass", Detail: w.Path + ": unrestricted"}
	if v.Rule >= 0 {
		i := v.Rule
		sv.Rule = &i
		sv.Detail = w.Path + ": " + v.Text
	}
	rec.Steps = append(rec.Steps, sv)
	return Outcome{}, false
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

// Counts summarises outcomes by status, for run_end.
func Counts(outcomes []Outcome) map[Status]int {
	m := map[Status]int{}
	for _, o := range outcomes {
		m[o.Status]++
	}
	return m
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
