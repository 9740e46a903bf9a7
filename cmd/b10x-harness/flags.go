package main

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/alecthomas/kong"

	"github.com/b10x/harness/internal/setting"
	"github.com/b10x/harness/policy"
	"github.com/b10x/harness/session"
)

// A command's policy flags are made at start from the policy table
// (policy.Settings): one flag per setting the command takes, in the
// table's order, with the row's name, help, default, enum words and
// placeholder. A command struct embeds PolicyFlags tagged with the
// command's name (`for:"call"`); bindFlags builds the flags before kong
// reads the struct, and PolicyFlags.policy turns what was given into a
// session.Policy. A flag of the command's own that --help should list
// among the table's says where: `after:"surface"` puts it right after
// --surface (orderFlags).

// byteSize is a size flag: a plain number of bytes or a number with a
// suffix (policy.ParseSize).
type byteSize int64

// UnmarshalText implements encoding.TextUnmarshaler for kong.
func (b *byteSize) UnmarshalText(text []byte) error {
	n, err := policy.ParseSize(string(text))
	if err != nil {
		return err
	}
	*b = byteSize(n)
	return nil
}

// PolicyFlags are a command's flags of the policy: --policy, and one flag
// per setting of the table the command takes (built by bind into the
// struct kong.Plugins holds).
type PolicyFlags struct {
	Policy         string `help:"Read the policy from this TOML file (see examples/policies/ and b10x-harness policy schema); a flag given here overrides the file's key of the same name, key by key." placeholder:"FILE" type:"path"`
	NoUserDefaults bool   `help:"Do not read the user defaults file ($XDG_CONFIG_HOME/b10x-harness/policy.toml, else ~/.config/b10x-harness/policy.toml), as B10X_HARNESS_NO_USER_DEFAULTS=1 does. exec never reads it."`
	kong.Plugins

	command policy.Command
	fields  []settingFlag
	vals    reflect.Value // *struct, the one in Plugins
}

// settingFlag is one setting's flag in a PolicyFlags struct.
type settingFlag struct {
	s     policy.Setting
	index int // its field
	alias int // its alias's field, -1 without
}

// bindFlags gives every PolicyFlags in the command structs of v (a pointer
// to a struct) the flags of its command.
func bindFlags(v reflect.Value) {
	v = reflect.Indirect(v)
	if v.Kind() != reflect.Struct {
		return
	}
	for i := range v.NumField() {
		f := v.Type().Field(i)
		if !f.IsExported() {
			continue
		}
		switch {
		case f.Type == reflect.TypeFor[PolicyFlags]():
			c := policy.CommandNamed(f.Tag.Get("for"))
			if c == 0 {
				panic("bug: PolicyFlags of " + v.Type().String() + " names no command: " + f.Tag.Get("for"))
			}
			v.Field(i).Addr().Interface().(*PolicyFlags).bind(c)
		case f.Type.Kind() == reflect.Struct:
			bindFlags(v.Field(i))
		}
	}
}

// bind builds the flags of command c.
func (p *PolicyFlags) bind(c policy.Command) {
	p.command, p.fields = c, nil
	var fields []reflect.StructField
	for _, s := range policy.Settings() {
		if s.Commands&c == 0 {
			continue
		}
		sf := settingFlag{s: s, index: len(fields), alias: -1}
		fields = append(fields, flagField(s, c))
		if a := s.Alias; a != nil {
			sf.alias = len(fields)
			fields = append(fields, reflect.StructField{Name: "Alias" + goName(a.Flag), Type: reflect.TypeFor[bool](),
				Tag: tags("name", a.Flag, "help", a.Help)})
		}
		p.fields = append(p.fields, sf)
	}
	p.vals = reflect.New(reflect.StructOf(fields))
	p.Plugins = kong.Plugins{p.vals.Interface()}
}

// flagField is setting s's flag in command c, as a struct field kong
// reads: a Go type for its kind, and its name, help, default, enum words,
// placeholder, separator and path type as tags.
func flagField(s policy.Setting, c policy.Command) reflect.StructField {
	help, words := s.FlagFor(c)
	kv := []string{"name", s.Flag(), "help", help}
	if d := s.DefaultFor(c); d != "" && s.HostDefault == nil {
		kv = append(kv, "default", d)
	}
	if words != nil {
		kv = append(kv, "enum", strings.Join(words, ","))
	}
	if s.Placeholder != "" {
		kv = append(kv, "placeholder", s.Placeholder)
	}
	if s.Kind == policy.List {
		kv = append(kv, "sep", "none")
	}
	if s.Path {
		kv = append(kv, "type", "path")
	}
	var t reflect.Type
	switch s.Kind {
	case policy.Bool:
		t = reflect.TypeFor[bool]()
	case policy.Int:
		t = reflect.TypeFor[int]()
	case policy.Float:
		t = reflect.TypeFor[float64]()
	case policy.Size:
		t = reflect.TypeFor[byteSize]()
	case policy.Duration:
		t = reflect.TypeFor[time.Duration]()
	case policy.List:
		t = reflect.TypeFor[[]string]()
	default: // String, Enum
		t = reflect.TypeFor[string]()
	}
	// The name is kong's only: it drops every field named as one tagged kong:"-".
	return reflect.StructField{Name: "Setting" + goName(s.Key), Type: t, Tag: tags(kv...)}
}

