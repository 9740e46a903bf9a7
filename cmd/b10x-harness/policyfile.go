package main

import (
	"errors"
	"strings"

	"github.com/alecthomas/kong"

	"github.com/b10x/harness/internal/setting"
	"github.com/b10x/harness/policy"
	"github.com/b10x/harness/session"
)

// The policy file, the user defaults file and the command line
// (docs/policy.md): a key a file sets is the value of its flag unless the
// command line gives that flag itself, the --policy file's key before the
// user defaults file's; each replaces what is below it whole (a list too).

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
	lf, err := session.LoadFile(path)
	if err != nil {
		return nil, err
	}
	// The keys the command does not take: exec refuses them; a session
	// command ignores those another session command takes.
	if c := commandOf(args); c != 0 {
		if err := lf.For(c); err != nil {
			return nil, err
		}
	}
	return lf, nil
}

// loadUserDefaults reads the user defaults file for the command args name
// (session.UserDefaultsFor), as loadPolicyFile reads --policy's: nil for
// --help, or when args give --no-user-defaults (up to a "--").
func loadUserDefaults(args []string, getenv func(string) string) (*session.LoadedFile, error) {
	for _, a := range args {
		if a == "--" {
			break
		}
		// Help is the same with a user defaults file or without, even a
		// bad one (help COMMAND reads none).
		if a == "--no-user-defaults" || a == "--help" || a == "-h" {
			return nil, nil
		}
		if v, ok := strings.CutPrefix(a, "--no-user-defaults="); ok {
			// A word kong does not take skips the file too: kong then
			// refuses the flag, and that is the error to see.
			if skip, ok := setting.BoolWord(v); skip || !ok {
				return nil, nil
			}
		}
	}
	return session.UserDefaultsFor(commandOf(args), getenv)
}

// commandOf is the command args name that takes settings ("call", "policy
// show"), 0 for none.
func commandOf(args []string) policy.Command {
	if len(args) == 0 {
		return 0
	}
	name := args[0]
	if name == "policy" && len(args) > 1 {
		name += " " + args[1]
	}
	return policy.CommandNamed(name)
}

// fileResolver gives kong, for each flag the command line does not set,
// the value of the first of its files that sets the key: the --policy
// file, then the user defaults file (nil ones are skipped).
type fileResolver struct{ files []*session.LoadedFile }

func (fileResolver) Validate(*kong.Application) error { return nil }

func (r fileResolver) Resolve(_ *kong.Context, _ *kong.Path, f *kong.Flag) (any, error) {
	key := flagKey(f.Name)
	if key == "policy" {
		return nil, nil
	}
	var v any
	ok := false
	for _, lf := range r.files {
		if lf != nil {
			if v, ok = lf.Value(key); ok {
				break
			}
		}
	}
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

// sourcesOf says where each policy key's value came from: "flag --x" for a
// flag on the command line, the position in the first of files (in
// fileResolver's order) that sets a key no flag overrode ("ci.toml:3:1",
// "user defaults PATH:3:1"); absent keys are defaults.
func sourcesOf(kctx *kong.Context, files ...*session.LoadedFile) map[string]string {
	src := map[string]string{}
	for _, p := range kctx.Path {
		if p.Flag == nil {
			continue
		}
		key := flagKey(p.Flag.Name)
		if p.Resolved {
			for _, lf := range files {
				if lf == nil {
					continue
				}
				if pos, ok := lf.Pos[key]; ok {
					src[key] = pos
					break
				}
			}
			continue
		}
		src[key] = "flag " + setting.Flag(key)
	}
	return src
}

// renderError words err for the command line: a policy error's key as its
// flag (--allow-program), or, when the value came from the policy file,
// as the file's position and key.
func renderError(err error, sources map[string]string) string {
	var he *session.Error
	if !errors.As(err, &he) {
		return setting.Flagged(err).Error()
	}
	if he.Key == "" && he.Pos == "" {
		// A library's error of a setting, carried whole.
		return setting.Flagged(he.Err).Error()
	}
	switch {
	case he.Pos != "": // a value of the policy file, at its position
		return he.Error()
	case he.Key == "program":
		return he.Render("exec:")
	}
	if src := sources[he.Key]; src != "" && !strings.HasPrefix(src, "flag ") {
		return he.Render(src + ": " + he.Key)
	}
	return he.Render(setting.Flag(he.Key))
}
