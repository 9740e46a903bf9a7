package policy

import (
	"bytes"
	"encoding/json"
)

// SchemaID is the $id of the policy file's JSON Schema.
const SchemaID = "https://github.com/b10x/harness/docs/policy.schema.json"

// The patterns the schema gives sizes and durations.
const (
	sizePattern     = `^\s*[0-9]+\s*([kKmMgG]([iI]?[bB])?|[bB])?\s*$`
	durationPattern = `^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$|^0$`
)

// Schema is the JSON Schema of a policy file, made from the table: one
// property per setting, with its Help as the description, its kind's JSON
// type (a size or a duration as a string with a pattern), an Enum's words,
// and an integer's or a number's minimum (Min, 0 unless set). Editors read
// it; docs/policy.schema.json is this, kept equal by a test.
func Schema() []byte {
	props := map[string]any{}
	for _, s := range settings {
		p := map[string]any{"description": s.Help}
		switch s.Kind {
		case String, Enum:
			p["type"] = "string"
		case Size:
			p["type"], p["pattern"] = "string", sizePattern
		case Duration:
			p["type"], p["pattern"] = "string", durationPattern
		case Bool:
			p["type"] = "boolean"
		case Int:
			p["type"], p["minimum"] = "integer", s.Min
		case Float:
			p["type"], p["minimum"] = "number", s.Min
		case List:
			p["type"], p["items"] = "array", map[string]any{"type": "string"}
		}
		if w := s.Words(); w != nil {
			p["enum"] = w
		}
		props[s.Key] = p
	}
	doc := map[string]any{
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
	_ = enc.Encode(doc) // maps of strings and numbers: cannot fail
	return b.Bytes()
}
