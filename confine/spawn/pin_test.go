package spawn

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPinnedPathsSwapped is finding C of issue 19, at the spawn level and
// with every runner: a child that may write a parent of the workspace or of
// an extra path swaps it (renames the parent away, makes a new one, puts a
// link to an outside directory, or another directory, where the pinned path
// was). The next call must not bind what the child put there: it fails at
// its "bind <path>" step naming the path, the program never runs, nothing
// outside is read or written.
func TestPinnedPathsSwapped(t *testing.T) {
	for name, r := range runners(t) {
		for _, c := range []struct {
			what string
			// swap is the first call's script, run in top (the write
			// path); $OUT is the outside directory.
			swap string
			// victim is the pinned path the swap changes, relative to top.
			victim string
			link   bool // the swap leaves a symbolic link at victim
		}{
			{"extra read path replaced by a link", `mv a a.old && mkdir a && ln -s "$OUT" a/ref`, "a/ref", true},
			{"extra write path replaced by a link", `mv a a.old && mkdir a && ln -s "$OUT" a/out`, "a/out", true},
			{"extra read path replaced by a directory", `mv a a.old && mkdir -p a/ref`, "a/ref", false},
			{"workspace parent renamed, workspace replaced", `mv p p.old && mkdir -p p/ws`, "p/ws", false},
			{"workspace parent renamed, workspace a link", `mv p p.old && mkdir p && ln -s "$OUT" p/ws`, "p/ws", true},
		} {
			top := workspace(t)
			outside := workspace(t)
			if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("OUTSIDE-SECRET\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			ws := filepath.Join(top, "p", "ws")
			for _, d := range []string{ws, filepath.Join(top, "a", "ref"), filepath.Join(top, "a", "out")} {
				if err := os.MkdirAll(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			for _, d := range []string{"p", "p/ws", "a", "a/ref", "a/out"} {
				own(t, filepath.Join(top, d)) // the workspace owner's, as the child is
			}
			ref, out := filepath.Join(top, "a", "ref"), filepath.Join(top, "a", "out")
			spec := func(script string) Spec {
				s := shSpec(t, ws, script)
				s.Env = append(s.Env, "OUT="+outside)
				s.Workspace = pin(t, ws)
				s.WritePaths = []Pinned{pin(t, top)}
				// Only the path the swap attacks is pinned besides top:
				// the swap of one leaves the other missing too.
				switch c.victim {
				case "a/ref":
					s.ReadPaths = []Pinned{pin(t, ref)}
				case "a/out":
					s.WritePaths = append(s.WritePaths, pin(t, out))
				}
				return s
			}
			s1, s2 := spec("cd "+top+" && "+c.swap+" && echo swapped"), spec("")
			// Every call is built from the pins taken at start; the
			// second call's script tries to use what the swap left.
			s2.Argv = []string{"sh", "-c", "cat " + ref + "/secret; echo pwned > " + out + "/pwned.txt; echo pwned > " + ws + "/pwned.txt; echo ran"}

			res, o, err := run(t, r, s1)
			if err != nil || res.ExitCode != 0 || !strings.Contains(string(o.stdout.Bytes()), "swapped") {
				t.Fatalf("%s: %s: the child could not make the swap (the attack must be possible for this test to mean anything): %v %+v\n%s", name, c.what, err, res, o)
			}
			res, o, err = run(t, r, s2)
			victim := filepath.Join(top, c.victim)
			var se *SetupError
			if !errors.As(err, &se) || se.Step != "bind "+victim || !strings.Contains(err.Error(), victim) {
				t.Errorf("%s: %s: second call: %v (%+v), want a *SetupError at step %q naming the path\n%s", name, c.what, err, res, "bind "+victim, o)
			}
			if c.link && !strings.Contains(err.Error(), "symbolic link") {
				t.Errorf("%s: %s: the error does not say a link was found: %v", name, c.what, err)
			}
			if got := string(o.stdout.Bytes()) + string(o.stderr.Bytes()); strings.Contains(got, "OUTSIDE-SECRET") || strings.Contains(got, "ran") {
				t.Errorf("%s: %s: the program ran: %q", name, c.what, got)
			}
			ents, _ := os.ReadDir(outside)
			if len(ents) != 1 {
				t.Errorf("%s: %s: the outside directory holds %d entries, want only its secret", name, c.what, len(ents))
			}
			t.Logf("%s: %s: %v", name, c.what, err)
		}
	}
}
