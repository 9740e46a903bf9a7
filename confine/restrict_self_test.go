package confine

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/b10x/harness/internal/reexec"
	"github.com/b10x/harness/internal/testenv"
)

// Entry points of the RestrictSelf children.
const (
	restrictEntry = "confine-test-restrict-self"
	writerEntry   = "confine-test-writer"
)

func init() {
	reexec.Register(restrictEntry, restrictChildMain)
	reexec.Register(writerEntry, writerChildMain)
}

// attackOp is one attempt to change something beneath target. other is a
// second directory, always inside the workspace, used as the far end of
// cross-directory operations and as the home of escape links. pre holds
// descriptors opened before the restriction.
type attackOp struct {
	name string
	do   func(target, other string, pre map[string]int) error
	// crossDir ops need the refer right (ABI 2) even inside the workspace.
	crossDir bool
	// effect checks, in the parent, that the op took effect beneath a
	// target where it was allowed.
	effect func(target, other string) error
}

// sfx names the files in other that belong to one target, so the inside
// and outside runs never share them.
func sfx(target string) string { return "-" + filepath.Base(target) }

func writeOpen(path string, flags int) error {
	fd, err := unix.Open(path, flags|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if flags&(unix.O_WRONLY|unix.O_RDWR) != 0 {
		if _, err := unix.Write(fd, []byte("pwned")); err != nil {
			return fmt.Errorf("write after open: %w", err)
		}
	}
	return nil
}

func exists(path string) error {
	_, err := os.Lstat(path)
	return err
}

func absent(path string) error {
	if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%s still there (%v)", path, err)
	}
	return nil
}

func content(path, want string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if string(b) != want {
		return fmt.Errorf("%s holds %q, want %q", path, b, want)
	}
	return nil
}

