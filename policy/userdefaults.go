package policy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// UserDefaultsOrigin begins the source of every key the user defaults file
// gives, and every error of it: "user defaults
// /home/u/.config/b10x-harness/policy.toml:3:1".
const UserDefaultsOrigin = "user defaults"

// UserDefaultsPath is where the user defaults file is, by getenv (os.Getenv
// on a host): $XDG_CONFIG_HOME/b10x-harness/policy.toml, or
// $HOME/.config/b10x-harness/policy.toml when XDG_CONFIG_HOME is unset,
// empty or not absolute (the XDG Base Directory Specification: a relative
// path in it is to be ignored). "" when neither names an absolute
// directory (no HOME): there is then no such file.
func UserDefaultsPath(getenv func(string) string) string {
	dir := getenv("XDG_CONFIG_HOME")
	if !filepath.IsAbs(dir) {
		home := getenv("HOME")
		if !filepath.IsAbs(home) {
			return ""
		}
		dir = filepath.Join(home, ".config")
	}
	return filepath.Join(dir, "b10x-harness", "policy.toml")
}

// LoadUserDefaults reads the user defaults file at path strictly, as Load
// reads a policy file, with its positions named "user defaults
// PATH:LINE:COL" (File.Pos, and so the sources Apply records). A path with
// nothing at it (no file, or no directory on the way) gives nil and no
// error: most users have none. Anything else that keeps it from being
// read is a usage *Error at "user defaults PATH": a directory, what is not
// a regular file (it is opened without blocking, so a FIFO does not hang
// the start), a link to nothing, no permission, more than a policy file
// holds.
//
// It does not judge where the file lies (a workspace a model may write):
// its caller knows the workspace.
func LoadUserDefaults(path string, checks Checks) (*File, error) {
	o := origin{path: path, name: UserDefaultsOrigin + " " + path, user: true}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			target, lerr := os.Readlink(path)
			if lerr != nil {
				return nil, nil // nothing there
			}
			return nil, o.fail(fmt.Errorf("a link to %s, which does not exist", target))
		}
		return nil, o.fail(unreadable(err))
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, o.fail(unreadable(err))
	}
	if !st.Mode().IsRegular() {
		return nil, o.fail(fmt.Errorf("is %s, not a policy file", typeOf(st.Mode())))
	}
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(io.LimitReader(f, maxFile+1)); err != nil {
		return nil, o.fail(unreadable(err))
	}
	if buf.Len() > maxFile {
		return nil, o.fail(fmt.Errorf("more than %d bytes; a policy file is small", maxFile))
	}
	return parse(o, buf.Bytes(), checks)
}

// unreadable says the file cannot be read, and why: err without the
// operation and path a *fs.PathError adds (the error it is part of names
// the path already).
func unreadable(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return fmt.Errorf("cannot be read: %w", err)
}

// typeOf names the type of a file that is not a regular one.
func typeOf(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	}
	return "a file of type " + m.Type().String()
}
