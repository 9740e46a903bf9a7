package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/b10x/harness/mcp"
	"github.com/b10x/harness/session"
)

type mcpCmd struct {
	policyFlags
	agentFlags
	Surface        string        `default:"flat" enum:"flat,verbs" help:"The shape the client's model sees: flat (one tool per entry) or verbs (tool_search, tool_describe, tool_invoke)."`
	ApproveTimeout time.Duration `default:"5m" help:"How long an approval asked through the client (elicitation) may wait for an answer; no answer refuses the call."`
}

// Run serves the session's published tools over MCP on stdin and stdout
// until the client closes its end. The harness confines itself (Open)
// before it reads a message. Calls above the ceiling are asked through
// the client (elicitation), never on /dev/tty: the terminal is the
// client's.
func (c *mcpCmd) Run(e *env) error {
	pol, err := c.policy(e, c.Surface)
	if err != nil {
		return err
	}
	if _, err := c.agentFlags.narrow(&pol); err != nil {
		return err
	}
	approver, err := mcp.NewApprover(pol.Approve, c.ApproveTimeout)
	if err != nil {
		return usageError{err}
	}
	opt := e.options("mcp")
	opt.Approver = approver
	s, err := session.Open(context.Background(), pol, opt)
	if err != nil {
		return err
	}
	srv, err := mcp.NewServer(mcp.Config{Surface: s.Surface(), Gate: s.Gate(), Name: "b10x-harness", Version: version, Network: s.Network()})
	if err != nil {
		s.End("error")
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := srv.ServeStdio(ctx, e.stdin, e.stdout); err != nil && ctx.Err() == nil {
		s.End("error")
		return err
	}
	if ctx.Err() != nil {
		s.End("cancelled")
		return exitError{exitInterrupted}
	}
	s.End("completed")
	return nil
}
