package agent

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/b10x/harness/gate"
)

// Def is a named agent: a Markdown file whose front matter declares the
// agent's name, description, tools and an optional risk ceiling, and whose
// body is its instructions (the system prompt of a run with --agent).
//
//	---
//	name: reviewer
//	description: Reads the code and reports problems; changes nothing.
//	tools: [file_read, search, find]
//	approve-up-to: low
//	---
//	You review code. ...
//
// approve-up-to may also be spelt approve_up_to, as a policy file spells
// it (one key: both in one file is a repetition). tools may also be written as "- name" lines under "tools:". A definition
// can only narrow: Allow is intersected with what the parent run admits (by
// the gate, at its one chokepoint), and Ceiling refuses a ceiling above the
// parent's. The zero value declares no narrowing and no ceiling. A Def is a
// plain value, safe to copy and to share between goroutines once parsed.
// It does not protect anything by itself: a caller that ignores Allow or
// Ceiling gets the parent's whole policy.
type Def struct {
	Name         string
	Description  string
	Tools        []string  // the declared catalogue entries, when HasTools
	HasTools     bool      // tools: was declared (possibly empty: no tools at all)
	ApproveUpTo  gate.Risk // the declared ceiling, when HasCeiling
	HasCeiling   bool      // approve-up-to: was declared
	Instructions string    // the body after the front matter
	File         string    // where it was read from
	Line         int       // line of its name: key
}

// Allow returns the narrowing for gate.Config.Allow: nil when the
// definition declares no tools (no narrowing), otherwise a new, non-nil
// slice of the declared entries (empty: nothing is published).
func (d Def) Allow() []string {
	if !d.HasTools {
		return nil
	}
	out := make([]string, len(d.Tools))
	copy(out, d.Tools)
	return out
}

// Ceiling returns the risk ceiling of a run of this agent under a parent
// whose ceiling is parent: the agent's own when declared, else the parent's.
// A declared ceiling above the parent's is an error: a named agent can only
// lower it.
func (d Def) Ceiling(parent gate.Risk) (gate.Risk, error) {
	if !d.HasCeiling {
		return parent, nil
	}
	if d.ApproveUpTo > parent {
		return 0, fmt.Errorf("agent %q (%s:%d): approve-up-to %s is above the parent's ceiling %s; a named agent can only lower the ceiling",
			d.Name, d.File, d.Line, d.ApproveUpTo, parent)
	}
	return d.ApproveUpTo, nil
}

// DefError is a configuration error in an agent definition. It names the
// file and the line.
type DefError struct {
	File string
	Line int // 0 when the error concerns the file as a whole
	Msg  string
}

func (e *DefError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s: %s", e.File, e.Msg)
}

// MaxDefSize is the largest agent definition file read.
const MaxDefSize = 1 << 20

// validDefName reports whether s is an agent name: 1 to 64 bytes of
// [a-z0-9_.-], the first a letter or digit. (As a regular expression,
// ^[a-z0-9][a-z0-9_.-]{0,63}$, whose 63-fold repetition cost 2.3 ms and
// 733 allocations of every start to compile.)
func validDefName(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9':
		case i > 0 && (c == '_' || c == '.' || c == '-'):
		default:
			return false
		}
	}
	return true
}

