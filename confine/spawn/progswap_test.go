package spawn

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/b10x/harness/internal/testenv"
)

// The program swap of issue 27 (finding A): the allowed program lies in the
// workspace, where a run child may write, and the child replaces it (by a
// link to a file outside the view, by a link to another program, by a file
// of its own) between calls or while other calls start it. A later call
// must run the file pinned at start or nothing: never bind what the link
// reaches, never run what the child put there.

// swapFixture is a workspace holding a program tool, pinned, and an
// outside directory (not in the view: the child's /tmp is its own) holding
// a secret file and an executable script.
type swapFixture struct {
	ws, outside, tool string
	prog              Pinned
}

const (
	outsideSecret = "OUTSIDE-SECRET"
	outsideScript = "OUTSIDE-SCRIPT-RAN"
)

func newSwapFixture(t *testing.T, body []byte) swapFixture {
	t.Helper()
	f := swapFixture{ws: workspace(t), outside: workspace(t)}
	if err := os.WriteFile(filepath.Join(f.outside, "secret"), []byte(outsideSecret+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.outside, "script.sh"), []byte("#!/bin/sh\necho "+outsideScript+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	f.tool = filepath.Join(f.ws, "tool")
	if err := os.WriteFile(f.tool, body, 0o755); err != nil {
		t.Fatal(err)
	}
	own(t, f.tool)
	p, err := PinProgram(f.tool)
	if err != nil {
		t.Fatal(err)
	}
	f.prog = p
	return f
}

// spec is a call of the pinned tool with argv.
func (f swapFixture) spec(t *testing.T, argv ...string) Spec {
	s := shSpec(t, f.ws, "")
	s.Program, s.Argv = f.prog, append([]string{"tool"}, argv...)
	return s
}

// swapSpec is a call of sh that runs script in the workspace, with $OUT the
// outside directory.
func (f swapFixture) swapSpec(t *testing.T, script string) Spec {
	s := shSpec(t, f.ws, script)
	s.Env = append(s.Env, "OUT="+f.outside)
	return s
}

// leaked reports whether o shows anything of the outside directory.
func leaked(o output) bool {
	s := o.String()
	return strings.Contains(s, outsideSecret) || strings.Contains(s, outsideScript)
}

// TestProgramSwapped: a call replaces the pinned program; the next call of
// it fails at its "program <path>" step, runs nothing, and shows nothing of
// what the replacement reaches, with every runner.
func TestProgramSwapped(t *testing.T) {
	cases := []struct{ what, swap string }{
		{"a link to a script outside the view", `rm tool && ln -s "$OUT/script.sh" tool`},
		{"a link to a secret outside the view", `rm tool && ln -s "$OUT/secret" tool`},
		{"a link to a program of the view", `rm tool && ln -s /bin/sh tool`},
		{"a file of the child's own", `rm tool && printf '#!/bin/sh\necho replaced\n' > tool && chmod 755 tool`},
		{"a directory holding a link", `mv tool old && mkdir tool`},
	}
	for name, r := range runners(t) {
		for _, c := range cases {
			f := newSwapFixture(t, []byte("#!/bin/sh\necho pinned tool ran\n"))
			// Control: the pinned program runs (so the refusal below is
			// the swap's doing).
			if _, out, err := run(t, r, f.spec(t)); err != nil || !strings.Contains(string(out.stdout.Bytes()), "pinned tool ran") {
				t.Fatalf("%s: %s: control call: %v\n%s", name, c.what, err, out)
			}
			if _, out, err := run(t, r, f.swapSpec(t, c.swap)); err != nil {
				t.Fatalf("%s: %s: the swap: %v\n%s", name, c.what, err, out)
			}
			res, out, err := run(t, r, f.spec(t))
			var se *SetupError
			if !errors.As(err, &se) || se.Step != "program "+f.tool {
				t.Errorf("%s: %s: got %v (exit %d), want a *SetupError at step %q\n%s", name, c.what, err, res.ExitCode, "program "+f.tool, out)
			}
			if leaked(out) || strings.Contains(out.String(), "replaced") {
				t.Errorf("%s: %s: the replacement ran or was read:\n%s", name, c.what, out)
			}
			t.Logf("%s: %s: %v", name, c.what, err)
		}
	}
}

// TestProgramOutsideViewReplaced: a program outside every directory of the
// view is bound into it as one file; when the host's file at that path is
// replaced after it was pinned, the call fails at its bind step instead of
// binding the new file.
func TestProgramOutsideViewReplaced(t *testing.T) {
	for name, r := range runners(t) {
		dir := workspace(t)
		ws := workspace(t)
		prog := filepath.Join(dir, "prog")
		if err := os.WriteFile(prog, []byte("#!/bin/sh\necho first\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		s := shSpec(t, ws, "")
		p, err := PinProgram(prog)
		if err != nil {
			t.Fatal(err)
		}
		s.Program, s.Argv = p, []string{"prog"}
		if _, out, err := run(t, r, s); err != nil || !strings.Contains(string(out.stdout.Bytes()), "first") {
			t.Fatalf("%s: control call: %v\n%s", name, err, out)
		}
		if err := os.WriteFile(prog+".new", []byte("#!/bin/sh\necho second\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(prog+".new", prog); err != nil {
			t.Fatal(err)
		}
		_, out, err := run(t, r, s)
		var se *SetupError
		if !errors.As(err, &se) || se.Step != "bind "+prog {
			t.Errorf("%s: got %v, want a *SetupError at step %q\n%s", name, err, "bind "+prog, out)
		}
		if strings.Contains(out.String(), "second") {
			t.Errorf("%s: the replaced program ran:\n%s", name, out)
		}
	}
}

// TestProgramSwapRace: while one call keeps swapping the pinned program
// (a hard link of the pinned file itself, a link to a script outside the
// view, a script of its own: each put in place by rename), 30 other calls
// start it. Every call either runs the pinned file or fails at its
// "program" step; none reads or runs anything outside the view, and none
// runs the child's script: the program here is an ELF binary (a copy of
// this test binary, running its pid probe), executed by the descriptor
// that was checked.
func TestProgramSwapRace(t *testing.T) {
	// A copy of this test binary, which runs its probe whatever it is
	// called (the VM shapes' echo is busybox, which goes by argv[0]).
	body, err := os.ReadFile(selfExe(t))
	if err != nil {
		t.Fatal(err)
	}
	for name, r := range runners(t) {
		f := newSwapFixture(t, body)
		if err := os.Link(f.tool, filepath.Join(f.ws, "orig")); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(f.ws, "evil"), []byte("#!/bin/sh\necho EVIL-RAN\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		own(t, filepath.Join(f.ws, "evil"))
		// The swapper runs in its own runner beside the calls, until the
		// stop file appears.
		swapper := NewDirect(testOptions())
		stop := filepath.Join(f.ws, "stop")
		script := `n=0; while [ ! -e stop ]; do
			ln -f orig t1 && mv -f t1 tool
			ln -sf "$OUT/script.sh" t2 && mv -f t2 tool
			cp evil t3 && mv -f t3 tool
			n=$((n+1)); done; echo "swaps $n"`
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		var wg sync.WaitGroup
		var swapOut output
		var swapErr error
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := f.swapSpec(t, script)
			s.Timeout = 2 * time.Minute
			_, swapOut, swapErr = runCtx(ctx, t, swapper, s)
		}()
		var ran, refused atomic.Int64
		// Under emulation (the VM shapes) a call takes about a second:
		// fewer calls there, which still must never run what the child
		// put in place, but need not see both outcomes.
		calls, host := 30, !testenv.InVM()
		if !host {
			calls = 8
		}
		for i := 0; i < calls; i++ {
			s := f.spec(t, "pid")
			s.Argv[0] = "b10x-reexec:" + probeEntry
			_, out, err := run(t, r, s)
			var se *SetupError
			switch {
			case leaked(out) || strings.Contains(out.String(), "EVIL-RAN"):
				t.Errorf("%s: call %d ran or read what the child put there:\n%s", name, i, out)
			case err == nil && probes(out)["pid"] != "":
				ran.Add(1)
			case errors.As(err, &se) && se.Step == "program "+f.tool:
				refused.Add(1)
			default:
				t.Errorf("%s: call %d: %v\n%s", name, i, err, out)
			}
		}
		if err := os.WriteFile(stop, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		cancel()
		if swapErr != nil || !strings.Contains(string(swapOut.stdout.Bytes()), "swaps ") {
			t.Fatalf("%s: the swapper: %v\n%s", name, swapErr, swapOut)
		}
		t.Logf("%s: %d calls ran the pinned program, %d were refused; %s", name, ran.Load(), refused.Load(), strings.TrimSpace(string(swapOut.stdout.Bytes())))
		// Thirty calls against a swap that spends about a third of its
		// time in each state: both outcomes are seen, or the race was not
		// raced.
		if host && (ran.Load() == 0 || refused.Load() == 0) {
			t.Errorf("%s: %d ran, %d refused: the swap and the calls did not overlap", name, ran.Load(), refused.Load())
		}
	}
}

// TestProgramExecutedByDescriptor: the program is executed through the
// descriptor that was checked to be the pinned file (its AT_EXECFN is
// /dev/fd/N), never by a name resolved again after the check; a "#!"
// script, which the kernel can only hand its interpreter by name, still
// runs, with its own path as $0.
func TestProgramExecutedByDescriptor(t *testing.T) {
	for name, r := range runners(t) {
		ws := workspace(t)
		_, out, err := run(t, r, probeSpec(t, ws, "execfn"))
		if err != nil {
			t.Fatalf("%s: %v\n%s", name, err, out)
		}
		if got := probes(out)["execfn"]; !strings.HasPrefix(got, "/dev/fd/") {
			t.Errorf("%s: AT_EXECFN %q, want /dev/fd/N (executed by descriptor)", name, got)
		}
		f := newSwapFixture(t, []byte("#!/bin/sh\necho \"script $0 $1\"\n"))
		_, out, err = run(t, r, f.spec(t, "arg"))
		if want := "script " + f.tool + " arg\n"; err != nil || string(out.stdout.Bytes()) != want {
			t.Errorf("%s: script: %v, stdout %q, want %q\n%s", name, err, out.stdout.Bytes(), want, out)
		}
	}
}

// execFn is the program's AT_EXECFN, the name its execve was given, read
// from the auxiliary vector and, where it points, from the process's own
// memory: "/dev/fd/N" when it was executed by descriptor (execveat with
// AT_EMPTY_PATH), its path when by name.
func execFn() string {
	auxv, err := os.ReadFile("/proc/self/auxv")
	if err != nil {
		return errName(err)
	}
	const atExecFn = 31
	for i := 0; i+16 <= len(auxv); i += 16 {
		if binary.NativeEndian.Uint64(auxv[i:]) != atExecFn {
			continue
		}
		mem, err := os.Open("/proc/self/mem")
		if err != nil {
			return errName(err)
		}
		defer mem.Close()
		buf := make([]byte, 4096)
		n, _ := mem.ReadAt(buf, int64(binary.NativeEndian.Uint64(auxv[i+8:])))
		if z := bytes.IndexByte(buf[:n], 0); z >= 0 {
			return string(buf[:z])
		}
		return "unterminated"
	}
	return "none"
}
