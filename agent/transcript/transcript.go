// Package transcript renders an agent run for the person or the CI job
// watching it: a text transcript of turns and calls, one JSON event per
// line, or only the summary. A Writer is an agent.Observer, so the loop
// reports to it as the run goes on; cmd only picks the Options.
//
// Everything a model controls (its text, tool names, arguments, results,
// stop reasons) and every name from a file is made safe for a terminal with
// termsafe before it is written, so that it is shown and never interpreted;
// JSON events go through termsafe.JSON.
package transcript

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/b10x/harness/agent"
	"github.com/b10x/harness/gate"
	"github.com/b10x/harness/internal/termsafe"
	"github.com/b10x/harness/surface"
)

// Options says how a run is shown.
type Options struct {
	JSON    bool         // one JSON event per line instead of the text transcript
	Quiet   bool         // only the summary (and, in JSON, only its event)
	Surface surface.Kind // the surface the model sees, to name the entry a call reaches

	// MayPrompt says an approver may ask on the terminal during a run call
	// (the approve mode asks there and run is above approve-up-to): a live
	// progress line would then be drawn over the question, so none is.
	MayPrompt bool
}

// Writer writes the transcript of one run to w, and the progress of a long
// run call to errw. It implements agent.Observer.
type Writer struct {
	w, errw  io.Writer
	quiet    bool
	json     bool
	kind     surface.Kind
	progress progressMode // how a long run call is reported on errw

	mu       sync.Mutex
	stopTick chan struct{}
	tickDone chan struct{}
}

var _ agent.Observer = (*Writer)(nil)

// New returns a Writer for one run. A long run call is reported on errw:
// a live line when errw is a terminal, a line every 15 seconds when it is
// not, and nothing in JSON or quiet mode or when an approver may prompt.
func New(w, errw io.Writer, opts Options) *Writer {
	o := &Writer{w: w, errw: errw, quiet: opts.Quiet, json: opts.JSON, kind: opts.Surface}
	o.progress = progressLines
	if f, ok := errw.(*os.File); ok && isTerminal(f) {
		o.progress = progressLive
		if opts.MayPrompt {
			o.progress = progressOff
		}
	}
	if o.json || o.quiet {
		o.progress = progressOff
	}
	return o
}

func (o *Writer) event(v any) {
	_ = termsafe.WriteJSON(o.w, "", v)
}

// Header writes what the run starts with: the provider, the surface, the
// named agent (def, nil when there is none) and what g publishes and why
// the rest is not.
func (o *Writer) Header(provider string, def *agent.Def, g *gate.Gate) {
	if o.quiet {
		return
	}
	pub := []string{} // an empty list in JSON, not null
	for _, en := range g.Published() {
		pub = append(pub, en.Name)
	}
	if o.json {
		o.headerEvent(provider, def, g, pub)
		return
	}
	fmt.Fprintf(o.w, "run: provider %s, surface %s\n", termsafe.Line(provider), o.kind)
	if def != nil {
		decl := "all of the parent's"
		if def.HasTools {
			decl = "[" + strings.Join(def.Tools, ", ") + "]"
		}
		fmt.Fprintf(o.w, "agent: %s (%s:%d), declared tools %s, approve-up-to %s\n", termsafe.Line(def.Name), termsafe.Line(def.File), def.Line, termsafe.Line(decl), g.Config().ApproveUpTo)
	}
	fmt.Fprintf(o.w, "published: %s\n", orNone(pub))
	for _, en := range gate.Catalogue {
		if why, ok := g.Unpublished()[en.Name]; ok {
			fmt.Fprintf(o.w, "not published: %s (%s)\n", en.Name, termsafe.Line(why))
		}
	}
}

func (o *Writer) headerEvent(provider string, def *agent.Def, g *gate.Gate, pub []string) {
	ev := map[string]any{"event": "start", "provider": provider, "surface": string(o.kind), "published": pub, "unpublished": g.Unpublished()}
	if def != nil {
		ev["agent"] = def.Name
		ev["agent_file"] = def.File
		if def.HasTools {
			ev["agent_tools"] = def.Tools
		}
	}
	o.event(ev)
}

// Turn implements agent.Observer.
func (o *Writer) Turn(n int, t agent.Turn) {
	if o.quiet {
		return
	}
	if o.json {
		o.event(map[string]any{"event": "turn", "turn": n, "text": t.Text, "stop": t.Stop, "calls": len(t.Calls)})
		return
	}
	fmt.Fprintf(o.w, "\n[%d]", n)
	if t.Text != "" {
		lines := strings.Split(strings.TrimRight(termsafe.Text(t.Text), "\n"), "\n")
		fmt.Fprintf(o.w, " model: %s\n", lines[0])
		for _, l := range lines[1:] {
			fmt.Fprintf(o.w, "    %s\n", l)
		}
	} else {
		fmt.Fprintln(o.w, " model (no text)")
	}
}

