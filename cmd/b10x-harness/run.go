package main

import (
	"context"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/b10x/harness/agent"
	"github.com/b10x/harness/agent/provider"
	"github.com/b10x/harness/agent/transcript"
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
	opt := provider.Options{Model: c.Model, BaseURL: c.BaseURL, MaxTokens: c.MaxTokens, RequestTimeout: c.RequestTimeout,
		APIKey: os.Getenv(provider.KeyEnv(spec.Kind))}
	if err := spec.Check(opt); err != nil {
		return err
	}
	if spec.Kind != "replay" {
		if strings.TrimSpace(task) == "" {
			return usagef("--provider %s needs a task: give it as the argument of run (or - to read it from stdin)", spec.Kind)
		}
		pol.ProviderNetwork = true
	}
	prov, err := provider.Open(spec, opt)
	if err != nil {
		return usageError{err}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var out *transcript.Writer
	sum, err := session.RunAgent(ctx, pol, e.options("run"), session.AgentOptions{Provider: prov, Agent: def, Task: task,
		Observer: func(s *session.Session) agent.Observer {
			out = transcript.New(e.stdout, e.stderr, transcript.Options{JSON: c.JSON, Quiet: pol.Quiet,
				Surface: surface.Kind(pol.Surface), MayPrompt: s.MayPrompt()})
			out.Header(c.Provider, def, s.Gate())
			return out
		}})
	if err != nil {
		return err
	}
	out.Summary(sum)

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
