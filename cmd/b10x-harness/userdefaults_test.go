package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/b10x/harness/internal/testenv"
	"github.com/b10x/harness/policy"
	"github.com/b10x/harness/session"
)

// The suite does not read a developer's own user defaults file: every
// harness it starts inherits B10X_HARNESS_NO_USER_DEFAULTS=1, unless the
// variable is set already (a harness this binary runs as, or a test of
// this file, which sets it empty and HOME and XDG_CONFIG_HOME to its own).
func init() {
	if _, set := os.LookupEnv(session.NoUserDefaultsEnv); !set {
		os.Setenv(session.NoUserDefaultsEnv, "1")
	}
}

// userHome is a test's HOME with its user defaults file
// (~/.config/b10x-harness/policy.toml) holding content ("": none), and the
// environment that gives a harness that HOME, no XDG_CONFIG_HOME, and the
// user defaults file read.
type userHome struct {
	home, file string
	env        []string
}

func newUserHome(t *testing.T, content string) userHome {
	t.Helper()
	home := t.TempDir()
	u := userHome{home: home, file: filepath.Join(home, ".config", "b10x-harness", "policy.toml"),
		env: []string{"HOME=" + home, "XDG_CONFIG_HOME=", session.NoUserDefaultsEnv + "="}}
	if content != "" {
		u.write(t, content)
	}
	return u
}

func (u userHome) write(t *testing.T, content string) {
	t.Helper()
	must(t, os.MkdirAll(filepath.Dir(u.file), 0o755))
	must(t, os.WriteFile(u.file, []byte(content), 0o644))
}

// harnessEnv is harness with env added to the test's environment (a later
// entry wins), started in dir ("": the test's).
func harnessEnv(t *testing.T, dir string, env []string, args ...string) result {
	t.Helper()
	cmd := harnessCommand(args...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "B10X_TEST_MAIN=1"), env...)
	return runHarnessCmd(t, cmd, "")
}

// shownPolicy is policy show --json.
type shownPolicy struct {
	Policy       []session.KeyValue `json:"policy"`
	File         *session.FileRef   `json:"file"`
	UserDefaults *session.FileRef   `json:"user_defaults"`
}

func showPolicy(t *testing.T, env []string, args ...string) (shownPolicy, map[string]session.KeyValue) {
	t.Helper()
	r := harnessEnv(t, "", env, append([]string{"policy", "show", "--json"}, args...)...)
	if r.code != 0 {
		t.Fatalf("policy show %v: exit %d: %s", args, r.code, r.stderr)
	}
	var s shownPolicy
	if err := json.Unmarshal([]byte(r.stdout), &s); err != nil {
		t.Fatalf("policy show %v: %v: %s", args, err, r.stdout)
	}
	byKey := map[string]session.KeyValue{}
	for _, kv := range s.Policy {
		byKey[kv.Key] = kv
	}
	return s, byKey
}

func sha(content string) string {
	sum := sha256.Sum256([]byte(content))
	return hex.EncodeToString(sum[:])
}

