package policy

import (
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestTable: every row is whole and consistent: a unique snake_case key,
// a kind, commands, a field of the kind's type that Set and Get agree on,
// a default that parses and passes its own check, enum words (and each
// variant's, the alias's value and the default among them), list checks
// only on lists, limits with their layer.
func TestTable(t *testing.T) {
	keyRe := regexp.MustCompile(`^[a-z]+(_[a-z]+)*$`)
	seen := map[string]bool{}
	for _, s := range Settings() {
		k := s.Key
		if !keyRe.MatchString(k) || seen[k] {
			t.Errorf("%q: not a unique snake_case key", k)
		}
		seen[k] = true
		if s.Kind < String || s.Kind > Enum || s.Commands == 0 || s.Field == nil || s.Help == "" {
			t.Errorf("%s: kind %s, commands %q, field %v, help %q", k, s.Kind, s.Commands, s.Field != nil, s.Help)
			continue
		}
		if s.HostDefault != nil && s.Default != "" {
			t.Errorf("%s: both a Default and a HostDefault", k)
		}
		// The default parses, is what Defaults holds, and is valid.
		p := Defaults()
		d := s.defaultValue()
		if got := s.Get(&p); !equal(got, d) {
			t.Errorf("%s: Defaults holds %v, the row's default is %v", k, got, d)
		}
		if err := s.validate(&p, nil); err != nil {
			t.Errorf("%s: its default is refused: %v", k, err)
		}
		// Set and Get agree, and touch only this field.
		before := Defaults()
		if v, ok := sample(s); ok {
			if err := s.Set(&p, v); err != nil {
				t.Errorf("%s: Set(%v): %v", k, v, err)
			} else if got := s.Get(&p); !equal(got, v) {
				t.Errorf("%s: Set(%v), then Get gives %v", k, v, got)
			}
			for _, o := range Settings() {
				if o.Key != k && !equal(o.Get(&p), o.Get(&before)) {
					t.Errorf("setting %s changed %s", k, o.Key)
				}
			}
		}
		words := s.Words()
		if (s.Kind == Enum) != (len(words) > 0) {
			t.Errorf("%s: kind %s with words %v", k, s.Kind, words)
		}
		if s.Kind == Enum && s.Default != "" && !slices.Contains(words, s.Default) {
			t.Errorf("%s: default %q is not a word", k, s.Default)
		}
		for _, v := range s.For {
			if v.Commands&^s.Commands != 0 {
				t.Errorf("%s: a variant for %s, which do not take it", k, v.Commands&^s.Commands)
			}
			for _, w := range v.Enum {
				if !slices.Contains(words, w) {
					t.Errorf("%s: variant word %q is not a word", k, w)
				}
			}
			if v.Enum != nil && s.Default != "" && !slices.Contains(v.Enum, s.Default) {
				t.Errorf("%s: default %q is not a word of %s", k, s.Default, v.Commands)
			}
		}
		if a := s.Alias; a != nil && (a.Flag == "" || a.Help == "" || (s.Kind == Enum && !slices.Contains(words, a.Value))) {
			t.Errorf("%s: alias %+v", k, *a)
		}
		if (s.Item != nil || s.Syntax != "") && s.Kind != List {
			t.Errorf("%s: an element check on a %s", k, s.Kind)
		}
		if s.Check != nil && (s.Kind == List || s.Kind == Enum) {
			t.Errorf("%s: a value check on a %s", k, s.Kind)
		}
		if (s.Controller == "") != (s.Layer == "") {
			t.Errorf("%s: controller %q, layer %q", k, s.Controller, s.Layer)
		}
		if s.Min != 0 && (s.Kind != Int || s.Check == nil || s.Check(s.Min-1) == nil || s.Check(s.Min) != nil) {
			t.Errorf("%s: minimum %d, which its check does not hold", k, s.Min)
		}
	}
}

// sample is a value of s's kind other than its default.
func sample(s Setting) (any, bool) {
	switch s.Kind {
	case String:
		return "/x", true
	case Bool:
		return !s.defaultValue().(bool), true
	case Int, Size:
		return s.defaultValue().(int64) + 3, true
	case Float:
		return 2.5, true
	case Duration:
		return s.defaultValue().(time.Duration) + time.Second, true
	case List:
		return []string{"a", "b"}, true
	case Enum:
		for _, w := range s.Words() {
			if w != s.Default {
				return w, true
			}
		}
	}
	return nil, false
}

func equal(a, b any) bool {
	la, ok := a.([]string)
	if ok {
		lb, _ := b.([]string)
		return slices.Equal(la, lb)
	}
	return a == b
}

// TestCommands: every command's name names it again, and a set reads as
// the command line names its members.
func TestCommands(t *testing.T) {
	for _, n := range commandNames {
		if CommandNamed(n.name) != n.c || n.c.String() != n.name {
			t.Errorf("%s: %d", n.name, CommandNamed(n.name))
		}
	}
	if got := (Call | Show | Exec).String(); got != "call, policy show, exec" {
		t.Errorf("a set: %q", got)
	}
	if CommandNamed("doctor") != 0 {
		t.Error("doctor takes no settings")
	}
}

// TestLimitSettings: every limit, once, in cgroup's order.
func TestLimitSettings(t *testing.T) {
	var keys []string
	for _, s := range LimitSettings() {
		keys = append(keys, s.Key)
	}
	if strings.Join(keys, ",") != "pids_max,memory_max,cpu_max" {
		t.Errorf("limits %v", keys)
	}
}
