package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/b10x/harness/confine/spawn"
	"github.com/b10x/harness/egress"
	"github.com/b10x/harness/internal/termsafe"
	"github.com/b10x/harness/record"
	"github.com/b10x/harness/session"
	"github.com/b10x/harness/tools"
)

type execCmd struct {
	PolicyFlags `for:"exec"`
	Report      string   `after:"record" help:"Write the outcome as JSON to this file (with every connection attempt through the proxy)." placeholder:"FILE"`
	Command     []string `arg:"" passthrough:"" help:"The program and its arguments (after --). The program is a name looked up in PATH, an absolute path, or a path with a slash relative to the working directory that resolves inside the workspace (./build.sh)."`

	// Workspace and Record are the policy's workspace and record (prepare
	// sets them).
	Workspace string `kong:"-"`
	Record    string `kong:"-"`
}

// Exit statuses of exec besides the command's own, as timeout(1), env(1)
// and docker use them: a command's own status never means the harness
// failed.
const (
	exitTimeout    = 124 // the command was killed at its time limit
	exitSetupError = 125 // the harness failed, or refused before the command ran (a bad flag or policy, strict, a confinement step)
	exitCannotRun  = 126 // the program was found but is not an executable file
	exitNotFound   = 127 // the program was not found
)

// execNotRun reports err, which kept the command from running, and
// returns exec's status for it: 127 or 126 for a program not found or not
// executable, else 125.
func execNotRun(e *env, err error) error {
	fmt.Fprintf(e.stderr, "b10x-harness: %s\n", termsafe.Message(renderError(err, e.sources)))
	switch {
	case errors.Is(err, tools.ErrProgramNotFound) || errors.Is(err, fs.ErrNotExist):
		return exitError{exitNotFound}
	case errors.Is(err, tools.ErrProgramNotExecutable):
		return exitError{exitCannotRun}
	}
	return exitError{exitSetupError}
}

// terminating are the signals exec forwards that end a command that does
// not handle them: the first starts the grace, after which the whole tree
// is killed.
var terminating = []os.Signal{os.Interrupt, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT}

