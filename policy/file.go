package policy

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pelletier/go-toml/v2"
	"github.com/pelletier/go-toml/v2/unstable"
)

// File is a policy file (TOML), read and checked: every key is top-level
// and spelled as its command-line flag with "_" for "-" (--allow-program
// is allow_program). Sizes are strings ("2GiB"), durations Go durations
// ("10s"). A key that is absent leaves the value to a flag or the default;
// a flag given on the command line overrides the file's key (key by key: a
// list in the file is replaced, not extended, by the flag's values).
//
// A File is not changed after Parse; it is safe to share.
type File struct {
	Ref FileRef
	// Pos is each key the file sets and its position ("ci.toml:3:1").
	Pos map[string]string

	keys   []string       // the keys the file sets, in the file's order
	vals   map[string]any // each key's TOML value: string, int64, float64, bool or []string
	checks Checks
}

// maxFile bounds what a policy file may hold.
const maxFile = 1 << 20

// Load reads the policy file at path strictly (Parse). Nothing is
// started.
func Load(path string, checks Checks) (*File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, &Error{Key: "policy", Err: err, Usage: true}
	}
	defer f.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(io.LimitReader(f, maxFile+1)); err != nil {
		return nil, &Error{Key: "policy", Value: path, Err: err, Usage: true}
	}
	if buf.Len() > maxFile {
		return nil, errorf("policy", path, "more than %d bytes; a policy file is small", maxFile)
	}
	return Parse(path, buf.Bytes(), checks)
}

// Parse reads content, the policy file at path: a syntax error, a table,
// an unknown key, a value of the wrong type and a bad value (by its
// setting's row and the checks of the syntaxes others own) are each an
// *Error at the file's position: "ci.toml:4:1: confne: unknown key (did
// you mean confine?)". A value that is only wrong beside another
// setting's (Validate's rules) is not refused here.
func Parse(path string, content []byte, checks Checks) (*File, error) {
	return parse(origin{path: path, name: path}, content, checks)
}

// origin is where a policy file's values come from: the file's path, and
// the name its positions and errors begin with (the path, or "user
// defaults PATH").
type origin struct {
	path, name string
	user       bool // the user defaults file, which no flag names
}

// pos is a position in the file: "ci.toml:3:1".
func (o origin) pos(line, col int) string { return fmt.Sprintf("%s:%d:%d", o.name, line, col) }

// fail is an error of the file as a whole: of --policy's file by the
// flag's key, of the user defaults file at its name.
func (o origin) fail(err error) *Error {
	if o.user {
		return at(o.name, "", "", err)
	}
	return &Error{Key: "policy", Value: o.path, Err: err, Usage: true}
}

