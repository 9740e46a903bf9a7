package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/b10x/harness/workspace"
)

// testHookAfterEditRead, when set by a test, runs between file_edit's read
// (and the building of the new content) and the check before its rename.
var testHookAfterEditRead func()

// FileEditArgs are file_edit's arguments.
type FileEditArgs struct {
	Path       string `json:"path" max:"16384" desc:"Existing text file to edit, relative to the workspace root."`
	OldString  string `json:"old_string" max:"4194304" desc:"Exact text to replace (whitespace and line breaks included). It must occur exactly once in the file unless replace_all is true."`
	NewString  string `json:"new_string" max:"4194304" desc:"Text to put in its place (may be empty to delete)."`
	ReplaceAll bool   `json:"replace_all,omitempty" desc:"Replace every occurrence instead of requiring exactly one. Default false."`
}

// FileEdit is the file_edit tool: exact string replacement in an existing
// text file. old_string must occur exactly once unless replace_all; none
// or several occurrences are ReasonToolError with the count. An empty
// old_string, or one equal to new_string, is ReasonInvalidArgument. The
// size of the new content is computed from the count before it is built:
// over MaxWriteBytes (or more than 1,048,576 replacements) the call fails
// with ReasonTooLarge and nothing is written.
//
// The new content is written as file_write writes (same resolver, same
// atomic replacement, same metadata rules), and commits only if the file
// is still the one read (compare and swap at the rename: device, inode,
// size, times, and the content when those differ); if another writer
// changed it, the edit is made again on the fresh content, up to 5 times,
// then fails with ReasonConflict. The result begins with what was done:
//
//	edited PATH: N replacement(s); R line(s) removed, A added; OLD -> NEW bytes; sha256 HEX (was HEX)
//
// then a "note: ..." line per metadata change (Meta["effect"] holds these
// lines), then a unified diff of the change, stopped past 1 MiB with a
// line that says so. The zero value is ready to use; it holds no state and
// is safe for concurrent use.
type FileEdit struct{}

var fileEditSpec = sync.OnceValue(func() *argSpec { return mustArgSpec(FileEditArgs{}) })

// Name implements Tool.
func (FileEdit) Name() string { return "file_edit" }

// Description implements Tool.
func (FileEdit) Description() string {
	return "Edit an existing text file by exact string replacement: old_string (copied exactly from the file, whitespace included) is replaced by new_string. " +
		"old_string must occur exactly once, unless replace_all is true; include enough surrounding text to make it unique. " +
		"The write is atomic. The result is a unified diff of the change. " + pathRules
}

// Schema implements Tool.
func (FileEdit) Schema() json.RawMessage { return fileEditSpec().schema }

// Prepare implements Tool.
func (FileEdit) Prepare(ws *workspace.Workspace, raw json.RawMessage) (Prepared, error) {
	var a FileEditArgs
	if _, err := fileEditSpec().decode(raw, &a); err != nil {
		return nil, err
	}
	if a.OldString == "" {
		return nil, Errorf(ReasonInvalidArgument, nil, "field %q must not be empty", "old_string")
	}
	if a.OldString == a.NewString {
		return nil, Errorf(ReasonInvalidArgument, nil, "fields %q and %q are the same: nothing to change", "old_string", "new_string")
	}
	rel, err := ws.Resolve(a.Path)
	if err != nil {
		return nil, fromWorkspace(err)
	}
	return &fileEditCall{ws: ws, args: a, rel: rel}, nil
}

type fileEditCall struct {
	ws   *workspace.Workspace
	args FileEditArgs
	rel  string
}

func (c *fileEditCall) Args() any       { return c.args }
func (c *fileEditCall) Reads() []string { return []string{c.rel} } // its diff and its matching show the content
func (c *fileEditCall) Writes() []Write { return []Write{{Path: c.rel, Whole: false}} }

// Preview implements Previewer: the diff the edit would make to the file
// as it is now. The file is read again when the call executes; if it
// changed in between, the change applied is the one the result shows.
func (c *fileEditCall) Preview() Preview {
	var data []byte
	err := fromWorkspace(c.ws.WithRoot(func(root int) error {
		f, err := openRegular(root, c.rel, "read")
		if err != nil {
			return err
		}
		defer f.close()
		data, err = readAllFd(f.fd, c.rel, f.st.Size)
		return err
	}))
	var p editPlan
	if err == nil {
		p, err = c.plan(data)
	}
	if err != nil {
		msg := "the file could not be read"
		if te := (*Error)(nil); errors.As(err, &te) {
			msg = te.Public
		}
		return Preview{DiffErr: msg}
	}
	d, _ := editDiff(c.rel, p.text, c.args.OldString, c.args.NewString, p.offs, maxDiffBytes)
	return Preview{Diff: d}
}

// maxDiffBytes is where file_edit's diff stops (with a line saying so):
// the effect line before it always states the whole change.
const maxDiffBytes = 1 << 20

// maxReplacements bounds replace_all: the offsets of the occurrences are
// kept for the diff.
const maxReplacements = 1 << 20

