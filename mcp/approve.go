package mcp

import (
	"context"
	"errors"
	"fmt"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/b10x/harness/gate"
)

// DefaultApproveTimeout is how long an Approver waits for the client's
// answer when NewApprover is given no timeout.
const DefaultApproveTimeout = 5 * time.Minute

// Approval modes, as the policy's --approve names them.
const (
	ApproveAuto   = "auto"   // ask by elicitation when the client can; otherwise deny, and say so
	ApprovePrompt = "prompt" // ask by elicitation; a client that cannot is refused at initialize
	ApproveDeny   = "deny"   // deny every call above the ceiling (gate.DenyAll)
	ApproveAll    = "all"    // approve every call above the ceiling (gate.ApproveAll)
)

// Approver is the gate.Approver of an MCP server: it decides calls above
// the risk ceiling by asking the person behind the MCP client, with an
// elicitation/create request, on the session the call arrived by.
//
// An Approver is created before the gate (gate.Config.Approver) and is
// bound to sessions by the Server, which puts the calling session into the
// context it passes to the gate. Called with a context that carries no
// session (a call that did not come through a Server), it denies.
//
// What is asked shows the resolved catalogue entry, its operation and risk,
// and what the call would do (gate.DescribeRequest: a run's quoted argv, a
// file_write's content head and SHA-256, a file_edit's diff), rendered
// safe with internal/termsafe. Accept approves this call once; decline,
// cancel, an error or no answer within the timeout refuses it, and the gate
// records the refusal with reason approval_rejected.
//
// The Approver never opens /dev/tty. It is safe for concurrent use; its
// zero value is not usable: use NewApprover.
type Approver struct {
	mode    string
	timeout time.Duration
}

// NewApprover returns an approver for mode (ApproveAuto, ApprovePrompt,
// ApproveDeny or ApproveAll) that waits at most timeout for an answer
// (0: DefaultApproveTimeout). An unknown mode is an error.
func NewApprover(mode string, timeout time.Duration) (*Approver, error) {
	switch mode {
	case ApproveAuto, ApprovePrompt, ApproveDeny, ApproveAll:
	default:
		return nil, fmt.Errorf("mcp: invalid approval mode %q: want auto, prompt, deny or all", mode)
	}
	if timeout <= 0 {
		timeout = DefaultApproveTimeout
	}
	return &Approver{mode: mode, timeout: timeout}, nil
}

// Mode reports the approver's mode.
func (a *Approver) Mode() string { return a.mode }

// Name implements gate.Approver: "elicit" for auto and prompt, "deny" and
// "all" for the others (the names gate.DenyAll and gate.ApproveAll record).
func (a *Approver) Name() string {
	switch a.mode {
	case ApproveDeny:
		return gate.DenyAll{}.Name()
	case ApproveAll:
		return gate.ApproveAll{}.Name()
	}
	return "elicit"
}

// sessionKey carries the calling *sdk.ServerSession in a context.
type sessionKey struct{}

func withSession(ctx context.Context, ss *sdk.ServerSession) context.Context {
	return context.WithValue(ctx, sessionKey{}, ss)
}

func sessionFrom(ctx context.Context) *sdk.ServerSession {
	ss, _ := ctx.Value(sessionKey{}).(*sdk.ServerSession)
	return ss
}

// canElicit reports whether the client declared the elicitation capability
// (form mode, or no mode named: the protocol's default is form).
func canElicit(p *sdk.InitializeParams) bool {
	if p == nil || p.Capabilities == nil || p.Capabilities.Elicitation == nil {
		return false
	}
	e := p.Capabilities.Elicitation
	return e.Form != nil || e.URL == nil
}

// approvalSchema asks for nothing but the answer itself: accept, decline
// or cancel.
var approvalSchema = map[string]any{"type": "object", "properties": map[string]any{}}

// Approve implements gate.Approver.
func (a *Approver) Approve(ctx context.Context, r gate.Request) (gate.Decision, error) {
	switch a.mode {
	case ApproveDeny:
		return gate.DenyAll{}.Approve(ctx, r)
	case ApproveAll:
		return gate.ApproveAll{}.Approve(ctx, r)
	}
	ss := sessionFrom(ctx)
	if ss == nil {
		return gate.Decision{Reason: "there is no MCP session to ask (approver: elicit)"}, nil
	}
	if !canElicit(ss.InitializeParams()) {
		return gate.Decision{Reason: fmt.Sprintf("the MCP client cannot ask its user (no elicitation capability), so calls above the risk ceiling are denied (approve: %s)", a.mode)}, nil
	}
	ectx, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()
	msg := "Approval needed: allow this tool call once?\n\n" + gate.DescribeRequest(r)
	res, err := ss.Elicit(ectx, &sdk.ElicitParams{Mode: "form", Message: msg, RequestedSchema: approvalSchema})
	if err != nil {
		switch {
		case ctx.Err() != nil:
			return gate.Decision{Reason: "no answer before the call was cancelled"}, ctx.Err()
		case errors.Is(ectx.Err(), context.DeadlineExceeded):
			return gate.Decision{Reason: fmt.Sprintf("no answer within %s", a.timeout)}, nil
		}
		return gate.Decision{Reason: "the MCP client could not be asked"}, fmt.Errorf("elicitation: %w", err)
	}
	switch res.Action {
	case "accept":
		return gate.Decision{Approved: true, Reason: "approved by the MCP client's user"}, nil
	case "decline":
		return gate.Decision{Reason: "declined by the MCP client's user"}, nil
	case "cancel":
		return gate.Decision{Reason: "the MCP client's user dismissed the request"}, nil
	}
	return gate.Decision{Reason: "the MCP client gave no valid answer"}, fmt.Errorf("elicitation: unknown action %q", res.Action)
}