// tags writes key/value pairs as a struct tag.
func tags(kv ...string) reflect.StructTag {
	var b strings.Builder
	for i := 0; i+1 < len(kv); i += 2 {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(kv[i] + ":" + strconv.Quote(kv[i+1]))
	}
	return reflect.StructTag(b.String())
}

// goName is a key as an exported Go name: allow_cidr → AllowCidr.
func goName(key string) string {
	var b strings.Builder
	for _, w := range strings.FieldsFunc(key, func(r rune) bool { return r == '_' || r == '-' }) {
		b.WriteString(strings.ToUpper(w[:1]) + w[1:])
	}
	return b.String()
}

// value is the flag's parsed value as the setting's Value.
func (p *PolicyFlags) value(i int) any {
	switch v := p.vals.Elem().Field(i).Interface().(type) {
	case int:
		return int64(v)
	case byteSize:
		return int64(v)
	default:
		return v
	}
}

// policy is the command's flags (and the policy file's keys, which kong
// gave the flags the command line did not set) as a session.Policy: the
// defaults, every value given, and where each came from; checked.
func (p *PolicyFlags) policy(e *env) (session.Policy, error) {
	pol := session.Defaults()
	src := maps.Clone(e.sources)
	if src == nil {
		src = map[string]string{}
	}
	for _, f := range p.fields {
		s := f.s
		// A path's default too: kong made it absolute, as a given one;
		// and a default of the command's own (mcp's max_result).
		if _, given := src[s.Key]; given || s.Path || (s.DefaultFor(p.command) != s.Default && s.HostDefault == nil) {
			if err := s.Set(&pol.Policy, p.value(f.index)); err != nil {
				return pol, usageError{fmt.Errorf("%s: %w", setting.Flag(s.Key), err)}
			}
		}
		if f.alias < 0 || !p.vals.Elem().Field(f.alias).Bool() {
			continue
		}
		// The alias stands for one value, which any other value given
		// contradicts (the default does not).
		a, cur := s.Alias, fmt.Sprint(s.Get(&pol.Policy))
		if cur != a.Value && cur != s.Default {
			return pol, usagef("--%s means %s %s; it contradicts %s %s", a.Flag, setting.Flag(s.Key), a.Value, setting.Flag(s.Key), cur)
		}
		if err := s.Set(&pol.Policy, a.Value); err != nil {
			return pol, usageError{err}
		}
		src[s.Key] = "flag --" + a.Flag
	}
	pol.Sources = src
	if e.file != nil {
		ref := e.file.Ref
		pol.File = &ref
	}
	if ud := e.userDefaults; ud != nil {
		if p.NoUserDefaults {
			return pol, errors.New("bug: --no-user-defaults was given, and the user defaults file was read")
		}
		if err := pol.UseUserDefaults(ud, setting.Flag); err != nil {
			return pol, err
		}
	}
	if err := pol.Validate(); err != nil {
		return pol, err
	}
	return pol, nil
}

// orderFlags puts each flag of n and its commands with an after tag right
// after the flag it names, in the order they are declared, so that --help
// lists a command's own flags among the table's where they belong.
func orderFlags(n *kong.Node) {
	var base, moved []*kong.Flag
	for _, f := range n.Flags {
		if f.Tag.Get("after") != "" {
			moved = append(moved, f)
		} else {
			base = append(base, f)
		}
	}
	if len(moved) > 0 {
		out := make([]*kong.Flag, 0, len(n.Flags))
		var emit func(f *kong.Flag)
		emit = func(f *kong.Flag) {
			out = append(out, f)
			for _, m := range moved {
				if m.Tag.Get("after") == f.Name {
					emit(m)
				}
			}
		}
		for _, f := range base {
			emit(f)
		}
		if len(out) != len(n.Flags) {
			panic("bug: a flag of " + n.Path() + " is to follow a flag it does not have")
		}
		n.Flags = out
	}
	for _, c := range n.Children {
		orderFlags(c)
	}
}
