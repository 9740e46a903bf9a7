package tools

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// decodeSpecs are the argument decoders of every tool, by tool name.
func decodeSpecs() []struct {
	name string
	spec *argSpec
} {
	return []struct {
		name string
		spec *argSpec
	}{
		{"file_read", fileReadSpec()}, {"dir_list", dirListSpec()}, {"search", searchSpec()}, {"find", findSpec()},
		{"file_write", fileWriteSpec()}, {"file_edit", fileEditSpec()}, {"run", runSpec()},
	}
}

// FuzzDecodeArgs attacks the strict argument decoder of every tool (the
// decode each tool's Prepare calls first) with any bytes, as the whole
// arguments and as the value of each of its fields. It never panics. A
// refusal is an *Error, invalid_argument, with a short public message; an
// acceptance has every required field present and only known ones, and
// its struct, encoded by encoding/json and decoded again, is the same
// struct. An unknown field is refused naming it; a value of the wrong
// type, or any value the field does not take, is refused naming the
// field. A string a field takes is the one encoding/json reads, valid
// UTF-8 without NUL; an integer it takes is exactly the number the text
// says, a whole one.
func FuzzDecodeArgs(f *testing.F) {
	for i, raw := range []string{
		`{"path":"a","offset":1,"limit":2}`, `{"path":"a","offset":1.0}`, `{"path":"a","offset":2e1}`, `{"path":"a","offset":null}`,
		`{"path":"a\u00e9\ud83d\ude00"}`, `{"path":"\ud800\u0041"}`, `{"path":"a\u0000b"}`, `{"path":"a","path":"b"}`, `{"Path":"a"}`,
		`{"path":"a","offset":1e400}`, `{"path":"a","offset":99999999999999999999}`, `{"path":"a","offset":-1}`, ``, `null`, `[]`,
		`{"path":"a"} {}`, `{"path":"a"`, "{\"path\":\"caf\xe9\"}",
		`{}`, `{"path":"sub"}`,
		`{"pattern":"a(b","path":"x","glob":"**/*.go","max_results":3}`,
		`{"pattern":"**/*.go","max_results":500}`,
		`{"path":"x.txt","content":"line\n"}`,
		`{"path":"file.txt","old_string":"x","new_string":"","replace_all":true}`,
		`{"argv":["sh","-c","echo hi"],"cwd":"sub","stdin":"in","timeout_s":5}`, `{"argv":[]}`, `{"argv":[null]}`,
	} {
		f.Add(uint8(i), []byte(raw), "extra")
	}
	f.Add(uint8(0), []byte(`"\ud83d\ude00"`), "path\x00")
	f.Add(uint8(6), []byte(`9223372036854775807`), "Argv")
	f.Add(uint8(3), []byte(`-9223372036854775808.0`), strings.Repeat("k", 300))
	f.Add(uint8(1), []byte(`["a","\ud800"]`), "caf\xe9")
	specs := decodeSpecs()
	// As file_read's offset: numbers a float reads as another integer
	// (the decoder once took them so).
	for _, n := range []string{`1.00000000000000000001`, `9007199254740993.0`, `1e-400`, `100e-2`, `-0.0e7`, `0.5e1`, `1e99999999999999999999`} {
		f.Add(uint8(len(specs)), []byte(n), "x")
	}
	f.Fuzz(func(t *testing.T, which uint8, raw []byte, key string) {
		tool := specs[int(which)%len(specs)]
		s := tool.spec
		v, present, err := decodeInto(s, raw)
		if err == nil {
			checkDecoded(t, tool.name, s, raw, v, present)
		} else {
			checkRefusal(t, tool.name, raw, err, "")
		}

		// An unknown field, first: refused, naming it.
		var name string
		kb, _ := json.Marshal(key)
		_ = json.Unmarshal(kb, &name)
		if _, known := s.byName[name]; !known {
			_, _, err := decodeInto(s, []byte("{"+string(kb)+":1}"))
			checkRefusal(t, tool.name, raw, err, "unknown field "+strconv.Quote(capText(name, maxEchoBytes)))
		}

		// raw, and values of the wrong types, as each field's value.
		f := s.fields[int(which/uint8(len(specs)))%len(s.fields)]
		values := [][]byte{raw}
		switch f.kind {
		case reflect.String:
			values = append(values, []byte(`1`), []byte(`true`), []byte(`["a"]`), []byte(`{}`))
		case reflect.Int:
			values = append(values, []byte(`"1"`), []byte(`true`), []byte(`[1]`), []byte(`{}`), []byte(`1.5`))
		case reflect.Bool:
			values = append(values, []byte(`"true"`), []byte(`1`), []byte(`[]`))
		case reflect.Slice:
			values = append(values, []byte(`"sh"`), []byte(`[1]`), []byte(`{}`), []byte(`true`))
		}
		for i, val := range values {
			if !json.Valid(val) {
				continue
			}
			obj := withField(s, f, val)
			v, present, err := decodeInto(s, obj)
			if err != nil {
				checkRefusal(t, tool.name, obj, err, strconv.Quote(f.name))
				continue
			}
			if i > 0 {
				t.Fatalf("%s %s: a value of the wrong type taken", tool.name, obj)
			}
			if present[f.name] {
				checkValue(t, tool.name, f, val, reflect.ValueOf(v).Elem().Field(f.index))
			}
			checkDecoded(t, tool.name, s, obj, v, present)
		}
	})
}

