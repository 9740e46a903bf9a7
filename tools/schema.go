package tools

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"
)

// An argument struct is the one source of truth for a tool's arguments:
// its JSON Schema is generated from it and its decoder is driven by it.
//
// Supported fields: string, bool and the signed integer kinds, or pointers
// to them. Tags:
//
//	json:"name[,omitempty]"  the property name; "-" or no tag skips the field
//	desc:"..."               the property's description
//	min:"N"                  minimum for an integer property
//	max:"N"                  most bytes a string property may hold (after
//	                         JSON unescaping); a longer value is refused with
//	                         ReasonInvalidArgument naming the field, the limit
//	                         and the size, before the tool looks at it. Not in
//	                         the schema (maxLength counts characters, and is
//	                         outside the subset every provider accepts).
//
// A property is required unless the field is a pointer or its json tag has
// omitempty.

// argField describes one property of an argument struct.
type argField struct {
	name     string
	index    int
	kind     reflect.Kind // String, Bool or Int
	ptr      bool
	required bool
	desc     string
	min      *int64
	max      int64 // string: most bytes; 0: no limit of its own
}

// argSpec is the generated description of an argument struct.
type argSpec struct {
	typ    reflect.Type
	fields []argField
	byName map[string]int
	schema json.RawMessage
}

// newArgSpec builds the spec of struct type t, or says why it cannot.
func newArgSpec(t reflect.Type) (*argSpec, error) {
	if t.Kind() != reflect.Struct {
		return nil, fmt.Errorf("argument type %s is not a struct", t)
	}
	s := &argSpec{typ: t, byName: map[string]int{}}
	for i := range t.NumField() {
		sf := t.Field(i)
		tag, ok := sf.Tag.Lookup("json")
		if !ok || tag == "-" || !sf.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if name == "" {
			return nil, fmt.Errorf("%s.%s: json tag without a name", t, sf.Name)
		}
		if _, dup := s.byName[name]; dup {
			return nil, fmt.Errorf("%s.%s: duplicate property %q", t, sf.Name, name)
		}
		f := argField{name: name, index: i, desc: sf.Tag.Get("desc")}
		ft := sf.Type
		if ft.Kind() == reflect.Pointer {
			f.ptr = true
			ft = ft.Elem()
		}
		switch ft.Kind() {
		case reflect.String:
			f.kind = reflect.String
		case reflect.Bool:
			f.kind = reflect.Bool
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			f.kind = reflect.Int
		case reflect.Slice:
			if ft.Elem().Kind() != reflect.String || f.ptr {
				return nil, fmt.Errorf("%s.%s: unsupported field type %s", t, sf.Name, sf.Type)
			}
			f.kind = reflect.Slice // a list of strings
		default:
			return nil, fmt.Errorf("%s.%s: unsupported field type %s", t, sf.Name, sf.Type)
		}
		if m, ok := sf.Tag.Lookup("min"); ok {
			if f.kind != reflect.Int && f.kind != reflect.Slice {
				return nil, fmt.Errorf("%s.%s: min on a field that is neither an integer nor a list", t, sf.Name)
			}
			v, err := strconv.ParseInt(m, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("%s.%s: min %q: %w", t, sf.Name, m, err)
			}
			f.min = &v
		}
		if m, ok := sf.Tag.Lookup("max"); ok {
			v, err := strconv.ParseInt(m, 10, 64)
			if f.kind != reflect.String || err != nil || v <= 0 {
				return nil, fmt.Errorf("%s.%s: max %q: only a positive byte count on a string field", t, sf.Name, m)
			}
			f.max = v
		}
		f.required = !f.ptr && !strings.Contains(","+opts+",", ",omitempty,")
		if f.desc == "" {
			return nil, fmt.Errorf("%s.%s: no desc tag", t, sf.Name)
		}
		s.byName[name] = len(s.fields)
		s.fields = append(s.fields, f)
	}
	schema, err := s.buildSchema()
	if err != nil {
		return nil, err
	}
	s.schema = schema
	return s, nil
}

// mustArgSpec is newArgSpec for the package's own argument structs, built
// at init: a failure is a bug in this package, caught by its tests.
func mustArgSpec(v any) *argSpec {
	s, err := newArgSpec(reflect.TypeOf(v))
	if err != nil {
		panic("tools: bug: " + err.Error())
	}
	return s
}

