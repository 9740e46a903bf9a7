package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/alecthomas/kong"

	"github.com/b10x/harness/internal/testenv"
	"github.com/b10x/harness/policy"
	"github.com/b10x/harness/session"
)

// TestPolicyFileCall is the example: a call with the shipped CI
// policy from the repository's root.
func TestPolicyFileCall(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	// A guest has not the repository.
	_, errReadme := os.Stat(filepath.Join(root, "README.md"))
	testenv.Require(t, errReadme == nil, "the repository", testenv.InGuest()...)
	cmd := harnessCommand("call", "--policy", "examples/policies/ci.toml", "file_read", `{"path":"README.md"}`)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "B10X_TEST_MAIN=1")
	r := runHarnessCmd(t, cmd, "")
	if r.code != 0 || !strings.Contains(r.stdout, `"status":"executed"`) || !strings.Contains(r.stdout, "b10x-harness is a Linux-native") {
		t.Fatalf("call --policy ci.toml: exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
	}
}

// TestPolicyFileRefused: a typo'd key, a wrong type and a bad value are
// refused before anything starts, with FILE:LINE:COL and the key; nothing
// is written (no record, no output).
func TestPolicyFileRefused(t *testing.T) {
	dir := t.TempDir()
	rec := filepath.Join(dir, "rec.jsonl")
	for _, c := range []struct{ content, want string }{
		{"record = \"" + rec + "\"\nconfine = \"auto\"\nalow_program = [\"sh\"]\n", ":3:1: alow_program: unknown key (did you mean allow_program?)"},
		{"record = \"" + rec + "\"\nmax_calls = \"many\"\n", ":2:13: max_calls: want an integer"},
		{"record = \"" + rec + "\"\n\n  approve = \"sometimes\"\n", ":3:3: approve: \"sometimes\": want auto, prompt, deny, all"},
	} {
		pf := filepath.Join(dir, "p.toml")
		if err := os.WriteFile(pf, []byte(c.content), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, args := range [][]string{
			{"call", "--policy", pf, "--workspace", dir, "file_read", `{"path":"p.toml"}`},
			{"policy", "check", pf},
			{"exec", "--policy=" + pf, "--workspace", dir, "--", "true"},
		} {
			r := harness(t, "", args...)
			if r.code != usageStatus(args) || r.stdout != "" || !strings.Contains(r.stderr, pf+c.want) {
				t.Errorf("%v with %q: exit %d, stdout %q, stderr %q; want exit %d and %q", args[:2], c.content, r.code, r.stdout, r.stderr, usageStatus(args), pf+c.want)
			}
		}
		if _, err := os.Stat(rec); err == nil {
			t.Errorf("a refused policy file still opened its record")
		}
	}
}

// TestPolicyPrecedence: a flag overrides the file's key, key by key (a
// list whole); policy show says where each value came from; run_start
// carries the effective policy and the file's SHA-256.
func TestPolicyPrecedence(t *testing.T) {
	dir := t.TempDir()
	rec := filepath.Join(dir, "rec.jsonl")
	pf := filepath.Join(dir, "p.toml")
	content := "confine = \"off\"\nmax_calls = 9\nwrite_scope = [\"a/**=denied\", \"b/**=denied\"]\nrecord = \"" + rec + "\"\n"
	if err := os.WriteFile(pf, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	r := harness(t, "", "policy", "show", "--json", "--policy", pf, "--workspace", dir, "--max-calls", "3", "--write-scope", "c/**=denied")
	if r.code != 0 {
		t.Fatalf("policy show: exit %d: %s", r.code, r.stderr)
	}
	var shown struct {
		Policy []session.KeyValue `json:"policy"`
		File   session.FileRef    `json:"file"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &shown); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(content))
	if shown.File.SHA256 != hex.EncodeToString(sum[:]) {
		t.Errorf("file %+v, want sha256 %x", shown.File, sum)
	}
	got := map[string]session.KeyValue{}
	for _, kv := range shown.Policy {
		got[kv.Key] = kv
	}
	for key, want := range map[string]struct {
		value  string
		source string
	}{
		"confine":     {`"off"`, pf + ":1:1"},
		"max_calls":   {`3`, "flag --max-calls"},
		"write_scope": {`["c/**=denied"]`, "flag --write-scope"},
		"workspace":   {`"` + dir + `"`, "flag --workspace"},
		"net":         {`"none"`, "default"},
	} {
		v, _ := json.Marshal(got[key].Value)
		if string(v) != want.value || got[key].Source != want.source {
			t.Errorf("%s = %s (%s), want %s (%s)", key, v, got[key].Source, want.value, want.source)
		}
	}

	r = harness(t, "", "call", "--policy", pf, "--workspace", dir, "--max-calls", "3", "file_read", `{"path":"p.toml"}`)
	if r.code != 0 {
		t.Fatalf("call: exit %d: %s", r.code, r.stderr)
	}
	b, err := os.ReadFile(rec)
	if err != nil {
		t.Fatal(err)
	}
	first, _, _ := bytes.Cut(b, []byte("\n"))
	var start struct {
		Confinement struct {
			Mode string `json:"mode"`
		} `json:"confinement"`
		Policy struct {
			MaxCalls  int                `json:"max_calls"`
			File      session.FileRef    `json:"file"`
			Effective []session.KeyValue `json:"effective"`
		} `json:"policy"`
	}
	if err := json.Unmarshal(first, &start); err != nil {
		t.Fatal(err)
	}
	if start.Confinement.Mode != "off" || start.Policy.MaxCalls != 3 || start.Policy.File.SHA256 != hex.EncodeToString(sum[:]) || len(start.Policy.Effective) < 20 {
		t.Errorf("run_start: %s", first)
	}
}

// TestPolicyKeysAreFlags: every setting of the table is a flag of each
// command that takes it and of no other, and every other flag of a command
// that builds a policy is one of the command's own (what it does, prints
// or reads), so the file and the command line cannot drift apart.
func TestPolicyKeysAreFlags(t *testing.T) {
	c := reflect.ValueOf(&cli{})
	bindFlags(c)
	k, err := kong.New(c.Interface(), kong.Vars{"version": "test"})
	if err != nil {
		t.Fatal(err)
	}
	// Flags that are not policy: what a command does, prints or reads
	// (mcp's, how it serves, are not listed).
	notPolicy := []string{"help", "version", "policy", "no_user_defaults", "yes", "json", "quiet", "report", "provider", "model", "base_url",
		"max_tokens", "request_timeout"}
	for _, cmd := range []policy.Command{policy.Call, policy.Run, policy.Tools, policy.MCP, policy.Show, policy.Exec} {
		node := findNode(k.Model.Node, cmd.String())
		if node == nil {
			t.Fatalf("no command %s", cmd)
		}
		flags := map[string]bool{}
		for _, f := range node.Flags {
			flags[flagKey(f.Name)] = true
			if s, ok := policy.Lookup(flagKey(f.Name)); ok && s.Commands&cmd == 0 {
				t.Errorf("%s --%s: a setting %s does not take", cmd, f.Name, cmd)
			} else if !ok && cmd != policy.MCP && !slices.Contains(notPolicy, flagKey(f.Name)) {
				t.Errorf("%s --%s has no policy key", cmd, f.Name)
			}
		}
		for _, s := range policy.Settings() {
			if s.Commands&cmd != 0 && !flags[s.Key] {
				t.Errorf("%s takes %s, and has no --%s", cmd, s.Key, s.Flag())
			}
		}
	}
}

func findNode(n *kong.Node, path string) *kong.Node {
	if n.Path() == path {
		return n
	}
	for _, ch := range n.Children {
		if f := findNode(ch, path); f != nil {
			return f
		}
	}
	return nil
}

// inProcess runs the CLI in this process, for commands that start
// nothing (help, policy show, check and schema).
func inProcess(args ...string) result {
	var out, errs bytes.Buffer
	code := realMain(args, env{stdin: strings.NewReader(""), stdout: &out, stderr: &errs})
	return result{code: code, stdout: out.String(), stderr: errs.String()}
}

// TestAddedSetting: a setting added to the table, and nothing else, is a
// flag of the commands its row names (with its help and default), a key
// of the policy file (checked by its row, at its position), a property
// of the schema, and a line of policy show with each of its sources.
func TestAddedSetting(t *testing.T) {
	var widgets int // the field the setting fills: a test's, not Policy's
	defer policy.AddForTest(policy.Setting{
		Key: "max_widgets", Kind: policy.Int, Default: "7", Commands: policy.Session | policy.Exec,
		Help:  "Widgets each call may make (0: none); a setting of this test only.",
		Check: func(v any) error { return map[bool]error{true: errors.New("must not be negative")}[v.(int64) < 0] },
		Field: func(*policy.Policy) any { return &widgets },
	})()
	dir := t.TempDir()
	file := func(content string) string {
		f := filepath.Join(dir, "p.toml")
		if err := os.WriteFile(f, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return f
	}
	check := func(what string, r result, code int, out, errs string) {
		t.Helper()
		if r.code != code || !strings.Contains(r.stdout, out) || !strings.Contains(r.stderr, errs) {
			t.Errorf("%s: exit %d\nstdout %s\nstderr %s\nwant exit %d, %q and %q", what, r.code, r.stdout, r.stderr, code, out, errs)
		}
	}
	// Flags, in the commands the row names.
	for _, cmd := range [][]string{{"call"}, {"tools"}, {"run"}, {"mcp"}, {"policy", "show"}, {"exec"}} {
		check(strings.Join(cmd, " ")+" --help", inProcess(append(cmd, "--help")...), 0, "--max-widgets=7", "")
	}
	if r := inProcess("doctor", "--help"); strings.Contains(r.stdout, "widgets") {
		t.Errorf("doctor takes no settings, and lists --max-widgets: %s", r.stdout)
	}
	// policy show, from the default, a flag and a file; the row's check
	// for each.
	check("default", inProcess("policy", "show"), 0, "max_widgets = 7", "")
	check("flag", inProcess("policy", "show", "--max-widgets", "3"), 0, "# flag --max-widgets", "")
	check("flag's value", inProcess("policy", "show", "--json", "--max-widgets", "3"), 0, `"key": "max_widgets",
      "value": 3,
      "source": "flag --max-widgets"`, "")
	f := file("\nmax_widgets = 4\n")
	check("check", inProcess("policy", "check", f), 0, "ok, 1 key(s)", "")
	check("file", inProcess("policy", "show", "--json", "--policy", f), 0, `"key": "max_widgets",
      "value": 4,
      "source": "`+f+`:2:1"`, "")
	check("a flag over the file", inProcess("policy", "show", "--policy", f, "--max-widgets", "5"), 0, "# flag --max-widgets", "")
	check("bad flag", inProcess("policy", "show", "--max-widgets=-1"), exitUsage, "", "--max-widgets -1: must not be negative")
	check("bad value", inProcess("policy", "check", file("max_widgets = -2\n")), exitUsage, "", f+":1:1: max_widgets: must not be negative")
	check("bad type", inProcess("policy", "check", file("max_widgets = \"many\"\n")), exitUsage, "", f+":1:15: max_widgets: want an integer, not a TOML string")
	check("typo", inProcess("policy", "check", file("max_widget = 1\n")), exitUsage, "", "max_widget: unknown key (did you mean max_widgets?)")
	// The schema.
	var schema struct {
		Properties map[string]struct {
			Type        string `json:"type"`
			Description string `json:"description"`
			Minimum     *int   `json:"minimum"`
		} `json:"properties"`
	}
	r := inProcess("policy", "schema")
	if err := json.Unmarshal([]byte(r.stdout), &schema); err != nil {
		t.Fatal(err)
	}
	if p := schema.Properties["max_widgets"]; p.Type != "integer" || !strings.HasPrefix(p.Description, "Widgets each call") || p.Minimum == nil || *p.Minimum != 0 {
		t.Errorf("schema: %+v", p)
	}
}

// TestExamplePolicies: each command an example policy's comment gives
// runs as written, from a copy of the repository's examples (its make
// test run as true), or is refused only because this host cannot enforce
// a limit the file gives, naming the file's line.
func TestExamplePolicies(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	_, errReadme := os.Stat(filepath.Join(root, "README.md"))
	testenv.Require(t, errReadme == nil, "the repository", testenv.InGuest()...)
	files, _ := filepath.Glob(filepath.Join(root, "examples", "policies", "*.toml"))
	if len(files) < 2 {
		t.Fatalf("examples/policies holds %d files, want a CI step and an evaluation", len(files))
	}
	// A copy of what the lines name (examples/, README.md), and
	// b10x-harness on PATH: this test binary as the CLI.
	dir := t.TempDir()
	if out, err := exec.Command("cp", "-r", filepath.Join(root, "examples"), filepath.Join(root, "README.md"), dir).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v: %s", err, out)
	}
	bin := filepath.Join(dir, "bin")
	must(t, os.Mkdir(bin, 0o755))
	must(t, os.WriteFile(filepath.Join(bin, "b10x-harness"), []byte("#!/bin/sh\nB10X_TEST_MAIN=1 exec "+os.Args[0]+" \"$@\"\n"), 0o755))
	for _, f := range files {
		name := "examples/policies/" + filepath.Base(f)
		lines := commentCommands(t, f)
		if len(lines) == 0 {
			t.Errorf("%s: no command in its comment", name)
		}
		ran := 0
		for _, line := range lines {
			if !strings.HasPrefix(line, "b10x-harness ") {
				continue
			}
			ran++
			sh := strings.ReplaceAll(strings.ReplaceAll(line, "/tmp/eval-ws", filepath.Join(dir, "eval-ws")), "-- make test", "-- true")
			script := "set -e\n" + strings.Join(setupOf(lines, dir), "\n") + "\n" + sh
			cmd := exec.Command("sh", "-c", script)
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"))
			r := runHarnessCmd(t, cmd, "")
			switch {
			case r.code == 0:
			case strings.Contains(r.stderr, name+":") && strings.Contains(r.stderr, "was given but cannot be enforced"):
				t.Logf("%s: %s: this host cannot enforce a limit the file gives: %s", name, line, r.stderr)
			default:
				t.Errorf("%s: %s: exit %d\nstdout %.2000s\nstderr %s", name, line, r.code, r.stdout, r.stderr)
			}
		}
		if ran == 0 {
			t.Errorf("%s: no b10x-harness command in its comment", name)
		}
	}
}

// commentCommands are the shell commands of a policy file's comment: its
// lines that start with a command (or follow "with: "), continuation lines
// joined.
func commentCommands(t *testing.T, file string) []string {
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	cont := false
	for _, l := range strings.Split(string(b), "\n") {
		c, ok := strings.CutPrefix(l, "#")
		if !ok {
			cont = false
			continue
		}
		c = strings.TrimSpace(c)
		if _, after, found := strings.Cut(c, "with: "); found && !cont {
			c = after
		}
		if cont {
			out[len(out)-1] += " " + strings.TrimSuffix(c, "\\")
		} else if strings.HasPrefix(c, "b10x-harness ") || strings.HasPrefix(c, "cp ") {
			out = append(out, strings.TrimSuffix(c, "\\"))
		} else {
			continue
		}
		cont = strings.HasSuffix(c, "\\")
	}
	for i := range out {
		out[i] = strings.Join(strings.Fields(out[i]), " ")
	}
	return out
}

// setupOf are the lines of a comment that prepare for its commands (a
// copy of the example workspace), made to write beneath dir.
func setupOf(lines []string, dir string) []string {
	var out []string
	for _, l := range lines {
		if strings.HasPrefix(l, "cp ") {
			out = append(out, strings.ReplaceAll(l, "/tmp/eval-ws", filepath.Join(dir, "eval-ws")))
		}
	}
	return out
}
