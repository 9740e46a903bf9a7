package main

import (
	"strings"
	"testing"

	"github.com/b10x/harness/internal/testenv"
)

// tmpCapScript writes 3 MiB (below a 4 MiB cap) and 6 MiB (past it) into
// each of the child's /tmp and /dev/shm.
const tmpCapScript = `for d in /tmp /dev/shm; do
  dd if=/dev/zero of=$d/below bs=1048576 count=3 2>/dev/null; echo "$d below=$?"
  rm -f $d/below
  dd if=/dev/zero of=$d/past bs=1048576 count=6 2>&1 | grep -c 'No space left' | sed "s|^|$d enospc=|"
done`

// TestTmpSizeFlag: --tmp-size caps the child's /tmp and /dev/shm through
// exec and through the run tool, and a bad size is a one-line usage error
// naming the flag.
func TestTmpSizeFlag(t *testing.T) {
	ws, _ := sampleWorkspace(t)
	for _, bad := range []string{"--tmp-size=0", "--tmp-size=-1", "--tmp-size=garbage", "--tmp-size=99999999999GiB", "--tmp-size=0MiB"} {
		for _, args := range [][]string{
			{"exec", "--workspace", ws, bad, "--", "true"},
			{"call", "--workspace", ws, bad, "dir_list", "{}"},
			{"call", "--workspace", ws, "--allow-program", "true", bad, "dir_list", "{}"},
			{"tools", "--workspace", ws, bad},
		} {
			r := harness(t, "", args...)
			if r.code != exitUsage || !strings.Contains(r.stderr, "--tmp-size") || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 || r.stdout != "" {
				t.Errorf("%q: want exit 2 and one line naming --tmp-size, got exit %d\nstdout: %s\nstderr: %s", args, r.code, r.stdout, r.stderr)
			}
		}
	}

	want := []string{"/tmp below=0\n", "/tmp enospc=1\n", "/dev/shm below=0\n", "/dev/shm enospc=1\n"}
	testenv.Require(t, execution(), "confined execution", testenv.ShapeNoLandlock, testenv.ShapeNoUserns)
	r := harness(t, "", "exec", "--workspace", ws, "--tmp-size", "4MiB", "--", "sh", "-c", tmpCapScript)
	if r.code != 0 {
		t.Fatalf("exec: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	for _, w := range want {
		if !strings.Contains(r.stdout, w) {
			t.Errorf("exec --tmp-size 4MiB: want %q in the output\n%s", w, r.stdout)
		}
	}

	o := outcome(t, harness(t, "", "call", "--workspace", ws, "--yes", "--allow-program", "sh", "--tmp-size", "4MiB",
		"run", `{"argv":["sh","-c",`+jsonString(tmpCapScript)+`]}`))
	text, _ := o["result"].(string)
	if o["status"] != "executed" {
		t.Fatalf("call run: %v", o)
	}
	for _, w := range want {
		if !strings.Contains(text, w) {
			t.Errorf("call run --tmp-size 4MiB: want %q in the result\n%s", w, text)
		}
	}
}
