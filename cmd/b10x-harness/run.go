package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/b10x/harness/agent"
	"github.com/b10x/harness/agent/provider"
	"github.com/b10x/harness/gate"
	"github.com/b10x/harness/internal/termsafe"
	"github.com/b10x/harness/session"
	"github.com/b10x/harness/surface"
)

// Exit statuses of run, beyond the shared ones.
const (
	exitBudget      = 4   // a budget (--max-turns, --max-calls, --run-timeout) ended the run
	exitInterrupted = 130 // SIGINT or SIGTERM ended the run
)

// maxStdinTask bounds the task run - reads from stdin.
const maxStdinTask = 1 << 20

type runCmd struct {
	PolicyFlags    `for:"run"`
	Provider       string        `after:"surface" required:"" help:"The model provider: anthropic, openai (or an OpenAI-compatible server with --base-url), or replay:FILE (a JSON Lines script of model turns, no network)." placeholder:"PROVIDER"`
	Model          string        `after:"surface" help:"The model name (required for anthropic and openai)."`
	BaseURL        string        `after:"surface" name:"base-url" help:"The provider's endpoint, e.g. an OpenAI-compatible server (vLLM, llama.cpp, Ollama). Keys come only from ANTHROPIC_API_KEY or OPENAI_API_KEY." placeholder:"URL"`
	MaxTokens      int           `after:"surface" help:"Largest model response in tokens (0: 8192 for anthropic, unset for openai)."`
	RequestTimeout time.Duration `after:"run-timeout" default:"10m" help:"Limit on each request to the provider, per attempt."`
	JSON           bool          `help:"Print one JSON event per line (for CI) instead of the transcript."`
	Task           string        `arg:"" optional:"" help:"The task for the model, or - to read it from stdin (not needed for replay)."`
}

