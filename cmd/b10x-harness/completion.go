package main

import (
	"fmt"
	"io"
	"strings"
	"unicode"

	"github.com/alecthomas/kong"
)

// Shell completion and the man page are written from kong's model of the
// whole cli (fullModel), never from a list of their own: a flag added to a
// command, or to the policy table, is completed and documented by the
// binary that has it. Hidden commands and flags are left out of both.

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
	return writeCompletion(e.stdout, app, c.Shell)
}

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

// writeCompletion writes app's completion script for shell (bash, zsh or
// fish); any other shell is a usage error naming it and the three.
func writeCompletion(w io.Writer, app *kong.Application, shell string) error {
	root := completionTree(app)
	var script string
	switch shell {
	case "bash":
		script = bashCompletion(root)
	case "zsh":
		script = zshCompletion(root)
	case "fish":
		script = fishCompletion(root)
	default:
		return usagef("completion: no such shell %q: bash, zsh or fish", shell)
	}
	_, err := io.WriteString(w, script)
	return err
}

// helpCommand is the command realMain turns into --help (help exec is
// exec --help): its arguments are completed as command names.
const helpCommand = "help"

// valueKind is what a flag or a positional argument takes.
type valueKind int

const (
	valueNone valueKind = iota // a flag that takes no value (a bool, a counter)
	valueAny                   // a value of its own, nothing to offer
	valueFile                  // a path: the shell's file names
	valueEnum                  // one of words
	valueRest                  // it and every word after it are not ours (exec's command)
)

// compValue is what a flag or a positional argument takes.
type compValue struct {
	kind  valueKind
	words []string // valueEnum's
}

// compFlag is one visible flag of a command.
type compFlag struct {
	long        []string // --name, --alias..., --no-name: as typed
	short       string   // -h, or ""
	value       compValue
	repeat      bool // it may be given more than once
	help        string
	placeholder string // what its value is called, valueAny and valueFile
}

// names is every form of f as typed, the short one last.
func (f compFlag) names() []string {
	if f.short == "" {
		return f.long
	}
	return append(append([]string(nil), f.long...), f.short)
}

// compArg is one positional argument of a command.
type compArg struct {
	name     string
	value    compValue
	optional bool
	repeat   bool // it takes every word after it (cumulative)
	help     string
}

// compCmd is a command as completion sees it: kong's node without what is
// hidden.
type compCmd struct {
	name     string
	path     string // the command names from the root, space-separated; "" for the root
	help     string
	parent   *compCmd
	children []*compCmd
	flags    []compFlag // its own; kong takes its parents' after it too
	args     []compArg
}

// allFlags is c's flags and its parents', the nearest first.
func (c *compCmd) allFlags() []compFlag {
	var out []compFlag
	for n := c; n != nil; n = n.parent {
		out = append(out, n.flags...)
	}
	return out
}

// walk calls fn for c and every command below it, parents first.
func (c *compCmd) walk(fn func(*compCmd)) {
	fn(c)
	for _, ch := range c.children {
		ch.walk(fn)
	}
}

// completionTree is app's commands, flags and arguments, hidden ones left
// out.
func completionTree(app *kong.Application) *compCmd {
	var build func(n *kong.Node, parent *compCmd) *compCmd
	build = func(n *kong.Node, parent *compCmd) *compCmd {
		c := &compCmd{name: n.Name, help: n.Help, parent: parent}
		if parent != nil {
			c.path = strings.TrimSpace(parent.path + " " + n.Name)
		}
		for _, f := range n.Flags {
			if f.Hidden {
				continue
			}
			cf := compFlag{long: []string{"--" + f.Name}, value: valueOf(f.Value, f.PlaceHolder), repeat: f.IsCumulative() || f.IsCounter(), help: f.Help, placeholder: placeholderOf(f)}
			for _, a := range f.Aliases {
				cf.long = append(cf.long, "--"+a)
			}
			if neg := negation(f); neg != "" {
				cf.long = append(cf.long, neg)
			}
			if f.Short != 0 {
				cf.short = "-" + string(f.Short)
			}
			c.flags = append(c.flags, cf)
		}
		for _, p := range n.Positional {
			a := compArg{name: p.Name, value: valueOf(p, p.Tag.PlaceHolder), optional: !p.Required, repeat: p.IsCumulative(), help: p.Help}
			if n.Passthrough || p.Passthrough || p.PassthroughMode != kong.PassThroughModeNone {
				a.value = compValue{kind: valueRest}
			}
			c.args = append(c.args, a)
		}
		for _, ch := range n.Children {
			if ch.Hidden || ch.Type != kong.CommandNode {
				continue
			}
			c.children = append(c.children, build(ch, c))
		}
		return c
	}
	return build(app.Node, nil)
}