// TestUserDefaultsPrecedence: a flag wins, then the --policy file's key,
// then the user defaults file's, then the default, key by key (a list
// whole); policy show names each origin, the user defaults file's as its
// own ("user defaults PATH:LINE:COL"), and the file and its SHA-256.
func TestUserDefaultsPrecedence(t *testing.T) {
	ud := "max_calls = 9\nhook_timeout = \"7s\"\nmax_result = \"100KiB\"\nallow_program = [\"sh\", \"cat\"]\n"
	u := newUserHome(t, ud)
	ws := t.TempDir()
	pf := filepath.Join(ws, "p.toml")
	must(t, os.WriteFile(pf, []byte("max_calls = 5\nhook_timeout = \"8s\"\n"), 0o644))
	udAt := func(line int) string { return fmt.Sprintf("user defaults %s:%d:1", u.file, line) }

	type want struct{ value, source string }
	for _, c := range []struct {
		name string
		args []string
		keys map[string]want
	}{
		{"user defaults alone", nil, map[string]want{
			"max_calls": {"9", udAt(1)}, "hook_timeout": {`"7s"`, udAt(2)}, "max_result": {`"100KiB"`, udAt(3)},
			"allow_program": {`["sh","cat"]`, udAt(4)}, "net": {`"none"`, "default"}}},
		{"--policy over user defaults", []string{"--policy", pf}, map[string]want{
			"max_calls": {"5", pf + ":1:1"}, "hook_timeout": {`"8s"`, pf + ":2:1"}, "max_result": {`"100KiB"`, udAt(3)}}},
		{"a flag over both", []string{"--policy", pf, "--max-calls", "3", "--allow-program", "go"}, map[string]want{
			"max_calls": {"3", "flag --max-calls"}, "hook_timeout": {`"8s"`, pf + ":2:1"}, "max_result": {`"100KiB"`, udAt(3)},
			"allow_program": {`["go"]`, "flag --allow-program"}}},
		{"a flag over user defaults", []string{"--max-result", "1KiB"}, map[string]want{
			"max_result": {`"1KiB"`, "flag --max-result"}, "max_calls": {"9", udAt(1)}}},
		{"skipped", []string{"--no-user-defaults"}, map[string]want{
			"max_calls": {"0", "default"}, "max_result": {`"256KiB"`, "default"}, "allow_program": {`[]`, "default"}}},
	} {
		args := append([]string{"--workspace", ws}, c.args...)
		s, got := showPolicy(t, u.env, args...)
		for key, w := range c.keys {
			v, _ := json.Marshal(got[key].Value)
			if string(v) != w.value || got[key].Source != w.source {
				t.Errorf("%s: %s = %s (%s), want %s (%s)", c.name, key, v, got[key].Source, w.value, w.source)
			}
		}
		skipped := c.name == "skipped"
		if skipped != (s.UserDefaults == nil) || !skipped && (s.UserDefaults.Path != u.file || s.UserDefaults.SHA256 != sha(ud)) {
			t.Errorf("%s: user_defaults %+v, want %s, sha256 %s (none when skipped)", c.name, s.UserDefaults, u.file, sha(ud))
		}
	}

	// The text says the same.
	r := harnessEnv(t, "", u.env, "policy", "show", "--workspace", ws, "--policy", pf)
	lines := map[string]bool{}
	for _, l := range strings.Split(r.stdout, "\n") {
		lines[strings.Join(strings.Fields(l), " ")] = true
	}
	for _, w := range []string{
		"# user defaults " + u.file + ", sha256 " + sha(ud),
		`max_result = "100KiB" # ` + udAt(3),
		"max_calls = 5 # " + pf + ":1:1",
	} {
		if r.code != 0 || !lines[w] {
			t.Errorf("policy show: exit %d, no line %q:\n%s%s", r.code, w, r.stdout, r.stderr)
		}
	}

	// XDG_CONFIG_HOME, when absolute, is where the file is; a relative one
	// is ignored.
	xdg := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(xdg, "b10x-harness"), 0o755))
	xfile := filepath.Join(xdg, "b10x-harness", "policy.toml")
	must(t, os.WriteFile(xfile, []byte("max_calls = 11\n"), 0o644))
	_, got := showPolicy(t, append(u.env, "XDG_CONFIG_HOME="+xdg), "--workspace", ws)
	if got["max_calls"].Source != "user defaults "+xfile+":1:1" {
		t.Errorf("XDG_CONFIG_HOME=%s: max_calls from %s", xdg, got["max_calls"].Source)
	}
	_, got = showPolicy(t, append(u.env, "XDG_CONFIG_HOME=relative/cfg"), "--workspace", ws)
	if got["max_calls"].Source != udAt(1) {
		t.Errorf("a relative XDG_CONFIG_HOME: max_calls from %s, want %s", got["max_calls"].Source, udAt(1))
	}
}

