package tools

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"github.com/b10x/harness/workspace"
)

// FileWriteArgs are file_write's arguments.
type FileWriteArgs struct {
	Path    string `json:"path" max:"16384" desc:"File to create or replace, relative to the workspace root. Missing parent directories are created."`
	Content string `json:"content" max:"67108864" desc:"The complete new content of the file."`
}

// FileWrite is the file_write tool: create or replace a whole file,
// atomically (workspace.Workspace.Commit). The path is resolved with
// ResolveForWrite (a link at the target is resolved to its in-root target
// or refused); missing parent directories are created beneath the root;
// the content goes to a temporary file in the target's directory, is
// fsynced and renamed over the target, and the directory is fsynced. A crash at any moment leaves
// the old content or the new one. The open and rename use the canonical
// path relative to the root descriptor with RESOLVE_NO_SYMLINKS, so a link
// swapped in after Prepare fails the call with ReasonDeniedPath; the
// rename replaces a directory entry, it never writes through one.
//
// What a replaced file keeps (docs/decisions/0049-what-an-edit-preserves.md):
// its permission bits (setuid, setgid and sticky bits are dropped, and the
// result says so), its owner and group (a harness running as root gives
// them; otherwise the harness must own the file, and a group it belongs
// to is kept), and its extended attributes (security.capability is
// dropped, and the result says so). A file with more than one hard link
// and a read-only file (no write bit at all) are refused with
// ReasonToolError, unchanged. A new file gets 0644 and new directories
// 0755; a harness running as root gives them the owner of the directory
// they are made in, so a run child (the workspace's owner, never root) can
// change what the file tools wrote.
//
// Writes of the harness in one directory are serialised by a lock on the
// directory (flock), across processes; content over MaxWriteBytes is
// ReasonInvalidArgument. The result's first line says what was done:
//
//	wrote PATH (created): N bytes, L line(s), mode 0644; sha256 HEX
//	wrote PATH (replaced): OLD -> N bytes, L line(s), mode 0640; sha256 HEX
//
// followed by a "note: ..." line per metadata change; Meta["effect"] holds
// that text. The zero value is ready to use; it holds no state and is
// safe for concurrent use.
type FileWrite struct{}

var fileWriteSpec = sync.OnceValue(func() *argSpec { return mustArgSpec(FileWriteArgs{}) })

// Name implements Tool.
func (FileWrite) Name() string { return "file_write" }

// Description implements Tool.
func (FileWrite) Description() string {
	return "Create a file or replace its whole content. Missing parent directories are created. " +
		"The write is atomic: the file holds either its old content or the new one, never a mix. " +
		"To change part of an existing file, prefer file_edit. " + pathRules
}

// Schema implements Tool.
func (FileWrite) Schema() json.RawMessage { return fileWriteSpec().schema }

// Prepare implements Tool.
func (FileWrite) Prepare(ws *workspace.Workspace, raw json.RawMessage) (Prepared, error) {
	var a FileWriteArgs
	if _, err := fileWriteSpec().decode(raw, &a); err != nil {
		return nil, err
	}
	rel, err := ws.ResolveForWrite(a.Path)
	if err != nil {
		return nil, fromWorkspace(err)
	}
	if rel == "." {
		return nil, Errorf(ReasonToolError, nil, "%q is the workspace root, a directory", a.Path)
	}
	return &fileWriteCall{ws: ws, args: a, rel: rel}, nil
}

type fileWriteCall struct {
	ws   *workspace.Workspace
	args FileWriteArgs
	rel  string
}

func (c *fileWriteCall) Args() any       { return c.args }
func (c *fileWriteCall) Writes() []Write { return []Write{{Path: c.rel, Whole: true}} }

func (c *fileWriteCall) Execute(ctx context.Context, rep Report) (Result, error) {
	if err := ctx.Err(); err != nil {
		return Result{}, ctxError(err, "file_write")
	}
	data := []byte(c.args.Content)
	eff, err := c.ws.Commit(ctx, workspace.Change{Path: c.rel, Build: limitWrite(c.rel, func([]byte) ([]byte, error) { return data, nil })})
	if err != nil {
		return Result{}, fromWorkspace(err)
	}
	var effect string
	if eff.Created {
		effect = fmt.Sprintf("wrote %s (created): %d bytes, %d line(s), mode %04o; sha256 %s\n", workspace.ShowPath(c.rel), len(data), countLines(data), eff.Mode, shaHex(data))
	} else {
		effect = fmt.Sprintf("wrote %s (replaced): %d -> %d bytes, %d line(s), mode %04o; sha256 %s\n", workspace.ShowPath(c.rel), eff.SizeBefore, len(data), countLines(data), eff.Mode, shaHex(data))
	}
	effect += notesText(eff.Notes)
	return Result{
		Text: effect,
		Meta: map[string]any{
			"path":         c.rel,
			"effect":       effect,
			"bytes":        len(data),
			"bytes_before": eff.SizeBefore,
			"created":      eff.Created,
			"lines":        countLines(data),
			"sha256":       shaHex(data),
			"mode":         fmt.Sprintf("%04o", eff.Mode),
			"attempts":     eff.Attempts,
		},
	}, nil
}

// limitWrite wraps a write's Build so that new content over MaxWriteBytes
// refuses the write (ReasonTooLarge) before its temporary file is made.
func limitWrite(rel string, build func(old []byte) ([]byte, error)) func(old []byte) ([]byte, error) {
	return func(old []byte) ([]byte, error) {
		data, err := build(old)
		if err != nil {
			return nil, err
		}
		if len(data) > MaxWriteBytes {
			return nil, tooLarge(rel, int64(len(data)))
		}
		return data, nil
	}
}

// tooLarge is the error for new content over MaxWriteBytes.
func tooLarge(rel string, size int64) *Error {
	return Errorf(ReasonTooLarge, nil, "the new content of %q would be %d bytes; the limit is %d bytes; nothing was written", rel, size, MaxWriteBytes)
}

// shaHex is the hex SHA-256 of data.
func shaHex(data []byte) string {
	s := sha256.Sum256(data)
	return hex.EncodeToString(s[:])
}

// countLines counts the lines of data (a last line without a newline
// counts).
func countLines(data []byte) int {
	n := bytes.Count(data, []byte{'\n'})
	if len(data) > 0 && data[len(data)-1] != '\n' {
		n++
	}
	return n
}

// notesText renders effect notes as one line each.
func notesText(notes []string) string {
	var b strings.Builder
	for _, n := range notes {
		b.WriteString("note: ")
		b.WriteString(n)
		b.WriteByte('\n')
	}
	return b.String()
}
