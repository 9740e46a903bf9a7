package cliref

import (
	"fmt"
	"io"
	"strings"
)

// Completion is what a completion script says beyond the model. Its zero
// value is a program's whose command `NAME completion SHELL` prints the
// script and whose command `help` shows another's help.
type Completion struct {
	// Command is the command line that prints the scripts, without the
	// shell; a script says it was made by Command and the shell's name
	// and how to load it. "" is the program's name and " completion".
	Command string
	// Help is the command whose arguments name another command, whose
	// help it shows (help policy show): its arguments are completed as
	// commands, and a first word of this name starts them whether or not
	// the model has such a command. "" is "help".
	Help string
}

// Shells are the shells WriteCompletion writes for.
var Shells = []string{"bash", "zsh", "fish"}

// WriteCompletion writes root's completion script for shell (one of
// Shells) to w. Any other shell is an error naming it and Shells; nothing
// is written then.
func WriteCompletion(w io.Writer, root *Command, shell string, o Completion) error {
	n := scriptNames(root, shell, o)
	var script string
	switch shell {
	case "bash":
		script = bash(root, n)
	case "zsh":
		script = zsh(root, n)
	case "fish":
		script = fish(root, n)
	default:
		return fmt.Errorf("no such shell %q: bash, zsh or fish", shell)
	}
	_, err := io.WriteString(w, script)
	return err
}

// names are what a script's fixed text is written with.
type names struct {
	name   string // the program: b10x-harness
	fn     string // the program as part of a shell function's name: b10x_harness
	source string // what prints the script: b10x-harness completion bash
	help   string // the help command
}

func scriptNames(root *Command, shell string, o Completion) names {
	n := names{name: root.Name, source: o.Command, help: o.Help}
	if n.source == "" {
		n.source = root.Name + " completion"
	}
	n.source += " " + shell
	if n.help == "" {
		n.help = "help"
	}
	n.fn = strings.Map(func(r rune) rune {
		if r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' {
			return r
		}
		return '_'
	}, root.Name)
	return n
}

// expand is text with {{name}}, {{fn}}, {{source}} and {{help}} replaced
// by n's.
func (n names) expand(text string) string {
	return strings.NewReplacer("{{name}}", n.name, "{{fn}}", n.fn, "{{source}}", n.source, "{{help}}", n.help).Replace(text)
}

// shq quotes s for bash (and zsh) as one word.
func shq(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// quoteAll is each of words quoted by q.
func quoteAll(words []string, q func(string) string) []string {
	out := make([]string, len(words))
	for i, w := range words {
		out[i] = q(w)
	}
	return out
}

// shWords is words quoted for bash, separated by spaces.
func shWords(words []string) string { return strings.Join(quoteAll(words, shq), " ") }
