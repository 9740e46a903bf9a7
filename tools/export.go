package tools

import "encoding/json"

// SchemaOf returns the JSON Schema generated from an argument struct value,
// by the same generator the tools' own schemas come from. Other packages use
// it for arguments of their own (the verbs surface). It panics on a struct
// the generator does not support: a bug, found at init by tests.
func SchemaOf(v any) json.RawMessage { return mustArgSpec(v).schema }
