package spawn

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/b10x/harness/internal/testenv"
)

// TestLandlockOnlyDenial is the denial a test of attributed denials
// (decision 0080) provokes through a run child: creating a character
// device in the workspace, which the view allows (the workspace is
// writable) and only Landlock refuses (no rule grants fs.make_char), with
// EACCES. On ABI 7 and later the child's domain is created with
// LANDLOCK_RESTRICT_SELF_LOG_NEW_EXEC_ON, so this call also proves the
// kernel accepts the flag. Writing /usr/share/x is no such denial: the
// view's read-only mount answers EROFS before Landlock is asked.
func TestLandlockOnlyDenial(t *testing.T) {
	abi := hasLandlock(t)
	testenv.Require(t, abi > 0, "Landlock", testenv.ShapeNoLandlock)
	for name, r := range runners(t) {
		ws := workspace(t)
		res, out, err := run(t, r, shSpec(t, ws, "mknod c0 c 1 3; echo rc=$?"))
		if err != nil {
			t.Fatalf("%s: %v\n%s", name, err, out)
		}
		// Only Landlock refuses it (EACCES): the workspace is writable,
		// and a device node is no set-id mode seccomp would refuse. (The
		// shell's wording and status differ between coreutils and
		// busybox, which the VM shapes run.)
		got := string(out.stdout.Bytes()) + string(out.stderr.Bytes())
		if res.ExitCode != 0 || strings.Contains(got, "rc=0") || !strings.Contains(got, "Permission denied") {
			t.Fatalf("%s: %+v\n%s", name, res, got)
		}
		if _, err := os.Lstat(filepath.Join(ws, "c0")); err == nil {
			t.Fatalf("%s: the device node was made", name)
		}
	}
}
