package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/b10x/harness/workspace"
)

// MaxReadBytes bounds the text one file_read (or the file one file_edit)
// holds in memory. It is a guard for the harness's own memory, far above
// the gate's result cap (256 KiB by default): a larger section fails with
// ReasonToolError asking for offset/limit, it is never cut silently.
const MaxReadBytes = 64 << 20

// readLimit is MaxReadBytes; tests lower it.
var readLimit = MaxReadBytes

// binaryProbe is how much of a file's start is checked for NUL bytes.
const binaryProbe = 8 << 10

// FileReadArgs are file_read's arguments.
type FileReadArgs struct {
	Path   string `json:"path" max:"16384" desc:"File to read, relative to the workspace root."`
	Offset int    `json:"offset,omitempty" min:"1" desc:"First line to return, counting from 1. Default 1."`
	Limit  int    `json:"limit,omitempty" min:"1" desc:"Number of lines to return. Default: to the end of the file."`
}

// FileRead is the file_read tool: the text of one file, or a range of its
// lines. Binary files (a NUL byte in the first 8 KiB or in the returned
// lines, or text that is not UTF-8) and anything but a regular file are a
// ReasonToolError. The file is streamed: lines before offset are counted,
// not kept. The zero value is ready to use; it holds no state and is safe
// for concurrent use.
type FileRead struct{}

var fileReadSpec = sync.OnceValue(func() *argSpec { return mustArgSpec(FileReadArgs{}) })

// Name implements Tool.
func (FileRead) Name() string { return "file_read" }

// Description implements Tool.
func (FileRead) Description() string {
	return "Read a text file from the workspace. Returns the file's text exactly, without line numbers. " +
		"Use offset (first line, 1-based) and limit (number of lines) to read part of a large file; a result that is too large is refused, not cut, so read big files in ranges. " +
		"Binary files and directories are refused with an error (use dir_list for directories). " + pathRules
}

// Schema implements Tool.
func (FileRead) Schema() json.RawMessage { return fileReadSpec().schema }

// Prepare implements Tool.
func (FileRead) Prepare(ws *workspace.Workspace, raw json.RawMessage) (Prepared, error) {
	var a FileReadArgs
	if _, err := fileReadSpec().decode(raw, &a); err != nil {
		return nil, err
	}
	rel, fd, err := ws.ResolveOpen(a.Path, unix.O_RDONLY|unix.O_NONBLOCK)
	if err != nil {
		return nil, fromWorkspace(err)
	}
	var f *regularFile
	if fd >= 0 {
		// Resolved and opened at once: the file read is the file resolved.
		if f, err = regularFrom(fd, rel); err != nil {
			return nil, err
		}
	}
	return &fileReadCall{ws: ws, args: a, rel: rel, f: f}, nil
}

type fileReadCall struct {
	ws   *workspace.Workspace
	args FileReadArgs
	rel  string
	f    *regularFile // opened by Prepare; nil when Prepare had to walk
}

func (c *fileReadCall) Args() any       { return c.args }
func (c *fileReadCall) Reads() []string { return []string{c.rel} }
func (c *fileReadCall) Writes() []Write { return nil }

// Release implements Releaser: it closes the file Prepare opened.
func (c *fileReadCall) Release() {
	if c.f != nil {
		c.f.close()
		c.f = nil
	}
}

func (c *fileReadCall) Execute(ctx context.Context, rep Report) (Result, error) {
	if f := c.f; f != nil {
		defer c.Release()
		return readLines(ctx, f, f.st.Size, c.rel, c.args.Offset, c.args.Limit)
	}
	var res Result
	err := c.ws.WithRoot(func(root int) error {
		f, err := openRegular(root, c.rel, "read")
		if err != nil {
			return err
		}
		defer f.close()
		res, err = readLines(ctx, f, f.st.Size, c.rel, c.args.Offset, c.args.Limit)
		return err
	})
	return res, fromWorkspace(err)
}

// regularFile is a regular file open for reading on a raw descriptor (no
// os.File: no poller registration, no extra system calls). Reads stop at
// the size fstat reported when it was opened, so the common case needs no
// read just to see end of file; a file that shrinks meanwhile ends early.
type regularFile struct {
	fd   int
	st   unix.Stat_t
	left int64
}

// Read implements io.Reader.
func (f *regularFile) Read(p []byte) (int, error) {
	if f.left <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > f.left {
		p = p[:f.left]
	}
	for {
		n, err := unix.Read(f.fd, p)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 0, err
		}
		if n == 0 {
			f.left = 0
			return 0, io.EOF
		}
		f.left -= int64(n)
		return n, nil
	}
}

func (f *regularFile) close() { unix.Close(f.fd) }

