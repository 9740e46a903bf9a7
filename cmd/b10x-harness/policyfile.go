package main

import (
	"errors"
	"strings"

	"github.com/alecthomas/kong"

	"github.com/b10x/harness/internal/setting"
	"github.com/b10x/harness/session"
)

// The policy file and the command line (docs/policy.md): a key the file
// sets is the value of its flag unless the command line gives that flag
// itself; each flag replaces the file's key whole (a list too).

// loadPolicyFile reads the file --policy names in args (up to a "--"),
// nil when there is none. It is read before the command line is parsed so
// that its keys can stand for flags not given.
func loadPolicyFile(args []string) (*session.LoadedFile, error) {
	path, found := "", false
	for i, a := range args {
		if a == "--" {
			break
		}
		if v, ok := strings.CutPrefix(a, "--policy="); ok {
			path, found = v, true
		} else if a == "--policy" && i+1 < len(args) {
			path, found = args[i+1], true
		}
	}
	if !found {
		return nil, nil
	}
	if path == "" {
		return nil, usagef("--policy: no file named")
	}
	return session.LoadFile(path)
}

// fileResolver gives kong the policy file's value of each flag the command
// line does not set.
type fileResolver struct{ lf *session.LoadedFile }

func (fileResolver) Validate(*kong.Application) error { return nil }

func (r fileResolver) Resolve(_ *kong.Context, _ *kong.Path, f *kong.Flag) (any, error) {
	key := flagKey(f.Name)
	if key == "policy" {
		return nil, nil
	}
	v, ok := r.lf.Value(key)
	if !ok {
		return nil, nil
	}
	if list, ok := v.([]string); ok {
		out := make([]any, len(list))
		for i, s := range list {
			out[i] = s
		}
		return out, nil
	}
	return v, nil
}

// flagKey is a flag's policy-file key: allow-program → allow_program.
func flagKey(flag string) string { return strings.ReplaceAll(flag, "-", "_") }

// keyFlag is a policy key's flag: allow_program → --allow-program.
func keyFlag(key string) string { return "--" + strings.ReplaceAll(key, "_", "-") }

// sourcesOf says where each policy key's value came from: "flag --x" for a
// flag on the command line, the file's position for a key of the policy
// file that no flag overrode; absent keys are defaults.
func sourcesOf(kctx *kong.Context, lf *session.LoadedFile) map[string]string {
	src := map[string]string{}
	for _, p := range kctx.Path {
		if p.Flag == nil {
			continue
		}
		key := flagKey(p.Flag.Name)
		if p.Resolved {
			if lf != nil {
				if pos, ok := lf.Pos[key]; ok {
					src[key] = pos
				}
			}
			continue
		}
		src[key] = "flag " + keyFlag(key)
	}
	return src
}

// fill gives a policy built from flags its sources, the limits it
// requires (those given by a flag or the file) and its file.
func (e *env) fill(p *session.Policy) {
	p.Sources = e.sources
	for _, k := range []string{"pids_max", "memory_max", "cpu_max"} {
		if _, given := e.sources[k]; given {
			if p.Required == nil {
				p.Required = map[string]bool{}
			}
			p.Required[k] = true
		}
	}
	if e.file != nil {
		ref := e.file.Ref
		p.File = &ref
	}
}

// renderError words err for the command line: a policy error's key as its
// flag (--allow-program), or, when the value came from the policy file,
// as the file's position and key.
func renderError(err error, sources map[string]string) string {
	var he *session.Error
	if !errors.As(err, &he) {
		return setting.Flagged(err).Error()
	}
	if he.Key == "" {
		// A library's error of a setting, carried whole.
		return setting.Flagged(he.Err).Error()
	}
	switch {
	case strings.Contains(he.Key, ":"): // a position in a policy file
		return he.Error()
	case he.Key == "program":
		return he.Render("exec:")
	}
	if src := sources[he.Key]; src != "" && !strings.HasPrefix(src, "flag ") {
		return he.Render(src + ": " + he.Key)
	}
	return he.Render(keyFlag(he.Key))
}
