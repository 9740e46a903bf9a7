package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/b10x/harness/confine"
	"github.com/b10x/harness/internal/testenv"
)

// brokenResolverEnv names, in the harness test binary's environment, the
// files and directories that brokenResolver tries to read once the
// session's own domain holds (separated by ":").
const brokenResolverEnv = "B10X_TEST_BROKEN_RESOLVER"

// brokenResolver stands for a resolver bug: code of the harness that reads
// what it was asked without checking the path against the workspace. It
// prints one line per target: "broken-resolver: PATH<tab>ok CONTENT" or
// "broken-resolver: PATH<tab>ERROR".
func brokenResolver(workspace string, stderr io.Writer) {
	for _, p := range strings.Split(os.Getenv(brokenResolverEnv), ":") {
		var got string
		if fi, err := os.Stat(p); err == nil && fi.IsDir() {
			ents, err := os.ReadDir(p)
			if err != nil {
				got = err.Error()
			} else {
				var names []string
				for _, e := range ents {
					names = append(names, e.Name())
				}
				got = "ok " + strings.Join(names, ",")
			}
		} else if b, err := os.ReadFile(p); err != nil {
			got = err.Error()
		} else {
			got = "ok " + strings.TrimSpace(string(b))
		}
		fmt.Fprintf(stderr, "broken-resolver: %s\t%s\n", p, got)
	}
}

// brokenReads parses brokenResolver's lines.
func brokenReads(t *testing.T, stderr string) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, l := range strings.Split(stderr, "\n") {
		rest, ok := strings.CutPrefix(l, "broken-resolver: ")
		if !ok {
			continue
		}
		path, got, ok := strings.Cut(rest, "\t")
		if !ok {
			t.Fatalf("bad broken-resolver line %q", l)
		}
		m[path] = got
	}
	return m
}

// TestHarnessCannotReadBesideWorkspace: with its own domain in force, the
// harness cannot read a file beside the workspace, list the directory that
// holds it, nor read its own environment through /proc, even when its own
// code asks for it (a broken resolver, planted by the test binary). With
// --confine off the same code reads all of it: the attack is real. A hook
// the harness starts can run a system program but not read beside the
// workspace either.
func TestHarnessCannotReadBesideWorkspace(t *testing.T) {
	info, err := confine.ProbeLandlock()
	if err != nil {
		t.Fatal(err)
	}
	base := t.TempDir()
	ws := filepath.Join(base, "ws")
	must(t, os.Mkdir(ws, 0o755))
	must(t, os.WriteFile(filepath.Join(ws, "hello.txt"), []byte("hello\n"), 0o644))
	beside := filepath.Join(base, "beside.txt")
	must(t, os.WriteFile(beside, []byte("SECRET-BESIDE\n"), 0o644))
	environ := "/proc/self/environ"
	targets := []string{beside, base, environ}
	t.Setenv(brokenResolverEnv, strings.Join(targets, ":"))
	t.Setenv("B10X_TEST_SECRET_ENV", "SECRET-ENV")

	read := `{"path":"hello.txt"}`
	off := harness(t, "", "call", "--workspace", ws, "--confine", "off", "file_read", read)
	got := brokenReads(t, off.stderr)
	if !strings.Contains(got[beside], "SECRET-BESIDE") || !strings.Contains(got[base], "beside.txt") {
		t.Fatalf("--confine off: the planted reads did not read (the test proves nothing): %q\n%s", got, off.stderr)
	}

	testenv.Require(t, info.ABI > 0, "Landlock", testenv.ShapeNoLandlock)
	rec := filepath.Join(base, "rec.jsonl")
	r := harness(t, "", "call", "--workspace", ws, "--record", rec, "file_read", read)
	if r.code != 0 || !strings.Contains(r.stdout, "hello") {
		t.Fatalf("the call itself failed under the domain (exit %d):\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	got = brokenReads(t, r.stderr)
	for _, p := range targets {
		if !strings.Contains(got[p], "permission denied") {
			t.Errorf("under landlock-self, reading %s gave %q, want permission denied\n%s", p, got[p], r.stderr)
		}
	}
	if strings.Contains(r.stderr+r.stdout, "SECRET-") {
		t.Errorf("a secret reached the output:\n%s\n%s", r.stdout, r.stderr)
	}
	// The record says what the domain handles: reads included.
	b, err := os.ReadFile(rec)
	must(t, err)
	var start struct {
		Confinement struct {
			Self *confine.Applied `json:"self"`
		} `json:"confinement"`
	}
	must(t, json.Unmarshal([]byte(strings.SplitN(string(b), "\n", 2)[0]), &start))
	if start.Confinement.Self == nil || !strings.Contains(strings.Join(start.Confinement.Self.Handled, ","), "read_file") {
		t.Errorf("run_start's confinement.self = %+v, want read_file handled", start.Confinement.Self)
	}

	// A hook inherits the domain: it runs system programs, and cannot read
	// beside the workspace.
	hook := filepath.Join(base, "hook.sh")
	must(t, os.WriteFile(hook, []byte(fmt.Sprintf(`#!/bin/sh
cat >/dev/null
if cat %s >/dev/null 2>&1; then echo "the hook read beside the workspace" >&2; exit 2; fi
head -c 4 /bin/sh >/dev/null || { echo "the hook cannot read the system" >&2; exit 2; }
echo '{"decision":"allow","reason":"hook ran"}'
`, beside)), 0o755))
	rec2 := filepath.Join(base, "rec2.jsonl")
	r = harness(t, "", "call", "--workspace", ws, "--record", rec2, "--hook", hook, "file_read", read)
	if r.code != 0 || !strings.Contains(r.stdout, "hello") {
		t.Fatalf("with a hook (exit %d):\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if b, err := os.ReadFile(rec2); err != nil || !strings.Contains(string(b), "hook ran") {
		t.Errorf("the record does not show the hook's verdict (%v):\n%s", err, b)
	}
	got = brokenReads(t, r.stderr)
	if !strings.Contains(got[beside], "permission denied") {
		t.Errorf("with --hook, the harness read beside the workspace: %q", got[beside])
	}
}
