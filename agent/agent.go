// Package agent is the model loop of b10x-harness run: it sends a task and
// the published tool definitions to a model provider, passes every tool call
// the model makes through a surface (and so through the gate), returns each
// outcome to the model in the provider's tool-result form, and repeats until
// the model stops or a budget ends the run.
//
// The loop never executes a tool itself: the only way from a model's tool call
// to an effect is surface.Surface.Dispatch, which hands the call to the gate.
// Every refused or failed outcome reaches the model as an error (see
// ResultText), never as a success.
//
// Providers live behind the small Provider interface below: Anthropic and
// OpenAI-compatible servers in agent/provider, the replay script in
// agent/replay (kept apart so that it builds and fuzzes without any network
// client). Named agents (Markdown definitions with a front matter) are parsed
// by ParseDef and LoadDefs; a definition can only narrow what the parent run
// publishes.
package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/b10x/harness/gate"
	"github.com/b10x/harness/surface"
	"github.com/b10x/harness/tools"
)

// Request is what a conversation starts from. The zero value is a request with
// no system prompt, an empty task and no tools; the network providers refuse
// an empty task, the replay provider ignores the request. Tools are sent as
// the surface made them; a provider never adds or removes one.
type Request struct {
	System string        // the system prompt (a named agent's instructions, or the harness's default)
	Task   string        // the user's task, the first user message
	Tools  []surface.Def // the definitions the surface publishes, sent as they are
}

// ToolCall is one tool call a model made. Nothing in it is trusted: the
// gate decides what Name means and whether Args are acceptable.
type ToolCall struct {
	// ID is the provider's identifier of the call, echoed in its result.
	ID string
	// Name is the tool name as the model wrote it; it may name anything,
	// including a tool that was never published.
	Name string
	// Args are the arguments exactly as the model sent them. They may be
	// malformed JSON: the gate refuses those as invalid_argument.
	Args json.RawMessage
}

// Turn is one model response. The zero value is a turn with no text and no
// calls, which ends the run as EndModelStopped.
type Turn struct {
	Text  string     // the model's text, if any
	Calls []ToolCall // tool calls, in the order the model made them
	// Stop is the provider's stop reason as the provider names it
	// (Anthropic: end_turn, tool_use, max_tokens, ...; OpenAI: stop,
	// tool_calls, length, ...), or StopScriptEnded.
	Stop string
}

// StopScriptEnded is the Stop of a turn that ends a replay script: the last
// line had no tool calls, or there are no lines left. A turn with this stop
// ends the run with EndScriptEnded.
const StopScriptEnded = "script_ended"

// ToolResult is the outcome of one call, as the loop returns it to the model.
// Providers put Content in their tool-result form and set their error flag
// from IsError where the wire format has one.
type ToolResult struct {
	CallID  string // ToolCall.ID
	Name    string // ToolCall.Name
	Content string // ResultText of the outcome
	IsError bool   // true for every refused or failed outcome
}

// Provider starts conversations with a model. Implementations are in
// agent/provider and agent/replay; they must be safe for concurrent use
// (each Conversation need not be). A provider carries turns, nothing else:
// it must not execute a tool, and it must not put a credential in an error.
type Provider interface {
	// Name identifies the provider in transcripts ("anthropic", "openai",
	// "replay").
	Name() string
	// Begin starts a conversation. It does not contact the model.
	Begin(req Request) (Conversation, error)
}

// Conversation is one conversation with a model. It is used by one goroutine.
type Conversation interface {
	// Next sends the results of the previous turn's calls (none for the
	// first turn), one for each call and in the same order, and returns the
	// model's next turn. Errors name the provider and say what failed in
	// one line (authentication, rate limit, server error, timeout); they
	// never contain the API key.
	Next(ctx context.Context, results []ToolResult) (Turn, error)
}

// EndReason says what ended a run. It is written to the record's run_end as
// ended_by.
type EndReason string

// End reasons.
const (
	EndModelStopped EndReason = "model_stopped" // the model answered without tool calls
	EndScriptEnded  EndReason = "script_ended"  // a replay script ended
	EndMaxTurns     EndReason = "max_turns"     // Config.MaxTurns model turns were used
	EndMaxCalls     EndReason = "max_calls"     // the gate's call budget (max_calls) is exhausted
	EndTimeout      EndReason = "timeout"       // Config.Timeout passed
	EndCancelled    EndReason = "cancelled"     // the caller's context was cancelled (a signal)
	EndError        EndReason = "error"         // the provider failed; Summary.Err says how
)