// decodeInto decodes raw with s into a new value of its struct.
func decodeInto(s *argSpec, raw []byte) (any, map[string]bool, error) {
	v := reflect.New(s.typ).Interface()
	present, err := s.decode(json.RawMessage(raw), v)
	return v, present, err
}

// withField is an object of s's fields with f first, holding val, and
// then every other required field with a value it takes.
func withField(s *argSpec, f argField, val []byte) []byte {
	b := []byte("{")
	name, _ := json.Marshal(f.name)
	b = append(append(append(b, name...), ':'), val...)
	for _, g := range s.fields {
		if g.name == f.name || !g.required {
			continue
		}
		name, _ := json.Marshal(g.name)
		b = append(append(append(b, ','), name...), ':')
		switch g.kind {
		case reflect.String:
			b = append(b, `"a"`...)
		case reflect.Slice:
			b = append(b, `["a"]`...)
		case reflect.Bool:
			b = append(b, `true`...)
		case reflect.Int:
			b = strconv.AppendInt(b, ptrOr(g.min, 1), 10)
		}
	}
	return append(b, '}')
}

func ptrOr(p *int64, def int64) int64 {
	if p == nil {
		return def
	}
	return *p
}

// missingRequired is the first required field of s not in present.
func missingRequired(s *argSpec, present map[string]bool) string {
	for _, f := range s.fields {
		if f.required && !present[f.name] {
			return f.name
		}
	}
	return ""
}

// checkRefusal holds err, the decoder's refusal of raw, to its promises:
// an *Error, invalid_argument, a public message of bounded size that
// holds want.
func checkRefusal(t *testing.T, tool string, raw []byte, err error, want string) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) || e.Reason != ReasonInvalidArgument || e.Public == "" {
		t.Fatalf("%s %q: refused with %v, want invalid_argument", tool, raw, err)
	}
	if len(e.Public) > 8*maxEchoBytes+1024 {
		t.Fatalf("%s %q: a message of %d bytes", tool, raw, len(e.Public))
	}
	if !strings.Contains(e.Public, want) {
		t.Fatalf("%s %q: message %q does not hold %s", tool, raw, e.Public, want)
	}
}

// checkDecoded holds v, decoded from raw, to the decoder's promises.
func checkDecoded(t *testing.T, tool string, s *argSpec, raw []byte, v any, present map[string]bool) {
	t.Helper()
	for k := range present {
		if _, known := s.byName[k]; !known {
			t.Fatalf("%s %q: unknown field %q present", tool, raw, k)
		}
	}
	if m := missingRequired(s, present); m != "" {
		t.Fatalf("%s %q: taken without %q", tool, raw, m)
	}
	rv := reflect.ValueOf(v).Elem()
	for _, f := range s.fields {
		checkField(t, tool, raw, f, rv.Field(f.index))
	}
	enc, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("%s %q: %+v does not encode: %v", tool, raw, v, err)
	}
	again, _, err := decodeInto(s, enc)
	if err != nil {
		t.Fatalf("%s %q: decoded to %+v, whose encoding %s is refused: %v", tool, raw, v, enc, err)
	}
	if !reflect.DeepEqual(again, v) {
		t.Fatalf("%s %q: decoded to %+v, whose encoding %s decodes to %+v", tool, raw, v, enc, again)
	}
}

