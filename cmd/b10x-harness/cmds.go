package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"unicode/utf8"

	"github.com/b10x/harness/gate"
	"github.com/b10x/harness/internal/setting"
	"github.com/b10x/harness/internal/termsafe"
	"github.com/b10x/harness/policy"
	"github.com/b10x/harness/session"
	"github.com/b10x/harness/surface"
	"github.com/b10x/harness/tools"
)

type toolsCmd struct {
	PolicyFlags `for:"tools"`
	JSON        bool `help:"Print the exact tool definitions as JSON."`
}

func (c *toolsCmd) Run(e *env) error {
	pol, err := c.policy(e)
	if err != nil {
		return err
	}
	s, err := session.Open(context.Background(), pol, e.options("tools"))
	if err != nil {
		return err
	}
	defer s.End("completed")
	if c.JSON {
		defs := s.Surface().Definitions()
		if defs == nil {
			defs = []surface.Def{}
		}
		return writeJSON(e.stdout, "  ", defs)
	}
	return s.Surface().WriteText(e.stdout)
}

type callCmd struct {
	PolicyFlags `for:"call"`
	Tool        string `arg:"" help:"The tool to call."`
	Args        string `arg:"" optional:"" help:"The arguments as a JSON object, or - to read them from stdin." placeholder:"ARGS_JSON"`
}

// maxStdinArgs bounds what call - reads from stdin. The gate refuses
// arguments above its own cap (8 MiB) with their real size; this bound
// keeps the harness from reading an endless stream to learn it.
const maxStdinArgs = 64 << 20

// readLimited reads r to its end, refusing (a usage error naming what,
// the limit and the size read so far) anything larger than limit bytes.
func readLimited(r io.Reader, limit int64, what string) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, usagef("reading %s: %v", what, err)
	}
	if int64(len(b)) > limit {
		return nil, usagef("%s are more than %d bytes (%s), the limit; nothing was done", what, limit, policy.FormatSize(limit))
	}
	return b, nil
}

func (c *callCmd) Run(e *env) error {
	raw := []byte(c.Args)
	if n := len(e.args); n > 0 && !utf8.ValidString(e.args[n-1]) && strings.ToValidUTF8(e.args[n-1], "\uFFFD") == c.Args {
		raw = []byte(e.args[n-1]) // as given: the decoder refuses invalid UTF-8
	}
	if c.Args == "-" {
		b, err := readLimited(e.stdin, maxStdinArgs, "the arguments read from stdin")
		if err != nil {
			return err
		}
		raw = b
	}
	if len(strings.TrimSpace(string(raw))) == 0 {
		raw = []byte("{}")
	}
	pol, err := c.policy(e)
	if err != nil {
		return err
	}
	if pol.Surface == policy.SurfaceFlat {
		pol.OnlyTool = c.Tool
	}
	s, err := session.Open(context.Background(), pol, e.options("call"))
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	out := s.Call(ctx, c.Tool, json.RawMessage(raw))
	switch out.Reason {
	case tools.ReasonCancelled, tools.ReasonTimeout:
		s.End(string(out.Reason))
	default:
		s.End("completed")
	}
	if err := writeJSON(e.stdout, "", out); err != nil {
		return err
	}
	switch out.Status {
	case gate.Executed:
		return nil
	case gate.Refused:
		return exitError{exitRefused}
	}
	return exitError{exitFailed}
}

// options are a session's options for command: notes go to stderr, one
// line each, made safe for a terminal. A model's session (run, mcp) keeps
// a run sandbox started ahead; call's one call does not. A note names a
// setting by its flag.
func (e *env) options(command string) session.Options {
	return session.Options{Command: command, Version: version, Prestart: command == "run" || command == "mcp", Name: setting.Flag, Logf: func(format string, args ...any) {
		fmt.Fprintln(e.stderr, "b10x-harness: "+termsafe.Message(fmt.Sprintf(format, args...)))
	}}
}
