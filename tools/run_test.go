package tools

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/b10x/harness/confine/spawn"
	"github.com/b10x/harness/workspace"
)

// specRunner records the Spec of each call and runs nothing.
type specRunner struct{ specs []spawn.Spec }

func (r *specRunner) Run(ctx context.Context, s spawn.Spec, io spawn.Stdio) (spawn.Result, error) {
	r.specs = append(r.specs, s)
	return spawn.Result{}, nil
}

// specWorkspace opens a fresh workspace and its view as PinRunView would
// make it, without holding a descriptor for the rest of the test process
// (specRunner checks nothing).
func specWorkspace(t *testing.T) (*workspace.Workspace, RunView) {
	t.Helper()
	ws, err := workspace.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	var st syscall.Stat_t
	if err := syscall.Stat(ws.Dir(), &st); err != nil {
		t.Fatal(err)
	}
	return ws, RunView{Workspace: spawn.Pinned{Path: ws.Dir(), Dev: st.Dev, Ino: st.Ino, Dir: true}}
}

// TestRunConfigReachesSpec: the run tool's configuration, TmpSize included,
// is what the runner gets.
func TestRunConfigReachesSpec(t *testing.T) {
	ws, view := specWorkspace(t)
	for _, size := range []int64{0, 3 << 20} {
		r := &specRunner{}
		tool := RunTool(RunConfig{Programs: Programs{"true": pinTrue(t)}, Runner: r, TmpSize: size, Net: true, View: view})
		p, err := tool.Prepare(ws, json.RawMessage(`{"argv":["true"]}`))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.Execute(context.Background(), Report{}); err != nil {
			t.Fatal(err)
		}
		if len(r.specs) != 1 || r.specs[0].TmpSize != size || !r.specs[0].Net || r.specs[0].Program != pinTrue(t) {
			t.Fatalf("TmpSize %d: the runner got %+v", size, r.specs)
		}
	}
}

// TestModelTimeoutOnlyLowers: the model's timeout_s may lower the
// harness's limit, never raise it; the runner gets the smaller of the two.
func TestModelTimeoutOnlyLowers(t *testing.T) {
	ws, view := specWorkspace(t)
	cases := []struct {
		limit time.Duration // RunConfig.Timeout, the harness's --timeout
		args  string
		want  time.Duration
	}{
		{30 * time.Second, `{"argv":["true"],"timeout_s":3600}`, 30 * time.Second},
		{30 * time.Second, `{"argv":["true"],"timeout_s":31}`, 30 * time.Second},
		{30 * time.Second, `{"argv":["true"],"timeout_s":30}`, 30 * time.Second},
		{30 * time.Second, `{"argv":["true"],"timeout_s":5}`, 5 * time.Second},
		{30 * time.Second, `{"argv":["true"]}`, 30 * time.Second},
		{0, `{"argv":["true"],"timeout_s":100000}`, 2 * time.Minute},
		{0, `{"argv":["true"],"timeout_s":60}`, time.Minute},
	}
	for _, c := range cases {
		r := &specRunner{}
		tool := RunTool(RunConfig{Programs: Programs{"true": pinTrue(t)}, Runner: r, Timeout: c.limit, View: view})
		p, err := tool.Prepare(ws, json.RawMessage(c.args))
		if err != nil {
			t.Fatalf("limit %s, %s: %v", c.limit, c.args, err)
		}
		if _, err := p.Execute(context.Background(), Report{}); err != nil {
			t.Fatal(err)
		}
		if len(r.specs) != 1 || r.specs[0].Timeout != c.want {
			t.Errorf("limit %s, %s: the runner got timeout %v, want %s", c.limit, c.args, r.specs[0].Timeout, c.want)
		}
	}
}