// openRegular opens canonical rel for reading with the safe open and
// refuses anything but a regular file. It opens non-blocking, so a FIFO
// planted in the workspace cannot hang the call.
func openRegular(root int, rel, op string) (*regularFile, error) {
	fd, err := workspace.OpenBeneath(root, rel, unix.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, fsError(rel, op, err)
	}
	return regularFrom(fd, rel)
}

// regularFrom takes fd, open for reading, and refuses (closing it) anything
// but a regular file.
func regularFrom(fd int, rel string) (*regularFile, error) {
	f := &regularFile{fd: fd}
	if err := unix.Fstat(fd, &f.st); err != nil {
		unix.Close(fd)
		return nil, fsError(rel, "stat", err)
	}
	switch f.st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
	case unix.S_IFDIR:
		unix.Close(fd)
		return nil, Errorf(ReasonToolError, nil, "%q is a directory; use dir_list to list it", rel)
	default:
		unix.Close(fd)
		return nil, Errorf(ReasonToolError, nil, "%q is not a regular file", rel)
	}
	f.left = f.st.Size
	return f, nil
}

// readLines streams f and returns lines [offset, offset+limit) (offset 0
// means 1, limit 0 means to the end). sizeHint (the file's size) only sizes
// the read buffer.
func readLines(ctx context.Context, f io.Reader, sizeHint int64, rel string, offset, limit int) (Result, error) {
	if offset < 1 {
		offset = 1
	}
	buf := make([]byte, max(512, min(sizeHint, 64<<10)))
	// Reading the whole file, the text kept is the file: size it once
	// instead of growing it line by line.
	var out []byte
	if offset == 1 && limit == 0 && sizeHint > 0 {
		out = make([]byte, 0, min(sizeHint, 1<<20))
	}
	line := 1        // number of the line at the read position
	collected := 0   // complete lines kept
	partial := false // out ends with a line not yet terminated
	probed := false
	var last byte // the last byte read, to count an unterminated last line
	readAny := false
	more := false // a line exists after the window
	done := false
	for !done {
		if err := ctx.Err(); err != nil {
			return Result{}, ctxError(err, "reading "+quote(rel))
		}
		n, err := f.Read(buf)
		if err != nil && err != io.EOF {
			return Result{}, fsError(rel, "read", err)
		}
		if n == 0 {
			break
		}
		chunk := buf[:n]
		last, readAny = chunk[n-1], true
		if !probed {
			probed = true
			if bytes.IndexByte(chunk[:min(n, binaryProbe)], 0) >= 0 {
				return Result{}, binaryError(rel)
			}
		}
		for len(chunk) > 0 {
			if line < offset {
				if c := bytes.Count(chunk, []byte{'\n'}); line+c < offset {
					line += c
					chunk = nil
					break
				}
				i := bytes.IndexByte(chunk, '\n')
				line++
				chunk = chunk[i+1:]
				continue
			}
			if limit > 0 && collected >= limit {
				more = true
				done = true
				break
			}
			i := bytes.IndexByte(chunk, '\n')
			if i < 0 {
				out = append(out, chunk...)
				partial = true
				chunk = nil
			} else {
				out = append(out, chunk[:i+1]...)
				partial = false
				chunk = chunk[i+1:]
				line++
				collected++
			}
			if len(out) > readLimit {
				return Result{}, Errorf(ReasonToolError, nil,
					"%q: the requested lines exceed %d bytes; read a smaller range with offset and limit", rel, readLimit)
			}
		}
	}
	if partial {
		collected++
	}
	if collected == 0 && offset > 1 {
		total := line - 1
		if readAny && last != '\n' {
			total++
		}
		return Result{}, Errorf(ReasonToolError, nil, "%q has %d line(s); offset %d is past the end", rel, total, offset)
	}
	if bytes.IndexByte(out, 0) >= 0 || !utf8.Valid(out) {
		return Result{}, binaryError(rel)
	}
	return Result{
		Text: string(out),
		Meta: map[string]any{
			"path":       rel,
			"first_line": offset,
			"lines":      collected,
			"bytes":      len(out),
			"more":       more,
		},
	}, nil
}

// ctxError is the error for a call whose context ended: ReasonTimeout
// for a deadline, ReasonCancelled for a cancel. The cause wraps err, so
// errors.Is(e, context.DeadlineExceeded) or context.Canceled tells them
// apart too.
func ctxError(err error, what string) *Error {
	if errors.Is(err, context.DeadlineExceeded) {
		return Errorf(ReasonTimeout, fmt.Errorf("%s: %w", what, err), "%s timed out", what)
	}
	return Errorf(ReasonCancelled, fmt.Errorf("%s: %w", what, err), "%s was cancelled", what)
}

func quote(s string) string { return strconv.Quote(s) }

func binaryError(rel string) *Error {
	return Errorf(ReasonToolError, nil, "%q is a binary file (NUL bytes or not UTF-8 text); file_read returns text only", rel)
}