// checkField holds a decoded field to what its kind and tags promise.
func checkField(t *testing.T, tool string, raw []byte, f argField, fv reflect.Value) {
	t.Helper()
	if f.ptr {
		if fv.IsNil() {
			return
		}
		fv = fv.Elem()
	}
	good := func(s string) bool { return utf8.ValidString(s) && !strings.Contains(s, "\x00") }
	switch f.kind {
	case reflect.String:
		if !good(fv.String()) || f.max > 0 && int64(fv.Len()) > f.max {
			t.Fatalf("%s %q: field %q holds %q", tool, raw, f.name, fv.String())
		}
	case reflect.Slice:
		list := fv.Interface().([]string)
		if f.min != nil && int64(len(list)) < *f.min {
			t.Fatalf("%s %q: field %q holds %d items", tool, raw, f.name, len(list))
		}
		for _, s := range list {
			if !good(s) {
				t.Fatalf("%s %q: field %q holds %q", tool, raw, f.name, s)
			}
		}
	case reflect.Int:
		if f.min != nil && fv.Int() < *f.min && fv.Int() != 0 {
			t.Fatalf("%s %q: field %q holds %d", tool, raw, f.name, fv.Int())
		}
	}
}

// smallNumber is a JSON number whose exponent big.Rat can work out
// quickly.
var smallNumber = regexp.MustCompile(`^-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]{1,3})?$`)

// checkValue holds the value fv the decoder took for f from val against
// what val says, read another way.
func checkValue(t *testing.T, tool string, f argField, val []byte, fv reflect.Value) {
	t.Helper()
	if f.ptr {
		fv = fv.Elem()
	}
	switch f.kind {
	case reflect.String:
		var s string
		if err := json.Unmarshal(val, &s); err != nil || s != fv.String() {
			t.Fatalf("%s field %q: %s taken as %q; encoding/json reads %q, %v", tool, f.name, val, fv.String(), s, err)
		}
	case reflect.Slice:
		var l []string
		if err := json.Unmarshal(val, &l); err != nil || !reflect.DeepEqual(l, fv.Interface()) {
			t.Fatalf("%s field %q: %s taken as %q; encoding/json reads %q, %v", tool, f.name, val, fv.Interface(), l, err)
		}
	case reflect.Bool:
		var b bool
		if err := json.Unmarshal(val, &b); err != nil || b != fv.Bool() {
			t.Fatalf("%s field %q: %s taken as %v", tool, f.name, val, fv.Bool())
		}
	case reflect.Int:
		if !smallNumber.Match(val) || len(val) > 400 {
			return
		}
		r, ok := new(big.Rat).SetString(string(val))
		if !ok {
			t.Fatalf("%s field %q: %s taken as %d, but it is not a number", tool, f.name, val, fv.Int())
		}
		if !r.IsInt() || r.Num().Cmp(big.NewInt(fv.Int())) != 0 {
			t.Fatalf("%s field %q: %s taken as %d, but it is %s", tool, f.name, val, fv.Int(), fmtRat(r))
		}
	}
}

func fmtRat(r *big.Rat) string {
	if r.IsInt() {
		return r.Num().String()
	}
	return fmt.Sprintf("%s (not whole)", r.FloatString(30))
}

// TestWholeNumber pins what wholeNumber takes and what it says of the
// rest, numbers a float would round among them.
func TestWholeNumber(t *testing.T) {
	for _, c := range []struct {
		in   string
		n    int64
		want string
	}{
		{"0", 0, ""}, {"-0", 0, ""}, {"7", 7, ""}, {"-7", -7, ""}, {"1.0", 1, ""}, {"2e1", 20, ""}, {"2E+1", 20, ""}, {"100e-2", 1, ""},
		{"0.5e1", 5, ""}, {"0e99999999999999999999", 0, ""}, {"9223372036854775807", 1<<63 - 1, ""},
		{"-9223372036854775808.0", -1 << 63, ""}, {"9007199254740993.0", 9007199254740993, ""},
		{"1.5", 0, "must be a whole number"}, {"1.00000000000000000001", 0, "must be a whole number"},
		{"1e-400", 0, "must be a whole number"}, {"1e-99999999999999999999", 0, "must be a whole number"},
		{"9223372036854775808", 0, "is out of range"}, {"1e400", 0, "is out of range"}, {"99999999999999999999", 0, "is out of range"},
		{"1e99999999999999999999", 0, "is out of range"},
		{"", 0, "must be an integer"}, {"-", 0, "must be an integer"}, {"1.", 0, "must be an integer"}, {".5", 0, "must be an integer"},
		{"1e", 0, "must be an integer"}, {"1e+", 0, "must be an integer"}, {"0x10", 0, "must be an integer"}, {`"1"`, 0, "must be an integer"},
	} {
		if n, msg := wholeNumber(c.in); n != c.n || msg != c.want {
			t.Errorf("wholeNumber(%q) = %d, %q; want %d, %q", c.in, n, msg, c.n, c.want)
		}
	}
}
