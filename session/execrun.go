package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
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
	"github.com/b10x/harness/tools"
)

// Exit statuses of an Execution besides the command's own, as timeout(1),
// env(1) and docker use them: a command's own status never means the
// harness failed.
const (
	ExitFailed     = 1   // the command ran to its status, but the harness could not restore the terminal
	ExitTimeout    = 124 // the command was killed at its time limit
	ExitSetupError = 125 // the harness failed, or refused before the command ran (a bad flag or policy, strict, a confinement step)
	ExitCannotRun  = 126 // the program was found but is not an executable file
	ExitNotFound   = 127 // the program was not found
)

// TerminatingSignals are the signals an Execution forwards that end a
// command that does not handle them: the first starts the grace, after
// which the whole tree is killed. ForwardedSignals are every signal it
// passes on; a caller relays these (signal.Notify) into ExecIO.Signals.
var (
	TerminatingSignals = []os.Signal{os.Interrupt, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT}
	ForwardedSignals   = append(slices.Clone(TerminatingSignals), syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGWINCH)
)

// ExecIO is what an Execution's command is given, and how the harness
// speaks beside it.
type ExecIO struct {
	// Stdin, Stdout and Stderr are handed to the command itself (the
	// descriptors, not copies): a terminal among them is saved before
	// the command starts and restored after, whatever ended it.
	Stdin, Stdout, Stderr *os.File
	// Signals are the signals the harness received (ForwardedSignals):
	// each is passed on to the command through its sandbox's init; the
	// first of TerminatingSignals starts the policy's grace, past which
	// the whole tree is killed (at once without a grace). Nil: none.
	Signals <-chan os.Signal
	// Say is given each line the harness says beside the command: its
	// notes (none under quiet), the connections the proxy denied, why the
	// command was killed. Nil says nothing.
	Say func(line string)
	// Version is the harness's version, for the record's run_start.
	Version string
}

// ExecReport is the outcome of an Execution (exec's --report).
type ExecReport struct {
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
	// Status is what the harness exits with: the command's own status,
	// 128+N for a command killed by signal N (by a forwarded signal's
	// grace too), or one of the Exit* statuses.
	Status int `json:"status"`
	// Connections are the attempts through the proxy (allow_domain).
	Connections []record.Net `json:"connections,omitempty"`
	// Denials are what the kernel refused the command (where that is
	// attributable: doctor says), the last counting those beyond
	// max_denials.
	Denials []record.Denial `json:"kernel_denials,omitempty"`
}

