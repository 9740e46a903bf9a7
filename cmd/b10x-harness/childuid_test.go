package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/b10x/harness/internal/testenv"
)

// TestChildUID: by default (child_uid caller) a run child's id(1) is the
// host id it runs as, the owner the host sees of a file it made; with
// --child-uid root it is 0 of its namespace, and the file is still that
// same host id's. Through exec and through a run call.
func TestChildUID(t *testing.T) {
	testenv.Require(t, execution(), "confined execution", testenv.ShapeNoLandlock, testenv.ShapeNoUserns)
	for _, c := range []struct {
		mode string
		args []string
	}{{"caller (the default)", nil}, {"caller", []string{"--child-uid", "caller"}}, {"root", []string{"--child-uid", "root"}}} {
		ws, _ := sampleWorkspace(t)
		if os.Geteuid() == 0 {
			// A workspace of an unprivileged user, as a root harness's
			// usually is: its program runs as that user (a root-owned
			// one is idmapped, root on disk being uid 65534 to it).
			chownTree(t, ws, 1000, 1000)
		}
		script := "id -u > uid; id -g > gid"
		for _, how := range []string{"exec", "run"} {
			var r result
			if how == "exec" {
				cmd := harnessCommand(append(append([]string{"exec", "--quiet", "--workspace", ws}, c.args...), "--", "sh", "-c", script)...)
				cmd.Dir = ws
				cmd.Env = append(os.Environ(), "B10X_TEST_MAIN=1")
				r = runHarnessCmd(t, cmd, "")
			} else {
				r = harness(t, "", append(append([]string{"call", "--quiet", "--workspace", ws, "--yes", "--allow-program", "sh"}, c.args...), "run", `{"argv":["sh","-c","`+script+`"]}`)...)
			}
			if r.code != 0 {
				t.Fatalf("%s %s: exit %d: %s%s", how, c.mode, r.code, r.stdout, r.stderr)
			}
			if strings.Contains(r.stderr, "confine auto") {
				t.Errorf("%s --quiet said a note: %q", how, r.stderr)
			}
			b, err := os.ReadFile(filepath.Join(ws, "uid"))
			must(t, err)
			fi, err := os.Stat(filepath.Join(ws, "uid"))
			must(t, err)
			host := fi.Sys().(*syscall.Stat_t).Uid
			inside := strings.TrimSpace(string(b))
			want := strconv.Itoa(int(host))
			if strings.HasPrefix(c.mode, "root") {
				want = "0"
			}
			if inside != want {
				t.Errorf("%s, child_uid %s: id -u says %s (the host sees the file as uid %d's), want %s", how, c.mode, inside, host, want)
			}
			if host == 0 {
				t.Errorf("%s, child_uid %s: the program's file is host root's", how, c.mode)
			}
			must(t, os.Remove(filepath.Join(ws, "uid")))
			must(t, os.Remove(filepath.Join(ws, "gid")))
		}
	}
	r := harness(t, "", "exec", "--child-uid", "nobody", "--", "true")
	if r.code != exitSetupError || !strings.Contains(r.stderr, `"caller","root" but got "nobody"`) || strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("a bad --child-uid: exit %d, %q", r.code, r.stderr)
	}
}

// TestQuietSaysNoNotes: the note exec says on every host under
// --limits-from enclosing (what bounds the command instead) is gone with
// --quiet; an error is not.
func TestQuietSaysNoNotes(t *testing.T) {
	testenv.Require(t, execution(), "confined execution", testenv.ShapeNoLandlock, testenv.ShapeNoUserns)
	ws, _ := sampleWorkspace(t)
	for _, quiet := range []bool{false, true} {
		args := []string{"exec", "--workspace", ws, "--limits-from", "enclosing"}
		if quiet {
			args = append(args, "--quiet")
		}
		r := harness(t, "", append(args, "--", "true")...)
		if r.code != 0 {
			t.Fatalf("exec (quiet %v): exit %d: %s", quiet, r.code, r.stderr)
		}
		said := strings.Contains(r.stderr, "limits_from enclosing:")
		if said == quiet {
			t.Errorf("quiet %v: stderr %q", quiet, r.stderr)
		}
		if quiet && r.stderr != "" {
			t.Errorf("--quiet: stderr %q, want nothing", r.stderr)
		}
	}
	r := harness(t, "", "exec", "--quiet", "--workspace", ws, "--", "no-such-program-4c1")
	if r.code != exitNotFound || !strings.Contains(r.stderr, "not found") {
		t.Errorf("--quiet hid an error: exit %d, %q", r.code, r.stderr)
	}
}

func chownTree(t *testing.T, dir string, uid, gid int) {
	t.Helper()
	must(t, filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, gid)
	}))
}
