package main

import (
	"fmt"

	"github.com/alecthomas/kong"

	"github.com/b10x/harness/internal/cliref"
)

// Shell completion and the man page are written by cliref from kong's
// model of the whole cli (fullModel), never from a list of their own: a
// flag added to a command, or to the policy table, is completed and
// documented by the binary that has it.

// completionCmd is `completion bash|zsh|fish`.
type completionCmd struct {
	Shell string `arg:"" enum:"bash,zsh,fish" help:"The shell: bash, zsh or fish."`
}

// Help is completion's --help below its summary: how each shell loads it.
func (c *completionCmd) Help() string {
	return `The script completes commands, flags, and the values of flags that take one of a set of words (--confine's modes) or a file; after -- (exec's command) it offers nothing of the harness's own. Load it for the current shell with source <(b10x-harness completion bash) in bash, source <(b10x-harness completion zsh) in zsh (after compinit), or b10x-harness completion fish | source in fish; or write it where the shell looks: ~/.local/share/bash-completion/completions/b10x-harness, _b10x-harness in a directory of zsh's $fpath, ~/.config/fish/completions/b10x-harness.fish.`
}

func (c *completionCmd) Run(k *kong.Context, e *env) error {
	app, err := fullModel(k.Model.Name, k.Model.Help)
	if err != nil {
		return err
	}
	if err := cliref.WriteCompletion(e.stdout, cliref.FromKong(app), c.Shell, cliref.Completion{Help: helpCommand}); err != nil {
		return usageError{fmt.Errorf("completion: %w", err)}
	}
	return nil
}

// helpCommand is the command realMain turns into --help (help exec is
// exec --help): its arguments are completed as command names.
const helpCommand = "help"

// fullModel is kong's model of the whole cli, as b10x-harness --help sees
// it, named name and described by description (the running model's).
// realMain builds the model of the command it runs only (cliFor), which
// for completion and man is that command alone.
func fullModel(name, description string) (*kong.Application, error) {
	p, err := kong.New(cliFor(nil), kong.Name(name), kong.Description(description), kong.Vars{"version": version})
	if err != nil {
		return nil, fmt.Errorf("bug: building the model of every command: %w", err)
	}
	orderFlags(p.Model.Node)
	return p.Model, nil
}