// TestUserDefaultsMissing: no file (no directory either, or no HOME at
// all) is not an error: every value is a flag's or a default.
func TestUserDefaultsMissing(t *testing.T) {
	ws := t.TempDir()
	for name, env := range map[string][]string{
		"no file":      newUserHome(t, "").env,
		"no .config":   {"HOME=" + t.TempDir(), "XDG_CONFIG_HOME=", session.NoUserDefaultsEnv + "="},
		"no HOME":      {"HOME=", "XDG_CONFIG_HOME=", session.NoUserDefaultsEnv + "="},
		"relative XDG": {"HOME=", "XDG_CONFIG_HOME=cfg", session.NoUserDefaultsEnv + "="},
	} {
		s, got := showPolicy(t, env, "--workspace", ws)
		if s.UserDefaults != nil || got["max_calls"].Source != "default" {
			t.Errorf("%s: user_defaults %+v, max_calls from %s", name, s.UserDefaults, got["max_calls"].Source)
		}
	}
	u := newUserHome(t, "")
	if r := harnessEnv(t, "", u.env, "call", "--workspace", ws, "--confine", "off", "dir_list", `{"path":"."}`); r.code != 0 {
		t.Errorf("call with no user defaults file: exit %d: %s", r.code, r.stderr)
	}
}

// TestUserDefaultsRefused: a bad key, a directory in the file's place, an
// unreadable file: one line naming the file (and the line and key), exit
// 2, nothing written, whichever command that reads it; exec reads none of
// them.
func TestUserDefaultsRefused(t *testing.T) {
	ws := t.TempDir()
	rec := filepath.Join(ws, "rec.jsonl")
	u := newUserHome(t, "")
	name := "user defaults " + u.file
	cases := []struct {
		what, want string
		make       func()
	}{
		{"a bad key", name + ":2:1: confne: unknown key (did you mean confine?)", func() { u.write(t, "max_calls = 1\nconfne = \"off\"\n") }},
		{"a bad value", name + ":1:1: max_calls: must not be negative", func() { u.write(t, "max_calls = -1\n") }},
		{"a table", name + ":1:2: [run]: a policy file has no tables", func() { u.write(t, "[run]\n") }},
		{"a directory", name + ": is a directory, not a policy file", func() {
			must(t, os.RemoveAll(u.file))
			must(t, os.MkdirAll(u.file, 0o755))
		}},
		{"a link to nothing", name + ": a link to gone.toml, which does not exist", func() {
			must(t, os.RemoveAll(u.file))
			must(t, os.Symlink("gone.toml", u.file))
		}},
		{"unreadable", name + ": cannot be read: ", func() {
			must(t, os.RemoveAll(u.file))
			must(t, os.Symlink("/proc/self/clear_refs", u.file)) // opened, and refused at read, by root too
		}},
	}
	for _, c := range cases {
		c.make()
		for _, args := range [][]string{
			{"call", "--workspace", ws, "--record", rec, "--confine", "off", "dir_list", `{"path":"."}`},
			{"tools", "--workspace", ws, "--record", rec},
			{"policy", "show", "--workspace", ws},
			{"mcp", "--workspace", ws, "--record", rec},
			{"run", "--workspace", ws, "--record", rec, "--provider", "replay:" + filepath.Join(ws, "none.jsonl")},
		} {
			r := harnessEnv(t, "", u.env, args...)
			line := strings.TrimSuffix(r.stderr, "\n")
			if r.code != exitUsage || r.stdout != "" || !strings.Contains(line, c.want) || strings.Contains(line, "\n") {
				t.Errorf("%s: %s: exit %d, stdout %q, stderr %q; want exit 2 and one line %q", c.what, args[0], r.code, r.stdout, r.stderr, c.want)
			}
		}
		if _, err := os.Stat(rec); err == nil {
			t.Fatalf("%s: a refused user defaults file still opened the record", c.what)
		}
		// exec does not read it: its own error is the one it reports.
		args := []string{"exec", "--workspace", ws, "--grace", "soon", "--", "true"}
		if r := harnessEnv(t, "", u.env, args...); r.code != exitSetupError || strings.Contains(r.stderr, "user defaults") || !strings.Contains(r.stderr, "--grace") {
			t.Errorf("%s: exec: exit %d, stderr %q; want 125 and --grace's error only", c.what, r.code, r.stderr)
		}
	}
	// --help does not read it either, and is what help COMMAND prints.
	h, d := harnessEnv(t, "", u.env, "call", "--help"), harnessEnv(t, "", u.env, "help", "call")
	if h.code != 0 || h.stdout != d.stdout || !strings.Contains(h.stdout, "--no-user-defaults") {
		t.Errorf("call --help beside a bad user defaults file: exit %d, %q", h.code, h.stderr)
	}
}

