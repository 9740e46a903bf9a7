package policy

import (
	"encoding"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/b10x/harness/cgroup"
)

// Kind is the type of a setting's value, as a flag and a policy file give
// it. Each kind has one Go type a value of it is handled as (Value).
type Kind int

// Kinds.
const (
	String   Kind = iota + 1 // a string (Value: string)
	Bool                     // true or false (bool)
	Int                      // an integer (int64)
	Float                    // a number (float64)
	Size                     // bytes: "2GiB", "64KiB", "1048576" (int64, see ParseSize)
	Duration                 // a Go duration: "10s", "15m" (time.Duration)
	List                     // strings; a flag that repeats, a file's array ([]string)
	Enum                     // one of a fixed list of words (string)
)

var kindNames = [...]string{String: "string", Bool: "bool", Int: "int", Float: "float", Size: "size", Duration: "duration", List: "list", Enum: "enum"}

// String names the kind as the table's documentation does ("size").
func (k Kind) String() string {
	if k > 0 && int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// Command is a set of the commands that take settings.
type Command uint

// The commands.
const (
	Call  Command = 1 << iota // call
	Run                       // run
	Tools                     // tools
	MCP                       // mcp
	Show                      // policy show
	Exec                      // exec
)

// Session is every command that opens a session: they share one policy
// file, each ignoring the keys only another of them takes. Exec is not
// one: it takes only its own keys (File.For).
const Session = Call | Run | Tools | MCP | Show

var commandNames = []struct {
	c    Command
	name string
}{{Call, "call"}, {Run, "run"}, {Tools, "tools"}, {MCP, "mcp"}, {Show, "policy show"}, {Exec, "exec"}}

// String names the commands of c as the command line does, joined by ", "
// ("call, run, policy show").
func (c Command) String() string {
	var out []string
	for _, n := range commandNames {
		if c&n.c != 0 {
			out = append(out, n.name)
		}
	}
	return strings.Join(out, ", ")
}

// CommandNamed returns the command a command line names ("call", "policy
// show"), 0 for one that takes no settings.
func CommandNamed(name string) Command {
	for _, n := range commandNames {
		if n.name == name {
			return n.c
		}
	}
	return 0
}

// Variant is how one command's flag differs from a setting's usual flag.
type Variant struct {
	Commands Command
	Help     string   // the flag's help for these commands ("": the usual)
	Enum     []string // the words these commands take (nil: every word)
	// Default is the default these commands show and apply ("": the
	// usual); the command applies it itself when neither a flag nor the
	// file gives the setting.
	Default string
}

// Alias is a boolean flag that stands for one value of a setting: given,
// the setting has Value (and its source is the alias's flag). It is a
// flag only, never a policy file's key.
type Alias struct {
	Flag  string // the flag's name, without "--" ("yes")
	Value string // the setting's value it stands for ("all")
	Help  string
}

// Syntax names a value's syntax that a package above this one owns: a
// list item of the setting is checked by Checks[Syntax].
type Syntax string

// The syntaxes others own.
const (
	ScopeRule Syntax = "write-scope rule" // gate.ParseScopeRule
	ReadRule  Syntax = "read-scope rule"  // gate.ParseReadRule
	HookLine  Syntax = "hook"             // gate.ParseHook
	Domain    Syntax = "domain pattern"   // egress.ParsePattern
)

// Checks are the parsers of the syntaxes others own, each returning an
// error that names the value ("domain pattern \"a b\": ..."). A syntax
// without a check is taken as it is: session.Checks is the complete set.
type Checks map[Syntax]func(string) error

// Setting is one row of the table: everything about one setting, from
// which the flags, the policy file's loader and schema, Defaults, Validate
// and policy show's lines are made.
type Setting struct {
	Key  string // the policy file's key; its flag is --Key with "-" for "_"
	Kind Kind

	// Default is the value in the form a flag gives it ("256KiB", "10s",
	// "auto"; "" the zero value), shown by --help. HostDefault, when set,
	// is the default instead, computed on the host at each start and not
	// shown as a value (its help says what it is).
	Default     string
	HostDefault func() string

	Help        string    // the policy file's (and the schema's) description
	FlagHelp    string    // the flag's help where it says more ("": Help)
	Placeholder string    // the flag's placeholder ("FILE"; "": kong's, from the kind)
	Path        bool      // a path the command line makes absolute from its working directory
	Commands    Command   // the commands that take it
	For         []Variant // per command, a flag that differs
	Alias       *Alias

	// Min is an integer's least value, for the schema (its check says so
	// too).
	Min int64
	// Controller and Layer are, for a resource limit of run calls, the
	// cgroup controller it needs and the layer (confine's name) that
	// reports and requires it.
	Controller cgroup.Controller
	Layer      string

	// Check refuses a bad value (Value's type for Kind): an error that
	// does not name the setting or the value ("must not be negative").
	Check func(v any) error
	// Item refuses a bad element of a list, as Check does (the value is
	// named for it).
	Item func(string) error
	// Syntax names the parser of each element of a list, another
	// package's: its error names the value.
	Syntax Syntax
	// Implied, when set, is a value another setting implies instead of
	// this one's, and which ("allow_domain (implies proxy)"), for policy
	// show and the record.
	Implied func(p *Policy) (v string, by string, ok bool)

	// Field returns a pointer to the field of p this setting fills: a
	// *string, *bool, *int, *int64, *float64, *time.Duration, *[]string,
	// or a pointer to one of this package's enum types.
	Field func(p *Policy) any
}

// Flag is the setting's flag name, without "--": "allow-program".
func (s Setting) Flag() string { return strings.ReplaceAll(s.Key, "_", "-") }

// Words are the values an Enum takes, for every command; nil for other
// kinds.
func (s Setting) Words() []string {
	if s.Kind != Enum || s.Field == nil {
		return nil
	}
	var p Policy
	if e, ok := reflect.ValueOf(s.Field(&p)).Elem().Interface().(enum); ok {
		return e.words()
	}
	return nil
}

// DefaultFor is the setting's default in command c: a variant's, or the
// usual one.
func (s Setting) DefaultFor(c Command) string {
	for _, v := range s.For {
		if v.Commands&c != 0 && v.Default != "" {
			return v.Default
		}
	}
	return s.Default
}

// FlagFor is the help and the enum words of the setting's flag in command
// c.
func (s Setting) FlagFor(c Command) (help string, words []string) {
	help, words = s.FlagHelp, s.Words()
	if help == "" {
		help = s.Help
	}
	for _, v := range s.For {
		if v.Commands&c != 0 {
			if v.Help != "" {
				help = v.Help
			}
			if v.Enum != nil {
				words = v.Enum
			}
		}
	}
	return help, words
}

// Settings returns the table, in its order (policy show's, the policy
// file's documentation's, a command's flags').
func Settings() []Setting { return slices.Clone(settings) }

// Lookup returns the setting of key.
func Lookup(key string) (Setting, bool) {
	for _, s := range settings {
		if s.Key == key {
			return s, true
		}
	}
	return Setting{}, false
}

// LimitSettings returns the settings that are resource limits of run
// calls (a Controller), in the order cgroup reports limits (pids, memory,
// cpu), which is the order refusals name them in.
func LimitSettings() []Setting {
	var out []Setting
	all := cgroup.Limits{PidsMax: 1, MemoryMax: 1, CPUQuota: 1, CPUPeriod: 1}
	for _, n := range all.Needs() {
		for _, s := range settings {
			if s.Controller == n.Controller {
				out = append(out, s)
			}
		}
	}
	return out
}

// Keys returns every key, in the table's order.
func Keys() []string {
	out := make([]string, len(settings))
	for i, s := range settings {
		out[i] = s.Key
	}
	return out
}

// AddForTest appends s to the table until the returned function is called,
// for tests of what is built from the table (flags, the loader, the
// schema, policy show). Not safe while anything reads the table.
func AddForTest(s Setting) (remove func()) {
	old := settings
	settings = append(slices.Clone(settings), s)
	return func() { settings = old }
}

// defaultValue is the setting's default as a Value.
func (s Setting) defaultValue() any {
	d := s.Default
	if s.HostDefault != nil {
		d = s.HostDefault()
	}
	v, err := s.Parse(d)
	if err != nil {
		panic("policy: the default of " + s.Key + ": " + err.Error()) // a bug of the table; TestTable checks every default
	}
	return v
}

// Parse reads text as the setting's Value, as a flag's text is read: a
// size by ParseSize, a duration by time.ParseDuration, an integer or a
// number, a list as one element; "" is the zero value. An Enum's word is
// not checked here (Set does).
func (s Setting) Parse(text string) (any, error) {
	if text == "" {
		return s.zero(), nil
	}
	switch s.Kind {
	case Bool:
		return strconv.ParseBool(text)
	case Int:
		return strconv.ParseInt(text, 10, 64)
	case Float:
		return strconv.ParseFloat(text, 64)
	case Size:
		return ParseSize(text)
	case Duration:
		return time.ParseDuration(text)
	case List:
		return []string{text}, nil
	}
	return text, nil
}

// zero is the zero Value of the setting's kind.
func (s Setting) zero() any {
	switch s.Kind {
	case Bool:
		return false
	case Int, Size:
		return int64(0)
	case Float:
		return float64(0)
	case Duration:
		return time.Duration(0)
	case List:
		return []string(nil)
	}
	return ""
}

// Get returns the setting's value in p, as its kind's Go type.
func (s Setting) Get(p *Policy) any {
	switch f := s.Field(p).(type) {
	case *string:
		return *f
	case *bool:
		return *f
	case *int:
		return int64(*f)
	case *int64:
		return *f
	case *float64:
		return *f
	case *time.Duration:
		return *f
	case *[]string:
		return *f
	case fmt.Stringer: // an enum
		return reflect.ValueOf(f).Elem().String()
	}
	panic("policy: " + s.Key + ": a field of an unknown type") // a bug of the table; TestTable reads every field
}

// Set stores v (the kind's Go type; an int or a []any of strings are taken
// too) in p. An Enum's word is checked: its error names the value.
func (s Setting) Set(p *Policy, v any) error {
	switch f := s.Field(p).(type) {
	case *string:
		*f = v.(string)
	case *bool:
		*f = v.(bool)
	case *int:
		*f = int(asInt(v))
	case *int64:
		*f = asInt(v)
	case *float64:
		*f = v.(float64)
	case *time.Duration:
		*f = v.(time.Duration)
	case *[]string:
		*f = slices.Clone(v.([]string))
	case encoding.TextUnmarshaler: // an enum
		return f.UnmarshalText([]byte(v.(string)))
	default:
		panic("policy: " + s.Key + ": a field of an unknown type") // a bug of the table; TestTable sets every field
	}
	return nil
}

func asInt(v any) int64 {
	switch n := v.(type) {
	case int:
		return int64(n)
	case int64:
		return n
	}
	panic(fmt.Sprintf("policy: %T is not an integer", v))
}