// editPlan is an edit worked out on one content of the file.
type editPlan struct {
	text    string
	offs    []int
	updated []byte
}

// plan finds the occurrences of old_string in data and builds the new
// content, after checking its size arithmetically (the size is known
// from the count before anything is built). Errors are the call's.
func (c *fileEditCall) plan(data []byte) (editPlan, error) {
	if bytes.IndexByte(data, 0) >= 0 || !utf8.Valid(data) {
		return editPlan{}, Errorf(ReasonToolError, nil, "%q is a binary file (NUL bytes or not UTF-8 text); file_edit edits text only", c.rel)
	}
	text := string(data)
	old, repl := c.args.OldString, c.args.NewString
	n := strings.Count(text, old)
	switch {
	case n == 0:
		return editPlan{}, Errorf(ReasonToolError, nil, "old_string was not found in %q (0 occurrences); it must match the file exactly, whitespace included", c.rel)
	case n > 1 && !c.args.ReplaceAll:
		return editPlan{}, Errorf(ReasonToolError, nil, "old_string occurs %d times in %q; include more surrounding text to make it unique, or set replace_all", n, c.rel)
	}
	size := int64(len(text)) + int64(n)*(int64(len(repl))-int64(len(old)))
	if size > MaxWriteBytes {
		return editPlan{}, Errorf(ReasonTooLarge, nil,
			"the edit would make %q %d bytes (%d replacement(s) of %d bytes by %d bytes in %d bytes); the limit is %d bytes; nothing was written",
			c.rel, size, n, len(old), len(repl), len(text), MaxWriteBytes)
	}
	if n > maxReplacements {
		return editPlan{}, Errorf(ReasonTooLarge, nil, "old_string occurs %d times in %q; replace_all is limited to %d replacements; nothing was written", n, c.rel, maxReplacements)
	}
	offs := make([]int, 0, n)
	for pos := 0; ; {
		i := strings.Index(text[pos:], old)
		if i < 0 {
			break
		}
		offs = append(offs, pos+i)
		pos += i + len(old)
	}
	updated := make([]byte, 0, size)
	pos := 0
	for _, o := range offs {
		updated = append(updated, text[pos:o]...)
		updated = append(updated, repl...)
		pos = o + len(old)
	}
	updated = append(updated, text[pos:]...)
	return editPlan{text: text, offs: offs, updated: updated}, nil
}

func (c *fileEditCall) Execute(ctx context.Context, rep Report) (Result, error) {
	if err := ctx.Err(); err != nil {
		return Result{}, ctxError(err, "file_edit")
	}
	var p editPlan
	build := limitWrite(c.rel, func(old []byte) ([]byte, error) {
		var err error
		p, err = c.plan(old)
		return p.updated, err
	})
	eff, err := c.ws.Commit(ctx, workspace.Change{Path: c.rel,
		Read: func(fd int, size int64) ([]byte, error) { return readAllFd(fd, c.rel, size) },
		Build: func(old []byte) ([]byte, error) {
			data, err := build(old)
			if err == nil && testHookAfterEditRead != nil {
				testHookAfterEditRead()
			}
			return data, err
		}})
	if err != nil {
		return Result{}, fromWorkspace(err)
	}
	diff, stats := editDiff(c.rel, p.text, c.args.OldString, c.args.NewString, p.offs, maxDiffBytes)
	effect := fmt.Sprintf("edited %s: %d replacement(s); %d line(s) removed, %d added; %d -> %d bytes; sha256 %s (was %s)\n",
		workspace.ShowPath(c.rel), len(p.offs), stats.removed, stats.added, len(p.text), len(p.updated), shaHex(p.updated), shaHex([]byte(p.text)))
	effect += notesText(eff.Notes)
	return Result{
		Text: effect + diff,
		Meta: map[string]any{
			"path":          c.rel,
			"effect":        effect,
			"replacements":  len(p.offs),
			"lines_removed": stats.removed,
			"lines_added":   stats.added,
			"bytes_before":  len(p.text),
			"bytes_after":   len(p.updated),
			"sha256":        shaHex(p.updated),
			"sha256_before": shaHex([]byte(p.text)),
			"mode":          fmt.Sprintf("%04o", eff.Mode),
			"attempts":      eff.Attempts,
		},
	}, nil
}

// readAllFd reads the whole file open at fd (from offset 0), refusing one
// larger than readLimit.
func readAllFd(fd int, rel string, size int64) ([]byte, error) {
	if size > int64(readLimit) {
		return nil, Errorf(ReasonToolError, nil, "%q is larger than %d bytes; file_edit edits text files up to that size", rel, readLimit)
	}
	data, err := workspace.ReadAll(fd, size, readLimit)
	if err != nil {
		return nil, fsError(rel, "read", err)
	}
	if len(data) > readLimit {
		return nil, Errorf(ReasonToolError, nil, "%q is larger than %d bytes; file_edit edits text files up to that size", rel, readLimit)
	}
	return data, nil
}