// buildSchema renders the JSON Schema with properties in field order.
func (s *argSpec) buildSchema() (json.RawMessage, error) {
	var b bytes.Buffer
	b.WriteString(`{"type":"object","properties":{`)
	var required []string
	for i, f := range s.fields {
		if i > 0 {
			b.WriteByte(',')
		}
		name, _ := json.Marshal(f.name)
		b.Write(name)
		b.WriteString(`:{"type":`)
		switch f.kind {
		case reflect.String:
			b.WriteString(`"string"`)
		case reflect.Bool:
			b.WriteString(`"boolean"`)
		case reflect.Int:
			b.WriteString(`"integer"`)
		case reflect.Slice:
			b.WriteString(`"array","items":{"type":"string"}`)
		}
		desc, _ := json.Marshal(f.desc)
		b.WriteString(`,"description":`)
		b.Write(desc)
		switch {
		case f.min != nil && f.kind == reflect.Slice:
			fmt.Fprintf(&b, `,"minItems":%d`, *f.min)
		case f.min != nil:
			fmt.Fprintf(&b, `,"minimum":%d`, *f.min)
		}
		b.WriteByte('}')
		if f.required {
			required = append(required, f.name)
		}
	}
	b.WriteByte('}')
	if len(required) > 0 {
		r, _ := json.Marshal(required)
		b.WriteString(`,"required":`)
		b.Write(r)
	}
	b.WriteString(`,"additionalProperties":false}`)
	if !json.Valid(b.Bytes()) {
		return nil, fmt.Errorf("%s: generated schema is not valid JSON", s.typ)
	}
	return json.RawMessage(b.Bytes()), nil
}

// decode fills dst (a pointer to the spec's struct type) from raw, strictly:
// raw must be one JSON object (empty raw counts as {}); every key must be a known
// property, given once; every required property present and not null;
// every value of its property's type; no string may hold a NUL byte,
// invalid UTF-8 or an unpaired surrogate escape; integers must be whole and at least their
// minimum. present reports which properties were given (not null).
func (s *argSpec) decode(raw json.RawMessage, dst any) (present map[string]bool, err error) {
	rv := reflect.ValueOf(dst)
	if rv.Kind() != reflect.Pointer || rv.Elem().Type() != s.typ {
		panic(fmt.Sprintf("tools: bug: decode into %T, want *%s", dst, s.typ))
	}
	out := rv.Elem()
	bad := func(format string, args ...any) error {
		return Errorf(ReasonInvalidArgument, nil, format, args...)
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		raw = json.RawMessage("{}") // no arguments at all: an empty object
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, bad("arguments must be a JSON object")
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, bad("arguments must be a JSON object")
	}
	present = map[string]bool{}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, bad("arguments are not well-formed JSON")
		}
		key, ok := tok.(string)
		if !ok {
			return nil, bad("arguments are not well-formed JSON")
		}
		var val json.RawMessage
		if err := dec.Decode(&val); err != nil {
			return nil, bad("arguments are not well-formed JSON (at field %q)", capText(key, maxEchoBytes))
		}
		if seen[key] {
			return nil, bad("field %q is given more than once", capText(key, maxEchoBytes))
		}
		seen[key] = true
		i, known := s.byName[key]
		if !known {
			return nil, bad("unknown field %q; the fields are %s", capText(key, maxEchoBytes), s.fieldList())
		}
		f := s.fields[i]
		if string(val) == "null" {
			if f.required {
				return nil, bad("field %q must be %s, not null", key, kindWord(f.kind))
			}
			continue
		}
		fv := out.Field(f.index)
		if f.ptr {
			p := reflect.New(fv.Type().Elem())
			fv.Set(p)
			fv = p.Elem()
		}
		if err := decodeValue(f, val, fv); err != nil {
			return nil, err
		}
		present[key] = true
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, bad("arguments are not well-formed JSON")
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, bad("arguments must be a single JSON object")
	}
	for _, f := range s.fields {
		if f.required && !present[f.name] {
			return nil, bad("missing required field %q", f.name)
		}
	}
	return present, nil
}

// decodeValue decodes one property's JSON value into fv.
func decodeValue(f argField, val json.RawMessage, fv reflect.Value) error {
	bad := func(format string, args ...any) error {
		return Errorf(ReasonInvalidArgument, nil, "field %q: "+format, append([]any{f.name}, args...)...)
	}
	switch f.kind {
	case reflect.String:
		str, err := decodeString(val)
		if err != "" {
			return bad("%s", err)
		}
		if f.max > 0 && int64(len(str)) > f.max {
			return Errorf(ReasonInvalidArgument, nil, "field %q is %d bytes; the limit is %d bytes", f.name, len(str), f.max)
		}
		fv.SetString(str)
	case reflect.Slice:
		var items []json.RawMessage
		if len(val) == 0 || val[0] != '[' || json.Unmarshal(val, &items) != nil {
			return bad("must be a list of strings")
		}
		if f.min != nil && int64(len(items)) < *f.min {
			return bad("must hold at least %d item(s)", *f.min)
		}
		list := make([]string, len(items))
		for i, it := range items {
			str, err := decodeString(it)
			if err != "" {
				return bad("item %d %s", i, err)
			}
			list[i] = str
		}
		fv.Set(reflect.ValueOf(list))
	case reflect.Bool:
		switch string(val) {
		case "true":
			fv.SetBool(true)
		case "false":
			fv.SetBool(false)
		default:
			return bad("must be true or false")
		}
	case reflect.Int:
		if len(val) == 0 || (val[0] != '-' && (val[0] < '0' || val[0] > '9')) {
			return bad("must be an integer")
		}
		n, msg := wholeNumber(string(val))
		if msg != "" {
			return bad("%s", msg)
		}
		if f.min != nil && n < *f.min {
			return bad("must be at least %d", *f.min)
		}
		if fv.OverflowInt(n) {
			return bad("is out of range")
		}
		fv.SetInt(n)
	}
	return nil
}

