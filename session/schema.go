package session

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
)

// SchemaID is the $id of the policy file's JSON Schema.
const SchemaID = "https://github.com/b10x/harness/docs/policy.schema.json"

// Schema is the JSON Schema of a policy file, generated from File's
// fields and tags (a number's minimum is 0 unless its min tag says
// otherwise), for editors (docs/policy.schema.json is this, kept in
// sync by a test).
func Schema() []byte {
	props := map[string]any{}
	t := reflect.TypeFor[File]()
	for i := range t.NumField() {
		f := t.Field(i)
		p := map[string]any{"description": f.Tag.Get("help")}
		switch f.Type.Kind() {
		case reflect.String:
			p["type"] = "string"
		case reflect.Slice:
			p["type"] = "array"
			p["items"] = map[string]any{"type": "string"}
		case reflect.Int, reflect.Int64:
			p["type"] = "integer"
			p["minimum"] = 0
		case reflect.Float64:
			p["type"] = "number"
			p["minimum"] = 0
		}
		if m := f.Tag.Get("min"); m != "" {
			p["minimum"], _ = strconv.Atoi(m) // a tag of this package: a number
		}
		if e := f.Tag.Get("enum"); e != "" {
			p["enum"] = strings.Split(e, ",")
		}
		switch f.Tag.Get("format") {
		case "size":
			p["pattern"] = `^\s*[0-9]+\s*([kKmMgG]([iI]?[bB])?|[bB])?\s*$`
		case "duration":
			p["pattern"] = `^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$|^0$`
		}
		props[f.Tag.Get("toml")] = p
	}
	s := map[string]any{
		"$schema":              "https://json-schema.org/draft/2020-12/schema",
		"$id":                  SchemaID,
		"title":                "b10x-harness policy file",
		"description":          "Every key is top-level and spelled as its command-line flag with _ for -. A flag given on the command line overrides the key.",
		"type":                 "object",
		"additionalProperties": false,
		"properties":           props,
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	_ = enc.Encode(s) // maps of strings and numbers: cannot fail
	return b.Bytes()
}