// ParseDef parses one agent definition. file names it in errors. The parser
// is strict: the file must start with a "---" line; keys are name and
// description (both required), tools and approve-up-to; an unknown or
// repeated key, an unknown tool name, a repeated tool, a value it cannot
// read, a missing closing "---" or an empty body is a *DefError naming the
// line.
func ParseDef(file string, data []byte) (Def, error) {
	d := Def{File: file}
	fail := func(line int, format string, args ...any) (Def, error) {
		return Def{}, &DefError{File: file, Line: line, Msg: fmt.Sprintf(format, args...)}
	}
	if len(data) > MaxDefSize {
		return fail(0, "larger than %d bytes", MaxDefSize)
	}
	if !utf8.Valid(data) {
		return fail(0, "not valid UTF-8")
	}
	if bytes.IndexByte(data, 0) >= 0 {
		return fail(0, "contains a NUL byte")
	}
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	lines := strings.Split(string(data), "\n")
	for i := range lines {
		lines[i] = strings.TrimSuffix(lines[i], "\r")
	}
	if len(lines) == 0 || strings.TrimRight(lines[0], " \t") != "---" {
		return fail(1, `front matter must start with a "---" line`)
	}
	seen := map[string]int{}
	inList := 0 // line of a "tools:" awaiting "- item" lines
	end := -1
	for i := 1; i < len(lines); i++ {
		n, l := i+1, lines[i]
		if strings.TrimRight(l, " \t") == "---" {
			end = i
			break
		}
		t := strings.TrimSpace(l)
		if t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		if strings.HasPrefix(t, "- ") || t == "-" {
			if inList == 0 {
				return fail(n, "a list item outside a list (only tools: takes one)")
			}
			item, err := scalar(strings.TrimSpace(strings.TrimPrefix(t, "-")))
			if err != nil {
				return fail(n, "tools: %v", err)
			}
			if err := addTool(&d, item); err != nil {
				return fail(n, "%v", err)
			}
			continue
		}
		inList = 0
		if l[0] == ' ' || l[0] == '\t' {
			return fail(n, "unexpected indentation (nested values are not supported)")
		}
		key, val, ok := strings.Cut(l, ":")
		if !ok {
			return fail(n, `expected "key: value"`)
		}
		key, val = strings.TrimSpace(key), strings.TrimSpace(val)
		// approve_up_to is the policy file's spelling of approve-up-to:
		// one key under either name.
		canon := key
		if canon == "approve_up_to" {
			canon = "approve-up-to"
		}
		if prev, dup := seen[canon]; dup {
			return fail(n, "%s: repeated (first on line %d)", key, prev)
		}
		seen[canon] = n
		listOpen, err := setDefKey(&d, key, val, n)
		if err != nil {
			return fail(n, "%s", err)
		}
		if listOpen {
			inList = n
		}
	}
	if end < 0 {
		return fail(1, `front matter is not closed by a "---" line`)
	}
	if _, ok := seen["name"]; !ok {
		return fail(end+1, "front matter has no name:")
	}
	if _, ok := seen["description"]; !ok {
		return fail(end+1, "front matter has no description:")
	}
	d.Instructions = strings.TrimSpace(strings.Join(lines[end+1:], "\n"))
	if d.Instructions == "" {
		return fail(end+1, "no instructions after the front matter")
	}
	return d, nil
}

// setDefKey sets one front-matter key of d, found on line. listOpen reports a "tools:"
// with no value, whose "- item" lines follow. An error is the message for
// the key's line.
func setDefKey(d *Def, key, val string, line int) (listOpen bool, err error) {
	switch key {
	case "name":
		v, err := scalar(val)
		if err != nil {
			return false, fmt.Errorf("name: %v", err)
		}
		if !validDefName(v) {
			return false, fmt.Errorf("name %q: want lower-case letters, digits, '.', '_' or '-' (at most 64, starting with a letter or digit)", v)
		}
		d.Name, d.Line = v, line
	case "description":
		v, err := scalar(val)
		if err != nil {
			return false, fmt.Errorf("description: %v", err)
		}
		if v == "" {
			return false, fmt.Errorf("description: empty")
		}
		d.Description = v
	case "tools":
		d.HasTools = true
		d.Tools = []string{}
		switch {
		case val == "":
			listOpen = true
		case strings.HasPrefix(val, "["):
			if !strings.HasSuffix(val, "]") {
				return false, fmt.Errorf(`tools: a list opened with "[" must close with "]" on the same line`)
			}
			inner := strings.TrimSpace(val[1 : len(val)-1])
			if inner == "" {
				break
			}
			for _, part := range strings.Split(inner, ",") {
				item, err := scalar(strings.TrimSpace(part))
				if err != nil {
					return false, fmt.Errorf("tools: %v", err)
				}
				if err := addTool(d, item); err != nil {
					return false, err
				}
			}
		default:
			return false, fmt.Errorf(`tools: want a list: "[a, b]" or "- a" lines below`)
		}
	case "approve-up-to", "approve_up_to":
		v, err := scalar(val)
		if err != nil {
			return false, fmt.Errorf("%s: %v", key, err)
		}
		r, err := gate.ParseRisk(v)
		if err != nil || v != strings.ToLower(v) {
			return false, fmt.Errorf("%s %q: want low, medium or high", key, v)
		}
		d.ApproveUpTo, d.HasCeiling = r, true
	default:
		return false, fmt.Errorf("unknown key %q (want name, description, tools, approve-up-to or approve_up_to)", key)
	}
	return listOpen, nil
}