// TestUserDefaultsExec: exec runs its command beside a user defaults file
// that would refuse it (a key exec does not take), and takes none of its
// keys (decision 0082).
func TestUserDefaultsExec(t *testing.T) {
	testenv.Require(t, execution(), "confined execution", testenv.ShapeNoLandlock, testenv.ShapeNoUserns)
	ws, _ := sampleWorkspace(t)
	u := newUserHome(t, "allow_program = [\"sh\"]\nconfine = \"off\"\n")
	r := harnessEnv(t, ws, u.env, "exec", "--workspace", ws, "--", "true")
	if r.code != 0 || strings.Contains(r.stderr, "user defaults") {
		t.Errorf("exec beside a user defaults file: exit %d: %s", r.code, r.stderr)
	}
}

// TestUserDefaultsInsideWorkspace: a user defaults file whose real path
// lies inside the session's workspace is refused, whichever way the
// workspace was given (a flag, the --policy file, the user defaults file
// itself, the directory the harness starts in) and whichever way the file
// is reached (in it, a link from outside to a file in it, a link from
// outside to a directory in it); nothing is written. One outside is read.
func TestUserDefaultsInsideWorkspace(t *testing.T) {
	ws := t.TempDir()
	rec := filepath.Join(ws, "rec.jsonl")
	outside := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(ws, ".cfg", "b10x-harness"), 0o755))
	inWS := filepath.Join(ws, ".cfg", "b10x-harness", "policy.toml")
	must(t, os.WriteFile(inWS, []byte("max_calls = 2\n"), 0o644))
	pf := filepath.Join(outside, "p.toml")
	must(t, os.WriteFile(pf, []byte("workspace = \""+ws+"\"\n"), 0o644))
	// A link from outside to the file in the workspace.
	linkHome := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(linkHome, ".config", "b10x-harness"), 0o755))
	must(t, os.Symlink(inWS, filepath.Join(linkHome, ".config", "b10x-harness", "policy.toml")))
	// XDG_CONFIG_HOME a link from outside to the workspace's directory.
	linkXDG := filepath.Join(outside, "xdg")
	must(t, os.Symlink(filepath.Join(ws, ".cfg"), linkXDG))
	// The user defaults file naming the workspace that holds it.
	selfXDG := filepath.Join(ws, "self")
	must(t, os.MkdirAll(filepath.Join(selfXDG, "b10x-harness"), 0o755))
	must(t, os.WriteFile(filepath.Join(selfXDG, "b10x-harness", "policy.toml"), []byte("workspace = \""+ws+"\"\n"), 0o644))

	env := func(xdg, home string) []string {
		return []string{"XDG_CONFIG_HOME=" + xdg, "HOME=" + home, session.NoUserDefaultsEnv + "="}
	}
	must(t, os.Symlink(ws, filepath.Join(outside, "ws-link")))
	call := []string{"--record", rec, "--confine", "off", "dir_list", `{"path":"."}`}
	for _, c := range []struct {
		what, dir, file string
		env, args       []string
	}{
		{"--workspace", "", inWS, env(filepath.Join(ws, ".cfg"), ""), []string{"--workspace", ws}},
		{"the --policy file's workspace", "", inWS, env(filepath.Join(ws, ".cfg"), ""), []string{"--policy", pf}},
		{"the default workspace, the directory the harness starts in", ws, inWS, env(filepath.Join(ws, ".cfg"), ""), nil},
		{"the user defaults file's own workspace", outside, filepath.Join(selfXDG, "b10x-harness", "policy.toml"), env(selfXDG, ""), nil},
		{"a link to a file in the workspace", "", filepath.Join(linkHome, ".config", "b10x-harness", "policy.toml"), env("", linkHome), []string{"--workspace", ws}},
		{"XDG_CONFIG_HOME a link into the workspace", "", filepath.Join(linkXDG, "b10x-harness", "policy.toml"), env(linkXDG, ""), []string{"--workspace", ws}},
		{"a workspace named by a link", "", inWS, env(filepath.Join(ws, ".cfg"), ""), []string{"--workspace", filepath.Join(outside, "ws-link")}},
	} {
		callArgs := func(more ...string) []string {
			return append(append(append([]string{"call"}, more...), c.args...), call...)
		}
		for _, args := range [][]string{callArgs(), append([]string{"policy", "show"}, c.args...)} {
			r := harnessEnv(t, c.dir, c.env, args...)
			want := "user defaults " + c.file + ": refused: it lies inside the workspace "
			line := strings.TrimSuffix(r.stderr, "\n")
			if r.code != exitUsage || r.stdout != "" || !strings.Contains(line, want) || !strings.Contains(line, "where a model could write it") || strings.Contains(line, "\n") {
				t.Errorf("%s: %s: exit %d, stdout %q, stderr %q; want exit 2 and %q", c.what, args[0], r.code, r.stdout, r.stderr, want)
			}
			if _, err := os.Stat(rec); err == nil {
				t.Fatalf("%s: a refused user defaults file still opened the record", c.what)
			}
		}
		// Skipped, the same command runs.
		if r := harnessEnv(t, c.dir, c.env, callArgs("--no-user-defaults")...); r.code != 0 {
			t.Errorf("%s, --no-user-defaults: exit %d: %s", c.what, r.code, r.stderr)
		}
		must(t, os.RemoveAll(rec))
	}
	// The same file, with the workspace elsewhere, is read.
	other := t.TempDir()
	_, got := showPolicy(t, env(filepath.Join(ws, ".cfg"), ""), "--workspace", other)
	if got["max_calls"].Source != "user defaults "+inWS+":1:1" {
		t.Errorf("workspace %s: max_calls from %s, want the user defaults file", other, got["max_calls"].Source)
	}
}

