package session

import (
	"context"
	"fmt"
	"os"

	"github.com/b10x/harness/agent"
	"github.com/b10x/harness/agent/provider"
)

// AgentOptions are what RunAgent needs besides the policy: the model's
// provider, its instructions and task, and what reports the run.
type AgentOptions struct {
	Provider agent.Provider
	// Agent is the named agent the policy was narrowed to (LoadAgents),
	// nil for none: its instructions come before DefaultSystem.
	Agent *agent.Def
	// System replaces the system prompt: "" is DefaultSystem, after the
	// named agent's instructions.
	System string
	Task   string
	// Observer is given the opened session (its gate, for a header) and
	// returns what is told of each turn and call; nil reports nothing.
	Observer func(*Session) agent.Observer
}

// RunAgent opens a session under p and runs a model on it until the model
// stops, a budget (the policy's max_turns, max_calls, run_timeout) is
// spent, or ctx ends; the session's run_end says which. The provider holds
// its key by now, so the provider keys are removed from the harness's
// environment first: nothing the session starts (a hook inherits that
// environment, a run call's pass_env reads from it) ever sees one,
// whichever provider this run uses.
func RunAgent(ctx context.Context, p Policy, o Options, a AgentOptions) (agent.Summary, error) {
	for _, k := range []string{provider.KeyEnv("anthropic"), provider.KeyEnv("openai")} {
		if err := os.Unsetenv(k); err != nil {
			return agent.Summary{}, fmt.Errorf("removing %s from the environment: %w", k, err)
		}
	}
	s, err := Open(ctx, p, o)
	if err != nil {
		return agent.Summary{}, err
	}
	system := a.System
	switch {
	case system != "":
	case a.Agent != nil:
		system = a.Agent.Instructions + "\n\n" + DefaultSystem
	default:
		system = DefaultSystem
	}
	var obs agent.Observer
	if a.Observer != nil {
		obs = a.Observer(s)
	}
	sum := agent.Run(ctx, agent.Config{Provider: a.Provider, Surface: s.surface, System: system, Task: a.Task,
		MaxTurns: p.Agent.MaxTurns, Timeout: p.Agent.RunTimeout, Observer: obs})
	s.End(string(sum.EndedBy))
	return sum, nil
}
