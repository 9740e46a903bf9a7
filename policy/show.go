package policy

import "time"

// KeyValue is one key of an effective policy and where its value came
// from ("default", "flag --confine", "ci.toml:3:1").
type KeyValue struct {
	Key    string `json:"key"`
	Value  any    `json:"value"`
	Source string `json:"source"`
}

// Effective is p as a policy file would spell it: every setting policy
// show takes, in the table's order, with its value (a string, an integer,
// a number, or a list of strings; sizes in the largest binary unit,
// durations as Go writes them) and its source. A value another setting
// implies (Implied) is shown with that setting as its source.
func (p Policy) Effective() []KeyValue { return p.EffectiveFor(Show) }

// EffectiveFor is Effective of the settings command c takes (exec's
// run_start records only exec's).
func (p Policy) EffectiveFor(c Command) []KeyValue {
	var out []KeyValue
	for _, s := range settings {
		if s.Commands&c == 0 {
			continue
		}
		kv := KeyValue{Key: s.Key, Value: shown(s.Kind, s.Get(&p)), Source: p.Sources[s.Key]}
		if kv.Source == "" {
			kv.Source = "default"
		}
		if s.Implied != nil {
			if v, by, ok := s.Implied(&p); ok {
				kv.Value, kv.Source = v, by
			}
		}
		out = append(out, kv)
	}
	return out
}

// shown is a Value as Effective gives it.
func shown(k Kind, v any) any {
	switch k {
	case Size:
		return FormatSize(v.(int64))
	case Duration:
		return v.(time.Duration).String()
	case List:
		if v.([]string) == nil {
			return []string{}
		}
	}
	return v
}