// attackOps are the write routes tried inside and outside the workspace.
var attackOps = []attackOp{
	{name: "open-creat",
		do: func(t, o string, _ map[string]int) error {
			return writeOpen(t+"/new.txt", unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY)
		},
		effect: func(t, o string) error { return content(t+"/new.txt", "pwned") }},
	{name: "open-wronly",
		do:     func(t, o string, _ map[string]int) error { return writeOpen(t+"/existing.txt", unix.O_WRONLY) },
		effect: func(t, o string) error { return content(t+"/existing.txt", "pwnednal content\n") }},
	{name: "open-trunc",
		do: func(t, o string, _ map[string]int) error {
			return writeOpen(t+"/trunc-open.txt", unix.O_WRONLY|unix.O_TRUNC)
		},
		effect: func(t, o string) error { return content(t+"/trunc-open.txt", "pwned") }},
	{name: "open-rdonly-trunc",
		do: func(t, o string, _ map[string]int) error {
			return writeOpen(t+"/trunc-rdonly.txt", unix.O_RDONLY|unix.O_TRUNC)
		},
		effect: func(t, o string) error { return content(t+"/trunc-rdonly.txt", "") }},
	{name: "truncate",
		do:     func(t, o string, _ map[string]int) error { return unix.Truncate(t+"/trunc-call.txt", 0) },
		effect: func(t, o string) error { return content(t+"/trunc-call.txt", "") }},
	{name: "reopen-proc-fd",
		do: func(t, o string, pre map[string]int) error {
			return writeOpen("/proc/self/fd/"+strconv.Itoa(pre[t+"/reopen.txt"]), unix.O_WRONLY)
		},
		effect: func(t, o string) error { return content(t+"/reopen.txt", "pwnednal content\n") }},
	{name: "rename-within",
		do:     func(t, o string, _ map[string]int) error { return unix.Rename(t+"/rename-same.txt", t+"/renamed.txt") },
		effect: func(t, o string) error { return errors.Join(absent(t+"/rename-same.txt"), exists(t+"/renamed.txt")) }},
	{name: "rename-into", crossDir: true,
		do:     func(t, o string, _ map[string]int) error { return unix.Rename(o+"/moveout"+sfx(t), t+"/moved-in.txt") },
		effect: func(t, o string) error { return errors.Join(absent(o+"/moveout"+sfx(t)), exists(t+"/moved-in.txt")) }},
	{name: "rename-out-of", crossDir: true,
		do:     func(t, o string, _ map[string]int) error { return unix.Rename(t+"/rename-src.txt", o+"/taken"+sfx(t)) },
		effect: func(t, o string) error { return errors.Join(absent(t+"/rename-src.txt"), exists(o+"/taken"+sfx(t))) }},
	{name: "rename-dir-out-of", crossDir: true,
		do: func(t, o string, _ map[string]int) error { return unix.Rename(t+"/rename-dir", o+"/taken-dir"+sfx(t)) },
		effect: func(t, o string) error {
			return errors.Join(absent(t+"/rename-dir"), exists(o+"/taken-dir"+sfx(t)+"/inner.txt"))
		}},
	{name: "rename-exchange", crossDir: true,
		do: func(t, o string, _ map[string]int) error {
			return unix.Renameat2(unix.AT_FDCWD, o+"/swap"+sfx(t), unix.AT_FDCWD, t+"/swap.txt", unix.RENAME_EXCHANGE)
		},
		effect: func(t, o string) error { return content(t+"/swap.txt", "other side\n") }},
	{name: "link-into", crossDir: true,
		do:     func(t, o string, _ map[string]int) error { return unix.Link(o+"/linksrc"+sfx(t), t+"/linked.txt") },
		effect: func(t, o string) error { return exists(t + "/linked.txt") }},
	{name: "link-out-of", crossDir: true,
		do:     func(t, o string, _ map[string]int) error { return unix.Link(t+"/link-src.txt", o+"/stolen"+sfx(t)) },
		effect: func(t, o string) error { return exists(o + "/stolen" + sfx(t)) }},
	{name: "link-within",
		do:     func(t, o string, _ map[string]int) error { return unix.Link(t+"/link-src.txt", t+"/hardlink.txt") },
		effect: func(t, o string) error { return exists(t + "/hardlink.txt") }},
	{name: "symlink",
		do:     func(t, o string, _ map[string]int) error { return unix.Symlink("existing.txt", t+"/sym") },
		effect: func(t, o string) error { return exists(t + "/sym") }},
	{name: "write-through-symlink",
		// The link itself is created inside the workspace (other); the
		// write goes through it to the target.
		do: func(t, o string, _ map[string]int) error {
			link := o + "/escape" + sfx(t)
			if err := unix.Symlink(t+"/via-link.txt", link); err != nil {
				return fmt.Errorf("setup symlink in workspace: %w", err)
			}
			return writeOpen(link, unix.O_WRONLY)
		},
		effect: func(t, o string) error { return content(t+"/via-link.txt", "pwnednal content\n") }},
	{name: "mkdir",
		do:     func(t, o string, _ map[string]int) error { return unix.Mkdir(t+"/newdir", 0o755) },
		effect: func(t, o string) error { return exists(t + "/newdir") }},
	{name: "mknod-fifo",
		do:     func(t, o string, _ map[string]int) error { return unix.Mknod(t+"/fifo", unix.S_IFIFO|0o644, 0) },
		effect: func(t, o string) error { return exists(t + "/fifo") }},
	{name: "bind-unix-socket",
		do: func(t, o string, _ map[string]int) error {
			fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				return fmt.Errorf("socket: %w", err)
			}
			defer unix.Close(fd)
			return unix.Bind(fd, &unix.SockaddrUnix{Name: t + "/s"})
		},
		effect: func(t, o string) error { return exists(t + "/s") }},
	{name: "unlink",
		do:     func(t, o string, _ map[string]int) error { return unix.Unlink(t + "/unlink-me.txt") },
		effect: func(t, o string) error { return absent(t + "/unlink-me.txt") }},
	{name: "rmdir",
		do:     func(t, o string, _ map[string]int) error { return unix.Rmdir(t + "/rmdir-me") },
		effect: func(t, o string) error { return absent(t + "/rmdir-me") }},
	{name: "chmod",
		do: func(t, o string, _ map[string]int) error { return unix.Chmod(t+"/chmod-me.txt", 0o600) },
		effect: func(t, o string) error {
			fi, err := os.Lstat(t + "/chmod-me.txt")
			if err != nil {
				return err
			}
			if fi.Mode().Perm() != 0o600 {
				return fmt.Errorf("mode %v, want 0600", fi.Mode().Perm())
			}
			return nil
		}},
	{name: "child-process-write",
		// A process started after the restriction inherits the domain.
		do: func(t, o string, _ map[string]int) error {
			var res struct{ Errno int }
			cmd := reexec.Command(writerEntry, t+"/from-child.txt")
			out, err := cmd.Output()
			if err != nil {
				return fmt.Errorf("writer child: %w", err)
			}
			if err := json.Unmarshal(out, &res); err != nil {
				return fmt.Errorf("writer child said %q: %w", out, err)
			}
			if res.Errno != 0 {
				return syscall.Errno(res.Errno)
			}
			return nil
		},
		effect: func(t, o string) error { return content(t+"/from-child.txt", "child") }},
}

