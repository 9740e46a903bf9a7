package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"unicode/utf8"

	"golang.org/x/sys/unix"
)

// testHookAfterEditRead, when set by a test, runs between file_edit's read
// and its write.
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
// new content is written as file_write writes (same resolver, same atomic
// replacement); if the file changed between reading and replacing (inode,
// size or modification time), the edit is refused rather than losing the
// other change. The result is a unified diff of the change. The zero
// value is ready to use; it holds no state and is safe for concurrent use.
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
func (FileEdit) Prepare(ws *Workspace, raw json.RawMessage) (Prepared, error) {
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
		return nil, err
	}
	return &fileEditCall{ws: ws, args: a, rel: rel}, nil
}

type fileEditCall struct {
	ws   *Workspace
	args FileEditArgs
	rel  string
}

func (c *fileEditCall) Args() any       { return c.args }
func (c *fileEditCall) Writes() []Write { return []Write{{Path: c.rel, Whole: false}} }

// Preview implements Previewer: the diff the edit would make to the file
// as it is now. The file is read again when the call executes; if it
// changed in between, the change applied is the one the result shows.
func (c *fileEditCall) Preview() Preview {
	text, _, offs, err := c.plan()
	if err != nil {
		msg := "the file could not be read"
		if te := (*Error)(nil); errors.As(err, &te) {
			msg = te.Public
		}
		return Preview{DiffErr: msg}
	}
	return Preview{Diff: editDiff(c.rel, text, c.args.OldString, c.args.NewString, offs)}
}

// plan reads the file and finds the occurrences of old_string; errors are
// the call's.
func (c *fileEditCall) plan() (text string, before unix.Stat_t, offs []int, err error) {
	err = c.ws.withRoot(func(root int) error {
		f, err := openRegular(root, c.rel, "read")
		if err != nil {
			return err
		}
		defer f.close()
		before = f.st
		if before.Size > int64(readLimit) {
			return Errorf(ReasonToolError, nil, "%q is larger than %d bytes; file_edit edits text files up to that size", c.rel, readLimit)
		}
		data, err := io.ReadAll(io.LimitReader(f, int64(readLimit)+1))
		if err != nil {
			return fsError(c.rel, "read", err)
		}
		if len(data) > readLimit {
			return Errorf(ReasonToolError, nil, "%q is larger than %d bytes; file_edit edits text files up to that size", c.rel, readLimit)
		}
		if strings.IndexByte(string(data), 0) >= 0 || !utf8.Valid(data) {
			return Errorf(ReasonToolError, nil, "%q is a binary file (NUL bytes or not UTF-8 text); file_edit edits text only", c.rel)
		}
		text = string(data)
		return nil
	})
	if err != nil {
		return "", before, nil, err
	}
	old := c.args.OldString
	for pos := 0; ; {
		i := strings.Index(text[pos:], old)
		if i < 0 {
			break
		}
		offs = append(offs, pos+i)
		pos += i + len(old)
	}
	switch {
	case len(offs) == 0:
		return "", before, nil, Errorf(ReasonToolError, nil, "old_string was not found in %q (0 occurrences); it must match the file exactly, whitespace included", c.rel)
	case len(offs) > 1 && !c.args.ReplaceAll:
		return "", before, nil, Errorf(ReasonToolError, nil, "old_string occurs %d times in %q; include more surrounding text to make it unique, or set replace_all", len(offs), c.rel)
	}
	return text, before, offs, nil
}

func (c *fileEditCall) Execute(ctx context.Context) (Result, error) {
	if err := ctx.Err(); err != nil {
		return Result{}, ctxError(err, "file_edit")
	}
	text, before, offs, err := c.plan()
	if err != nil {
		return Result{}, err
	}
	if testHookAfterEditRead != nil {
		testHookAfterEditRead()
	}
	old, repl := c.args.OldString, c.args.NewString
	var nb strings.Builder
	pos := 0
	for _, o := range offs {
		nb.WriteString(text[pos:o])
		nb.WriteString(repl)
		pos = o + len(old)
	}
	nb.WriteString(text[pos:])
	updated := nb.String()
	_, err = c.ws.writeFile(c.rel, []byte(updated), func(st *unix.Stat_t, exists bool) error {
		if !exists {
			return Errorf(ReasonToolError, nil, "%q was removed while being edited", c.rel)
		}
		if st.Dev != before.Dev || st.Ino != before.Ino || st.Size != before.Size || st.Mtim != before.Mtim {
			return Errorf(ReasonToolError, nil, "%q changed while being edited; read it again and retry", c.rel)
		}
		return nil
	})
	if err != nil {
		return Result{}, err
	}
	diff := editDiff(c.rel, text, old, repl, offs)
	return Result{
		Text: fmt.Sprintf("edited %s: %d replacement(s)\n%s", c.rel, len(offs), diff),
		Meta: map[string]any{
			"path":         c.rel,
			"replacements": len(offs),
			"bytes_before": len(text),
			"bytes_after":  len(updated),
		},
	}, nil
}