func addTool(d *Def, name string) error {
	if name == "" {
		return errors.New("tools: empty tool name")
	}
	if _, ok := gate.Lookup(name); !ok {
		var names []string
		for _, e := range gate.Catalogue {
			names = append(names, e.Name)
		}
		return fmt.Errorf("tools: unknown tool %q (catalogue entries: %s)", name, strings.Join(names, ", "))
	}
	if slices.Contains(d.Tools, name) {
		return fmt.Errorf("tools: %q listed twice", name)
	}
	d.Tools = append(d.Tools, name)
	return nil
}

// scalar reads a plain, "double-quoted" or 'single-quoted' value.
func scalar(v string) (string, error) {
	if v == "" {
		return "", nil
	}
	switch v[0] {
	case '"':
		s, err := strconv.Unquote(v)
		if err != nil {
			return "", fmt.Errorf("bad double-quoted value %s", v)
		}
		return s, nil
	case '\'':
		if len(v) < 2 || v[len(v)-1] != '\'' {
			return "", fmt.Errorf("unterminated single-quoted value %s", v)
		}
		inner := v[1 : len(v)-1]
		if strings.Contains(strings.ReplaceAll(inner, "''", ""), "'") {
			return "", fmt.Errorf("bad single-quoted value %s", v)
		}
		return strings.ReplaceAll(inner, "''", "'"), nil
	case '[', '{', '|', '>', '&', '*', '!', '%', '@', '`':
		return "", fmt.Errorf("unsupported value %s (write plain text or quote it)", v)
	}
	if i := strings.Index(v, " #"); i >= 0 {
		v = strings.TrimSpace(v[:i])
	}
	return v, nil
}

// LoadDefs reads every *.md file of each directory (not recursively) as an
// agent definition. A directory that cannot be read, a definition that does
// not parse, or two definitions with the same name (in one directory or
// across them) is an error naming the file and line. The result is sorted
// by name.
func LoadDefs(dirs ...string) ([]Def, error) {
	var defs []Def
	byName := map[string]Def{}
	for _, dir := range dirs {
		ents, err := os.ReadDir(dir)
		if err != nil {
			return nil, fmt.Errorf("reading agent definitions: %w", err)
		}
		for _, e := range ents {
			if e.IsDir() || !strings.HasSuffix(e.Name(), ".md") {
				continue
			}
			p := filepath.Join(dir, e.Name())
			data, err := readDefFile(p)
			if err != nil {
				return nil, err
			}
			d, err := ParseDef(p, data)
			if err != nil {
				return nil, err
			}
			if prev, dup := byName[d.Name]; dup {
				return nil, &DefError{File: p, Line: d.Line, Msg: fmt.Sprintf("agent %q is already defined at %s:%d", d.Name, prev.File, prev.Line)}
			}
			byName[d.Name] = d
			defs = append(defs, d)
		}
	}
	sort.Slice(defs, func(i, j int) bool { return defs[i].Name < defs[j].Name })
	return defs, nil
}

func readDefFile(p string) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, fmt.Errorf("reading agent definition: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("reading agent definition: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, &DefError{File: p, Msg: "not a regular file"}
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxDefSize+1))
	if err != nil {
		return nil, fmt.Errorf("reading agent definition: %w", err)
	}
	return data, nil
}

// FindDef returns the definition named name, and false when there is none.
func FindDef(defs []Def, name string) (Def, bool) {
	for _, d := range defs {
		if d.Name == name {
			return d, true
		}
	}
	return Def{}, false
}
