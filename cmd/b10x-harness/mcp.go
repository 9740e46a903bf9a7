package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

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
}

// Run serves the session's published tools over MCP: on stdin and stdout
// until the client closes its end, or with --listen over streamable HTTP
// until SIGINT or SIGTERM. The harness confines itself (Open) before it
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
	if _, err := narrow(&pol); err != nil {
		return err
	}
	approver, err := mcp.NewApprover(string(pol.Approve), c.ApproveTimeout)
	if err != nil {
		return usageError{err}
	}
	ln, token, err := c.listen()
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
	srv, err := mcp.NewServer(mcp.Config{Surface: s.Surface(), Gate: s.Gate(), Name: "b10x-harness", Version: version, Network: s.Network()})
	if err != nil {
		s.End("error")
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if ln != nil {
		fmt.Fprintf(e.stderr, "b10x-harness: mcp: listening on %s\n", termsafe.Message(ln.String()))
		logf := func(format string, args ...any) {
			fmt.Fprintln(e.stderr, "b10x-harness: mcp: http: "+termsafe.Message(fmt.Sprintf(format, args...)))
		}
		err = srv.ServeStreamable(ctx, ln, token, logf)
	} else {
		err = srv.ServeStdio(ctx, e.stdin, e.stdout)
	}
	if err != nil && ctx.Err() == nil {
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

// listen checks the HTTP flags, reads the token and opens the listener:
// nil, nil without --listen. Every failure is a usage error (exit 2).
func (c *mcpCmd) listen() (*mcp.Listener, []byte, error) {
	if c.Listen == "" {
		for _, f := range []struct{ name, v string }{{"--token-file", c.TokenFile}, {"--tls-cert", c.TLSCert}, {"--tls-key", c.TLSKey}} {
			if f.v != "" {
				return nil, nil, usagef("mcp: %s is for --listen (the stdio transport needs no token)", f.name)
			}
		}
		return nil, nil, nil
	}
	if c.TokenFile == "" {
		return nil, nil, usagef("mcp: --listen %s needs --token-file FILE: every HTTP request must carry the bearer token the file holds", c.Listen)
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		return nil, nil, usagef("mcp: --tls-cert and --tls-key go together")
	}
	token, err := mcp.ReadToken(c.TokenFile)
	if err != nil {
		return nil, nil, usageError{fmt.Errorf("mcp: %w", err)}
	}
	var tlsConf *tls.Config
	if c.TLSCert != "" {
		cert, err := tls.LoadX509KeyPair(c.TLSCert, c.TLSKey)
		if err != nil {
			return nil, nil, usageError{fmt.Errorf("mcp: --tls-cert %s, --tls-key %s: %w", c.TLSCert, c.TLSKey, err)}
		}
		tlsConf = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}}
	}
	ln, err := mcp.Listen(c.Listen, tlsConf)
	if err != nil {
		return nil, nil, usageError{fmt.Errorf("mcp: %w", err)}
	}
	return ln, token, nil
}