// ErrRunTimeout is the cause of the run context's cancellation when
// Config.Timeout passes.
var ErrRunTimeout = errors.New("the run's time limit passed")

// Config configures Run. The zero value is not usable: Provider and Surface
// are required (Run ends with EndError without them). Zero budgets mean no
// limit; the call budget is the gate's (gate.Config.MaxCalls), not Run's.
type Config struct {
	Provider Provider         // required
	Surface  *surface.Surface // required: the only path from a call to the gate
	System   string           // system prompt
	Task     string           // the task
	MaxTurns int              // model turns allowed; 0: unlimited
	Timeout  time.Duration    // wall-clock limit for the whole run; 0: none
	Observer Observer         // nil: nothing is reported while the run goes on
}

// Observer is told what happens during a run, for a transcript. Its methods
// are called from the goroutine running Run, in order; they must not block
// for long.
type Observer interface {
	// Turn is called with each model turn, before its calls run.
	Turn(n int, t Turn)
	// CallStart is called before a call is dispatched.
	CallStart(turn int, c ToolCall)
	// CallDone is called with each call's outcome.
	CallDone(turn int, c ToolCall, out gate.Outcome, took time.Duration)
	// Skipped is called for calls of a turn that were never dispatched
	// because the run ended (timeout or interrupt) before them.
	Skipped(turn int, c ToolCall, why EndReason)
}

// CallSummary is one dispatched call in a Summary: the gate's outcome,
// without the result text.
type CallSummary struct {
	Turn    int          `json:"turn"`
	Seq     int64        `json:"seq"`
	Name    string       `json:"name"`  // as the model called it
	Entry   string       `json:"entry"` // as the gate resolved it
	Status  gate.Status  `json:"status"`
	Reason  tools.Reason `json:"reason,omitempty"`
	Message string       `json:"message,omitempty"`
}

// Summary is how a run ended. Calls holds every call passed to the surface,
// in order; Skipped counts calls the end overtook before they were passed.
type Summary struct {
	EndedBy  EndReason     `json:"ended_by"`
	Turns    int           `json:"turns"`
	Calls    []CallSummary `json:"calls"`
	Skipped  int           `json:"skipped,omitempty"` // calls never dispatched because the run ended
	LastStop string        `json:"last_stop,omitempty"`
	Err      error         `json:"-"` // set when EndedBy is EndError
	Duration time.Duration `json:"duration_ns"`
}

// Count returns how many dispatched calls ended with status st.
func (s Summary) Count(st gate.Status) int {
	n := 0
	for _, c := range s.Calls {
		if c.Status == st {
			n++
		}
	}
	return n
}

// Run drives one conversation until the model stops, the script ends, a
// budget ends it, the context is cancelled or the provider fails. It never
// returns an error: the Summary says how the run ended, with Err set for
// EndError. Every call the model makes is passed, in order, through
// cfg.Surface.Dispatch; Run acts on nothing itself. When the gate refuses a
// call with budget_exhausted, the rest of that turn's calls still go to the
// gate (which refuses and records them) and the run ends with EndMaxCalls.
// When the context ends (Config.Timeout, or the caller's cancellation)
// between calls, the remaining calls of the turn are not dispatched. A call
// whose ID repeats the ID of an earlier call of the same turn is not
// dispatched either: it is refused as invalid_argument (recorded through
// Surface.Refuse) and its result, an error, carries that ID.
//
// Run does not write the record's run_start or run_end: the caller owns the
// record and writes Summary.EndedBy. Run may be called concurrently with
// different Configs; one Config's Observer is called from one goroutine.
// Run does not protect against a provider that lies about its turns: what a
// call may do is decided by the gate alone.
func Run(ctx context.Context, cfg Config) Summary {
	start := time.Now()
	sum := Summary{}
	finish := func(r EndReason, err error) Summary {
		sum.EndedBy, sum.Err, sum.Duration = r, err, time.Since(start)
		return sum
	}
	if cfg.Provider == nil || cfg.Surface == nil {
		return finish(EndError, errors.New("agent: bug: Run needs a provider and a surface"))
	}
	if cfg.MaxTurns < 0 {
		return finish(EndError, fmt.Errorf("agent: max turns %d: must not be negative", cfg.MaxTurns))
	}
	if cfg.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, cfg.Timeout, ErrRunTimeout)
		defer cancel()
	}
	ended := func() (EndReason, bool) {
		if ctx.Err() == nil {
			return "", false
		}
		if errors.Is(context.Cause(ctx), ErrRunTimeout) || errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
			return EndTimeout, true
		}
		return EndCancelled, true
	}

	conv, err := cfg.Provider.Begin(Request{System: cfg.System, Task: cfg.Task, Tools: cfg.Surface.Definitions()})
	if err != nil {
		return finish(EndError, err)
	}
	var results []ToolResult
	for {
		if r, done := ended(); done {
			return finish(r, nil)
		}
		if cfg.MaxTurns > 0 && sum.Turns >= cfg.MaxTurns {
			return finish(EndMaxTurns, nil)
		}
		turn, err := conv.Next(ctx, results)
		if err != nil {
			if r, done := ended(); done {
				return finish(r, nil)
			}
			return finish(EndError, err)
		}
		sum.LastStop = turn.Stop
		if turn.Stop == StopScriptEnded && turn.Text == "" && len(turn.Calls) == 0 {
			return finish(EndScriptEnded, nil)
		}
		sum.Turns++
		if cfg.Observer != nil {
			cfg.Observer.Turn(sum.Turns, turn)
		}
		if len(turn.Calls) == 0 {
			if turn.Stop == StopScriptEnded {
				return finish(EndScriptEnded, nil)
			}
			return finish(EndModelStopped, nil)
		}

		var budget bool
		var stopped EndReason
		results, budget, stopped = dispatchTurn(ctx, cfg, &sum, turn, ended)
		if stopped != "" {
			return finish(stopped, nil)
		}
		if r, done := ended(); done {
			return finish(r, nil)
		}
		if budget {
			return finish(EndMaxCalls, nil)
		}
	}
}

