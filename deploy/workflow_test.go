package deploy

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/b10x/harness/internal/testenv"
)

// The parser of GitHub's own workflow schema (the language services'
// @actions/workflow-parser), pinned. scripts/check-workflow.mjs runs it.
const (
	workflowParser        = "@actions/workflow-parser"
	workflowParserVersion = "0.3.61"
)

// npmCache is where the project installs npm packages, one directory per
// PKG@VERSION: $B10X_INTEROP when make interoptest has set it, else
// ${XDG_CACHE_HOME:-$HOME/.cache}/b10x-harness/npm, as scripts/interop.sh
// installs.
func npmCache(t *testing.T) string {
	if c := os.Getenv("B10X_INTEROP"); c != "" {
		return c
	}
	base := os.Getenv("XDG_CACHE_HOME")
	if base == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			t.Fatalf("no cache directory for npm packages: %v", err)
		}
		base = filepath.Join(home, ".cache")
	}
	return filepath.Join(base, "b10x-harness", "npm")
}

// workflowParserPrefix returns the npm prefix the pinned parser is
// installed under, installing it there first when it is not (once; the
// next runs find it). It needs node and npm: on the host a missing one
// fails the test, as a missing Chromium fails the report tests; only a VM
// guest, which has neither, skips it.
func workflowParserPrefix(t *testing.T) string {
	t.Helper()
	_, errNode := exec.LookPath("node")
	_, errNpm := exec.LookPath("npm")
	testenv.Require(t, errNode == nil && errNpm == nil, "node and npm (the workflow check runs GitHub's parser, installed from npm)", testenv.InGuest()...)
	prefix := filepath.Join(npmCache(t), workflowParser+"@"+workflowParserVersion)
	pkg := filepath.Join(prefix, "node_modules", workflowParser, "package.json")
	installed := func() string {
		b, err := os.ReadFile(pkg)
		if err != nil {
			return ""
		}
		var j struct{ Version string }
		if json.Unmarshal(b, &j) != nil {
			return ""
		}
		return j.Version
	}
	if installed() != workflowParserVersion {
		if err := os.MkdirAll(prefix, 0o755); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		start := time.Now()
		out, err := exec.CommandContext(ctx, "npm", "install", "--prefix", prefix, "--no-audit", "--no-fund", "--loglevel=error",
			workflowParser+"@"+workflowParserVersion).CombinedOutput()
		if err != nil {
			t.Fatalf("npm install %s@%s into %s: %v\n%s", workflowParser, workflowParserVersion, prefix, err, out)
		}
		t.Logf("installed %s@%s into %s (%v)", workflowParser, workflowParserVersion, prefix, time.Since(start).Round(time.Millisecond))
	}
	if v := installed(); v != workflowParserVersion {
		t.Fatalf("%s: version %q installed under %s, want %s", workflowParser, v, prefix, workflowParserVersion)
	}
	return prefix
}

// checkWorkflows runs scripts/check-workflow.mjs on files and returns its
// exit status and the errors it printed, by file.
func checkWorkflows(t *testing.T, prefix string, files ...string) (int, map[string][]string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "node", append([]string{"../scripts/check-workflow.mjs", prefix}, files...)...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("node check-workflow.mjs: %v", err)
	}
	if code != 0 && code != 1 {
		t.Fatalf("check-workflow.mjs exited %d:\n%s%s", code, stdout.String(), stderr.String())
	}
	errs := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
		for _, f := range files {
			if strings.HasPrefix(line, f+" ") {
				errs[f] = append(errs[f], line)
			}
		}
	}
	return code, errs
}

// TestWorkflowSchema checks arc-workflow.yaml against GitHub's own
// workflow schema, then copies of it with one mistake each, which the
// schema must refuse, so that the check is seen to be able to fail.
func TestWorkflowSchema(t *testing.T) {
	prefix := workflowParserPrefix(t)
	const shipped = "k8s/arc-workflow.yaml"
	b := readFile(t, shipped)
	start := time.Now()
	if code, errs := checkWorkflows(t, prefix, shipped); code != 0 || len(errs) != 0 {
		t.Fatalf("GitHub's schema refuses %s (exit %d): %v", shipped, code, errs)
	}
	t.Logf("%s: no errors (%v)", shipped, time.Since(start).Round(time.Millisecond))

	// The shipped shell, with the expression it held before put back.
	w, err := parseManifest(b)
	if err != nil {
		t.Fatal(err)
	}
	shell := "shell: " + str(w[0], "jobs", "test", "defaults", "run", "shell")
	withWorkspace := strings.Replace(shell, " exec ", " exec --workspace ${{ github.workspace }} ", 1)
	dir := t.TempDir()
	write := func(name, old, new string) string {
		t.Helper()
		if !bytes.Contains(b, []byte(old)) {
			t.Fatalf("%s has no %q", shipped, old)
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, bytes.Replace(b, []byte(old), []byte(new), 1), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	refused := map[string]struct{ file, want string }{
		// The expression the shell held before, in the workflow's
		// defaults.run, where GitHub allows no context at all.
		"expression in the workflow's defaults.run": {write("workflow-defaults.yaml", "\njobs:\n", "\ndefaults:\n  run:\n    "+withWorkspace+"\njobs:\n"), "Unrecognized named-value: 'github'"},
		"expression in a step's shell":              {write("step-shell.yaml", "        run: make build\n", "        run: make build\n        "+withWorkspace+"\n"), "Unrecognized named-value: 'github'"},
		// runner.temp, the directory --allow-read names, is not among the
		// contexts a job's defaults.run may use.
		"runner.temp in the job's defaults.run": {write("runner-temp.yaml", shell, strings.Replace(shell, " exec ", " exec --allow-read ${{ runner.temp }} ", 1)), "Unrecognized named-value: 'runner'"},
		"no runs-on":                            {write("no-runs-on.yaml", "    runs-on: b10x-runners\n", ""), "Required property is missing: runs-on"},
	}
	var files []string
	for _, c := range refused {
		files = append(files, c.file)
	}
	code, errs := checkWorkflows(t, prefix, files...)
	if code != 1 {
		t.Errorf("check-workflow.mjs exited %d on the broken copies, want 1", code)
	}
	for name, c := range refused {
		got := strings.Join(errs[c.file], "\n")
		if !strings.Contains(got, c.want) {
			t.Errorf("%s: GitHub's schema did not say %q (it said %q)", name, c.want, got)
		}
	}
	// What the shell held before, in the job's defaults.run, is accepted:
	// that keyword takes the github context. The comment in
	// arc-workflow.yaml says so; the shell holds none anyway.
	if code, errs := checkWorkflows(t, prefix, write("job-defaults.yaml", shell, withWorkspace)); code != 0 {
		t.Errorf("the expression in the job's defaults.run is refused (exit %d, %v): arc-workflow.yaml's comment says a job's defaults.run takes the github context", code, errs)
	}
	t.Logf("all cases: %v", time.Since(start).Round(time.Millisecond))
}