// negation is the --no-name (or the named negation) a negatable bool flag
// also answers to, "" for any other.
func negation(f *kong.Flag) string {
	switch f.Tag.Negatable {
	case "":
		return ""
	case "_": // kong's mark for the default negation
		return "--no-" + f.Name
	default:
		return "--" + f.Tag.Negatable
	}
}

// valueOf is what v takes, placeholder being what its value is called.
func valueOf(v *kong.Value, placeholder string) compValue {
	switch {
	case v.Flag != nil && (v.IsBool() || v.IsCounter()):
		return compValue{kind: valueNone}
	case v.Enum != "":
		return compValue{kind: valueEnum, words: v.EnumSlice()}
	case takesPath(v, placeholder):
		return compValue{kind: valueFile}
	}
	return compValue{kind: valueAny}
}

// takesPath reports whether v is a path: its kong type is one, or it is
// called a FILE, DIR or PATH.
func takesPath(v *kong.Value, placeholder string) bool {
	switch v.Tag.Type {
	case "path", "existingfile", "existingdir", "filecontent":
		return true
	}
	name := strings.ToUpper(placeholder)
	if name == "" {
		name = strings.ToUpper(v.Name)
	}
	for _, p := range []string{"FILE", "DIR", "PATH"} {
		if name == p || strings.HasSuffix(name, "_"+p) || strings.HasSuffix(name, "-"+p) {
			return true
		}
	}
	return false
}