// parse is Parse of the file o.
func parse(o origin, content []byte, checks Checks) (*File, error) {
	sum := sha256.Sum256(content)
	f := &File{Ref: FileRef{Path: o.path, SHA256: hex.EncodeToString(sum[:])}, Pos: map[string]string{}, vals: map[string]any{}, checks: checks}
	pos := o.pos

	// Positions first: a syntax error is reported here, with its place.
	p := unstable.Parser{}
	p.Reset(content)
	for p.NextExpression() {
		e := p.Expression()
		switch e.Kind {
		case unstable.Table, unstable.ArrayTable:
			it := e.Key()
			var parts []string
			line, col := 0, 0
			for it.Next() {
				if line == 0 {
					sh := p.Shape(it.Node().Raw)
					line, col = sh.Start.Line, sh.Start.Column
				}
				parts = append(parts, string(it.Node().Data))
			}
			return nil, at(pos(line, col), "", "", fmt.Errorf("[%s]: a policy file has no tables: every key is top-level", strings.Join(parts, ".")))
		case unstable.KeyValue:
			it := e.Key()
			var parts []string
			var first *unstable.Node
			for it.Next() {
				if first == nil {
					first = it.Node()
				}
				parts = append(parts, string(it.Node().Data))
			}
			if first == nil {
				continue
			}
			sh := p.Shape(first.Raw)
			key := strings.Join(parts, ".")
			if _, seen := f.Pos[key]; !seen {
				f.keys = append(f.keys, key)
			}
			f.Pos[key] = pos(sh.Start.Line, sh.Start.Column)
		}
	}
	if err := p.Error(); err != nil {
		var pe *unstable.ParserError
		if errors.As(err, &pe) {
			sh := p.Shape(p.Range(pe.Highlight))
			return nil, at(pos(sh.Start.Line, sh.Start.Column), "", "", errors.New(pe.Message))
		}
		return nil, o.fail(err)
	}

	// Types and unknown keys: decoded strictly into a struct of one field
	// per setting, made from the table.
	typ, index := fileStruct()
	dst := reflect.New(typ)
	dec := toml.NewDecoder(bytes.NewReader(content)).DisallowUnknownFields()
	if err := dec.Decode(dst.Interface()); err != nil {
		var sm *toml.StrictMissingError
		if errors.As(err, &sm) && len(sm.Errors) > 0 {
			de := sm.Errors[0]
			line, col := de.Position()
			key := strings.Join(de.Key(), ".")
			return nil, at(pos(line, col), key, "", errors.New("unknown key"+suggest(key)))
		}
		var de *toml.DecodeError
		if errors.As(err, &de) {
			line, col := de.Position()
			key := strings.Join(de.Key(), ".")
			msg := strings.TrimPrefix(de.Error(), "toml: ")
			if key != "" && strings.Contains(msg, "cannot decode") {
				if s, ok := Lookup(key); ok {
					msg = "want " + s.wantType()
					if m := tomlKind().FindStringSubmatch(de.Error()); m != nil {
						msg += ", not a TOML " + m[1]
					}
				}
				return nil, at(pos(line, col), key, "", errors.New(msg))
			}
			return nil, at(pos(line, col), "", "", errors.New(msg))
		}
		return nil, o.fail(err)
	}
	for _, key := range f.keys {
		if i, ok := index[key]; ok {
			f.vals[key] = dst.Elem().Field(i).Interface()
		}
	}
	// Every value is checked now, by the rows the policy uses.
	pol := Defaults()
	if err := f.Apply(&pol); err != nil {
		return nil, err
	}
	return f, nil
}

// fileStruct is the Go type a policy file decodes into: one field per
// setting, tagged with its key, of its kind's TOML type; index maps a key
// to its field.
func fileStruct() (reflect.Type, map[string]int) {
	fields := make([]reflect.StructField, len(settings))
	index := map[string]int{}
	for i, s := range settings {
		var t reflect.Type
		switch s.Kind {
		case Bool:
			t = reflect.TypeFor[bool]()
		case Int:
			t = reflect.TypeFor[int64]()
		case Float:
			t = reflect.TypeFor[float64]()
		case List:
			t = reflect.TypeFor[[]string]()
		default: // String, Enum, Size, Duration
			t = reflect.TypeFor[string]()
		}
		fields[i] = reflect.StructField{Name: "F" + strconv.Itoa(i), Type: t, Tag: reflect.StructTag(`toml:"` + s.Key + `"`)}
		index[s.Key] = i
	}
	return reflect.StructOf(fields), index
}

// Apply sets in p every key the file sets, each checked, and records the
// file's position as the key's source; an error names the key at its
// position.
func (f *File) Apply(p *Policy) error {
	for _, s := range settings {
		pos, ok := f.Pos[s.Key]
		if !ok {
			continue
		}
		if err := s.apply(p, f.vals[s.Key], pos, f.checks); err != nil {
			return err
		}
		src := maps.Clone(p.Sources)
		if src == nil {
			src = map[string]string{}
		}
		src[s.Key] = pos
		p.Sources = src
	}
	return nil
}

