package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"strings"

	"github.com/b10x/harness/internal/termsafe"
	"github.com/b10x/harness/session"
)

type execCmd struct {
	PolicyFlags `for:"exec"`
	Report      string   `after:"record" help:"Write the outcome as JSON to this file (with every connection attempt through the proxy)." placeholder:"FILE"`
	Command     []string `arg:"" passthrough:"" help:"The program and its arguments (after --). The program is a name looked up in PATH, an absolute path, or a path with a slash relative to the working directory that resolves inside the workspace (./build.sh)."`
}

// Exit statuses of exec besides the command's own (session.Exit*).
const (
	exitTimeout    = session.ExitTimeout
	exitSetupError = session.ExitSetupError
	exitCannotRun  = session.ExitCannotRun
	exitNotFound   = session.ExitNotFound
)

// execNotRun reports err, which kept the command from running, and
// returns exec's status for it (session.NotRunStatus).
func execNotRun(e *env, err error) error {
	fmt.Fprintf(e.stderr, "b10x-harness: %s\n", termsafe.Message(renderError(err, e.sources)))
	return exitError{session.NotRunStatus(err)}
}

func (c *execCmd) Run(e *env) error {
	argv := c.Command
	if len(argv) > 0 && argv[0] == "--" {
		argv = argv[1:]
	}
	if len(argv) == 0 {
		return execNotRun(e, usagef("exec: no command given (b10x-harness exec [flags] -- PROGRAM ARGS...)"))
	}
	if strings.HasPrefix(argv[0], "-") {
		// Kong hands an unknown flag to the passthrough command.
		hint := ""
		if argv[0] == "--max-output" || strings.HasPrefix(argv[0], "--max-output=") {
			hint = "; exec does not capture output (the program writes to the harness's own stdout and stderr), so it has no --max-output"
		}
		return execNotRun(e, usagef("exec: %s is not a flag of exec (the program and its arguments come after --)%s", argv[0], hint))
	}
	x, err := c.prepare(e, argv)
	if err != nil {
		return execNotRun(e, err)
	}
	defer x.Close()
	// The signals a supervisor passes on are caught until the command
	// ends and forwarded to it, as a CI runner's SIGTERM or a Ctrl-C
	// expects: it may clean up and exit with a status of its own.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, session.ForwardedSignals...)
	defer signal.Stop(sigs)
	rep, err := x.Run(session.ExecIO{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Signals: sigs, Version: version,
		Say: func(line string) { fmt.Fprintln(e.stderr, "b10x-harness: "+termsafe.Message(line)) }})
	if err != nil {
		return execNotRun(e, err)
	}
	if c.Report != "" {
		b, _ := json.MarshalIndent(rep, "", "  ")
		if err := os.WriteFile(c.Report, append(b, '\n'), 0o644); err != nil {
			fmt.Fprintf(e.stderr, "b10x-harness: --report: %v\n", err)
			if rep.Status == 0 {
				rep.Status = exitFailed
			}
		}
	}
	if rep.Status != 0 {
		return exitError{rep.Status}
	}
	return nil
}

// prepare turns exec's flags (and --policy's keys) into a policy and
// readies argv under it.
func (c *execCmd) prepare(e *env, argv []string) (*session.Execution, error) {
	pol, err := c.policy(e)
	if err != nil {
		return nil, err
	}
	return session.Prepare(pol, argv)
}
