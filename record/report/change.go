package report

import (
	"fmt"
	"strings"
)

// change is what a file_write or file_edit call asked to change, from its
// recorded arguments: the lines it removes (an edit's old_string) and adds.
type change struct {
	Path  string
	Op    string // "write" or "edit"
	Lines []diffLine
	// Kept is false for a string the record keeps only as its size and
	// SHA-256 (over record.BodyLimit); Note says so.
	Note string
}

type diffLine struct {
	Kind string // "add", "del"
	Text string
}

// changeOf reads the change a call of entry asked for; nil for an entry
// that changes no file. A call through the verbs surface (tool_invoke)
// is read as the entry it invoked.
func changeOf(entry string, args any) *change {
	m, _ := args.(map[string]any)
	if entry == "tool_invoke" && m != nil {
		name, _ := m["name"].(string)
		inner, _ := m["arguments"].(map[string]any)
		entry, m = name, inner
	}
	if m == nil {
		return nil
	}
	path, _ := m["path"].(string)
	c := &change{Path: path}
	switch entry {
	case "file_write":
		c.Op = "write"
		c.side("add", "content", m["content"])
	case "file_edit":
		c.Op = "edit"
		c.side("del", "old_string", m["old_string"])
		c.side("add", "new_string", m["new_string"])
	default:
		return nil
	}
	return c
}

// side adds the lines of one argument: a string, or the record's digest
// of a long one ({"bytes": N, "sha256": HEX}).
func (c *change) side(kind, key string, v any) {
	switch v := v.(type) {
	case string:
		if v == "" {
			return
		}
		for _, l := range strings.SplitAfter(v, "\n") {
			if l != "" {
				c.Lines = append(c.Lines, diffLine{Kind: kind, Text: strings.TrimSuffix(l, "\n")})
			}
		}
	case map[string]any:
		c.Note += fmt.Sprintf("%s: %v bytes, sha256 %v (the record keeps a long argument only as its size and digest). ", key, v["bytes"], v["sha256"])
	}
}