// Run runs the prepared command once, to its end: under the policy's
// deadline, with the proxy served when its network is the proxy, the
// record (when the policy names one) given run_start, the connections
// and run_end. The report says how it ended. The error is non-nil only
// when the command could not be started for a reason of the host or the
// program (a *spawn.SetupError is a report with ExitSetupError, not an
// error): the caller says it and exits with ExitStatus(err).
func (x *Execution) Run(io ExecIO) (ExecReport, error) {
	say := io.Say
	if say == nil {
		say = func(string) {}
	}
	if !x.Quiet {
		for _, n := range x.Notes {
			say(n)
		}
	}
	rec, err := x.openRecord(io.Version)
	if err != nil {
		return ExecReport{}, err
	}
	stdio := spawn.Stdio{Stdin: io.Stdin, Stdout: io.Stdout, Stderr: io.Stderr}
	px, err := x.startProxy(rec)
	if err != nil {
		return ExecReport{}, err
	}
	if px.ch != nil {
		stdio.Proxy = px.ch.Child()
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	forward := make(chan os.Signal, 8)
	stdio.Signals = forward
	first := x.relaySignals(ctx, cancel, io.Signals, forward)

	// The command gets the terminal itself (spawn passes the
	// descriptors): its state is saved now and restored after, whatever
	// ended it (decision 0036). A child can make any key send SIGQUIT
	// (stty quit ^M); the restore runs all the same.
	terms := saveTerminals(io.Stdin, io.Stdout, io.Stderr)
	res, runErr := x.Runner.Run(ctx, x.Spec, stdio)
	endedBySignal := first()
	// The terminal first: a command that stopped its output (TCOOFF)
	// would block every line said on it until then.
	termErrs := restoreTerminals(terms)
	denials := x.sayDenials(res, rec, say)
	connections := px.close(say)
	for _, err := range termErrs {
		say(fmt.Sprintf("the terminal could not be restored after the command: %v", err))
	}
	rep := ExecReport{Argv: x.Spec.Argv, Program: x.Spec.Program.Path, ExitCode: res.ExitCode, Signal: res.Signal, TimedOut: res.TimedOut,
		OOMKilled: res.OOMKilled, DurationMS: res.Duration.Milliseconds(), MemoryPeak: res.MemoryPeak, PidsPeak: res.PidsPeak, Layers: res.Layers,
		Connections: connections, Denials: denials}
	rep.Missing = x.Missing(res.Layers)
	if len(rep.Missing) > 0 && runErr == nil && !x.Quiet {
		why := "this host lacks them"
		if x.MissingWhy != "" {
			why = "no cgroup leaf " + x.MissingWhy
		}
		say(fmt.Sprintf("confine auto: ran without %s (%s; see `b10x-harness doctor`)", strings.Join(rep.Missing, ", "), why))
	}
	if err := x.setStatus(&rep, res, runErr, ctx.Err() != nil, endedBySignal, say); err != nil {
		return rep, err
	}
	if len(termErrs) > 0 && rep.Status == 0 {
		rep.Status = ExitFailed
	}
	_ = rec.Write(record.RunEnd{Event: "run_end", Time: time.Now().UTC(), EndedBy: endedBy(rep.Status)})
	return rep, nil
}

// setStatus sets the report's status from how the command ended, saying
// what the harness did to it. cancelled is true when the harness ended it
// (a signal, past its grace); endedBySignal is the first terminating
// signal received. A runErr that is neither a setup error nor the
// harness's own cancelling is returned.
func (x *Execution) setStatus(rep *ExecReport, res spawn.Result, runErr error, cancelled bool, endedBySignal os.Signal, say func(string)) error {
	var se *spawn.SetupError
	switch {
	case errors.As(runErr, &se):
		rep.SetupError = se.Error()
		rep.Status = ExitSetupError
		say(se.Error())
	case runErr != nil && cancelled:
		sig, _ := endedBySignal.(syscall.Signal)
		if sig == 0 {
			sig = syscall.SIGTERM
		}
		rep.Status = 128 + int(sig)
		if x.Grace > 0 {
			say(fmt.Sprintf("the command did not end within its grace (%s) after %s; its whole process tree was killed", x.Grace, unix.SignalName(sig)))
		} else {
			say(fmt.Sprintf("interrupted (%s); the command's whole process tree was killed", unix.SignalName(sig)))
		}
	case runErr != nil:
		return runErr
	case res.TimedOut:
		rep.Status = ExitTimeout
		say(fmt.Sprintf("the command was killed at its time limit (%s), with its whole process tree", x.Spec.Timeout))
	case res.Signal != "":
		// A name the kernel does not know gives 0, which still reports
		// a non-zero status (128).
		rep.Status = 128 + int(unix.SignalNum(res.Signal))
		if res.OOMKilled {
			say("the command ran out of memory (memory.max) and was killed")
		}
	default:
		rep.Status = res.ExitCode
	}
	return nil
}

// sayDenials ends the command's watch of its kernel denials: each is
// recorded (as the one command's, call 1) and said on stderr after the
// command, with their count.
func (x *Execution) sayDenials(res spawn.Result, rec *record.Recorder, say func(string)) []record.Denial {
	r := x.denials
	if res.DomainName == "" {
		r = nil
	}
	lines, text, _, _ := tools.CollectDenials(r, res, x.maxDenials)
	for i := range lines {
		lines[i].Seq = 1
		_ = rec.Write(lines[i])
	}
	for _, l := range strings.Split(strings.TrimPrefix(text, "\n"), "\n") {
		if l != "" {
			say(termsafe.Line(l))
		}
	}
	return lines
}

// proxy is exec's egress channel and the connections it reported.
type proxy struct {
	ch    *egress.Channel
	mu    sync.Mutex
	conns []record.Net
}

// startProxy starts the egress channel when the policy's network is the
// proxy; each attempt is recorded as the one command's (call 1).
func (x *Execution) startProxy(rec *record.Recorder) (*proxy, error) {
	px := &proxy{}
	if x.Egress == nil {
		return px, nil
	}
	ch, err := egress.NewChannel(x.Egress, egress.Options{Report: func(ev egress.Event) {
		n := record.NetLine(1, ev) // the one command is call 1
		px.mu.Lock()
		px.conns = append(px.conns, n)
		px.mu.Unlock()
		_ = rec.Write(n)
	}})
	if err != nil {
		return nil, err
	}
	px.ch = ch
	return px, nil
}

// close ends every connection of the command, which ends with it, says
// each denied one and returns every attempt.
func (px *proxy) close(say func(string)) []record.Net {
	if px.ch != nil {
		for _, d := range px.ch.Close() {
			say("network: denied " + termsafe.Line(egress.Destination(d.Host, d.Port)) + " (" + termsafe.Line(d.Rule) + ")")
		}
	}
	px.mu.Lock()
	defer px.mu.Unlock()
	return px.conns
}

// relaySignals passes the signals the harness receives on to the command
// (forward) until ctx ends, and returns what gives the first terminating
// signal received (nil: none) once the command has ended. The first
// terminating signal starts the grace, past which cancel kills the whole
// tree; with no grace the tree is killed at once and the signal is not
// forwarded (a trap would run half).
func (x *Execution) relaySignals(ctx context.Context, cancel func(), sigs <-chan os.Signal, forward chan<- os.Signal) func() os.Signal {
	var mu sync.Mutex
	var first os.Signal
	var grace *time.Timer
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case sig := <-sigs:
				terminating := slices.Contains(TerminatingSignals, sig)
				if terminating && x.Grace <= 0 {
					mu.Lock()
					if first == nil {
						first = sig
					}
					mu.Unlock()
					cancel()
					continue
				}
				select {
				case forward <- sig:
				default: // the command is not reading them fast enough: drop
				}
				if !terminating {
					continue
				}
				mu.Lock()
				if first == nil {
					first = sig
					grace = time.AfterFunc(x.Grace, cancel)
				}
				mu.Unlock()
			}
		}
	}()
	return func() os.Signal {
		mu.Lock()
		defer mu.Unlock()
		if grace != nil {
			grace.Stop()
		}
		return first
	}
}