// populate creates the files and directories the ops act on.
func populate(t *testing.T, target, other string) {
	t.Helper()
	for _, d := range []string{target, other, target + "/rmdir-me", target + "/rename-dir"} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"existing.txt", "trunc-open.txt", "trunc-rdonly.txt", "trunc-call.txt", "reopen.txt",
		"rename-same.txt", "rename-src.txt", "link-src.txt", "via-link.txt", "unlink-me.txt", "chmod-me.txt", "rename-dir/inner.txt"} {
		if err := os.WriteFile(filepath.Join(target, f), []byte("original content\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(target+"/swap.txt", []byte("this side\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"moveout", "linksrc"} {
		if err := os.WriteFile(other+"/"+f+sfx(target), []byte("from the workspace\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(other+"/swap"+sfx(target), []byte("other side\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(target+"/chmod-me.txt", 0o644); err != nil {
		t.Fatal(err)
	}
}

// snapshot maps every path beneath dir to its type, permissions and content
// (or link target), for a byte-for-byte comparison.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	m := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		v := fmt.Sprintf("%v", fi.Mode())
		switch {
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			v += " " + strconv.Quote(string(b))
		case fi.Mode()&fs.ModeSymlink != 0:
			l, err := os.Readlink(p)
			if err != nil {
				return err
			}
			v += " -> " + l
		}
		m[rel] = v
		return nil
	})
	if err != nil {
		t.Fatalf("snapshot %s: %v", dir, err)
	}
	return m
}

// restrictChildArgs: workspace, outside target, inside target, other (inside the workspace).
type restrictChildOut struct {
	Applied      Applied
	Err          string
	NotSupported bool
	Errno        map[string]int    // op -> errno (0: succeeded, -1: failed without errno)
	Msg          map[string]string // op -> error text
}

func restrictChildMain() {
	ws, outside, inside, other, readable := os.Args[1], os.Args[2], os.Args[3], os.Args[4], os.Args[5]
	var res restrictChildOut
	if os.Getenv("B10X_TEST_PRIVATE_MOUNTS") == "1" {
		// Started in a new mount namespace: keep any mount it makes here.
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
			res.Err = fmt.Sprintf("make / private: %v", err)
			childPrint(res)
		}
	}
	pre := map[string]int{}
	for _, t := range []string{outside, inside} {
		fd, err := unix.Open(t+"/reopen.txt", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			res.Err = fmt.Sprintf("pre-open: %v", err)
			childPrint(res)
		}
		pre[t+"/reopen.txt"] = fd
	}
	// The test binary stays executable (child-process-write starts it);
	// readable is a directory granted for reading only.
	exe, err := os.Executable()
	if err != nil {
		res.Err = fmt.Sprintf("executable: %v", err)
		childPrint(res)
	}
	applied, err := RestrictSelf(SelfPolicy{Workspace: ws, Devices: DefaultDevices(), ReadPaths: []string{readable, exe, readable + "/absent"}})
	if err != nil {
		res.Err, res.NotSupported = err.Error(), errors.Is(err, ErrNotSupported)
		childPrint(res)
	}
	res.Applied = applied
	res.Errno, res.Msg = map[string]int{}, map[string]string{}
	record := func(name string, err error) {
		res.Errno[name] = 0
		if err != nil {
			var e syscall.Errno
			res.Errno[name] = -1
			if errors.As(err, &e) {
				res.Errno[name] = int(e)
			}
			res.Msg[name] = err.Error()
		}
	}
	for _, where := range []struct{ name, dir string }{{"outside", outside}, {"inside", inside}} {
		for _, op := range attackOps {
			record(where.name+"/"+op.name, op.do(where.dir, other, pre))
		}
		record(where.name+"/tmpfile", func() error {
			fd, err := unix.Open(where.dir, unix.O_TMPFILE|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
			if err == nil {
				unix.Close(fd)
			}
			return err
		}())
		if os.Getenv("B10X_TEST_PRIVATE_MOUNTS") == "1" {
			record(where.name+"/mount", unix.Mount("tmpfs", where.dir+"/newdir-for-mount", "tmpfs", 0, ""))
		}
	}
	readOpen := func(path string, flags int) error {
		fd, err := unix.Open(path, flags|unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err == nil {
			unix.Close(fd)
		}
		return err
	}
	record("devnull-write", writeOpen("/dev/null", unix.O_WRONLY))
	record("devnull-read", readOpen("/dev/null", 0))
	record("read-inside", readOpen(inside+"/existing.txt", 0))
	record("list-inside", readOpen(inside, unix.O_DIRECTORY))
	record("read-outside", readOpen(outside+"/existing.txt", 0))
	record("list-outside", readOpen(outside, unix.O_DIRECTORY))
	record("read-proc-status", readOpen("/proc/self/status", 0))
	record("list-root", readOpen("/", unix.O_DIRECTORY))
	record("exec-outside", unix.Exec(outside+"/run.sh", []string{"run.sh"}, nil))
	record("read-granted", readOpen(readable+"/r.txt", 0))
	record("list-granted", readOpen(readable, unix.O_DIRECTORY))
	record("write-granted", writeOpen(readable+"/r.txt", unix.O_WRONLY))
	record("create-granted", writeOpen(readable+"/new.txt", unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL))
	record("read-self-exe", func() error { _, err := os.ReadFile("/proc/self/exe"); return err }())
	childPrint(res)
}

func writerChildMain() {
	var res struct{ Errno int }
	if err := os.WriteFile(os.Args[1], []byte("child"), 0o644); err != nil {
		var e syscall.Errno
		res.Errno = -1
		if errors.As(err, &e) {
			res.Errno = int(e)
		}
	}
	childPrint(res)
}

// TestRestrictSelfAttacks restricts a child of the test binary to a
// workspace and tries every write route outside it and inside it.
func TestRestrictSelfAttacks(t *testing.T) {
	info, err := ProbeLandlock()
	if err != nil {
		t.Fatal(err)
	}
	testenv.Require(t, info.ABI > 0, "Landlock", testenv.ShapeNoLandlock)

	root := t.TempDir()
	ws, outside := filepath.Join(root, "ws"), filepath.Join(root, "out")
	inside, other := filepath.Join(ws, "in"), filepath.Join(ws, "other")
	populate(t, outside, other)
	populate(t, inside, other)
	// Targets of the mount attempt, one per side.
	for _, d := range []string{outside, inside} {
		if err := os.Mkdir(d+"/newdir-for-mount", 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var attr *syscall.SysProcAttr
	privateMounts := os.Geteuid() == 0
	if privateMounts {
		// Root: the child gets its own mount namespace, so the mount
		// attempt cannot touch the host even if Landlock failed.
		attr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNS}
		t.Setenv("B10X_TEST_PRIVATE_MOUNTS", "1")
	}
	var res restrictChildOut
	readable := filepath.Join(root, "readable")
	if err := os.Mkdir(readable, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(readable+"/r.txt", []byte("granted\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(outside+"/run.sh", []byte("#!/bin/sh\necho ran\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, outside)
	runTestChild(t, attr, &res, restrictEntry, ws, outside, inside, other, readable)
	if res.Err != "" {
		t.Fatalf("RestrictSelf in child: %s", res.Err)
	}
	t.Logf("applied: ABI %d, handled %v, grants %+v, skipped %v, %s", res.Applied.ABI, res.Applied.Handled, res.Applied.Grants, res.Applied.Skipped, res.Applied.Verified)
	if res.Applied.ABI != info.ABI {
		t.Errorf("Applied.ABI = %d, want the probed %d", res.Applied.ABI, info.ABI)
	}
	if !slices.Equal(res.Applied.Handled, rightNames(selfRights(info.ABI))) {
		t.Errorf("Applied.Handled = %v, want %v", res.Applied.Handled, rightNames(selfRights(info.ABI)))
	}

	// What the kernel does not cover at this ABI: these succeed outside.
	gaps := map[string]bool{"chmod": true} // no Landlock ABI covers chmod(2)
	if !info.Has(FeatureTruncate) {
		// truncate(2) needs no open; open(O_RDONLY|O_TRUNC) is refused
		// for the read (read_file is handled at every ABI).
		gaps["truncate"] = true
	}
	denied := []syscall.Errno{unix.EACCES, unix.EPERM}
	crossDenied := []syscall.Errno{unix.EACCES, unix.EPERM, unix.EXDEV}

	for _, op := range attackOps {
		name := "outside/" + op.name
		got, ok := res.Errno[name]
		if !ok {
			t.Errorf("%s: not attempted", name)
			continue
		}
		switch {
		case gaps[op.name]:
			if got != 0 {
				t.Errorf("%s: got errno %d (%s); at ABI %d Landlock does not cover it, so the kernel was expected to allow it (update the documented gap)", name, got, res.Msg[name], info.ABI)
			}
		case op.crossDir:
			if !slices.Contains(crossDenied, syscall.Errno(got)) {
				t.Errorf("%s: errno %d (%s), want EACCES, EPERM or EXDEV", name, got, res.Msg[name])
			}
		default:
			if !slices.Contains(denied, syscall.Errno(got)) {
				t.Errorf("%s: errno %d (%s), want EACCES or EPERM", name, got, res.Msg[name])
			}
		}
		// The op must have had no effect, unless it is a documented gap,
		// whose effect must be real.
		effectErr := op.effect(outside, other)
		if gaps[op.name] && effectErr != nil {
			t.Errorf("%s: allowed, yet no effect: %v", name, effectErr)
		}
		if !gaps[op.name] && effectErr == nil {
			t.Errorf("%s: expected no effect, yet it is there (errno %d)", name, got)
		}
		t.Logf("%-32s errno %d %s", name, got, res.Msg[name])
	}
	// O_TMPFILE creates an unnamed file; outside the workspace it must be
	// refused too.
	if got := res.Errno["outside/tmpfile"]; !slices.Contains(denied, syscall.Errno(got)) {
		t.Errorf("outside/tmpfile: errno %d (%s), want EACCES or EPERM", got, res.Msg["outside/tmpfile"])
	}
	if privateMounts {
		for _, where := range []string{"outside", "inside"} {
			if got := res.Errno[where+"/mount"]; got != int(unix.EPERM) {
				t.Errorf("%s/mount after RestrictSelf: errno %d (%s), want EPERM", where, got, res.Msg[where+"/mount"])
			}
		}
	}

	// The outside tree is unchanged byte for byte, except for what the
	// documented gaps changed.
	want := maps.Clone(before)
	want["chmod-me.txt"] = "-rw------- " + strconv.Quote("original content\n")
	if gaps["truncate"] {
		want["trunc-call.txt"] = "-rw-r--r-- " + strconv.Quote("")
	}
	after := snapshot(t, outside)
	for k, v := range want {
		if after[k] != v {
			t.Errorf("outside %s: now %q, want %q", k, after[k], v)
		}
	}
	for k, v := range after {
		if _, ok := want[k]; !ok {
			t.Errorf("outside: %s appeared (%s)", k, v)
		}
	}

	// Inside the workspace every route works (cross-directory ones from
	// ABI 2, which brings the refer right).
	for _, op := range attackOps {
		name := "inside/" + op.name
		got, ok := res.Errno[name]
		if !ok {
			t.Errorf("%s: not attempted", name)
			continue
		}
		if op.crossDir && !info.Has(FeatureRefer) {
			if got != int(unix.EXDEV) {
				t.Errorf("%s at ABI 1: errno %d (%s), want EXDEV (no refer right before ABI 2)", name, got, res.Msg[name])
			}
			continue
		}
		if got != 0 {
			t.Errorf("%s: errno %d (%s), want success inside the workspace", name, got, res.Msg[name])
			continue
		}
		if err := op.effect(inside, other); err != nil {
			t.Errorf("%s: reported success but no effect: %v", name, err)
		}
	}
	if got := res.Errno["inside/tmpfile"]; got != 0 {
		t.Errorf("inside/tmpfile: errno %d (%s), want success", got, res.Msg["inside/tmpfile"])
	}
	// Reads: the workspace, the read paths and the devices only.
	for _, name := range []string{"devnull-write", "devnull-read", "read-inside", "list-inside", "read-granted", "list-granted", "read-self-exe"} {
		if got, ok := res.Errno[name]; !ok || got != 0 {
			t.Errorf("%s: errno %d (%s), want success", name, got, res.Msg[name])
		}
	}
	for _, name := range []string{"read-outside", "list-outside", "read-proc-status", "list-root", "exec-outside", "write-granted", "create-granted"} {
		if got, ok := res.Errno[name]; !ok || got != int(unix.EACCES) {
			t.Errorf("%s: errno %d (%s), want EACCES", name, got, res.Msg[name])
		}
	}
	if err := absent(readable + "/new.txt"); err != nil {
		t.Errorf("create-granted: %v", err)
	}
	if err := content(readable+"/r.txt", "granted\n"); err != nil {
		t.Errorf("write-granted: %v", err)
	}
	if !slices.Contains(res.Applied.Skipped, readable+"/absent") {
		t.Errorf("Applied.Skipped = %v, want the absent read path listed", res.Applied.Skipped)
	}
}

const notSupportedEntry = "confine-test-restrict-self-abi0"

func init() { reexec.Register(notSupportedEntry, notSupportedChildMain) }

// abi0Result is what the no-Landlock child reports.
type abi0Result struct {
	Err          string
	NotSupported bool
	Strict       []string // layers strict names
	WriteAfter   string   // error writing outside after the refusal, "" when it worked
}

// notSupportedChildMain: arguments workspace, outside file, errno. A
// non-zero errno makes landlock_create_ruleset fail with it (a seccomp
// filter), which is what a kernel without Landlock (ENOSYS) or with it
// disabled at boot (EOPNOTSUPP) answers; 0 uses the kernel as it is.
func notSupportedChildMain() {
	var res abi0Result
	if errno, _ := strconv.Atoi(os.Args[3]); errno != 0 {
		filter := []unix.SockFilter{
			{Code: bpfLd, K: 0}, // A = nr
			{Code: bpfJeq, K: unix.SYS_LANDLOCK_CREATE_RULESET, Jt: 0, Jf: 1},
			{Code: bpfRet, K: unix.SECCOMP_RET_ERRNO | uint32(errno)},
			{Code: bpfRet, K: unix.SECCOMP_RET_ALLOW},
		}
		if err := installTestFilter(filter); err != nil {
			res.Err = "setup: " + err.Error()
			childPrint(res)
		}
	}
	_, err := RestrictSelf(SelfPolicy{Workspace: os.Args[1], Devices: DefaultDevices()})
	if err != nil {
		res.Err, res.NotSupported = err.Error(), errors.Is(err, ErrNotSupported)
	}
	_, serr := Report{Landlock: probeLandlockReport()}.Plan(Strict)
	var se *StrictError
	if errors.As(serr, &se) {
		for _, l := range se.Missing {
			if l.Name == LayerLandlockSelf || l.Name == LayerLandlockChild {
				res.Strict = append(res.Strict, l.Name)
			}
		}
	}
	// Nothing was restricted: the caller is told, and must not go on.
	if err := os.WriteFile(os.Args[2], []byte("x"), 0o644); err != nil {
		res.WriteAfter = err.Error()
	}
	childPrint(res)
}

// TestRestrictSelfWithoutLandlock: where the kernel has no Landlock,
// RestrictSelf must fail with ErrNotSupported, never succeed having enforced
// nothing, and strict must name both Landlock layers. Every shape runs it: a
// seccomp filter gives the child the answers of a kernel without Landlock
// (ENOSYS) and of one with Landlock disabled at boot (EOPNOTSUPP); the
// no-landlock shape also runs it against the real kernel.
func TestRestrictSelfWithoutLandlock(t *testing.T) {
	info, err := ProbeLandlock()
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		errno syscall.Errno
	}{{"NotBuilt", unix.ENOSYS}, {"DisabledAtBoot", unix.EOPNOTSUPP}}
	if info.ABI == 0 {
		cases = append(cases, struct {
			name  string
			errno syscall.Errno
		}{"RealKernel", 0})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var res abi0Result
			outside := filepath.Join(t.TempDir(), "outside.txt")
			runTestChild(t, nil, &res, notSupportedEntry, t.TempDir(), outside, strconv.Itoa(int(tc.errno)))
			if strings.HasPrefix(res.Err, "setup: ") {
				t.Fatal(res.Err)
			}
			if res.Err == "" || !res.NotSupported {
				t.Fatalf("RestrictSelf without Landlock: err %q (matches ErrNotSupported: %v), want an ErrNotSupported error", res.Err, res.NotSupported)
			}
			if !slices.Equal(res.Strict, []string{LayerLandlockSelf, LayerLandlockChild}) {
				t.Errorf("strict names %v among the Landlock layers, want both", res.Strict)
			}
			if res.WriteAfter != "" {
				t.Errorf("after the refusal a write failed (%s): the failed call changed the process", res.WriteAfter)
			}
			if _, err := os.Stat(outside); err != nil {
				t.Errorf("the child's write outside did not happen: %v", err)
			}
			t.Logf("refused as expected: %s", res.Err)
		})
	}
}
