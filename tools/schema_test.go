package tools

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestSchemaGenerated(t *testing.T) {
	got := string(FileRead{}.Schema())
	want := `{"type":"object","properties":{` +
		`"path":{"type":"string","description":"File to read, relative to the workspace root."},` +
		`"offset":{"type":"integer","description":"First line to return, counting from 1. Default 1.","minimum":1},` +
		`"limit":{"type":"integer","description":"Number of lines to return. Default: to the end of the file.","minimum":1}},` +
		`"required":["path"],"additionalProperties":false}`
	if got != want {
		t.Fatalf("file_read schema\n got %s\nwant %s", got, want)
	}
	// dir_list has no required field: no "required" key at all.
	if s := string(DirList{}.Schema()); strings.Contains(s, "required") {
		t.Fatalf("dir_list schema has required: %s", s)
	}
}

// Every tool's schema stays within the subset both providers accept, and
// says exactly what its argument struct says.
func TestSchemasMatchStructs(t *testing.T) {
	structs := map[string]any{
		"file_read": FileReadArgs{}, "dir_list": DirListArgs{}, "search": SearchArgs{},
		"find": FindArgs{}, "file_write": FileWriteArgs{}, "file_edit": FileEditArgs{},
	}
	all := append(ReadTools(), WriteTools()...)
	if len(all) != 6 {
		t.Fatalf("%d tools", len(all))
	}
	for _, tool := range all {
		var s struct {
			Type       string                    `json:"type"`
			Properties map[string]map[string]any `json:"properties"`
			Required   []string                  `json:"required"`
			AddProps   *bool                     `json:"additionalProperties"`
		}
		dec := json.NewDecoder(strings.NewReader(string(tool.Schema())))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&s); err != nil {
			t.Fatalf("%s: %v", tool.Name(), err)
		}
		if s.Type != "object" || s.AddProps == nil || *s.AddProps {
			t.Errorf("%s: type %q additionalProperties %v", tool.Name(), s.Type, s.AddProps)
		}
		st := reflect.TypeOf(structs[tool.Name()])
		if st == nil {
			t.Fatalf("unknown tool %q", tool.Name())
		}
		if len(s.Properties) != st.NumField() {
			t.Errorf("%s: %d properties for %d fields", tool.Name(), len(s.Properties), st.NumField())
		}
		for i := range st.NumField() {
			f := st.Field(i)
			name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
			p, ok := s.Properties[name]
			if !ok {
				t.Errorf("%s: no property %q", tool.Name(), name)
				continue
			}
			for k := range p {
				switch k {
				case "type", "description", "minimum":
				default:
					t.Errorf("%s.%s: keyword %q outside the common subset", tool.Name(), name, k)
				}
			}
			if p["description"] != f.Tag.Get("desc") {
				t.Errorf("%s.%s: description differs from the desc tag", tool.Name(), name)
			}
			required := !strings.Contains(opts, "omitempty")
			if got := contains(s.Required, name); got != required {
				t.Errorf("%s.%s: required %v, want %v", tool.Name(), name, got, required)
			}
		}
		if tool.Description() == "" {
			t.Errorf("%s: empty description", tool.Name())
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestSchemaGeneratorRejects(t *testing.T) {
	type noDesc struct {
		A string `json:"a"`
	}
	type badType struct {
		A []int `json:"a" desc:"x"`
	}
	type badMin struct {
		A string `json:"a" desc:"x" min:"1"`
	}
	// Two fields with one property name (built at run time: vet rightly
	// refuses such a struct literal).
	dup := reflect.StructOf([]reflect.StructField{
		{Name: "A", Type: reflect.TypeFor[string](), Tag: `json:"a" desc:"x"`},
		{Name: "B", Type: reflect.TypeFor[string](), Tag: `json:"a" desc:"y"`},
	})
	for _, typ := range []reflect.Type{reflect.TypeOf(noDesc{}), reflect.TypeOf(badType{}), reflect.TypeOf(badMin{}), dup, reflect.TypeOf(3)} {
		if _, err := newArgSpec(typ); err == nil {
			t.Errorf("%s accepted", typ)
		}
	}
	type ok struct {
		S *string `json:"s" desc:"optional through a pointer"`
		N int64   `json:"n" desc:"required" min:"-3"`
		B bool    `json:"b,omitempty" desc:"optional"`
		//lint:ignore U1000 never read: the unexported field newArgSpec must skip
		skipped string
		Ignored string `json:"-"`
	}
	s, err := newArgSpec(reflect.TypeOf(ok{}))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"type":"object","properties":{"s":{"type":"string","description":"optional through a pointer"},` +
		`"n":{"type":"integer","description":"required","minimum":-3},"b":{"type":"boolean","description":"optional"}},` +
		`"required":["n"],"additionalProperties":false}`
	if string(s.schema) != want {
		t.Fatalf("got %s", s.schema)
	}
	var v ok
	if _, err := s.decode(json.RawMessage(`{"s":"x","n":-3}`), &v); err != nil || v.S == nil || *v.S != "x" || v.N != -3 {
		t.Fatalf("decode: %+v %v", v, err)
	}
}

func TestStrictDecode(t *testing.T) {
	cases := []struct {
		raw   string
		field string // the message must name it ("" when none)
		ok    bool
	}{
		{`{"path":"a"}`, "", true},
		{`{"path":"a","offset":1,"limit":2}`, "", true},
		{` {"path":"a"} `, "", true},
		{`{"path":"a","offset":1.0}`, "", true},
		{`{"path":"a","offset":2e1}`, "", true},
		{`{"path":"a","offset":null}`, "", true},
		{`{"path":"a\u00e9\ud83d\ude00"}`, "", true},
		{`{}`, "path", false},
		{`{"path":null}`, "path", false},
		{`{"path":3}`, "path", false},
		{`{"path":["a"]}`, "path", false},
		{`{"path":"a","extra":1}`, "extra", false},
		{`{"Path":"a"}`, "Path", false},
		{`{"path":"a","path":"b"}`, "path", false},
		{`{"path":"a\u0000b"}`, "path", false},
		{`{"path":"\ud800"}`, "path", false},
		{`{"path":"\udc00x"}`, "path", false},
		{`{"path":"\ud800\u0041"}`, "path", false},
		{"{\"path\":\"caf\xe9\"}", "path", false},
		{"{\"path\":\"a\",\"caf\xe9\":1}", "", false},
		{`{"path":"a","offset":"1"}`, "offset", false},
		{`{"path":"a","offset":1.5}`, "offset", false},
		{`{"path":"a","offset":0}`, "offset", false},
		{`{"path":"a","offset":-1}`, "offset", false},
		{`{"path":"a","offset":1e400}`, "offset", false},
		{`{"path":"a","offset":99999999999999999999}`, "offset", false},
		{`{"path":"a","offset":true}`, "offset", false},
		{`[]`, "", false},
		{`"path"`, "", false},
		{``, "path", false},
		{`  `, "path", false},
		{`null`, "", false},
		{`{"path":"a"} {}`, "", false},
		{`{"path":"a"`, "", false},
		{`{"path" "a"}`, "", false},
	}
	for _, tc := range cases {
		var a FileReadArgs
		_, err := fileReadSpec().decode(json.RawMessage(tc.raw), &a)
		if tc.ok {
			if err != nil {
				t.Errorf("%s: %v", tc.raw, err)
			}
			continue
		}
		e, isErr := err.(*Error)
		if !isErr || e.Reason != ReasonInvalidArgument {
			t.Errorf("%s: got %v, want invalid_argument", tc.raw, err)
			continue
		}
		if tc.field != "" && !strings.Contains(e.Public, `"`+tc.field+`"`) {
			t.Errorf("%s: message %q does not name field %q", tc.raw, e.Public, tc.field)
		}
	}
	// Booleans are strict too.
	var e FileEditArgs
	if _, err := fileEditSpec().decode(json.RawMessage(`{"path":"a","old_string":"x","new_string":"y","replace_all":"yes"}`), &e); reasonOf(err) != ReasonInvalidArgument {
		t.Errorf("replace_all string: %v", err)
	}
	if _, err := fileEditSpec().decode(json.RawMessage(`{"path":"a","old_string":"x","new_string":"","replace_all":true}`), &e); err != nil || !e.ReplaceAll || e.NewString != "" {
		t.Errorf("valid edit: %+v %v", e, err)
	}
}

// Prepare refuses bad arguments before touching anything, for every tool.
func TestPrepareRefusesBadArguments(t *testing.T) {
	fx := newFixture(t)
	cases := []struct {
		tool Tool
		args string
		want Reason
	}{
		{FileRead{}, `{"path":"file.txt","bogus":1}`, ReasonInvalidArgument},
		{FileRead{}, `{"path":""}`, ReasonInvalidArgument},
		{FileRead{}, `{"path":"../secret.txt"}`, ReasonDeniedPath},
		{DirList{}, `{"path":5}`, ReasonInvalidArgument},
		{DirList{}, `{"path":"dirout"}`, ReasonDeniedPath},
		{Search{}, `{}`, ReasonInvalidArgument},
		{Search{}, `{"pattern":""}`, ReasonInvalidArgument},
		{Search{}, `{"pattern":"a(b"}`, ReasonInvalidArgument},
		{Search{}, `{"pattern":"(?<=a)b"}`, ReasonInvalidArgument},
		{Search{}, `{"pattern":"a","glob":"[a"}`, ReasonInvalidArgument},
		{Search{}, `{"pattern":"a","max_results":0}`, ReasonInvalidArgument},
		{Search{}, `{"pattern":"a","path":"/etc"}`, ReasonDeniedPath},
		{Find{}, `{"pattern":""}`, ReasonInvalidArgument},
		{Find{}, `{"pattern":"{a"}`, ReasonInvalidArgument},
		{Find{}, `{"pattern":"*","path":"dirout"}`, ReasonDeniedPath},
		{FileWrite{}, `{"path":"x.txt"}`, ReasonInvalidArgument},
		{FileWrite{}, `{"path":"x.txt","content":"a\u0000"}`, ReasonInvalidArgument},
		{FileWrite{}, `{"path":"dangling_out","content":"x"}`, ReasonDeniedPath},
		{FileEdit{}, `{"path":"file.txt","old_string":"","new_string":"x"}`, ReasonInvalidArgument},
		{FileEdit{}, `{"path":"file.txt","old_string":"x","new_string":"x"}`, ReasonInvalidArgument},
		{FileEdit{}, `{"path":"file.txt","old_string":"x"}`, ReasonInvalidArgument},
		{FileEdit{}, `{"path":"out","old_string":"x","new_string":"y"}`, ReasonDeniedPath},
	}
	for _, tc := range cases {
		_, err := tc.tool.Prepare(fx.ws, json.RawMessage(tc.args))
		if got := reasonOf(err); got != tc.want {
			t.Errorf("%s %s: %v; want %s", tc.tool.Name(), tc.args, err, tc.want)
		}
	}
	// No arguments at all is an empty object: fine where nothing is
	// required, a missing field otherwise.
	if p, err := (DirList{}).Prepare(fx.ws, nil); err != nil || p.Args() != (DirListArgs{}) {
		t.Errorf("dir_list without arguments: %v", err)
	}
	if _, err := (FileRead{}).Prepare(fx.ws, nil); reasonOf(err) != ReasonInvalidArgument {
		t.Errorf("file_read without arguments: %v", err)
	}
	// A nil workspace is an error, not a panic.
	for _, args := range []string{`{"path":"x"}`, `{"path":"/abs"}`} {
		if _, err := (FileRead{}).Prepare(nil, json.RawMessage(args)); reasonOf(err) != ReasonToolError {
			t.Errorf("nil workspace %s: %v", args, err)
		}
	}
}

func TestStringListArguments(t *testing.T) {
	type listArgs struct {
		Argv []string `json:"argv" min:"1" desc:"argv"`
	}
	s, err := newArgSpec(reflect.TypeOf(listArgs{}))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(s.schema), `"argv":{"type":"array","items":{"type":"string"},"description":"argv","minItems":1}`) {
		t.Fatalf("schema %s", s.schema)
	}
	var a listArgs
	if _, err := s.decode(json.RawMessage(`{"argv":["a"," b ","$(x);&&"]}`), &a); err != nil || len(a.Argv) != 3 || a.Argv[2] != "$(x);&&" {
		t.Fatalf("%q %v", a.Argv, err)
	}
	for _, bad := range []string{`{"argv":[]}`, `{"argv":"sh"}`, `{"argv":[1]}`, `{"argv":["a\u0000"]}`, `{"argv":["\ud800"]}`, `{"argv":[null]}`} {
		var a listArgs
		if _, err := s.decode(json.RawMessage(bad), &a); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}
