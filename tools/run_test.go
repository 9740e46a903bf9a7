package tools

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/b10x/harness/confine/spawn"
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
func specWorkspace(t *testing.T) (*Workspace, RunView) {
	t.Helper()
	ws, err := OpenWorkspace(t.TempDir())
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
		tool := RunTool(RunConfig{Programs: Programs{"true": "/bin/true"}, Runner: r, TmpSize: size, Net: true, View: view})
		p, err := tool.Prepare(ws, json.RawMessage(`{"argv":["true"]}`))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.Execute(context.Background()); err != nil {
			t.Fatal(err)
		}
		if len(r.specs) != 1 || r.specs[0].TmpSize != size || !r.specs[0].Net || r.specs[0].Path != "/bin/true" {
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
		tool := RunTool(RunConfig{Programs: Programs{"true": "/bin/true"}, Runner: r, Timeout: c.limit, View: view})
		p, err := tool.Prepare(ws, json.RawMessage(c.args))
		if err != nil {
			t.Fatalf("limit %s, %s: %v", c.limit, c.args, err)
		}
		if _, err := p.Execute(context.Background()); err != nil {
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
	for _, path := range []string{"", ":", ".", "./", "bin", "./bin", "sub/bin", "bin:.", "::bin:sub/bin", "../" + filepath.Base(cwd) + "/bin", ":/nonexistent:bin"} {
		if p, err := ResolvePrograms([]string{"planted"}, path); err == nil {
			t.Errorf("PATH %q: planted resolved to %v, want not found", path, p)
		}
	}
	for _, path := range []string{good, "bin:" + good, ".:" + good, ":" + good, good + ":bin"} {
		p, err := ResolvePrograms([]string{"tool"}, path)
		if err != nil || p["tool"] != filepath.Join(good, "tool") {
			t.Errorf("PATH %q: tool resolved to %v, %v; want %s", path, p, err, filepath.Join(good, "tool"))
		}
	}
	// Names with a slash are refused: neither a path nor a name.
	for _, d := range []string{"bin/planted", "./planted", "../planted"} {
		if _, err := ResolvePrograms([]string{d}, good); err == nil {
			t.Errorf("--allow-program %q was accepted", d)
		}
	}
}
