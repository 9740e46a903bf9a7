package tools

import (
	"context"
	"encoding/json"

	"github.com/b10x/harness/record"
	"github.com/b10x/harness/workspace"
)

// Tool is one catalogue entry's operation, without policy: whether it is
// published, approved or within a write scope is decided by the gate.
//
// Implementations in this package are stateless values, safe for
// concurrent use.
type Tool interface {
	// Name is the catalogue entry: "file_read", "dir_list", "search",
	// "find", "file_write", "file_edit" or "run".
	Name() string
	// Description tells the model what the tool does, its limits and the
	// path rules.
	Description() string
	// Schema is the JSON Schema of the arguments, generated from the
	// tool's argument struct. It uses only the subset both the Anthropic
	// input_schema and OpenAI function parameters accept.
	Schema() json.RawMessage
	// Prepare decodes the arguments strictly and resolves their paths
	// beneath ws. It does not act. Errors are *Error:
	// ReasonInvalidArgument naming the field (unknown field, wrong type,
	// missing required field, NUL byte, invalid UTF-8, bad pattern) or a
	// resolution error (ReasonDeniedPath, ReasonToolError for a missing
	// file).
	Prepare(ws *workspace.Workspace, raw json.RawMessage) (Prepared, error)
}

// Prepared is a decoded, resolved call, ready to execute. A Prepared is
// meant to be executed once, by one goroutine.
type Prepared interface {
	// Args returns the decoded argument struct (FileReadArgs, ...), for
	// the record and for showing an approver.
	Args() any
	// Writes lists what the call would change, by canonical
	// workspace-relative path; nil for the read tools.
	Writes() []Write
	// Execute performs the call, telling rep what it does while it runs.
	// Errors are *Error: ReasonToolError for an operation that failed,
	// ReasonDeniedPath when the path was found changed (a link swapped
	// in) after Prepare resolved it.
	Execute(ctx context.Context, rep Report) (Result, error)
}

// Report is told what a call does while it runs, passed with the call to
// Execute: a run call reports its program's output as it arrives and each
// connection attempt through its proxy; the file tools report nothing.
// Either function may be nil. They are called from the goroutines the call
// runs, possibly at once, and must be quick.
type Report struct {
	// Progress is given the bytes of stdout and stderr together so far
	// (counted before the capture cap) after each chunk. Reports can
	// arrive out of order: the largest is the total so far.
	Progress func(outBytes int64)
	// Connection is given each attempt through the call's proxy as the
	// record's net line; its Seq is 0 (the caller numbers its calls).
	Connection func(record.Net)
	// Denial is given each request of the call's program that the kernel
	// refused (where they are attributable) as the record's denial line,
	// after the program ended; its Seq is 0.
	Denial func(record.Denial)
}

// Releaser is implemented by a Prepared that holds resources (an open
// file) from Prepare to Execute. Whoever prepares a call must call Release
// once it will not, or did not, execute it; Execute releases them itself,
// and Release after Execute, or twice, does nothing.
type Releaser interface {
	Release()
}

// Previewer is implemented by a Prepared call that can show a person,
// before it executes, what it would do (file_edit, run). The gate asks for
// a preview only when an approver is to be asked. Preview reads what it
// needs at that moment; nothing guarantees the call, executed later, finds
// the same state (the result says what was done).
type Previewer interface {
	Preview() Preview
}

// Preview is what a call would do, for an approver. The strings are
// untrusted (they hold model arguments and file text): render them with
// internal/termsafe before they reach a terminal. Fields that do not apply
// to the call are empty; the zero value previews nothing.
type Preview struct {
	Diff    string // file_edit: the unified diff of the change to the file as it is now
	DiffErr string // file_edit: why no diff could be made (the call would fail with it)
	Program string // run: the host path argv[0] resolves to
	Dir     string // run: the working directory, relative to the workspace root
}

// Write is one path a write tool would change. Path is canonical and
// workspace-relative (symbolic links resolved), so a write-scope rule
// matched against it cannot be dodged through a link. Whole is true for a
// whole-file replacement (file_write) and false for an exact edit
// (file_edit). The zero value names nothing; Writes never returns it.
type Write struct {
	Path  string
	Whole bool
}

// Result is what a call produced. Text is what the model reads; it is not
// cut to any size here (the gate applies the result cap). Meta holds
// structured figures for the record (counts, bytes, truncated=...), whose
// values are ints, bools and strings. The zero value is an empty result.
type Result struct {
	Text string
	Meta map[string]any
}

// ReadTools returns the four read tools: file_read, dir_list, search and
// find, in that order. Each call returns a new slice.
func ReadTools() []Tool {
	return []Tool{FileRead{}, DirList{}, Search{}, Find{}}
}

// WriteTools returns the two write tools: file_write and file_edit, in
// that order. Each call returns a new slice.
func WriteTools() []Tool {
	return []Tool{FileWrite{}, FileEdit{}}
}

// pathRules is the paragraph every tool description ends with.
const pathRules = "Paths are relative to the workspace root (an absolute path is accepted only when it begins with the workspace root). " +
	"Anything that leads outside the workspace is refused: '..' above the root, absolute paths elsewhere, and symbolic links whose target is outside. " +
	"A symbolic link in the path you give is followed when it stays inside the workspace. Paths are taken byte for byte: no URL decoding, no Unicode normalisation. " +
	"A name that is not plain text (control characters, invalid UTF-8, or a leading '\"') is shown in Go double quotes, e.g. \"a\\nb\"; give it back the same way (sub/\"a\\nb\" or the whole path quoted)."
