package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/b10x/harness/internal/dirent"
	"github.com/b10x/harness/workspace"
)

// DirListArgs are dir_list's arguments.
type DirListArgs struct {
	Path string `json:"path,omitempty" max:"16384" desc:"Directory to list, relative to the workspace root. Default (or empty): the root."`
}

// DirList is the dir_list tool: the entries of one directory, sorted by
// name (byte order), each with its kind (file, dir, symlink, other) and,
// for files, its size. A symbolic link is listed as a link and never
// followed out: its target is shown (as a canonical workspace-relative
// path) only when it resolves inside the workspace; a link leading outside
// is shown as such, without its target text, so host paths do not leak.
// The zero value is ready to use; it holds no state and is safe for
// concurrent use.
type DirList struct{}

var dirListSpec = sync.OnceValue(func() *argSpec { return mustArgSpec(DirListArgs{}) })

// Name implements Tool.
func (DirList) Name() string { return "dir_list" }

// Description implements Tool.
func (DirList) Description() string {
	return "List one directory of the workspace (not recursive). One entry per line, sorted by name: " +
		"'file NAME (SIZE bytes)', 'dir NAME/', 'symlink NAME -> TARGET' (TARGET is the workspace path the link leads to; links leading outside the workspace are marked and never followed), or 'other NAME' (devices, FIFOs, sockets). " +
		pathRules
}

// Schema implements Tool.
func (DirList) Schema() json.RawMessage { return dirListSpec().schema }

// Prepare implements Tool.
func (DirList) Prepare(ws *workspace.Workspace, raw json.RawMessage) (Prepared, error) {
	var a DirListArgs
	if _, err := dirListSpec().decode(raw, &a); err != nil {
		return nil, err
	}
	rel, err := resolveOptional(ws, a.Path)
	if err != nil {
		return nil, err
	}
	return &dirListCall{ws: ws, args: a, rel: rel}, nil
}

// resolveOptional resolves an optional path argument: empty means the root.
func resolveOptional(ws *workspace.Workspace, p string) (string, error) {
	if p == "" {
		p = "."
	}
	rel, err := ws.Resolve(p)
	return rel, fromWorkspace(err)
}

type dirListCall struct {
	ws     *workspace.Workspace
	args   DirListArgs
	rel    string
	denied ReadVerdict
}

func (c *dirListCall) Args() any                 { return c.args }
func (c *dirListCall) Reads() []string           { return []string{c.rel} }
func (c *dirListCall) FilterReads(v ReadVerdict) { c.denied = v }
func (c *dirListCall) Writes() []Write           { return nil }

func (c *dirListCall) Execute(ctx context.Context, rep Report) (Result, error) {
	var res Result
	err := c.ws.WithRoot(func(root int) error {
		fd, err := workspace.OpenBeneath(root, c.rel, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			if err == unix.ENOTDIR {
				return Errorf(ReasonToolError, err, "%q is not a directory; use file_read to read a file", c.rel)
			}
			return fsError(c.rel, "open directory", err)
		}
		defer unix.Close(fd)
		ents, err := dirent.Read(fd, make([]byte, 32<<10))
		if err != nil {
			return fsError(c.rel, "read directory", err)
		}
		ents = slices.DeleteFunc(ents, func(e dirent.Entry) bool { return workspace.IsTempName(e.Name) }) // writes' temporary files
		slices.SortFunc(ents, func(a, b dirent.Entry) int { return strings.Compare(a.Name, b.Name) })
		var b strings.Builder
		counts := map[string]int{}
		for _, e := range ents {
			if err := ctx.Err(); err != nil {
				return ctxError(err, "listing "+quote(c.rel))
			}
			var st unix.Stat_t
			if err := unix.Fstatat(fd, e.Name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				continue // vanished since it was listed
			}
			name := workspace.ShowName(e.Name)
			rule, denied := "", false
			if c.denied != nil {
				rule, denied = c.denied(workspace.Child(c.rel, e.Name))
			}
			switch st.Mode & unix.S_IFMT {
			case unix.S_IFREG:
				counts["file"]++
				if denied {
					fmt.Fprintf(&b, "file %s%s\n", name, deniedMark(rule))
					continue
				}
				fmt.Fprintf(&b, "file %s (%d bytes)\n", name, st.Size)
			case unix.S_IFDIR:
				counts["dir"]++
				if denied {
					fmt.Fprintf(&b, "dir %s/%s\n", name, deniedMark(rule))
					continue
				}
				fmt.Fprintf(&b, "dir %s/\n", name)
			case unix.S_IFLNK:
				counts["symlink"]++
				fmt.Fprintf(&b, "symlink %s -> %s\n", name, linkTarget(c.ws, workspace.Child(c.rel, e.Name)))
			default:
				counts["other"]++
				fmt.Fprintf(&b, "other %s\n", name)
			}
		}
		text := b.String()
		if text == "" {
			text = "(empty directory)\n"
		}
		res = Result{Text: text, Meta: map[string]any{
			"path":     c.rel,
			"entries":  len(ents),
			"files":    counts["file"],
			"dirs":     counts["dir"],
			"symlinks": counts["symlink"],
			"others":   counts["other"],
		}}
		return nil
	})
	return res, fromWorkspace(err)
}

// linkTarget describes where the link at canonical rel leads, without ever
// showing a location outside the workspace.
func linkTarget(ws *workspace.Workspace, rel string) string {
	target, err := ws.Resolve(rel)
	if err == nil {
		return workspace.ShowPath(target)
	}
	var e *workspace.Error
	switch {
	case errors.As(err, &e) && e.Kind == workspace.Denied:
		return "(outside the workspace; not followed)"
	case errors.Is(err, workspace.ErrLinkLoop), errors.Is(err, unix.ELOOP):
		return "(link loop: too many levels of symbolic links)"
	}
	return "(broken link)"
}