// TestUserDefaultsOptOut: --no-user-defaults and
// B10X_HARNESS_NO_USER_DEFAULTS=1 skip a file that would refuse the
// command; 0, empty and --no-user-defaults=false read it; another value of
// the variable is refused, naming it.
func TestUserDefaultsOptOut(t *testing.T) {
	ws := t.TempDir()
	u := newUserHome(t, "confne = \"off\"\n")
	refused := "user defaults " + u.file + ":1:1: confne: unknown key"
	for _, c := range []struct {
		what  string
		env   []string
		flags []string
		code  int
		want  string
	}{
		{"read", nil, nil, exitUsage, refused},
		{"--no-user-defaults", nil, []string{"--no-user-defaults"}, 0, ""},
		{"--no-user-defaults=true", nil, []string{"--no-user-defaults=true"}, 0, ""},
		{"--no-user-defaults=false", nil, []string{"--no-user-defaults=false"}, exitUsage, refused},
		{"the variable 1", []string{session.NoUserDefaultsEnv + "=1"}, nil, 0, ""},
		{"the variable true", []string{session.NoUserDefaultsEnv + "=true"}, nil, 0, ""},
		{"the variable 0", []string{session.NoUserDefaultsEnv + "=0"}, nil, exitUsage, refused},
		{"the variable empty", []string{session.NoUserDefaultsEnv + "="}, nil, exitUsage, refused},
		{"the variable, another word", []string{session.NoUserDefaultsEnv + "=maybe"}, nil, exitUsage, session.NoUserDefaultsEnv + `="maybe": want 1`},
		{"the variable 0, the flag", []string{session.NoUserDefaultsEnv + "=0"}, []string{"--no-user-defaults"}, 0, ""},
	} {
		for _, cmd := range [][]string{{"policy", "show"}, {"call"}, {"tools"}} {
			args := append(append(append([]string{}, cmd...), c.flags...), "--workspace", ws)
			if cmd[0] == "call" {
				args = append(args, "--confine", "off", "dir_list", `{"path":"."}`)
			}
			r := harnessEnv(t, "", append(u.env, c.env...), args...)
			if r.code != c.code || c.want != "" && !strings.Contains(r.stderr, c.want) {
				t.Errorf("%s: %s: exit %d, stderr %q; want exit %d and %q", c.what, cmd[0], r.code, r.stderr, c.code, c.want)
			}
		}
	}
	// exec takes the flag too (it reads no user defaults file).
	if r := harnessEnv(t, "", u.env, "exec", "--no-user-defaults", "--grace", "soon", "--", "true"); r.code != exitSetupError || strings.Contains(r.stderr, "not a flag") {
		t.Errorf("exec --no-user-defaults: exit %d, %q", r.code, r.stderr)
	}
}

