package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/alecthomas/kong"

	"github.com/b10x/harness/internal/testenv"
	"github.com/b10x/harness/session"
)

// TestPolicyFileCall is the example: a call with the shipped CI
// policy from the repository's root.
func TestPolicyFileCall(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	// The file declares go, make and sh for run; a guest has neither the
	// repository nor a Go toolchain.
	_, errGo := exec.LookPath("go")
	_, errMake := exec.LookPath("make")
	_, errReadme := os.Stat(filepath.Join(root, "README.md"))
	testenv.Require(t, errGo == nil && errMake == nil && errReadme == nil, "the repository and the programs examples/policies/ci.toml declares (go, make)", testenv.InGuest()...)
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

// TestPolicyKeysAreFlags: every key of a policy file is a flag of some
// command, and every flag of a command that builds a policy is a key (the
// file holds every policy flag), so the file and the command line cannot
// drift apart.
func TestPolicyKeysAreFlags(t *testing.T) {
	var c cli
	k, err := kong.New(&c, kong.Vars{"version": "test", "tmp_size_default": tmpSizeDefault})
	if err != nil {
		t.Fatal(err)
	}
	flags := map[string][]string{}
	var walk func(n *kong.Node)
	walk = func(n *kong.Node) {
		for _, f := range n.Flags {
			flags[flagKey(f.Name)] = append(flags[flagKey(f.Name)], n.Path())
		}
		for _, ch := range n.Children {
			walk(ch)
		}
	}
	walk(k.Model.Node)
	keys := session.FileKeys()
	for _, key := range keys {
		if len(flags[key]) == 0 {
			t.Errorf("policy key %s is no command's flag", key)
		}
	}
	// Flags that are not policy: what a command does, prints or reads.
	notPolicy := []string{"help", "version", "policy", "yes", "json", "quiet", "report", "provider", "model", "base_url",
		"max_tokens", "request_timeout", "tool", "args", "file", "task", "command", "summary"}
	for _, cmd := range []string{"call", "tools", "run", "exec", "policy show"} {
		node := findNode(k.Model.Node, cmd)
		if node == nil {
			t.Fatalf("no command %s", cmd)
		}
		for _, f := range node.Flags {
			key := flagKey(f.Name)
			if !slices.Contains(keys, key) && !slices.Contains(notPolicy, key) {
				t.Errorf("%s --%s has no policy key", cmd, f.Name)
			}
		}
		if p := reflect.TypeFor[policyFlags](); p.Kind() != reflect.Struct {
			t.Fatal("policyFlags is not a struct")
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