func (c *runCmd) Run(e *env) error {
	spec, err := provider.ParseSpec(c.Provider)
	if err != nil {
		return usageError{err}
	}
	if c.RequestTimeout < 0 {
		return usagef("--request-timeout %s: must not be negative", c.RequestTimeout)
	}
	if c.MaxTokens < 0 {
		return usagef("--max-tokens %d: must not be negative", c.MaxTokens)
	}
	task := c.Task
	if task == "-" {
		b, err := readLimited(e.stdin, maxStdinTask, "the task read from stdin")
		if err != nil {
			return err
		}
		task = string(b)
	}

	pol, err := c.policy(e)
	if err != nil {
		return err
	}
	def, err := session.LoadAgents(&pol)
	if err != nil {
		return err
	}

	// The provider is built before the session so that a bad script, a
	// missing key or model is a usage error before anything is recorded.
	opt := provider.Options{Model: c.Model, BaseURL: c.BaseURL, MaxTokens: c.MaxTokens, RequestTimeout: c.RequestTimeout}
	switch spec.Kind {
	case "anthropic", "openai":
		if strings.TrimSpace(task) == "" {
			return usagef("--provider %s needs a task: give it as the argument of run (or - to read it from stdin)", spec.Kind)
		}
		if c.Model == "" {
			return usagef("--provider %s needs --model", spec.Kind)
		}
		env := provider.KeyEnv(spec.Kind)
		opt.APIKey = os.Getenv(env)
		if opt.APIKey == "" && (spec.Kind == "anthropic" || c.BaseURL == "") {
			return usagef("--provider %s needs an API key in %s (keys are never taken from flags)", spec.Kind, env)
		}
		pol.ProviderNetwork = true
	case "replay":
		if c.Model != "" || c.BaseURL != "" {
			return usagef("--model and --base-url do not apply to --provider replay")
		}
	}
	prov, err := provider.Open(spec, opt)
	if err != nil {
		return usageError{err}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var out *runOutput
	sum, err := session.RunAgent(ctx, pol, e.options("run"), session.AgentOptions{Provider: prov, Agent: def, Task: task,
		Observer: func(s *session.Session) agent.Observer {
			out = newRunOutput(e.stdout, e.stderr, c, pol, s.Gate())
			out.header(c.Provider, def, s.Gate())
			return out
		}})
	if err != nil {
		return err
	}
	out.summary(sum)

	switch sum.EndedBy {
	case agent.EndModelStopped, agent.EndScriptEnded:
		return nil
	case agent.EndMaxTurns, agent.EndMaxCalls, agent.EndTimeout:
		return exitError{exitBudget}
	case agent.EndCancelled:
		return exitError{exitInterrupted}
	}
	if sum.Err != nil {
		return sum.Err
	}
	return exitError{exitFailed}
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

// runOutput is the terminal side of a run: a transcript, JSON events, or
// only the summary. It implements agent.Observer.
type runOutput struct {
	w, errw  io.Writer
	quiet    bool
	json     bool
	kind     surface.Kind
	progress progressMode // how a long run call is reported on stderr

	mu       sync.Mutex
	stopTick chan struct{}
	tickDone chan struct{}
}

func newRunOutput(w, errw io.Writer, c *runCmd, pol session.Policy, g *gate.Gate) *runOutput {
	o := &runOutput{w: w, errw: errw, quiet: pol.Quiet, json: c.JSON, kind: surface.Kind(pol.Surface)}
	// On a terminal the line is live, unless an approver may be prompting
	// on that terminal during the call.
	o.progress = progressLines
	if f, ok := errw.(*os.File); ok && isTerminal(f) {
		o.progress = progressLive
		runEntry, _ := gate.Lookup("run")
		interactive := pol.Approve == session.ApprovePrompt || pol.Approve == session.ApproveAuto
		if interactive && runEntry.Risk > g.Config().ApproveUpTo {
			o.progress = progressOff
		}
	}
	if o.json || o.quiet {
		o.progress = progressOff
	}
	return o
}

type progressMode int

const (
	progressOff   progressMode = iota
	progressLines              // a line every 15 s (stderr is not a terminal)
	progressLive               // a live line redrawn every second
)

func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

func (o *runOutput) event(v any) {
	_ = writeJSON(o.w, "", v)
}

func (o *runOutput) header(prov string, def *agent.Def, g *gate.Gate) {
	var pub []string
	for _, en := range g.Published() {
		pub = append(pub, en.Name)
	}
	if pub == nil {
		pub = []string{}
	}
	if o.json {
		if o.quiet {
			return
		}
		ev := map[string]any{"event": "start", "provider": prov, "surface": string(o.kind), "published": pub, "unpublished": g.Unpublished()}
		if def != nil {
			ev["agent"] = def.Name
			ev["agent_file"] = def.File
			if def.HasTools {
				ev["agent_tools"] = def.Tools
			}
		}
		o.event(ev)
		return
	}
	if o.quiet {
		return
	}
	fmt.Fprintf(o.w, "run: provider %s, surface %s\n", termsafe.Line(prov), o.kind)
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

// Turn implements agent.Observer.
func (o *runOutput) Turn(n int, t agent.Turn) {
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
func (o *runOutput) CallStart(turn int, c agent.ToolCall) {
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

// startTicker reports a run call that takes a while: on a terminal a live
// elapsed-time line (erased when the call ends), elsewhere a line every 15
// seconds, both on stderr so that the transcript on stdout stays clean.
func (o *runOutput) startTicker() {
	o.mu.Lock()
	defer o.mu.Unlock()
	stop, done := make(chan struct{}), make(chan struct{})
	o.stopTick, o.tickDone = stop, done
	start := time.Now()
	live := o.progress == progressLive
	go func() {
		defer close(done)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		drawn := false
		for {
			select {
			case <-stop:
				if drawn {
					fmt.Fprint(o.errw, "\r\033[K")
				}
				return
			case <-t.C:
				secs := int(time.Since(start).Seconds())
				switch {
				case live && secs >= 2:
					fmt.Fprintf(o.errw, "\r     run: still executing, %ds", secs)
					drawn = true
				case !live && secs > 0 && secs%15 == 0:
					fmt.Fprintf(o.errw, "     run: still executing after %ds\n", secs)
				}
			}
		}
	}()
}

func (o *runOutput) stopTicker() {
	o.mu.Lock()
	stop, done := o.stopTick, o.tickDone
	o.stopTick, o.tickDone = nil, nil
	o.mu.Unlock()
	if stop != nil {
		close(stop)
		<-done
	}
}

// CallDone implements agent.Observer.
func (o *runOutput) CallDone(turn int, c agent.ToolCall, out gate.Outcome, took time.Duration) {
	o.stopTicker()
	if o.quiet {
		return
	}
	if o.json {
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

// Skipped implements agent.Observer.
func (o *runOutput) Skipped(turn int, c agent.ToolCall, why agent.EndReason) {
	if o.quiet {
		return
	}
	if o.json {
		o.event(map[string]any{"event": "skipped", "turn": turn, "name": c.Name, "why": why})
		return
	}
	fmt.Fprintf(o.w, "  -- %s not dispatched: the run ended (%s)\n", termsafe.Text(c.Name), why)
}

func (o *runOutput) summary(s agent.Summary) {
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
	if re+fa == 0 {
		return
	}
	fmt.Fprintln(o.w, "refused or failed:")
	for _, c := range s.Calls {
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

func roundDur(d time.Duration) string {
	if d < time.Millisecond {
		return "<1ms"
	}
	return d.Round(time.Millisecond).String()
}

// printPreview prints the first lines of a result, indented.
func printPreview(w io.Writer, s string) {
	const maxLines, maxWidth = 6, 160
	s = strings.TrimRight(s, "\n")
	if s == "" {
		return
	}
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if i == maxLines {
			fmt.Fprintf(w, "       | ... (%d more lines)\n", len(lines)-maxLines)
			break
		}
		fmt.Fprintf(w, "       | %s\n", termsafe.Text(firstLine(l, maxWidth)))
	}
}

func firstLine(s string, max int) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > max {
		cut := max
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "..."
	}
	return s
}

// argsText renders a call's arguments for the transcript: compact JSON, or
// the raw bytes escaped when they are not JSON; safe for a terminal either
// way.
func argsText(raw json.RawMessage, max int) string {
	var b strings.Builder
	if json.Valid(raw) {
		var v any
		_ = json.Unmarshal(raw, &v)
		_ = writeJSON(&b, "", v)
		return firstLine(strings.TrimSpace(b.String()), max)
	}
	return firstLine("(not JSON) "+termsafe.Line(string(raw)), max)
}