// TestUserDefaultsRecord: run_start's policy names the user defaults file
// and its SHA-256 beside the --policy file, and each key it gave has it as
// its source; a session that skipped it names none.
func TestUserDefaultsRecord(t *testing.T) {
	ws := t.TempDir()
	rec := filepath.Join(ws, "rec.jsonl")
	ud := "confine = \"off\"\nmax_calls = 7\n"
	u := newUserHome(t, ud)
	pf := filepath.Join(t.TempDir(), "p.toml")
	must(t, os.WriteFile(pf, []byte("max_calls = 4\n"), 0o644))
	type start struct {
		Policy struct {
			MaxCalls     int                `json:"max_calls"`
			File         *session.FileRef   `json:"file"`
			UserDefaults *session.FileRef   `json:"user_defaults"`
			Effective    []session.KeyValue `json:"effective"`
		} `json:"policy"`
	}
	runStart := func(args ...string) start {
		t.Helper()
		must(t, os.RemoveAll(rec))
		r := harnessEnv(t, "", u.env, append(append([]string{"call", "--workspace", ws, "--record", rec}, args...), "dir_list", `{"path":"."}`)...)
		if r.code != 0 {
			t.Fatalf("call %v: exit %d: %s", args, r.code, r.stderr)
		}
		b, err := os.ReadFile(rec)
		must(t, err)
		first, _, _ := bytes.Cut(b, []byte("\n"))
		var s start
		must(t, json.Unmarshal(first, &s))
		return s
	}
	sourceOf := func(s start, key string) string {
		for _, kv := range s.Policy.Effective {
			if kv.Key == key {
				return kv.Source
			}
		}
		return ""
	}

	s := runStart("--policy", pf)
	if u2 := s.Policy.UserDefaults; u2 == nil || u2.Path != u.file || u2.SHA256 != sha(ud) {
		t.Errorf("run_start user_defaults %+v, want %s, sha256 %s", u2, u.file, sha(ud))
	}
	if s.Policy.File == nil || s.Policy.File.Path != pf || s.Policy.MaxCalls != 4 {
		t.Errorf("run_start file %+v, max_calls %d; want %s and 4", s.Policy.File, s.Policy.MaxCalls, pf)
	}
	if got := sourceOf(s, "confine"); got != "user defaults "+u.file+":1:1" {
		t.Errorf("run_start: confine from %q", got)
	}
	if got := sourceOf(s, "max_calls"); got != pf+":1:1" {
		t.Errorf("run_start: max_calls from %q", got)
	}

	// Every key it sets overridden, it still took part.
	s = runStart("--confine", "off", "--max-calls", "1")
	if s.Policy.UserDefaults == nil || s.Policy.File != nil || sourceOf(s, "confine") != "flag --confine" {
		t.Errorf("overridden: user_defaults %+v, file %+v, confine from %s", s.Policy.UserDefaults, s.Policy.File, sourceOf(s, "confine"))
	}

	s = runStart("--no-user-defaults", "--confine", "off")
	if s.Policy.UserDefaults != nil || sourceOf(s, "max_calls") != "default" {
		t.Errorf("skipped: user_defaults %+v, max_calls from %s", s.Policy.UserDefaults, sourceOf(s, "max_calls"))
	}
	if b, _ := os.ReadFile(rec); bytes.Contains(b, []byte("user_defaults")) {
		t.Errorf("skipped, the record names a user defaults file: %s", b)
	}
}