// execReport is the --report file.
type execReport struct {
	Argv       []string `json:"argv"`
	Program    string   `json:"program"`
	ExitCode   int      `json:"exit_code"`
	Signal     string   `json:"signal,omitempty"`
	TimedOut   bool     `json:"timed_out"`
	OOMKilled  bool     `json:"oom_killed"`
	DurationMS int64    `json:"duration_ms"`
	MemoryPeak int64    `json:"memory_peak_bytes"`
	PidsPeak   int64    `json:"pids_peak"`
	Layers     []string `json:"layers"`
	Missing    []string `json:"missing_layers"`
	SetupError string   `json:"setup_error,omitempty"`
	Status     int      `json:"status"` // what b10x-harness exec exited with
	// Connections are the attempts through the proxy (--allow-domain).
	Connections []record.Net `json:"connections,omitempty"`
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
	quiet := x.Quiet
	for _, n := range x.Notes {
		if !quiet {
			fmt.Fprintln(e.stderr, "b10x-harness: "+termsafe.Message(n))
		}
	}
	runner, spec, timeout := x.Runner, x.Spec, x.Spec.Timeout
	rec, closeRec, err := c.openRecord(argv)
	if err != nil {
		return execNotRun(e, err)
	}
	defer closeRec()
	var netMu sync.Mutex
	var conns []record.Net
	stdio := spawn.Stdio{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr}
	var ch *egress.Channel
	if x.Egress != nil {
		ch, err = egress.NewChannel(x.Egress, egress.Options{Report: func(ev egress.Event) {
			n := ev.Line(1) // exec's one command is call 1
			netMu.Lock()
			conns = append(conns, n)
			netMu.Unlock()
			_ = rec.Write(n)
		}})
		if err != nil {
			return execNotRun(e, err)
		}
		stdio.Proxy = ch.Child()
	}
	// The child gets the user's terminal itself (spawn passes the
	// descriptors): its state is saved now and restored after the call,
	// whatever ended it. The signals a supervisor passes on are caught
	// until then and forwarded to the command (through its sandbox's
	// init), as a CI runner's SIGTERM or a Ctrl-C expects: the command
	// may clean up and exit with a status of its own. The first that
	// ends a command starts the grace; past it the whole tree is killed.
	// (A child can make any key send SIGQUIT: stty quit ^M; the restore
	// runs all the same.)
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, append(slices.Clone(terminating), syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGWINCH)...)
	defer signal.Stop(sigs)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	forward := make(chan os.Signal, 8)
	stdio.Signals = forward
	var firstMu sync.Mutex
	var first os.Signal // the first terminating signal received
	var graceTimer *time.Timer
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case sig := <-sigs:
				if x.Grace <= 0 && slices.Contains(terminating, sig) {
					// No grace: the whole tree is killed at once, the
					// signal not forwarded (a trap would run half).
					firstMu.Lock()
					if first == nil {
						first = sig
					}
					firstMu.Unlock()
					cancel()
					continue
				}
				select {
				case forward <- sig:
				default: // the command is not reading them fast enough: drop
				}
				if !slices.Contains(terminating, sig) {
					continue
				}
				firstMu.Lock()
				if first == nil {
					first = sig
					if x.Grace <= 0 {
						cancel()
					} else {
						graceTimer = time.AfterFunc(x.Grace, cancel)
					}
				}
				firstMu.Unlock()
			}
		}
	}()
	terms := saveTerminals(os.Stdin, os.Stdout, os.Stderr)
	res, runErr := runner.Run(ctx, spec, stdio)
	firstMu.Lock()
	if graceTimer != nil {
		graceTimer.Stop()
	}
	endedBySignal := first
	firstMu.Unlock()
	termErrs := restoreTerminals(terms)
	if ch != nil {
		// Every connection of the command ends with it.
		for _, d := range ch.Close() {
			fmt.Fprintf(e.stderr, "b10x-harness: network: denied %s (%s)\n", termsafe.Line(egress.Destination(d.Host, d.Port)), termsafe.Line(d.Rule))
		}
	}
	netMu.Lock()
	connections := conns
	netMu.Unlock()
	for _, err := range termErrs {
		fmt.Fprintf(e.stderr, "b10x-harness: the terminal could not be restored after the command: %v\n", err)
	}
	rep := execReport{Argv: argv, Program: spec.Program.Path, ExitCode: res.ExitCode, Signal: res.Signal, TimedOut: res.TimedOut,
		OOMKilled: res.OOMKilled, DurationMS: res.Duration.Milliseconds(), MemoryPeak: res.MemoryPeak, PidsPeak: res.PidsPeak, Layers: res.Layers,
		Connections: connections}
	rep.Missing = x.Missing(res.Layers)
	if len(rep.Missing) > 0 && runErr == nil && !quiet {
		why := "this host lacks them"
		if x.MissingWhy != "" {
			why = "no cgroup leaf " + x.MissingWhy
		}
		fmt.Fprintf(e.stderr, "b10x-harness: confine auto: ran without %s (%s; see `b10x-harness doctor`)\n", termsafe.Message(strings.Join(rep.Missing, ", ")), termsafe.Message(why))
	}
	var se *spawn.SetupError
	switch {
	case errors.As(runErr, &se):
		rep.SetupError = se.Error()
		rep.Status = exitSetupError
		fmt.Fprintf(e.stderr, "b10x-harness: %v\n", se)
	case runErr != nil && ctx.Err() != nil:
		sig, _ := endedBySignal.(syscall.Signal)
		if sig == 0 {
			sig = syscall.SIGTERM
		}
		rep.Status = 128 + int(sig)
		if x.Grace > 0 {
			fmt.Fprintf(e.stderr, "b10x-harness: the command did not end within its grace (%s) after %s; its whole process tree was killed\n", x.Grace, unix.SignalName(sig))
		} else {
			fmt.Fprintf(e.stderr, "b10x-harness: interrupted (%s); the command's whole process tree was killed\n", unix.SignalName(sig))
		}
	case runErr != nil:
		return execNotRun(e, runErr)
	case res.TimedOut:
		rep.Status = exitTimeout
		fmt.Fprintf(e.stderr, "b10x-harness: the command was killed at its time limit (%s), with its whole process tree\n", timeout)
	case res.Signal != "":
		rep.Status = 128 + signalNumber(res.Signal)
		if res.OOMKilled {
			fmt.Fprintln(e.stderr, "b10x-harness: the command ran out of memory (memory.max) and was killed")
		}
	default:
		rep.Status = res.ExitCode
	}
	if len(termErrs) > 0 && rep.Status == 0 {
		rep.Status = exitFailed
	}
	_ = rec.Write(record.RunEnd{Event: "run_end", Time: time.Now().UTC(), EndedBy: endedBy(rep.Status)})
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

// signalNumber maps a signal name ("SIGKILL") to its number. A name the
// kernel does not know gives 0, which still reports a non-zero status (128).
func signalNumber(name string) int { return int(unix.SignalNum(name)) }

// prepare turns exec's flags (and --policy's keys) into a policy and
// readies argv under it.
func (c *execCmd) prepare(e *env, argv []string) (*session.Execution, error) {
	pol, err := c.policy(e)
	if err != nil {
		return nil, err
	}
	c.Workspace, c.Record = pol.Workspace, pol.Record
	return session.Prepare(pol, argv)
}

// openRecord opens --record and writes its run_start; the recorder is nil
// (records nothing) without --record.
func (c *execCmd) openRecord(argv []string) (*record.Recorder, func(), error) {
	if c.Record == "" {
		return nil, func() {}, nil
	}
	f, _, err := record.Open(c.Record)
	if err != nil {
		return nil, nil, usagef("--record: %v", err)
	}
	rec := record.NewRecorder(f)
	ws, _ := filepath.Abs(c.Workspace)
	if err := rec.Write(record.RunStart{Event: "run_start", RecordVersion: record.Version, Time: time.Now().UTC(), Version: version,
		Command: "exec", Workspace: ws, Policy: record.Policy{Programs: argv[:1]}}); err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("--record: %w", err)
	}
	return rec, func() { f.Close() }, nil
}

// endedBy words exec's exit status for run_end.
func endedBy(status int) string {
	switch status {
	case 0:
		return "completed"
	case exitTimeout:
		return "timeout"
	case exitSetupError:
		return "setup_error"
	}
	return "exit_" + strconv.Itoa(status)
}
