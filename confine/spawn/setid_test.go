package spawn

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/b10x/harness/internal/testenv"
)

// wideTree makes a tree beneath dir wider than the set-id walk's queue
// (maxQueued) and deeper than one level, with harmless files everywhere.
func wideTree(t *testing.T, dir string) {
	t.Helper()
	for i := 0; i < 3*maxQueued; i++ {
		d := filepath.Join(dir, "d"+strconv.Itoa(i), "e", "f")
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{filepath.Join(d, "x.go"), filepath.Join(dir, "d"+strconv.Itoa(i), "y")} {
			if err := os.WriteFile(f, []byte("x"), 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestPrivilegedFileFound: the walk finds a set-user-ID, a set-group-ID
// and a capability-carrying file wherever it lies in a wide tree (queued
// or walked depth first), finds nothing in a clean one, and follows no
// link to one outside.
func TestPrivilegedFileFound(t *testing.T) {
	testenv.Require(t, os.Geteuid() == 0, "running as root (set-id files of root's, file capabilities)", testenv.ShapeNoUserns)
	clean := t.TempDir()
	wideTree(t, clean)
	outside := filepath.Join(t.TempDir(), "suid")
	if err := os.WriteFile(outside, []byte("x"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(outside, 0o755|os.ModeSetuid); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(clean, "d3", "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Dir(outside), filepath.Join(clean, "d4", "linkdir")); err != nil {
		t.Fatal(err)
	}
	if found, err := privilegedFile(pinDir(t, clean)); found != "" || err != nil {
		t.Fatalf("a clean tree: %q, %v", found, err)
	}
	// A v2 capability set granting CAP_NET_RAW, as setcap writes it.
	caps := make([]byte, 20)
	binary.LittleEndian.PutUint32(caps, 0x02000000|1) // VFS_CAP_REVISION_2 | VFS_CAP_FLAGS_EFFECTIVE
	binary.LittleEndian.PutUint32(caps[4:], 1<<unix.CAP_NET_RAW)
	for _, c := range []struct {
		rel, why string
		mark     func(string) error
	}{
		{"d0/e/f/x.go", "set-user-ID", func(p string) error { return os.Chmod(p, 0o755|os.ModeSetuid) }},
		{"d" + strconv.Itoa(3*maxQueued-1) + "/y", "set-group-ID", func(p string) error { return os.Chmod(p, 0o755|os.ModeSetgid) }},
		{"d" + strconv.Itoa(2*maxQueued) + "/e/f/x.go", "file capabilities", func(p string) error { return unix.Setxattr(p, "security.capability", caps, 0) }},
	} {
		dir := t.TempDir()
		wideTree(t, dir)
		p := filepath.Join(dir, c.rel)
		if err := c.mark(p); err != nil {
			t.Fatal(err)
		}
		found, err := privilegedFile(pinDir(t, dir))
		if err != nil || !strings.HasPrefix(found, p+" ") || !strings.Contains(found, strings.Split(c.why, "-")[0]) {
			t.Errorf("%s (%s): found %q, %v", c.rel, c.why, found, err)
		}
		if c.why == "file capabilities" {
			// The way without getxattrat (Linux before 6.13) reads the same.
			dfd, err := unix.Open(filepath.Dir(p), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(filepath.Dir(p), "plain.go"), []byte("x"), 0o755); err != nil {
				t.Fatal(err)
			}
			var st, plain unix.Stat_t
			_ = unix.Fstatat(dfd, filepath.Base(p), &st, unix.AT_SYMLINK_NOFOLLOW)
			_ = unix.Fstatat(dfd, "plain.go", &plain, unix.AT_SYMLINK_NOFOLLOW)
			if err := capabilitiesOf(dfd, filepath.Base(p), &st); err != nil {
				t.Errorf("capabilitiesOf the file with capabilities: %v", err)
			}
			if err := capabilitiesOf(dfd, "plain.go", &plain); !errors.Is(err, unix.ENODATA) {
				t.Errorf("capabilitiesOf a plain file: %v, want ENODATA", err)
			}
			unix.Close(dfd)
		}
	}
	// The pinned directory replaced since: refused, not walked.
	p := pinDir(t, filepath.Join(clean, "d5"))
	if err := os.Rename(filepath.Join(clean, "d5"), filepath.Join(clean, "d5.old")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(clean, "d5"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := privilegedFile(p); err == nil || !strings.Contains(err.Error(), "no longer the file pinned") {
		t.Errorf("a pinned directory replaced: %v", err)
	}
}

func pinDir(t *testing.T, dir string) Pinned {
	t.Helper()
	p, err := Pin(dir)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