// CallStart implements agent.Observer.
func (o *Writer) CallStart(turn int, c agent.ToolCall) {
	if o.quiet || o.json {
		return
	}
	name := c.Name
	if entry := o.kind.EntryOf(c.Name, c.Args); entry != c.Name {
		name = c.Name + " → " + entry
	}
	fmt.Fprintf(o.w, "  -> %s %s\n", termsafe.Text(name), argsText(c.Args, 200))
	if o.progress != progressOff && o.kind.EntryOf(c.Name, c.Args) == "run" {
		o.startTicker()
	}
}

// CallDone implements agent.Observer.
func (o *Writer) CallDone(turn int, c agent.ToolCall, out gate.Outcome, took time.Duration) {
	o.stopTicker()
	if o.quiet {
		return
	}
	if o.json {
		o.callEvent(turn, c, out, took)
		return
	}
	if !out.IsError() {
		fmt.Fprintf(o.w, "     executed (%d bytes, %s)\n", len(out.Result), roundDur(took))
		printPreview(o.w, out.Result)
		return
	}
	msg := strings.ReplaceAll(strings.TrimRight(termsafe.Text(out.Message), "\n"), "\n", "\n       | ")
	fmt.Fprintf(o.w, "     %s %s: %s\n", strings.ToUpper(string(out.Status)), out.Reason, msg)
}

// callEvent writes a call's event. Its arguments are kept as JSON when
// they are JSON (as a string when not), and only counted when large.
func (o *Writer) callEvent(turn int, c agent.ToolCall, out gate.Outcome, took time.Duration) {
	ev := map[string]any{"event": "call", "turn": turn, "seq": out.Seq, "name": c.Name, "entry": out.Entry,
		"status": out.Status, "result_bytes": len(out.Result), "duration_ms": took.Milliseconds()}
	switch {
	case len(c.Args) > 4096:
		ev["args_bytes"] = len(c.Args)
	case json.Valid(c.Args):
		ev["args"] = json.RawMessage(c.Args)
	default:
		ev["args_raw"] = string(c.Args)
	}
	if out.Reason != "" {
		ev["reason"] = out.Reason
	}
	if out.Message != "" {
		ev["message"] = out.Message
	}
	if len(out.Meta) > 0 {
		ev["meta"] = out.Meta
	}
	o.event(ev)
}

// Skipped implements agent.Observer.
func (o *Writer) Skipped(turn int, c agent.ToolCall, why agent.EndReason) {
	if o.quiet {
		return
	}
	if o.json {
		o.event(map[string]any{"event": "skipped", "turn": turn, "name": c.Name, "why": why})
		return
	}
	fmt.Fprintf(o.w, "  -- %s not dispatched: the run ended (%s)\n", termsafe.Text(c.Name), why)
}

// Summary writes how the run ended and what its calls came to, with a
// line for each call refused or failed. Quiet mode writes it too.
func (o *Writer) Summary(s agent.Summary) {
	ex, re, fa := s.Count(gate.Executed), s.Count(gate.Refused), s.Count(gate.Failed)
	if o.json {
		ev := map[string]any{"event": "end", "ended_by": s.EndedBy, "turns": s.Turns, "calls": len(s.Calls),
			"executed": ex, "refused": re, "failed": fa, "skipped": s.Skipped, "duration_ms": s.Duration.Milliseconds()}
		if s.LastStop != "" {
			ev["last_stop"] = s.LastStop
		}
		if s.Err != nil {
			ev["error"] = s.Err.Error()
		}
		o.event(ev)
		return
	}
	fmt.Fprintf(o.w, "\nsummary: ended by %s after %d turn(s) in %s", s.EndedBy, s.Turns, roundDur(s.Duration))
	if s.EndedBy == agent.EndModelStopped && s.LastStop != "" {
		fmt.Fprintf(o.w, " (stop: %s)", termsafe.Line(s.LastStop))
	}
	fmt.Fprintln(o.w)
	fmt.Fprintf(o.w, "calls: %d: %d executed, %d refused, %d failed", len(s.Calls), ex, re, fa)
	if s.Skipped > 0 {
		fmt.Fprintf(o.w, ", %d not dispatched", s.Skipped)
	}
	fmt.Fprintln(o.w)
	if re+fa > 0 {
		o.notExecuted(s.Calls)
	}
}

// notExecuted lists the calls that were refused or failed, one a line.
func (o *Writer) notExecuted(calls []agent.CallSummary) {
	fmt.Fprintln(o.w, "refused or failed:")
	for _, c := range calls {
		if c.Status == gate.Executed {
			continue
		}
		name := c.Entry
		if name != c.Name {
			name = c.Name + " → " + c.Entry
		}
		fmt.Fprintf(o.w, "  #%-3d %-26s %-7s %-20s %s\n", c.Seq, termsafe.Text(name), c.Status, c.Reason, termsafe.Text(firstLine(c.Message, 120)))
	}
}
