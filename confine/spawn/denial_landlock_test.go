package spawn

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/b10x/harness/confine/audit"
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

// TestDenialsOfARunAttributed: where Landlock logs a program's denials
// (ABI 7) each run names its sandbox's domain with a token of its own
// (Result.DomainName), and where the kernel's audit is on (the VM shape
// debian-6.18) the audit reader gives a call's denials to that call
// alone: two calls at once, one denied a character device and one a
// block device, each see their own, asked for after the program ended,
// through the broker and directly (and one after the other in sandboxes
// pre-started before their calls).
func TestDenialsOfARunAttributed(t *testing.T) {
	abi := hasLandlock(t)
	testenv.Require(t, abi > 0, "Landlock", testenv.ShapeNoLandlock)
	for name, r := range runners(t) {
		ws := workspace(t)
		res, out, err := run(t, r, shSpec(t, ws, "true"))
		if err != nil {
			t.Fatalf("%s: %v\n%s", name, err, out)
		}
		if abi < 7 {
			if res.DomainName != "" {
				t.Errorf("%s: Landlock ABI %d logs no denials, yet the domain was named %q", name, abi, res.DomainName)
			}
			continue
		}
		if len(res.DomainName) != 15 || !strings.HasPrefix(res.DomainName, "b10x") {
			t.Errorf("%s: domain name %q, want b10x and 11 hex digits", name, res.DomainName)
		}
		again, _, err := run(t, r, shSpec(t, ws, "true"))
		if err != nil || again.DomainName == res.DomainName {
			t.Errorf("%s: a second call's domain name %q (%v): each sandbox needs its own", name, again.DomainName, err)
		}
	}
	s := audit.Probe()
	testenv.Require(t, s.Attributable, "Landlock audit records ("+s.Why+")",
		append([]string{testenv.ShapeDebian61, testenv.ShapeDebian612, testenv.ShapeNoLandlock, testenv.ShapeNoUserns, testenv.ShapeCgroupV1},
			testenv.HostLacks(!s.Attributable)...)...)
	rd, err := audit.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	for name, r := range runners(t) {
		ws := workspace(t)
		type call struct {
			res  Result
			out  string
			err  error
			node string
		}
		calls := []*call{{node: "mknod c0 c 1 3"}, {node: "mknod b0 b 1 1"}}
		var wg sync.WaitGroup
		for _, c := range calls {
			wg.Add(1)
			do := func() {
				defer wg.Done()
				res, out, err := run(t, r, shSpec(t, ws, c.node+"; echo rc=$?"))
				c.res, c.err = res, err
				c.out = string(out.stdout.Bytes()) + string(out.stderr.Bytes())
			}
			if name == "pre-started" {
				do() // its one slot is for one call at a time
			} else {
				go do()
			}
		}
		wg.Wait()
		for i, c := range calls {
			if c.err != nil || c.res.DomainName == "" || strings.Contains(c.out, "rc=0") {
				t.Fatalf("%s: %s: %v %+v\n%s", name, c.node, c.err, c.res, c.out)
			}
			ds, dropped := rd.WatchName(c.res.DomainName, 0).Stop()
			want := map[int]string{0: "fs.make_char", 1: "fs.make_block"}[i]
			if len(ds) != 1 || dropped != 0 || strings.Join(ds[0].Blockers, ",") != want || !strings.Contains(ds[0].Object, ws) {
				t.Errorf("%s: %s: denials %v (+%d dropped), want one %s in %s", name, c.node, ds, dropped, want, ws)
			}
		}
	}
}
