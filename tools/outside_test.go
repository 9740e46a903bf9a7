package tools

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/b10x/harness/confine/spawn"
	"github.com/b10x/harness/internal/testenv"
)

// TestProgramOutsideViewRefused: an allowed program outside the view is
// shown to run calls as its one file. Refused at start, naming
// --allow-read and the directory, when that one file cannot run: a script
// (a version manager's shim), an ELF program whose loader or RUNPATH lies
// outside the view. Allowed: the same script once its directory is an
// extra read path; a static program; a dynamic one with a system loader.
func TestProgramOutsideViewRefused(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	shims := filepath.Join(home, ".pyenv", "shims")
	must(t, os.MkdirAll(shims, 0o755))
	shim := filepath.Join(shims, "python")
	must(t, os.WriteFile(shim, []byte("#!/bin/sh\nexec \"$PYENV_ROOT/libexec/pyenv\" exec python \"$@\"\n"), 0o755))
	refused := func(name, prog string, view RunView, why, dir string) {
		t.Helper()
		_, err := ResolvePrograms([]string{prog}, "", view)
		if err == nil || !strings.Contains(err.Error(), why) || !strings.HasSuffix(err.Error(), "--allow-read "+dir) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v; want one line saying it %s, ending with --allow-read %s", name, err, why, dir)
		}
	}
	allowed := func(name, prog string, view RunView) {
		t.Helper()
		if p, err := ResolvePrograms([]string{prog}, "", view); err != nil || p[prog].Path == "" {
			t.Errorf("%s: %v, want it allowed", name, err)
		}
	}
	canonHome, err := filepath.EvalSymlinks(home)
	must(t, err)
	refused("a shim under $HOME", shim, RunView{}, "is a script (#!/bin/sh)", filepath.Join(canonHome, ".pyenv"))
	allowed("the shim with ~/.pyenv readable", shim, RunView{Read: []spawn.Pinned{{Path: filepath.Join(canonHome, ".pyenv")}}})
	allowed("the shim in the workspace", shim, RunView{Workspace: spawn.Pinned{Path: canonHome}})

	elsewhere := t.TempDir()
	script := filepath.Join(elsewhere, "build.sh")
	must(t, os.WriteFile(script, []byte("#!/bin/sh\nmake\n"), 0o755))
	canonElsewhere, err := filepath.EvalSymlinks(elsewhere)
	must(t, err)
	refused("a script outside $HOME", script, RunView{}, "is a script", canonElsewhere)

	// This test binary: static (CGO_ENABLED=0), it runs from its one file.
	self, err := os.Executable()
	must(t, err)
	static := filepath.Join(elsewhere, "static")
	copyFile(t, self, static)
	allowed("a static program outside the view", static, RunView{})

	// /bin/true, dynamic, loaded by the system's loader (the guests' is
	// busybox, static).
	trueBin, err := exec.LookPath("true")
	must(t, err)
	b, err := os.ReadFile(trueBin)
	must(t, err)
	interp := []byte("/lib64/ld-linux-x86-64.so.2")
	i := bytes.Index(b, interp)
	testenv.Require(t, i >= 0, "a true(1) loaded by glibc's x86-64 loader", testenv.InGuest()...)
	dyn := filepath.Join(elsewhere, "true")
	must(t, os.WriteFile(dyn, b, 0o755))
	allowed("a dynamic program with the system loader", dyn, RunView{})

	// The same with its loader renamed to one outside the view (a Nix
	// store's), same length, as patchelf would write it.
	copy(b[i:], "/nix/s/ld-linux-x86-64.so.2")
	foreign := filepath.Join(elsewhere, "foreign")
	must(t, os.WriteFile(foreign, b, 0o755))
	refused("a program loaded from outside the view", foreign, RunView{}, "is loaded by /nix/s/ld-linux-x86-64.so.2", canonElsewhere)

	// A program whose RUNPATH is $ORIGIN/../lib, as relocatable builds are.
	_, gccErr := exec.LookPath("gcc")
	testenv.Require(t, gccErr == nil, "gcc", testenv.InGuest()...)
	src := filepath.Join(elsewhere, "p.c")
	must(t, os.WriteFile(src, []byte("int main(void){return 0;}\n"), 0o644))
	bin := filepath.Join(elsewhere, "bin", "p")
	must(t, os.MkdirAll(filepath.Dir(bin), 0o755))
	must(t, os.MkdirAll(filepath.Join(elsewhere, "lib"), 0o755)) // a RUNPATH that does not exist is not needed
	if out, err := exec.Command("gcc", "-o", bin, src, "-Wl,--enable-new-dtags,-rpath,$ORIGIN/../lib").CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	refused("a program with RUNPATH $ORIGIN/../lib", bin, RunView{}, "looks for its libraries in "+filepath.Join(canonElsewhere, "lib"), filepath.Join(canonElsewhere, "bin"))
	allowed("the same with its tree readable", bin, RunView{Read: []spawn.Pinned{{Path: canonElsewhere}}})
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	must(t, err)
	must(t, os.WriteFile(to, b, 0o755))
}

// TestProgramRunpathMissingAllowed: a RUNPATH directory that does not
// exist holds no library the program needs; it is not a reason to refuse.
func TestProgramRunpathMissingAllowed(t *testing.T) {
	_, gccErr := exec.LookPath("gcc")
	testenv.Require(t, gccErr == nil, "gcc", testenv.InGuest()...)
	dir := t.TempDir()
	src := filepath.Join(dir, "p.c")
	must(t, os.WriteFile(src, []byte("int main(void){return 0;}\n"), 0o644))
	bin := filepath.Join(dir, "p")
	if out, err := exec.Command("gcc", "-o", bin, src, "-Wl,--enable-new-dtags,-rpath,$ORIGIN/../no-such-lib").CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	if _, err := ResolvePrograms([]string{bin}, "", RunView{}); err != nil {
		t.Errorf("%v, want allowed", err)
	}
}