// dispatchTurn dispatches a turn's calls in order and returns their
// results and whether one exhausted the call budget. When the run ends
// (ended) before a call, that call and the rest are skipped and the
// reason returned.
func dispatchTurn(ctx context.Context, cfg Config, sum *Summary, turn Turn, ended func() (EndReason, bool)) ([]ToolResult, bool, EndReason) {
	results := make([]ToolResult, 0, len(turn.Calls))
	budget := false
	ids := make(map[string]bool, len(turn.Calls))
	for i, c := range turn.Calls {
		if r, done := ended(); done {
			for _, rest := range turn.Calls[i:] {
				sum.Skipped++
				if cfg.Observer != nil {
					cfg.Observer.Skipped(sum.Turns, rest, r)
				}
			}
			return results, budget, r
		}
		if cfg.Observer != nil {
			cfg.Observer.CallStart(sum.Turns, c)
		}
		t0 := time.Now()
		var out gate.Outcome
		if c.ID != "" && ids[c.ID] {
			// Two calls under one id cannot both be answered: the
			// provider matches a result to its call by id. The first
			// runs; a later one is refused, recorded, and answered as
			// such (under the same id: the only one it has).
			out = cfg.Surface.Refuse(c.Name, c.Args, gate.Outcome{Status: gate.Refused, Reason: tools.ReasonInvalidArgument,
				Message: fmt.Sprintf("tool call id %q was already used by an earlier call of this turn; this call was not executed (give each call its own id)", c.ID)})
		} else {
			out = cfg.Surface.Dispatch(ctx, c.Name, c.Args)
		}
		ids[c.ID] = true
		if cfg.Observer != nil {
			cfg.Observer.CallDone(sum.Turns, c, out, time.Since(t0))
		}
		sum.Calls = append(sum.Calls, CallSummary{Turn: sum.Turns, Seq: out.Seq, Name: c.Name, Entry: out.Entry,
			Status: out.Status, Reason: out.Reason, Message: out.Message})
		budget = budget || out.Reason == tools.ReasonBudgetExhausted
		results = append(results, ToolResult{CallID: c.ID, Name: c.Name, Content: ResultText(out), IsError: out.IsError()})
	}
	return results, budget, ""
}

// ResultText is the text a model receives for an outcome. An executed call
// gives its result (or "(empty result)", since providers reject empty tool
// results). Anything else begins with "ERROR (status, reason): " followed by
// the public message, so that no provider and no model can read a refusal
// as success, even where the wire format has no error flag.
func ResultText(out gate.Outcome) string {
	if !out.IsError() {
		if out.Result == "" {
			return "(empty result)"
		}
		return out.Result
	}
	status := string(out.Status)
	if status == "" {
		status = "failed"
	}
	reason := string(out.Reason)
	if reason == "" {
		reason = string(tools.ReasonToolError)
	}
	msg := out.Message
	if msg == "" {
		msg = "the call did not succeed"
	}
	return fmt.Sprintf("ERROR (%s, %s): %s", status, reason, msg)
}
