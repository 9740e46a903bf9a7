package cliref

import (
	"strings"

	"github.com/alecthomas/kong"
)

// FromKong is app's commands, arguments and flags as a Command tree, the
// hidden ones left out, and branching arguments (kong's argument nodes)
// too. A command's aliases are not in it. A passthrough argument, or
// every argument of a passthrough command, takes Rest.
func FromKong(app *kong.Application) *Command {
	root := command(app.Node, "")
	root.Usage = "<command> [flags]"
	return root
}

// command is n as a Command whose path is path.
func command(n *kong.Node, path string) *Command {
	c := &Command{Name: n.Name, Path: path, Help: n.Help, Detail: n.Detail}
	c.Usage = strings.TrimSpace(strings.TrimPrefix(n.Summary(), n.Path()))
	for _, f := range n.Flags {
		if !f.Hidden {
			c.Flags = append(c.Flags, flag(f))
		}
	}
	for _, p := range n.Positional {
		a := Arg{Name: p.Name, Summary: p.Summary(), Help: p.Help, Value: valueOf(p, p.Tag.PlaceHolder), Optional: !p.Required, Repeat: p.IsCumulative()}
		if n.Passthrough || p.Passthrough || p.PassthroughMode != kong.PassThroughModeNone {
			a.Value = Value{Kind: Rest}
		}
		c.Args = append(c.Args, a)
	}
	for _, ch := range n.Children {
		if !ch.Hidden && ch.Type == kong.CommandNode {
			c.Children = append(c.Children, command(ch, strings.TrimSpace(path+" "+ch.Name)))
		}
	}
	return c
}

// flag is f as a Flag.
func flag(f *kong.Flag) Flag {
	out := Flag{Name: f.Name, Aliases: f.Aliases, Negation: negation(f), Short: f.Short, Help: f.Help,
		Value: valueOf(f.Value, f.PlaceHolder), Repeat: f.IsCumulative() || f.IsCounter(), Placeholder: f.PlaceHolder}
	if f.HasDefault {
		out.Default = f.Default
	}
	// kong's name for the value's type, as --help would show it without a
	// default: INT, DURATION, BYTE-SIZE, NAME=VALUE.
	v := *f.Value
	v.HasDefault = false
	g := *f
	g.Value = &v
	g.PlaceHolder = ""
	if p := g.FormatPlaceHolder(); p != "STRING" {
		out.Type = p
	}
	return out
}

// negation is the name a negatable bool flag's negation answers to, ""
// for any other flag.
func negation(f *kong.Flag) string {
	switch f.Tag.Negatable {
	case "":
		return ""
	case "_": // kong's mark for the default negation
		return "no-" + f.Name
	default:
		return f.Tag.Negatable
	}
}

// valueOf is what v takes, placeholder being what its value is called.
func valueOf(v *kong.Value, placeholder string) Value {
	switch {
	case v.Flag != nil && (v.IsBool() || v.IsCounter()):
		return Value{Kind: None}
	case v.Enum != "":
		return Value{Kind: Enum, Words: v.EnumSlice()}
	case takesPath(v, placeholder):
		return Value{Kind: File}
	}
	return Value{Kind: Any}
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