// TestUserDefaultsKeyOfAnotherCommand: a key the command does not take is
// handled as in a --policy file (File.For): here one only exec takes,
// which a session command refuses at its position, worded alike.
func TestUserDefaultsKeyOfAnotherCommand(t *testing.T) {
	var widgets int
	defer policy.AddForTest(policy.Setting{
		Key: "max_widgets", Kind: policy.Int, Commands: policy.Exec,
		Help:  "Widgets exec's command may make; a setting of this test only.",
		Field: func(*policy.Policy) any { return &widgets },
	})()
	u := newUserHome(t, "\nmax_widgets = 1\n")
	for _, kv := range u.env {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v) // in process: realMain reads this environment
	}
	pf := filepath.Join(t.TempDir(), "p.toml")
	must(t, os.WriteFile(pf, []byte("\nmax_widgets = 1\n"), 0o644))
	const why = ":2:1: max_widgets: not a key of policy show: only exec take it; remove it from a policy for policy show"
	if r := inProcess("policy", "show", "--no-user-defaults", "--policy", pf); r.code != exitUsage || !strings.Contains(r.stderr, pf+why) {
		t.Errorf("--policy: exit %d, %q; want %q", r.code, r.stderr, pf+why)
	}
	if r := inProcess("policy", "show"); r.code != exitUsage || !strings.Contains(r.stderr, "user defaults "+u.file+why) {
		t.Errorf("user defaults: exit %d, %q; want %q", r.code, r.stderr, "user defaults "+u.file+why)
	}
}

// TestUserDefaultsProtected: in a session whose workspace holds the path
// of the user defaults file (a workspace that is HOME), neither a write
// tool nor a run call's program can create it, whether or not the
// session reads it, so a model cannot write the policy of a later session
// elsewhere; another file beside it is written.
func TestUserDefaultsProtected(t *testing.T) {
	testenv.Require(t, execution(), "confined execution", testenv.ShapeNoLandlock, testenv.ShapeNoUserns)
	home, _ := sampleWorkspace(t)
	must(t, os.MkdirAll(filepath.Join(home, ".config"), 0o755))
	file := filepath.Join(home, ".config", "b10x-harness", "policy.toml")
	env := []string{"HOME=" + home, "XDG_CONFIG_HOME=", session.NoUserDefaultsEnv + "="}
	base := []string{"call", "--workspace", home, "--yes", "--allow-program", "sh"}
	for _, skip := range [][]string{nil, {"--no-user-defaults"}} {
		write := append(append(append([]string{}, base...), skip...), "file_write", `{"path":".config/b10x-harness/policy.toml","content":"approve = \"all\"\n"}`)
		if r := harnessEnv(t, "", env, write...); r.code != exitRefused || !strings.Contains(r.stdout, "is protected (.config/b10x-harness/policy.toml)") {
			t.Errorf("file_write %v: exit %d\nstdout %s\nstderr %s", skip, r.code, r.stdout, r.stderr)
		}
		run := append(append(append([]string{}, base...), skip...), "run", `{"argv":["sh","-c","mkdir -p .config/b10x-harness && echo 'approve = \"all\"' > .config/b10x-harness/policy.toml"]}`)
		if r := harnessEnv(t, "", env, run...); r.code != exitFailed || !strings.Contains(r.stdout, "protected_path") {
			t.Errorf("run %v: exit %d\nstdout %s\nstderr %s", skip, r.code, r.stdout, r.stderr)
		}
		if _, err := os.Lstat(file); err == nil {
			t.Fatalf("%v: the user defaults file was created in the workspace", skip)
		}
	}
	other := append(append([]string{}, base...), "file_write", `{"path":".config/other.toml","content":"x\n"}`)
	if r := harnessEnv(t, "", env, other...); r.code != 0 {
		t.Errorf("file_write beside it: exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
	}
}