// apply reads a file's value raw of s (its TOML type), checks it and sets
// it in p. A string's value is named, quoted, in an error; a number's is
// not (its position says it).
func (s Setting) apply(p *Policy, raw any, pos string, checks Checks) error {
	v, named := raw, ""
	if str, ok := raw.(string); ok {
		named = strconv.Quote(str)
		switch s.Kind {
		case Size:
			n, err := ParseSize(str)
			if err != nil {
				return at(pos, s.Key, "", err)
			}
			v = n
		case Duration:
			d, err := time.ParseDuration(str)
			if err != nil {
				return at(pos, s.Key, named, errors.New(`want a duration such as "10s" or "2m"`))
			}
			if d < 0 {
				return at(pos, s.Key, named, errors.New("must not be negative"))
			}
			v = d
		}
	}
	if list, ok := v.([]string); ok {
		for _, item := range list {
			if err := s.checkItem(item, checks); err != nil {
				err.Pos = pos
				return err
			}
		}
	} else if s.Check != nil {
		if err := s.Check(v); err != nil {
			return at(pos, s.Key, named, err)
		}
	}
	if err := s.Set(p, v); err != nil {
		return at(pos, s.Key, "", err)
	}
	return nil
}

// Value is the file's value of key in the form a command line gives it:
// a string, or a []string for a list; ok false when the file does not set
// it.
func (f *File) Value(key string) (v any, ok bool) {
	raw, ok := f.vals[key]
	if !ok {
		return nil, false
	}
	switch x := raw.(type) {
	case []string:
		return slices.Clone(x), true
	case int64:
		return strconv.FormatInt(x, 10), true
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64), true
	case bool:
		return strconv.FormatBool(x), true
	}
	return raw.(string), true
}

// For refuses, at its position, a key of the file that command c does not
// take, or an Enum's word that c does not take (exec's confine has no
// off). A session command ignores a key that only another session command
// takes (one file serves call, run, tools, mcp and policy show: max_turns
// means nothing to call); exec takes only its own keys, since a key it
// would ignore (write_scope, allow_program, approve) would promise what
// exec's command is not held to.
func (f *File) For(c Command) error {
	for _, key := range f.keys {
		s, ok := Lookup(key)
		if !ok {
			continue
		}
		if s.Commands&c == 0 {
			if c&Session != 0 && s.Commands&Session != 0 {
				continue
			}
			return at(f.Pos[key], key, "", fmt.Errorf("not a key of %s: only %s take it; remove it from a policy for %s", c, s.Commands, c))
		}
		if _, words := s.FlagFor(c); s.Kind == Enum && !slices.Contains(words, f.vals[key].(string)) {
			return at(f.Pos[key], key, strconv.Quote(f.vals[key].(string)), fmt.Errorf("%s takes only %s", c, strings.Join(words, ", ")))
		}
	}
	return nil
}

// wantType says what the setting's value must be, for a type error.
func (s Setting) wantType() string {
	switch s.Kind {
	case Size:
		return `a size as a string, e.g. "2GiB"`
	case Duration:
		return `a duration as a string, e.g. "10s"`
	case List:
		return "an array of strings"
	case Int:
		return "an integer"
	case Float:
		return "a number"
	case Bool:
		return "a boolean"
	}
	return "a string"
}

// tomlKind finds the kind of value a type error names. It is compiled at
// the first policy file with a type error, not by every start (decision 0066).
var tomlKind = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`TOML (\w+)`) })

// suggest names the known key nearest an unknown one.
func suggest(key string) string {
	best, bestD := "", 3
	for _, k := range Keys() {
		if d := editDistance(strings.ToLower(key), k); d < bestD {
			best, bestD = k, d
		}
	}
	if best == "" {
		return " (see `b10x-harness policy schema` for the keys)"
	}
	return " (did you mean " + best + "?)"
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			c := 1
			if a[i-1] == b[j-1] {
				c = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+c)
		}
		prev = cur
	}
	return prev[len(b)]
}
