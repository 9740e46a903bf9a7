package policy

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestUserDefaultsPath: XDG_CONFIG_HOME when it is absolute, else
// $HOME/.config; nothing without an absolute HOME.
func TestUserDefaultsPath(t *testing.T) {
	for _, c := range []struct {
		xdg, home, want string
	}{
		{"/x/cfg", "/home/u", "/x/cfg/b10x-harness/policy.toml"},
		{"/x/cfg/", "", "/x/cfg/b10x-harness/policy.toml"},
		{"", "/home/u", "/home/u/.config/b10x-harness/policy.toml"},
		{"cfg", "/home/u", "/home/u/.config/b10x-harness/policy.toml"}, // relative: ignored, as the spec says
		{"./cfg", "/home/u", "/home/u/.config/b10x-harness/policy.toml"},
		{"", "", ""},
		{"", "home", ""},
		{"cfg", "", ""},
	} {
		env := map[string]string{"XDG_CONFIG_HOME": c.xdg, "HOME": c.home}
		if got := UserDefaultsPath(func(k string) string { return env[k] }); got != c.want {
			t.Errorf("XDG_CONFIG_HOME=%q HOME=%q: %q, want %q", c.xdg, c.home, got, c.want)
		}
	}
}

// TestLoadUserDefaults: nothing there is no file and no error; what is
// there and cannot be read as a policy file is a usage error naming the
// path (one line); a key's position and error begin "user defaults PATH".
func TestLoadUserDefaults(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "policy.toml")
	name := "user defaults " + path

	for _, p := range []string{path, filepath.Join(dir, "no", "such", "policy.toml")} {
		if f, err := LoadUserDefaults(p, nil); f != nil || err != nil {
			t.Errorf("%s, missing: %v, %v; want nil, nil", p, f, err)
		}
	}
	// A file where a directory should be: there is no such file either.
	must(t, os.WriteFile(filepath.Join(dir, "plain"), nil, 0o644))
	if f, err := LoadUserDefaults(filepath.Join(dir, "plain", "policy.toml"), nil); f != nil || err != nil {
		t.Errorf("under a file: %v, %v; want nil, nil", f, err)
	}

	refused := func(what, want string) {
		t.Helper()
		f, err := LoadUserDefaults(path, nil)
		if f != nil || !IsUsage(err) || err.Error() != want || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v, %v; want a usage error %q", what, f, err, want)
		}
	}
	must(t, os.Mkdir(path, 0o755))
	refused("a directory", name+": is a directory, not a policy file")
	must(t, os.Remove(path))
	must(t, syscall.Mkfifo(path, 0o644)) // read without O_NONBLOCK, it would hang
	refused("a FIFO", name+": is a named pipe, not a policy file")
	must(t, os.Remove(path))
	must(t, os.Symlink("gone.toml", path))
	refused("a link to nothing", name+": a link to gone.toml, which does not exist")
	must(t, os.Remove(path))
	// Opened (root's DAC override included), and refused at read.
	must(t, os.Symlink("/proc/self/clear_refs", path))
	if f, err := LoadUserDefaults(path, nil); f != nil || !IsUsage(err) || !strings.HasPrefix(err.Error(), name+": cannot be read: ") {
		t.Errorf("unreadable: %v, %v", f, err)
	}
	must(t, os.Remove(path))
	if os.Geteuid() != 0 {
		must(t, os.WriteFile(path, []byte("confine = \"off\"\n"), 0o000))
		refused("mode 000", name+": cannot be read: permission denied")
		must(t, os.Remove(path))
	}
	must(t, os.WriteFile(path, []byte(strings.Repeat("#", maxFile+1)), 0o644))
	refused("too large", name+": more than 1048576 bytes; a policy file is small")

	// The same checks as a policy file, named by the origin.
	must(t, os.WriteFile(path, []byte("confine = \"off\"\n\nconfne = \"strict\"\n"), 0o644))
	refused("a bad key", name+":3:1: confne: unknown key (did you mean confine?)")
	must(t, os.WriteFile(path, []byte("confine = \"auto\"\n[run]\n"), 0o644))
	refused("a table", name+":2:2: [run]: a policy file has no tables: every key is top-level")
	must(t, os.WriteFile(path, []byte("max_calls = \"many\"\n"), 0o644))
	refused("a wrong type", name+":1:13: max_calls: want an integer, not a TOML string")

	// A good one: its keys' sources name it.
	must(t, os.WriteFile(path, []byte("confine = \"off\"\nmax_calls = 4\n"), 0o644))
	f, err := LoadUserDefaults(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := Defaults()
	must(t, f.Apply(&p))
	if p.Confine != ConfineOff || p.MaxCalls != 4 || p.Sources["max_calls"] != name+":2:1" || f.Ref.Path != path || len(f.Ref.SHA256) != 64 {
		t.Errorf("applied: confine %s, max_calls %d, sources %v, ref %+v", p.Confine, p.MaxCalls, p.Sources, f.Ref)
	}
	// A key another command takes is judged as in a --policy file.
	must(t, os.WriteFile(path, []byte("allow_program = [\"sh\"]\n"), 0o644))
	if f, err = LoadUserDefaults(path, nil); err != nil {
		t.Fatal(err)
	}
	if err := f.For(Exec); err == nil || !strings.HasPrefix(err.Error(), name+":1:1: allow_program: not a key of exec") {
		t.Errorf("For(Exec): %v", err)
	}
	if err := f.For(Call); err != nil {
		t.Errorf("For(Call): %v", err)
	}
}

// TestPolicyFileErrorsUnchanged: a --policy file's whole-file errors still
// name the flag's key, not an origin.
func TestPolicyFileErrorsUnchanged(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "none.toml"), nil)
	var e *Error
	if !errors.As(err, &e) || e.Key != "policy" || e.Pos != "" {
		t.Errorf("Load of nothing: %#v", err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