// TestResolveProgramsOddPaths: --allow-program names resolve only through
// absolute PATH entries. An empty entry, ".", or a relative directory
// (which name the current directory, where a workspace's file may lie)
// never resolves a name, even when the only match is there; an absolute
// entry after them still does.
func TestResolveProgramsOddPaths(t *testing.T) {
	cwd := t.TempDir()
	t.Chdir(cwd)
	good := t.TempDir()
	for _, dir := range []string{cwd, filepath.Join(cwd, "bin"), filepath.Join(cwd, "sub", "bin")} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "planted"), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(good, "tool"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	// The planted files are in the view: only the PATH rule refuses them.
	plantedView := RunView{Read: []spawn.Pinned{{Path: cwd}}}
	for _, path := range []string{"", ":", ".", "./", "bin", "./bin", "sub/bin", "bin:.", "::bin:sub/bin", "../" + filepath.Base(cwd) + "/bin", ":/nonexistent:bin"} {
		if p, err := ResolvePrograms([]string{"planted"}, path, plantedView); err == nil {
			t.Errorf("PATH %q: planted resolved to %v, want not found", path, p)
		}
	}
	goodView := RunView{Read: []spawn.Pinned{{Path: good}}} // a script outside the view is refused
	for _, path := range []string{good, "bin:" + good, ".:" + good, ":" + good, good + ":bin"} {
		p, err := ResolvePrograms([]string{"tool"}, path, goodView)
		if err != nil || p["tool"].Path != filepath.Join(good, "tool") {
			t.Errorf("PATH %q: tool resolved to %v, %v; want %s", path, p, err, filepath.Join(good, "tool"))
		}
	}
	// Names with a slash are refused: neither a path nor a name.
	for _, d := range []string{"bin/planted", "./planted", "../planted"} {
		if _, err := ResolvePrograms([]string{d}, good, RunView{}); err == nil {
			t.Errorf("--allow-program %q was accepted", d)
		}
	}
}

// pinTrue is /bin/true, pinned.
func pinTrue(t testing.TB) spawn.Pinned {
	t.Helper()
	p, err := spawn.PinProgram("/bin/true")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestProgramReplacedRefused: a program pinned at start and replaced since
// (a file_write renames a new file over it; a run child may make it a
// link) is refused when a call is prepared, with program_not_allowed,
// before any sandbox is built; the runner never sees the call.
func TestProgramReplacedRefused(t *testing.T) {
	ws, view := specWorkspace(t)
	tool := filepath.Join(ws.Dir(), "tool")
	must(t, os.WriteFile(tool, []byte("#!/bin/sh\necho pinned\n"), 0o755))
	progs, err := ResolvePrograms([]string{tool}, "", view)
	if err != nil {
		t.Fatal(err)
	}
	r := &specRunner{}
	run := RunTool(RunConfig{Programs: progs, Runner: r, View: view})
	if _, err := run.Prepare(ws, json.RawMessage(`{"argv":["`+tool+`"]}`)); err != nil {
		t.Fatalf("the pinned program: %v", err)
	}
	for _, swap := range []func(){
		func() { // replaced by rename, as file_write does
			must(t, os.WriteFile(tool+".new", []byte("#!/bin/sh\necho other\n"), 0o755))
			must(t, os.Rename(tool+".new", tool))
		},
		func() { // made a link to another program
			must(t, os.Symlink("/bin/sh", tool))
		},
	} {
		swap()
		_, err := run.Prepare(ws, json.RawMessage(`{"argv":["`+tool+`"]}`))
		var te *Error
		if !errors.As(err, &te) || te.Reason != ReasonProgramNotAllowed || !strings.Contains(te.Public, "no longer the file allowed at start") {
			t.Errorf("replaced program: %v, want program_not_allowed naming the replacement", err)
		}
		must(t, os.Remove(tool))
	}
	if len(r.specs) != 0 {
		t.Errorf("the runner got %d calls", len(r.specs))
	}
}

// TestResolveProgramsPlantedLink: a declared program reached through a
// symbolic link inside the workspace (where a run child of an earlier
// process may have planted it) is refused at start, naming the link; a
// program outside every writable area is pinned through its links.
func TestResolveProgramsPlantedLink(t *testing.T) {
	ws, view := specWorkspace(t)
	outside := t.TempDir()
	script := filepath.Join(outside, "script.sh")
	must(t, os.WriteFile(script, []byte("#!/bin/sh\n"), 0o755))
	must(t, os.Symlink(script, filepath.Join(ws.Dir(), "tool")))
	_, err := ResolvePrograms([]string{filepath.Join(ws.Dir(), "tool")}, "", view)
	if err == nil || !strings.Contains(err.Error(), "planted") {
		t.Errorf("a program through a link in the workspace: %v, want refused", err)
	}
	must(t, os.Symlink(script, filepath.Join(outside, "link")))
	view.Read = append(view.Read, spawn.Pinned{Path: outside}) // a script outside the view is refused
	p, err := ResolvePrograms([]string{filepath.Join(outside, "link")}, "", view)
	if canon, _ := filepath.EvalSymlinks(script); err != nil || p[filepath.Join(outside, "link")].Path != canon {
		t.Errorf("a program through a link outside: %v, %v; want pinned at %s", p, err, canon)
	}
}
