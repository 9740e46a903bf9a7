package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/bmatcuk/doublestar/v4"
	"golang.org/x/sys/unix"

	"github.com/b10x/harness/workspace"
)

// DefaultFindResults is find's max_results when not given.
const DefaultFindResults = 500

// FindArgs are find's arguments.
type FindArgs struct {
	Pattern    string `json:"pattern" max:"4096" desc:"Glob matched against paths (** matches any number of directories, * and ? stay within one name, {a,b} alternatives). A glob without '/' is matched against the entry's name, one with '/' against its path relative to the workspace root."`
	Path       string `json:"path,omitempty" max:"16384" desc:"Directory to search beneath, relative to the workspace root. Default (or empty): the whole workspace."`
	MaxResults int    `json:"max_results,omitempty" min:"1" desc:"Stop after this many paths. Default 500."`
}

// Find is the find tool: the workspace-relative paths beneath a directory
// that match a doublestar glob (one ending with '/' matches directories
// only, as they are printed and as gitignore reads it), in walk order (depth first, names in byte
// order). Directories are printed with a trailing '/', symbolic links with
// " (symlink)"; links are never followed and .git directories are not
// entered. The traversal is search's: every directory is opened from its
// parent's descriptor with the beneath resolve set. It stops after
// max_results paths and says so. The zero value is ready to use; it holds no
// state and is safe for concurrent use.
type Find struct{}

var findSpec = sync.OnceValue(func() *argSpec { return mustArgSpec(FindArgs{}) })

// Name implements Tool.
func (Find) Name() string { return "find" }

// Description implements Tool.
func (Find) Description() string {
	return "Find files and directories in the workspace by glob, e.g. '*.go' (by name, at any depth) or 'src/**/*_test.go' (by path from the workspace root). " +
		"A glob ending with '/' matches directories only. " +
		"Prints one path per line, relative to the workspace root: directories end with '/', symbolic links met while walking are marked '(symlink)' and not followed; .git directories are not entered. " +
		"Stops after max_results paths (default 500) and says so. " + pathRules
}

// Schema implements Tool.
func (Find) Schema() json.RawMessage { return findSpec().schema }

// Prepare implements Tool.
func (Find) Prepare(ws *workspace.Workspace, raw json.RawMessage) (Prepared, error) {
	var a FindArgs
	if _, err := findSpec().decode(raw, &a); err != nil {
		return nil, err
	}
	if a.Pattern == "" {
		return nil, Errorf(ReasonInvalidArgument, nil, "field %q must not be empty", "pattern")
	}
	// A trailing '/' means directories only, as find prints them and as
	// gitignore reads it; the glob without it is matched as usual.
	glob, dirsOnly := strings.CutSuffix(a.Pattern, "/")
	if dirsOnly && (glob == "" || strings.HasSuffix(glob, "/")) {
		return nil, Errorf(ReasonInvalidArgument, nil, "field %q: %q names no directory (one '/' at the end means directories only)", "pattern", capText(a.Pattern, maxEchoBytes))
	}
	if !doublestar.ValidatePattern(glob) {
		return nil, Errorf(ReasonInvalidArgument, nil, "field %q: %q is not a valid glob", "pattern", capText(a.Pattern, maxEchoBytes))
	}
	rel, err := resolveOptional(ws, a.Path)
	if err != nil {
		return nil, err
	}
	limit := a.MaxResults
	if limit == 0 {
		limit = DefaultFindResults
	}
	return &findCall{ws: ws, args: a, rel: rel, max: limit, glob: glob, dirsOnly: dirsOnly}, nil
}

type findCall struct {
	ws       *workspace.Workspace
	args     FindArgs
	rel      string
	max      int
	glob     string // the pattern without a trailing '/'
	dirsOnly bool   // the pattern ended with '/'
	denied   ReadVerdict
}

func (c *findCall) Args() any                 { return c.args }
func (c *findCall) Reads() []string           { return []string{c.rel} }
func (c *findCall) FilterReads(v ReadVerdict) { c.denied = v }
func (c *findCall) Writes() []Write           { return nil }

func (c *findCall) Execute(ctx context.Context, rep Report) (Result, error) {
	var res Result
	err := c.ws.WithRoot(func(root int) error {
		var stopped atomic.Bool
		nts := &notes{}
		var b strings.Builder
		n, truncated := 0, false
		wk := workspace.Walker{Stop: stopped.Load, Skip: nts.add, Visit: func(e workspace.Entry) {
			if c.dirsOnly && e.Type != unix.DT_DIR || !globMatch(c.glob, e.Rel) {
				return
			}
			if n == c.max {
				truncated = true
				stopped.Store(true)
				return
			}
			n++
			b.WriteString(workspace.ShowPath(e.Rel))
			switch e.Type {
			case unix.DT_DIR:
				b.WriteByte('/')
			case unix.DT_LNK:
				b.WriteString(" (symlink)")
			}
			if c.denied != nil {
				if rule, denied := c.denied(e.Rel); denied {
					b.WriteString(deniedMark(rule))
				}
			}
			b.WriteByte('\n')
		}}
		if err := wk.Walk(ctx, root, c.rel); err != nil {
			if err == unix.ENOTDIR {
				return Errorf(ReasonToolError, err, "%q is not a directory; find searches beneath a directory", c.rel)
			}
			return fsError(c.rel, "open directory", err)
		}
		if err := ctx.Err(); err != nil {
			return ctxError(err, "find")
		}
		if n == 0 {
			b.WriteString("no matches\n")
		}
		if truncated {
			fmt.Fprintf(&b, "[find stopped after max_results=%d paths; there are more: narrow path or pattern, or raise max_results]\n", c.max)
		}
		b.WriteString(nts.text())
		res = Result{Text: b.String(), Meta: map[string]any{
			"path":        c.rel,
			"matches":     n,
			"skipped":     nts.count,
			"truncated":   truncated,
			"max_results": c.max,
		}}
		return nil
	})
	return res, fromWorkspace(err)
}
