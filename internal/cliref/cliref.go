// Package cliref writes the reference of a command line: its completion
// scripts for bash, zsh and fish (WriteCompletion) and its manual page in
// roff, section 1 (WriteMan), both from one model of its commands,
// arguments and flags (Command), which FromKong makes from kong's. Neither
// keeps a list of its own: a flag added to a command is completed and
// documented by the binary that has it. What is hidden (a command, a flag)
// is in neither.
//
// It is the one package below cmd that speaks in flags, since a command
// line is what it renders; nothing but cmd imports it.
//
// # What the scripts complete
//
// Commands; flags, with their aliases, negations (--no-x) and short forms,
// and a parent's flags below it; the value of a flag or an argument that
// takes one of a set of words (Enum) or a file (File), in every form the
// shell splits --flag=value into; and after the help command (Completion.Help)
// the names of commands. After -- or from a passthrough argument on (Rest:
// a program and its arguments) a script offers the shell's own completion,
// nothing of the program's.
//
// The output is a function of the model and the options only: the same
// model gives the same bytes, so a test can compare a script or a page
// whole.
package cliref

import (
	"strings"
	"unicode"
)

// Command is one command of a command line as its reference shows it; the
// root is the program itself (its Name is the program's, its Path "").
// FromKong makes the tree; hidden commands and flags are not in it.
type Command struct {
	Name string
	// Path is the command's names from the root, space-separated
	// ("policy show"); "" for the root.
	Path string
	// Usage is what follows the program and Path in the command's usage
	// line: "<file> [flags]".
	Usage  string
	Help   string // its help; the first sentence is its summary
	Detail string // help written after Help, "" for none
	// Flags are the command's own; it takes its parents' flags too.
	Flags    []Flag
	Args     []Arg // its positional arguments, in order
	Children []*Command
}

// Flag is one flag of a command.
type Flag struct {
	Name     string   // without its dashes: "confine"
	Aliases  []string // other long names, without dashes
	Negation string   // the name that sets a bool flag false ("no-color"), "" for none
	Short    rune     // its one-letter form, 0 for none
	Help     string
	Value    Value // what it takes; a bool or a counter takes None
	Repeat   bool  // it may be given more than once
	// Placeholder is what its value is called ("FILE"), "" when nothing
	// calls it; Type the name of the value's type when it is not a string
	// ("INT", "DURATION"), else "".
	Placeholder string
	Type        string
	Default     string // its default, "" for none
}

// Arg is one positional argument of a command.
type Arg struct {
	Name     string
	Summary  string // as a usage line writes it: "<file>", "[<task>]", "<command> ..."
	Help     string
	Value    Value
	Optional bool
	Repeat   bool // it takes every word after it
}

// Kind is what a flag or an argument takes.
type Kind int

const (
	None Kind = iota // nothing: a flag that is a bool or a counter
	Any              // a value of its own, nothing to offer
	File             // a path: the shell's file names
	Enum             // one of Value.Words
	Rest             // it and every word after it are not the program's (a passthrough)
)

// Value is what a flag or an argument takes.
type Value struct {
	Kind  Kind
	Words []string // Enum's
}

// long is every long form of f as typed: --name, --alias..., --negation.
func (f Flag) long() []string {
	out := []string{"--" + f.Name}
	for _, a := range f.Aliases {
		out = append(out, "--"+a)
	}
	if f.Negation != "" {
		out = append(out, "--"+f.Negation)
	}
	return out
}

// short is f's short form as typed (-h), "" for none.
func (f Flag) short() string {
	if f.Short == 0 {
		return ""
	}
	return "-" + string(f.Short)
}

// names is every form of f as typed, the short one last.
func (f Flag) names() []string {
	if f.Short == 0 {
		return f.long()
	}
	return append(f.long(), f.short())
}

// placeholder is what f's value is called in a script: its placeholder,
// else its name in capitals ("" for a flag that takes no value).
func (f Flag) placeholder() string {
	switch {
	case f.Value.Kind == None:
		return ""
	case f.Placeholder != "":
		return f.Placeholder
	}
	return strings.ToUpper(f.Name)
}

// walk calls fn for c and every command below it, parents first, with the
// flags each takes: its own and its parents', the nearest first.
func (c *Command) walk(fn func(c *Command, flags []Flag)) {
	var visit func(c *Command, above []Flag)
	visit = func(c *Command, above []Flag) {
		flags := append(append([]Flag(nil), c.Flags...), above...)
		fn(c, flags)
		for _, ch := range c.Children {
			visit(ch, flags)
		}
	}
	visit(c, nil)
}

// firstSentence is s up to its first full stop followed by a capital, on
// one line, without the stop: a description a shell shows beside a name.
func firstSentence(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	for i := 0; i+2 < len(s); i++ {
		if s[i] == '.' && s[i+1] == ' ' && unicode.IsUpper(rune(s[i+2])) {
			return s[:i]
		}
	}
	return strings.TrimSuffix(s, ".")
}