// placeholderOf is what f's value is called: its placeholder, else its
// name in capitals ("" for a flag that takes no value).
func placeholderOf(f *kong.Flag) string {
	switch {
	case f.IsBool() || f.IsCounter():
		return ""
	case f.PlaceHolder != "":
		return f.PlaceHolder
	}
	return strings.ToUpper(f.Name)
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

// --- bash

// shq quotes s for bash (and zsh) as one word.
func shq(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// shWords is words quoted, separated by spaces.
func shWords(words []string) string {
	q := make([]string, len(words))
	for i, w := range words {
		q[i] = shq(w)
	}
	return strings.Join(q, " ")
}

// bashValue is the assignments that say v to the script's walker.
func bashValue(v compValue) string {
	switch v.kind {
	case valueEnum:
		return "kind=enum words=(" + shWords(v.words) + ")"
	case valueFile:
		return "kind=file"
	case valueRest:
		return "kind=rest"
	}
	return "kind=any"
}

// bashCompletion is the bash script: lookup functions generated from the
// tree, and a walker that reads COMP_WORDS through them.
func bashCompletion(root *compCmd) string {
	var b strings.Builder
	b.WriteString(`# bash completion for b10x-harness, generated by b10x-harness completion bash.
# Load it with: source <(b10x-harness completion bash)

# __b10x_harness_cmds PATH sets words to the commands below PATH.
__b10x_harness_cmds() {
	case $1 in
`)
	root.walk(func(c *compCmd) {
		if len(c.children) == 0 {
			return
		}
		names := make([]string, len(c.children))
		for i, ch := range c.children {
			names[i] = ch.name
		}
		fmt.Fprintf(&b, "\t%s) words=(%s) ;;\n", shq(c.path), shWords(names))
	})
	b.WriteString(`	*) words=() ;;
	esac
}

# __b10x_harness_flags PATH sets words to the flags PATH takes, its
# parents' included.
__b10x_harness_flags() {
	case $1 in
`)
	root.walk(func(c *compCmd) {
		var names []string
		for _, f := range c.allFlags() {
			names = append(names, f.names()...)
		}
		fmt.Fprintf(&b, "\t%s) words=(%s) ;;\n", shq(c.path), shWords(names))
	})
	b.WriteString(`	*) words=() ;;
	esac
}

# __b10x_harness_value PATH FLAG sets kind (enum, file or any) and words
# (enum's) to what FLAG takes in PATH; it fails for a flag that takes no
# value.
__b10x_harness_value() {
	words=()
	case $1 in
`)
	root.walk(func(c *compCmd) {
		fmt.Fprintf(&b, "\t%s)\n\t\tcase $2 in\n", shq(c.path))
		for _, f := range c.allFlags() {
			if f.value.kind == valueNone {
				continue
			}
			fmt.Fprintf(&b, "\t\t%s) %s ;;\n", strings.Join(quoteAll(f.names()), "|"), bashValue(f.value))
		}
		b.WriteString("\t\t*) return 1 ;;\n\t\tesac ;;\n")
	})
	b.WriteString(`	*) return 1 ;;
	esac
}

# __b10x_harness_arg PATH N is __b10x_harness_value for the positional
# argument N (from 0) of PATH; kind rest: it and every word after it are
# not the harness's (exec's command).
__b10x_harness_arg() {
	words=()
	case $1 in
`)
	root.walk(func(c *compCmd) {
		if len(c.args) == 0 || c.path == helpCommand {
			return
		}
		fmt.Fprintf(&b, "\t%s)\n\t\tcase $2 in\n", shq(c.path))
		for i, a := range c.args {
			pat := fmt.Sprint(i)
			if a.repeat && i == len(c.args)-1 {
				pat = "*" // every N not matched above is past i
			}
			fmt.Fprintf(&b, "\t\t%s) %s ;;\n", pat, bashValue(a.value))
		}
		b.WriteString("\t\t*) return 1 ;;\n\t\tesac ;;\n")
	})
	fmt.Fprintf(&b, `	*) return 1 ;;
	esac
}

# __b10x_harness_offer PREFIX offers words matching $cur, PREFIX before each.
__b10x_harness_offer() {
	local w
	for w in "${words[@]}"; do
		[[ $w == "$cur"* ]] && COMPREPLY+=("$1$w")
	done
}

_b10x_harness() {
	local cur=${COMP_WORDS[COMP_CWORD]} path= n=0 helping= flag= pre= kind i w
	local -a words
	COMPREPLY=()
	for ((i = 1; i < COMP_CWORD; i++)); do
		w=${COMP_WORDS[i]}
		case $w in
		--)
			# What follows is exec's command, or arguments: not ours.
			compopt -o default 2>/dev/null
			return 0 ;;
		-?*=*) ;;
		-?*)
			if __b10x_harness_value "$path" "$w"; then
				# Its value: the next word, or the one after a lone =
				# (COMP_WORDBREAKS splits --flag=value in three).
				if ((i + 1 < COMP_CWORD)) && [[ ${COMP_WORDS[i+1]} == = ]]; then
					((i++))
				fi
				if ((i + 1 == COMP_CWORD)); then
					flag=$w
					break
				fi
				((i++))
			fi ;;
		*)
			if [[ -z $path && -z $helping && $w == %s ]]; then
				helping=1
				continue
			fi
			__b10x_harness_cmds "$path"
			if [[ " ${words[*]} " == *" $w "* ]]; then
				path=${path:+$path }$w n=0
				continue
			fi
			if [[ -z $helping ]] && __b10x_harness_arg "$path" "$n" && [[ $kind == rest ]]; then
				compopt -o default 2>/dev/null
				return 0
			fi
			((n++)) ;;
		esac
	done
	if [[ -z $flag && $cur == -?*=* ]]; then
		flag=${cur%%%%=*} pre=${cur%%%%=*}= cur=${cur#*=}
	fi
	[[ $cur == = ]] && cur=
	if [[ -n $flag ]]; then
		__b10x_harness_value "$path" "$flag"
	elif [[ $cur == -* ]]; then
		__b10x_harness_flags "$path"
		kind=enum
	elif [[ -n $helping ]]; then
		__b10x_harness_cmds "$path"
		kind=enum
	else
		__b10x_harness_cmds "$path"
		kind=enum
		if ((${#words[@]} == 0)) && ! __b10x_harness_arg "$path" "$n"; then
			return 0
		fi
	fi
	case $kind in
	enum) __b10x_harness_offer "$pre" ;;
	file | rest) compopt -o default 2>/dev/null ;;
	esac
	return 0
}

complete -F _b10x_harness b10x-harness
`, helpCommand)
	return b.String()
}

// quoteAll is each of words quoted.
func quoteAll(words []string) []string {
	q := make([]string, len(words))
	for i, w := range words {
		q[i] = shq(w)
	}
	return q
}

// --- zsh

// zshFunc is the name of c's completion function.
func zshFunc(c *compCmd) string {
	if c.parent == nil {
		return "_b10x-harness"
	}
	return "__b10x_harness_" + strings.Map(func(r rune) rune {
		if r == ' ' || r == '-' {
			return '_'
		}
		return r
	}, c.path)
}

// zshDesc is s as a description in an _arguments spec or a _describe
// entry, within its single quotes: one line, brackets and colons escaped.
func zshDesc(s string) string {
	r := strings.NewReplacer(`\`, `\\`, "[", `\[`, "]", `\]`, ":", `\:`, "'", `'\''`)
	return r.Replace(firstSentence(s))
}

// zshAction is the message and action of v in an _arguments spec.
func zshAction(name string, v compValue) string {
	msg := strings.NewReplacer(`\`, `\\`, ":", `\:`, "'", `'\''`).Replace(name)
	switch v.kind {
	case valueEnum:
		q := make([]string, len(v.words))
		for i, w := range v.words {
			q[i] = strings.NewReplacer(`\`, `\\`, " ", `\ `, "(", `\(`, ")", `\)`, "'", `'\''`, ":", `\:`).Replace(w)
		}
		return msg + ":(" + strings.Join(q, " ") + ")"
	case valueFile:
		return msg + ":_files"
	case valueRest:
		return msg + ":_normal"
	}
	return msg + ": "
}

// zshFlagSpecs is f's _arguments specs, each quoted.
func zshFlagSpecs(f compFlag) []string {
	names := f.names()
	excl := ""
	if len(names) > 1 && !f.repeat {
		excl = "(" + strings.Join(names, " ") + ")"
	}
	rep := ""
	if f.repeat {
		rep = "*"
	}
	var out []string
	for _, n := range names {
		spec := excl + rep + n
		if f.value.kind != valueNone {
			if strings.HasPrefix(n, "--") {
				spec += "="
			}
			spec += "[" + zshDesc(f.help) + "]:" + zshAction(f.placeholder, f.value)
		} else {
			spec += "[" + zshDesc(f.help) + "]"
		}
		out = append(out, "'"+spec+"'")
	}
	return out
}

// zshCompletion is the zsh script: a function per command, each an
// _arguments of its flags and either its commands or its arguments.
func zshCompletion(root *compCmd) string {
	var b strings.Builder
	b.WriteString(`#compdef b10x-harness
# zsh completion for b10x-harness, generated by b10x-harness completion zsh.
# Load it with source <(b10x-harness completion zsh) after compinit, or
# save it as _b10x-harness in a directory of $fpath.

# __b10x_harness_commands PATH sets cmds to the commands below PATH, as
# name:description.
__b10x_harness_commands() {
	case $1 in
`)
	root.walk(func(c *compCmd) {
		if len(c.children) == 0 {
			return
		}
		var entries []string
		for _, ch := range c.children {
			entries = append(entries, "'"+strings.ReplaceAll(ch.name, ":", `\:`)+":"+zshDesc(ch.help)+"'")
		}
		fmt.Fprintf(&b, "\t%s) cmds=(\n\t\t%s\n\t) ;;\n", shq(c.path), strings.Join(entries, "\n\t\t"))
	})
	fmt.Fprintf(&b, `	*) cmds=() ;;
	esac
}

# The help command takes command names: help policy show.
__b10x_harness_%s() {
	local p= i
	local -a cmds
	for ((i = 2; i < CURRENT; i++)); do
		p=${p:+$p }${words[i]}
	done
	__b10x_harness_commands "$p"
	(( $#cmds )) && _describe -t commands command cmds
}
`, helpCommand)
	root.walk(func(c *compCmd) {
		if c.path == helpCommand {
			return
		}
		fn := zshFunc(c)
		fmt.Fprintf(&b, "\n# %s\n%s() {\n", strings.TrimSpace("b10x-harness "+c.path), fn)
		var specs []string
		for _, f := range c.allFlags() {
			specs = append(specs, zshFlagSpecs(f)...)
		}
		opts := "-S"
		if len(c.children) > 0 {
			b.WriteString("\tlocal curcontext=$curcontext state line ret=1\n\tlocal -a cmds\n")
			specs = append(specs, "': :->command'", "'*:: :->args'")
			opts = "-S -C"
		} else {
			for i, a := range c.args {
				pos := fmt.Sprint(i + 1)
				if a.repeat || a.value.kind == valueRest {
					pos = "*"
				}
				if a.optional || a.value.kind == valueRest {
					pos += ":"
				}
				if a.value.kind == valueRest {
					opts = "-S -A '-*'"
				}
				specs = append(specs, "'"+pos+":"+zshAction(a.name, a.value)+"'")
			}
		}
		fmt.Fprintf(&b, "\t_arguments %s \\\n\t\t%s", opts, strings.Join(specs, " \\\n\t\t"))
		if len(c.children) == 0 {
			b.WriteString("\n}\n")
			return
		}
		fmt.Fprintf(&b, ` && ret=0
	case $state in
	command)
		__b10x_harness_commands %s
		_describe -t commands command cmds && ret=0 ;;
	args)
		curcontext=${curcontext%%:*:*}:%s-$line[1]:
		case $line[1] in
`, shq(c.path), strings.Join(append([]string{"b10x-harness"}, strings.Fields(c.path)...), "-"))
		for _, ch := range c.children {
			fmt.Fprintf(&b, "\t\t%s) %s && ret=0 ;;\n", shq(ch.name), zshFunc(ch))
		}
		b.WriteString("\t\tesac ;;\n\tesac\n\treturn ret\n}\n")
	})
	b.WriteString(`
if [[ $funcstack[1] == _b10x-harness ]]; then
	_b10x-harness "$@"
else
	compdef _b10x-harness b10x-harness
fi
`)
	return b.String()
}

// --- fish

// fishq quotes s for fish as one word: as it is when nothing in it is
// special, else in single quotes, or in double quotes when it holds a
// single quote and no other special (a condition naming a path).
func fishq(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-+=,./:@%") == "" {
		return s
	}
	if strings.Contains(s, "'") && !strings.ContainsAny(s, "\"$\\") {
		return `"` + s + `"`
	}
	return "'" + strings.NewReplacer(`\`, `\\`, "'", `\'`).Replace(s) + "'"
}

// fishCompletion is the fish script: lookup functions generated from the
// tree, a walker that reads the command line through them, and a complete
// line per command, flag and argument, each under the walker's condition.
func fishCompletion(root *compCmd) string {
	var b strings.Builder
	b.WriteString(`# fish completion for b10x-harness, generated by b10x-harness completion fish.
# Load it with: b10x-harness completion fish | source

# __b10x_harness_cmds PATH prints the commands below PATH.
function __b10x_harness_cmds
    switch $argv[1]
`)
	root.walk(func(c *compCmd) {
		if len(c.children) == 0 {
			return
		}
		var names []string
		for _, ch := range c.children {
			names = append(names, fishq(ch.name))
		}
		fmt.Fprintf(&b, "        case %s\n            printf '%%s\\n' %s\n", fishq(c.path), strings.Join(names, " "))
	})
	b.WriteString(`    end
end

# __b10x_harness_takes PATH FLAG succeeds when FLAG takes a value in PATH.
function __b10x_harness_takes
    switch $argv[1]
`)
	root.walk(func(c *compCmd) {
		var names []string
		for _, f := range c.allFlags() {
			if f.value.kind != valueNone {
				for _, n := range f.names() {
					names = append(names, fishq(n))
				}
			}
		}
		if len(names) > 0 {
			fmt.Fprintf(&b, "        case %s\n            contains -- $argv[2] %s\n            return\n", fishq(c.path), strings.Join(names, " "))
		}
	})
	b.WriteString(`    end
    return 1
end

# __b10x_harness_rest PATH N succeeds when the positional argument N (from
# 0) of PATH is not the harness's, nor any word after it (exec's command).
function __b10x_harness_rest
    switch $argv[1]
`)
	root.walk(func(c *compCmd) {
		for i, a := range c.args {
			if a.value.kind == valueRest {
				fmt.Fprintf(&b, "        case %s\n            test $argv[2] -ge %d\n            return\n", fishq(c.path), i)
				break
			}
		}
	})
	fmt.Fprintf(&b, `    end
    return 1
end

# __b10x_harness_state prints where the word being completed is: "cmd",
# the command path and the number of positional arguments before it;
# "help" and the path named so far; "value" (a flag's); or "rest" (not
# the harness's: after -- or in exec's command).
function __b10x_harness_state
    set -l line (commandline -c)
    if test "$line" = "$__b10x_harness_line"
        printf '%%s\n' $__b10x_harness_state
        return
    end
    set -l tokens (commandline -opc)
    set -e tokens[1]
    set -l path ''
    set -l n 0
    set -l mode cmd
    set -l skip 0
    for w in $tokens
        if test $skip = 1
            set skip 0
            continue
        end
        switch $w
            case --
                set mode rest
                break
            case '-?*=*'
            case '-?*'
                if __b10x_harness_takes "$path" $w
                    set skip 1
                end
            case '*'
                if test -z "$path" -a $mode = cmd -a "$w" = %s
                    set mode help
                else if contains -- $w (__b10x_harness_cmds "$path")
                    set path (string trim -- "$path $w")
                    set n 0
                else if test $mode = cmd; and __b10x_harness_rest "$path" $n
                    set mode rest
                    break
                else
                    set n (math $n + 1)
                end
        end
    end
    if test $skip = 1
        set mode value
    end
    set -g __b10x_harness_line $line
    set -g __b10x_harness_state $mode $path $n
    printf '%%s\n' $__b10x_harness_state
end

# __b10x_harness_in PATH: completing the flags of PATH or of a command
# below it (help's too: help policy show --json is policy show --json
# --help).
function __b10x_harness_in
    set -l s (__b10x_harness_state)
    test $s[1] != rest; or return
    test "$s[2]" = "$argv[1]"; or string match -q -- "$argv[1] *" "$s[2]"; or test -z "$argv[1]"
end

# __b10x_harness_at PATH [N]: completing PATH's words (its positional
# argument N, or any from N on with a third argument).
function __b10x_harness_at
    set -l s (__b10x_harness_state)
    test $s[1] = cmd -a "$s[2]" = "$argv[1]"; or return
    if set -q argv[3]
        test $s[3] -ge $argv[2]
    else if set -q argv[2]
        test $s[3] = $argv[2]
    end
end

# __b10x_harness_mode MODE: the state is MODE.
function __b10x_harness_mode
    set -l s (__b10x_harness_state)
    test $s[1] = $argv[1]
end

# __b10x_harness_help_cmds prints the commands below those help names.
function __b10x_harness_help_cmds
    set -l s (__b10x_harness_state)
    __b10x_harness_cmds "$s[2]"
end

complete -c b10x-harness -f
complete -c b10x-harness -n '__b10x_harness_mode rest' -F
complete -c b10x-harness -n '__b10x_harness_mode help' -a '(__b10x_harness_help_cmds)'
`, fishq(helpCommand))
	root.walk(func(c *compCmd) {
		at := fishq("__b10x_harness_at " + fishq(c.path))
		for _, ch := range c.children {
			fmt.Fprintf(&b, "complete -c b10x-harness -n %s -a %s -d %s\n", at, fishq(fishq(ch.name)), fishq(firstSentence(ch.help)))
		}
		in := fishq("__b10x_harness_in " + fishq(c.path))
		for _, f := range c.flags {
			var opts []string
			for _, n := range f.long {
				opts = append(opts, "-l "+fishq(strings.TrimPrefix(n, "--")))
			}
			if f.short != "" {
				opts = append(opts, "-s "+fishq(strings.TrimPrefix(f.short, "-")))
			}
			switch f.value.kind {
			case valueEnum:
				opts = append(opts, "-x -a "+fishq(fishWords(f.value.words)))
			case valueFile:
				opts = append(opts, "-r -F")
			case valueAny:
				opts = append(opts, "-x")
			}
			fmt.Fprintf(&b, "complete -c b10x-harness -n %s %s -d %s\n", in, strings.Join(opts, " "), fishq(firstSentence(f.help)))
		}
		if c.path == helpCommand {
			return
		}
		for i, a := range c.args {
			cond := fmt.Sprintf("__b10x_harness_at %s %d", fishq(c.path), i)
			if a.repeat && i == len(c.args)-1 {
				cond += " on"
			}
			switch a.value.kind {
			case valueEnum:
				fmt.Fprintf(&b, "complete -c b10x-harness -n %s -a %s\n", fishq(cond), fishq(fishWords(a.value.words)))
			case valueFile:
				fmt.Fprintf(&b, "complete -c b10x-harness -n %s -F\n", fishq(cond))
			}
		}
	})
	return b.String()
}

// fishWords is words quoted for fish, separated by spaces: the -a of a
// complete line, which fish splits and expands.
func fishWords(words []string) string {
	q := make([]string, len(words))
	for i, w := range words {
		q[i] = fishq(w)
	}
	return strings.Join(q, " ")
}
