package session

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/b10x/harness/internal/setting"
	"github.com/b10x/harness/policy"
)

// LoadedFile is a policy file read and checked (a policy.File, whose
// values were checked with Checks): its values, which keys it sets and
// where.
type LoadedFile struct {
	*policy.File

	real string // the path read, every link resolved when it was read ("": not resolved)
}

// LoadFile reads the policy file at path strictly (policy.Load with
// Checks): an unknown key, a value of the wrong type or a bad value is an
// *Error at the file's position and key ("ci.toml:4:1: confne: unknown
// key"). Nothing is started.
func LoadFile(path string) (*LoadedFile, error) { return loaded(policy.Load(path, Checks)) }

// ParseFile is LoadFile of content read from path.
func ParseFile(path string, content []byte) (*LoadedFile, error) {
	return loaded(policy.Parse(path, content, Checks))
}

// LoadUserDefaults reads the user defaults file at path strictly
// (policy.LoadUserDefaults with Checks): its keys' positions and its
// errors begin "user defaults PATH". Nil and no error when there is
// nothing at path. Its real path (RealPath) is resolved as it is read, for
// Inside. Nothing is started.
func LoadUserDefaults(path string) (*LoadedFile, error) {
	f, err := policy.LoadUserDefaults(path, Checks)
	if err != nil || f == nil {
		return nil, err
	}
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return nil, &Error{Pos: policy.UserDefaultsOrigin + " " + path, Err: fmt.Errorf("resolving its links: %w", cause(err)), Usage: true}
	}
	return &LoadedFile{File: f, real: real}, nil
}

// NoUserDefaultsEnv, set to 1 in the environment, skips the user defaults
// file; 0 or empty reads it (UserDefaultsFor).
const NoUserDefaultsEnv = "B10X_HARNESS_NO_USER_DEFAULTS"

// UserDefaultsFor reads the user defaults file (policy.UserDefaultsPath, by
// getenv) for command c and refuses the keys c does not take
// (LoadedFile.For): nil when there is none, when c takes no settings (0),
// when c is exec (decision 0082: a CI step is the same on a laptop and a
// runner), or when getenv gives NoUserDefaultsEnv a true word
// (setting.BoolWord); any other word is a usage error. Whether the file
// lies inside the workspace is judged once the workspace is known
// (Policy.UseUserDefaults). Nothing is started.
func UserDefaultsFor(c policy.Command, getenv func(string) string) (*LoadedFile, error) {
	if c == 0 || c == policy.Exec {
		return nil, nil
	}
	if v := getenv(NoUserDefaultsEnv); v != "" {
		skip, ok := setting.BoolWord(v)
		if !ok {
			return nil, &Error{Err: fmt.Errorf("%s=%q: want 1 (skip the user defaults file) or 0", NoUserDefaultsEnv, v), Usage: true}
		}
		if skip {
			return nil, nil
		}
	}
	path := policy.UserDefaultsPath(getenv)
	if path == "" {
		return nil, nil
	}
	lf, err := LoadUserDefaults(path)
	if err != nil || lf == nil {
		return nil, err
	}
	if err := lf.For(c); err != nil {
		return nil, err
	}
	return lf, nil
}

func loaded(f *policy.File, err error) (*LoadedFile, error) {
	if err != nil {
		return nil, err
	}
	return &LoadedFile{File: f}, nil
}

// Apply sets in p every key the file sets, each checked, with the file's
// position as its source; an error names the key at its position.
func (lf *LoadedFile) Apply(p *Policy) error { return lf.File.Apply(&p.Policy) }

// RealPath is the file's path with every link resolved: as it was when
// LoadUserDefaults read it, or, for another file, as it is now.
func (lf *LoadedFile) RealPath() (string, error) {
	if lf.real != "" {
		return lf.real, nil
	}
	return filepath.EvalSymlinks(lf.Ref.Path)
}

// Inside reports whether the file lies inside the directory dir: whether
// dir is the directory of its real path (RealPath) or an ancestor of it.
// Directories are compared as the kernel knows them (device and inode),
// not by name, so that another name of dir (a link to it, a bind mount of
// it, another case spelling on a filesystem that folds case) is dir too.
// A dir that does not exist holds nothing (false); an error is what kept
// the question from being answered (fail closed: the caller refuses).
//
// It does not see a second hard link of the file itself: a link in dir
// to the same file is not found.
func (lf *LoadedFile) Inside(dir string) (bool, error) {
	ws, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	real, err := lf.RealPath()
	if err != nil {
		return false, err
	}
	for d := filepath.Dir(real); ; d = filepath.Dir(d) {
		st, err := os.Stat(d)
		if err != nil {
			return false, err
		}
		if os.SameFile(st, ws) {
			return true, nil
		}
		if d == filepath.Dir(d) {
			return false, nil
		}
	}
}

// NoUserDefaults names, for a namer (Options.Name), the choice not to
// read the user defaults file at all: cmd words it as its flag.
const NoUserDefaults = "no_user_defaults"

// UseUserDefaults makes ud (nil: none) the user defaults file p's values
// came from too: p.UserDefaults names it. It refuses ud, with a usage
// *Error at its path, when it lies inside p.Workspace, where a model could
// write it and so choose the next session's policy: its real path as read
// is judged by the directories' identity (LoadedFile.Inside), whichever
// way the workspace was given; an error that keeps the question from
// being answered refuses it too. Open judges it again against the
// workspace it opens. name words NoUserDefaults in the refusal as the
// reader gives it (cmd: its flag); nil, the key itself.
func (p *Policy) UseUserDefaults(ud *LoadedFile, name func(key string) string) error {
	if ud == nil {
		p.UserDefaults, p.userDefaults = nil, nil
		return nil
	}
	if err := checkUserDefaults(ud, p.Workspace, name); err != nil {
		return err
	}
	ref := ud.Ref
	p.UserDefaults, p.userDefaults = &ref, ud
	return nil
}

// checkUserDefaults refuses the user defaults file ud (nil: none) when it
// lies inside workspace (UseUserDefaults).
func checkUserDefaults(ud *LoadedFile, workspace string, name func(key string) string) error {
	if ud == nil {
		return nil
	}
	if name == nil {
		name = func(key string) string { return key }
	}
	at := policy.UserDefaultsOrigin + " " + ud.Ref.Path
	in, err := ud.Inside(workspace)
	if err != nil {
		return &Error{Pos: at, Err: fmt.Errorf("cannot tell whether it lies inside the workspace %s: %w", workspace, err), Usage: true}
	}
	if !in {
		return nil
	}
	as := ""
	if real, _ := ud.RealPath(); real != ud.Ref.Path {
		as = " (its real path is " + real + ")"
	}
	return &Error{Pos: at, Usage: true, Err: fmt.Errorf("refused: it lies inside the workspace %s%s, where a model could write it and so choose the next session's policy; move it out of the workspace, or give %s", workspace, as, name(NoUserDefaults))}
}

// cause is err without the operation and path a *fs.PathError adds.
func cause(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
