package tools

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/b10x/harness/confine/spawn"
	"github.com/b10x/harness/egress"
)

// ProbeRun does, with cfg, everything a run call does — namespaces, the
// cgroup leaf, every mount of the view, the child's identity, seccomp and
// Landlock — up to the execve of the program, which it never executes (see
// spawn.Spec.Probe). It proves that the run tool cfg describes would reach
// its programs on this host: a tool that cannot is not to be published.
// The program bound is the first declared one (by name); cfg.Programs must
// not be empty.
//
// The error is the spawn error of the step that failed (a *spawn.SetupError
// or a *spawn.RemoteError naming it), or a failure to run at all.
func ProbeRun(ctx context.Context, cfg RunConfig) error {
	names := cfg.Programs.Names()
	if len(names) == 0 {
		return errors.New("tools: probe run: no program declared")
	}
	// Exactly what a call in the workspace's root would be given.
	spec := cfg.spec(cfg.Programs[names[0]], []string{names[0]}, cfg.View.Workspace.Path, 30*time.Second)
	spec.Probe = true
	var stdio spawn.Stdio
	var ch *egress.Channel
	if cfg.Egress != nil {
		// The proxy's listener is part of what a call is given.
		var err error
		if ch, err = egress.NewChannel(cfg.Egress, egress.Options{}); err != nil {
			return err
		}
		defer ch.Close()
		stdio.Proxy = ch.Child()
	}
	res, err := cfg.Runner.Run(ctx, spec, stdio)
	if err != nil {
		return err
	}
	if ch != nil {
		ch.Close()
		if !ch.Served() {
			return errors.New("tools: probe run: the helper gave no proxy listener")
		}
	}
	if res.ExitCode != 0 || res.TimedOut {
		return fmt.Errorf("tools: probe run ended with exit %d (signal %q, timed out %v) before reaching its program", res.ExitCode, res.Signal, res.TimedOut)
	}
	return nil
}
