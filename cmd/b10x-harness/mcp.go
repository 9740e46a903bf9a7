package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/b10x/harness/internal/termsafe"
	"github.com/b10x/harness/mcp"
	"github.com/b10x/harness/session"
)

type mcpCmd struct {
	PolicyFlags    `for:"mcp"`
	ApproveTimeout time.Duration `default:"5m" help:"How long an approval asked through the client (elicitation) may wait for an answer; no answer refuses the call."`
	Listen         string        `placeholder:"ADDR" help:"Serve MCP streamable HTTP instead of stdio, on unix:/PATH (a socket, mode 0600) or HOST:PORT on a loopback address; any other address needs --tls-cert and --tls-key. Needs --token-file."`
	TokenFile      string        `placeholder:"FILE" help:"With --listen: the file (mode 0600 or stricter) holding the bearer token every HTTP request must carry, at least 32 bytes."`
	TLSCert        string        `name:"tls-cert" placeholder:"FILE" help:"With --listen: serve TLS with this certificate (PEM); with --tls-key."`
	TLSKey         string        `name:"tls-key" placeholder:"FILE" help:"With --listen: the private key (PEM) of --tls-cert."`
	SessionIdle    time.Duration `default:"10m" help:"With --listen: close an HTTP session that has had no request for this long (a call being served keeps it open); its client must initialize again. 0: never."`
	MaxSessions    int           `default:"100" help:"With --listen: how many HTTP sessions may be open at once; one more initialize is answered 503 with a JSON-RPC error until a session ends (DELETE) or is closed idle."`
}

// Run serves the session's published tools over MCP: on stdin and stdout
// until the client ends the session (SIGINT, SIGTERM or the end of stdin),
// or with --listen over streamable HTTP until SIGINT or SIGTERM; Help
// gives the exit statuses. The harness confines itself (Open) before it
// reads a message; with --listen the token, the TLS files and the listener
// (a socket file outside the workspace among them) are opened first, since
// the harness's own domain denies them afterwards. Calls above the ceiling
// are asked through the client (elicitation), never on /dev/tty: the
// terminal is the client's.
func (c *mcpCmd) Run(e *env) error {
	pol, err := c.policy(e)
	if err != nil {
		return err
	}
	if _, err := session.LoadAgents(&pol); err != nil {
		return err
	}
	approver, err := mcp.NewApprover(string(pol.Approve), c.ApproveTimeout)
	if err != nil {
		return usageError{err}
	}
	ln, token, err := mcp.HTTPConfig{Listen: c.Listen, TokenFile: c.TokenFile, TLSCert: c.TLSCert, TLSKey: c.TLSKey,
		SessionIdle: c.SessionIdle, MaxSessions: c.MaxSessions}.OpenHTTP()
	if errors.Is(err, mcp.ErrNeedsTLS) {
		return usagef("%s (--tls-cert FILE --tls-key FILE)", renderError(err, nil))
	}
	if err != nil {
		return err
	}
	if ln != nil {
		defer func() {
			if err := ln.Close(); err != nil {
				fmt.Fprintf(e.stderr, "b10x-harness: mcp: %s (the next start replaces it)\n", termsafe.Message(err.Error()))
			}
		}()
	}
	opt := e.options("mcp")
	opt.Approver = approver
	s, err := session.Open(context.Background(), pol, opt)
	if err != nil {
		return err
	}
	say := func(line string) { fmt.Fprintln(e.stderr, "b10x-harness: mcp: "+termsafe.Message(line)) }
	ctx, stop := signalContext()
	defer stop()
	end := s.ServeMCP(ctx, session.MCPOptions{Name: "b10x-harness", Version: version, Stdin: e.stdin, Stdout: e.stdout,
		Listener: ln, Token: token, SessionIdle: c.SessionIdle, MaxSessions: c.MaxSessions, Say: say})
	var status error
	switch end.EndedBy {
	case "error":
		status = end.Err
	case "cancelled":
		status = exitError{exitInterrupted}
	}
	if end.RecordErr != nil {
		say(fmt.Sprintf("the run record is incomplete (%v); exit 1", end.RecordErr))
		if status == nil || errors.As(status, new(exitError)) {
			return exitError{exitFailed}
		}
	}
	return status
}

// signalContext is a context cancelled by the first SIGINT or SIGTERM,
// with the signal's name as its cause. SIGPIPE is caught as well, so that
// writing to a client that is gone fails (and stops the server) instead of
// killing the harness before it records the end.
func signalContext() (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(context.Background())
	sigc := make(chan os.Signal, 1)
	signal.Notify(sigc, os.Interrupt, syscall.SIGTERM)
	pipe := make(chan os.Signal, 1)
	signal.Notify(pipe, syscall.SIGPIPE)
	go func() {
		select {
		case sg := <-sigc:
			name := sg.String()
			if n, ok := sg.(syscall.Signal); ok {
				name = unix.SignalName(n)
			}
			cancel(errors.New(name))
		case <-ctx.Done():
		}
	}()
	return ctx, func() {
		signal.Stop(sigc)
		signal.Stop(pipe)
		cancel(nil)
	}
}

// Help is the detail of `mcp --help`: how a session ends and what it exits.
func (c *mcpCmd) Help() string {
	return `A stdio session ends when the client ends it: SIGINT (Claude Code), SIGTERM (Codex, Gemini CLI) or the end of stdin. An HTTP server (--listen) ends on SIGINT or SIGTERM. Either way the calls still in flight are cancelled (a run call's program gets SIGTERM and --grace before its tree is killed), every answer computed is written to its client, and the record's run_end says how the session ended (ended_by, how, cancelled_calls). A call whose HTTP request goes away (the client's connection was reset) is cancelled too.

Exit status: 0 when the session ended with no call in flight (run_end ended_by client_closed over stdio, stopped over HTTP); 130 when calls in flight were cut short by the end (ended_by cancelled); 1 when the session broke (its input could not be read, ended_by error) or the run record could not be written (a full disk: it says so on stderr, even if the session ended normally); 2 for a usage or policy error, before anything is served.`
}