// openRecord opens the policy's record and writes its run_start; the
// recorder is nil (records nothing) without one. The file is closed with
// the Execution.
func (x *Execution) openRecord(version string) (*record.Recorder, error) {
	if x.record == "" {
		return nil, nil
	}
	f, _, err := openRecordFile(x.record)
	if err != nil {
		return nil, err
	}
	x.cleanup.add(func() { f.Close() })
	rec := record.NewRecorder(f)
	pol := record.Policy{Programs: x.Spec.Argv[:1]}
	if eff, err := json.Marshal(x.effective); err == nil {
		pol.Effective = eff
	}
	if x.file != nil {
		pol.File = &record.PolicyFile{Path: x.file.Path, SHA256: x.file.SHA256}
	}
	if err := rec.Write(record.RunStart{Event: "run_start", RecordVersion: record.Version, Time: time.Now().UTC(), Version: version,
		Command: "exec", Workspace: x.dir, Policy: pol, RunsOn: x.host}); err != nil {
		return nil, &Error{Key: "record", Err: err}
	}
	return rec, nil
}

// endedBy words an Execution's exit status for run_end.
func endedBy(status int) string {
	switch status {
	case 0:
		return "completed"
	case ExitTimeout:
		return "timeout"
	case ExitSetupError:
		return "setup_error"
	}
	return "exit_" + strconv.Itoa(status)
}

// NotRunStatus is the exit status for err, which kept a command from
// running: ExitNotFound or ExitCannotRun for a program not found or not
// executable, else ExitSetupError.
func NotRunStatus(err error) int {
	switch {
	case errors.Is(err, tools.ErrProgramNotFound) || errors.Is(err, fs.ErrNotExist):
		return ExitNotFound
	case errors.Is(err, tools.ErrProgramNotExecutable):
		return ExitCannotRun
	}
	return ExitSetupError
}