// wholeNumber reads a JSON number exactly, without going through a float
// (which would take 1.00000000000000000001 as 1, and 9007199254740993.0 as
// 9007199254740992): the int64 it is, or what is wrong with it ("must be
// an integer", "must be a whole number", "is out of range"). 1.0, 2e1 and
// 100e-2 are whole; 1.5 and 1e-400 are not.
func wholeNumber(s string) (int64, string) {
	const notInteger = "must be an integer"
	allDigits := func(d string) bool {
		for i := 0; i < len(d); i++ {
			if d[i] < '0' || d[i] > '9' {
				return false
			}
		}
		return d != ""
	}
	mantissa, neg := strings.CutPrefix(s, "-")
	exp := 0
	if i := strings.IndexAny(mantissa, "eE"); i >= 0 {
		e, err := strconv.Atoi(mantissa[i+1:])
		if err != nil && !errors.Is(err, strconv.ErrRange) {
			return 0, notInteger
		}
		// Past a million the answer is the same: out of range, or not
		// whole, or zero.
		exp = min(max(e, -1<<20), 1<<20)
		mantissa = mantissa[:i]
	}
	whole, frac, dotted := strings.Cut(mantissa, ".")
	if !allDigits(whole) || dotted && !allDigits(frac) {
		return 0, notInteger
	}
	// The value is 0.digits × 10^point.
	digits := strings.TrimLeft(whole+frac, "0")
	point := len(whole) + exp - (len(whole) + len(frac) - len(digits))
	digits = strings.TrimRight(digits, "0")
	switch {
	case digits == "":
		return 0, ""
	case len(digits) > point:
		return 0, "must be a whole number"
	case point > 19:
		return 0, "is out of range"
	}
	text := digits + strings.Repeat("0", point-len(digits))
	if neg {
		text = "-" + text
	}
	n, err := strconv.ParseInt(text, 10, 64)
	if err != nil {
		return 0, "is out of range"
	}
	return n, ""
}

// decodeString decodes a JSON string literal strictly, or says what is
// wrong with it ("must be a string", ...).
func decodeString(val json.RawMessage) (string, string) {
	if len(val) == 0 || val[0] != '"' {
		return "", "must be a string"
	}
	if !utf8.Valid(val) || hasLoneSurrogate(val) {
		return "", "is not valid UTF-8 (unpaired surrogate escape)"
	}
	var str string
	if err := json.Unmarshal(val, &str); err != nil {
		return "", "must be a string"
	}
	if strings.IndexByte(str, 0) >= 0 {
		return "", "must not contain NUL bytes"
	}
	return str, ""
}

// hasLoneSurrogate reports whether a JSON string literal holds a \uD800-
// \uDFFF escape not part of a valid pair. encoding/json would silently turn
// it into U+FFFD, hiding invalid input.
func hasLoneSurrogate(lit []byte) bool {
	hex4 := func(b []byte) (rune, bool) {
		if len(b) < 4 {
			return 0, false
		}
		v, err := strconv.ParseUint(string(b[:4]), 16, 16)
		return rune(v), err == nil
	}
	for i := 0; i < len(lit); i++ {
		if lit[i] != '\\' {
			continue
		}
		i++
		if i >= len(lit) || lit[i] != 'u' {
			continue
		}
		r, ok := hex4(lit[i+1:])
		if !ok {
			return true
		}
		i += 4
		switch {
		case r >= 0xDC00 && r <= 0xDFFF:
			return true
		case r >= 0xD800 && r <= 0xDBFF:
			if i+2 >= len(lit) || lit[i+1] != '\\' || lit[i+2] != 'u' {
				return true
			}
			lo, ok := hex4(lit[i+3:])
			if !ok || lo < 0xDC00 || lo > 0xDFFF {
				return true
			}
			i += 6
		}
	}
	return false
}

func kindWord(k reflect.Kind) string {
	switch k {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice:
		return "a list of strings"
	}
	return "an integer"
}

func (s *argSpec) fieldList() string {
	names := make([]string, len(s.fields))
	for i, f := range s.fields {
		names[i] = strconv.Quote(f.name)
	}
	return strings.Join(names, ", ")
}

// maxEchoBytes bounds any piece of model input a message repeats (a field
// name, a regular expression's error), so a huge argument never makes a
// huge message or record line.
const maxEchoBytes = 256

// capText returns s when it is at most n bytes, else its first n bytes
// (cut on a rune boundary) and a note of how many were left out.
func capText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	end := n
	for end > 0 && !utf8.RuneStart(s[end]) {
		end--
	}
	return fmt.Sprintf("%s[... %d more bytes]", s[:end], len(s)-end)
}
