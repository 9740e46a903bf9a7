package gate

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/b10x/harness/internal/testenv"
	"github.com/b10x/harness/tools"
)

// TestClassifyCase is DetectCase's decision with a fake lookup: no
// kernel needed.
func TestClassifyCase(t *testing.T) {
	found := func(c Casing) func() (Casing, string) {
		return func() (Casing, string) { return c, "looked up" }
	}
	never := func() (Casing, string) {
		t.Helper()
		t.Error("looked up where the attribute or the filesystem answers")
		return CaseUnknown, ""
	}
	for _, c := range []struct {
		name    string
		magic   uint32
		flags   uint32
		flagsOK bool
		lookup  func() (Casing, string)
		want    Casing
		why     string
	}{
		{"ext4 +F", unix.EXT4_SUPER_MAGIC, fsCasefoldFL, true, never, CaseInsensitive, "casefold attribute"},
		{"tmpfs +F among other flags", unix.TMPFS_MAGIC, fsCasefoldFL | 0x10, true, never, CaseInsensitive, "on tmpfs"},
		{"ext4 without", unix.EXT4_SUPER_MAGIC, 0x80000, true, never, CaseSensitive, "ext4 folds case only"},
		{"tmpfs without", unix.TMPFS_MAGIC, 0, true, never, CaseSensitive, "tmpfs"},
		{"vfat", unix.MSDOS_SUPER_MAGIC, 0, false, never, CaseInsensitive, "vfat looks every name up"},
		{"exfat", unix.EXFAT_SUPER_MAGIC, 0, false, never, CaseInsensitive, "exfat"},
		{"ext4 unreadable flags, lookup says", unix.EXT4_SUPER_MAGIC, 0, false, found(CaseSensitive), CaseSensitive, "looked up (on ext4)"},
		{"ext4 unreadable flags, nothing to look up", unix.EXT4_SUPER_MAGIC, 0, false, found(CaseUnknown), CaseUnknown, "attributes could not be read"},
		{"smb share of Windows", unix.SMB2_SUPER_MAGIC, 0, false, found(CaseInsensitive), CaseInsensitive, "looked up (on smb2)"},
		{"cifs, empty", unix.CIFS_SUPER_MAGIC, 0, false, found(CaseUnknown), CaseUnknown, "cifs may fold case"},
		{"xfs, flags say nothing of ascii-ci", unix.XFS_SUPER_MAGIC, 0, true, found(CaseInsensitive), CaseInsensitive, "(on xfs)"},
		{"ntfs3", ntfs3Magic, 0, true, found(CaseSensitive), CaseSensitive, "(on ntfs3)"},
		{"unknown kind", 0x12345678, 0, false, found(CaseUnknown), CaseUnknown, "unknown kind"},
	} {
		got, why := classifyCase(c.magic, c.flags, c.flagsOK, c.lookup)
		if got != c.want || !strings.Contains(why, c.why) {
			t.Errorf("%s: %s (%s), want %s (%q)", c.name, got, why, c.want, c.why)
		}
	}
}

// TestDetectCaseHere: on this host's temporary directories the answer
// agrees with what a lookup in the other case finds, independently, and
// an empty directory is never called case-insensitive without evidence.
func TestDetectCaseHere(t *testing.T) {
	dir := t.TempDir()
	r, err := DetectCase(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("empty %s: %+v", dir, r)
	write(t, filepath.Join(dir, "Probe"), "x")
	_, err = os.Lstat(filepath.Join(dir, "pROBE"))
	folds := err == nil
	if r.Casing == CaseInsensitive && !folds || r.Casing == CaseSensitive && folds {
		t.Fatalf("empty directory: %+v, but looking pROBE up for Probe finds it: %v", r, folds)
	}
	r, err = DetectCase(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := map[bool]Casing{false: CaseSensitive, true: CaseInsensitive}[folds]
	if r.Casing != want || r.Why == "" || r.Dir != dir || r.FS == "" {
		t.Fatalf("with a file Probe: %+v, want %s", r, want)
	}
	if rc := r.Record(); rc.Casing != want.String() || rc.FS != r.FS || rc.Why != r.Why {
		t.Fatalf("as recorded: %+v", rc)
	}

	// The lookup itself, wherever the attribute would answer first.
	lookupIn := func(names ...string) (Casing, string) {
		t.Helper()
		d := t.TempDir()
		for _, n := range names {
			write(t, filepath.Join(d, n), n)
		}
		fd, err := unix.Open(d, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(fd)
		return lookupCase(fd)
	}
	if folds {
		return // this host's temporary directory folds case: the rest is for one that does not
	}
	if c, why := lookupIn("123", "a.txt"); c != CaseSensitive || !strings.Contains(why, `"a.txt" is a name in the directory and "A.TXT" is not`) {
		t.Errorf("a.txt: %s (%s)", c, why)
	}
	if c, why := lookupIn("Makefile", "makefile"); c != CaseSensitive || !strings.Contains(why, "both") {
		t.Errorf("Makefile and makefile: %s (%s)", c, why)
	}
	if c, _ := lookupIn("123", "_-.0"); c != CaseUnknown {
		t.Errorf("names without letters: %s, want unknown", c)
	}
	if c, _ := lookupIn(); c != CaseUnknown {
		t.Errorf("no names: %s, want unknown", c)
	}
	if _, err := DetectCase(filepath.Join(dir, "Probe")); err == nil || !errors.Is(err, unix.ENOTDIR) || !strings.Contains(err.Error(), "Probe") {
		t.Errorf("DetectCase of a file: %v, want ENOTDIR naming it", err)
	}
}

// casefoldChildEnv names the mount point of TestCasefoldDirectory's
// re-run child.
const casefoldChildEnv = "B10X_GATE_CASEFOLD_DIR"

// kernelsBeforeCasefoldTmpfs are the vmtest shapes whose kernel (Debian's
// 6.1 and 6.12) predates tmpfs's casefold option (Linux 6.13).
var kernelsBeforeCasefoldTmpfs = []string{testenv.ShapeDebian61, testenv.ShapeDebian612, testenv.ShapeNoLandlock, testenv.ShapeNoUserns, testenv.ShapeCgroupV1}

var casefoldAbsent = regexp.MustCompile(`(?m)^casefold-absent: (.*)$`)

// TestCasefoldDirectory runs the gate on a directory that really folds
// case: a tmpfs mounted with casefold in a mount namespace of a re-run
// child of this test binary (the host's mounts are never touched), with a
// workspace directory given the casefold attribute. There the kernel
// takes .GIT/config for .git/config; the gate refuses it, the lookup and
// DetectCase say so, and a run child's .GIT/hooks/post-checkout is found
// and removed. A kernel without casefold tmpfs (before 6.13, or built
// without CONFIG_UNICODE) must be one that says so in
// /sys/fs/tmpfs/features or a shape declared to lack it.
func TestCasefoldDirectory(t *testing.T) {
	if dir := os.Getenv(casefoldChildEnv); dir != "" {
		casefoldChild(t, dir)
		return
	}
	testenv.Require(t, os.Geteuid() == 0, "running as root (to mount a tmpfs in a mount namespace of its own)", testenv.ShapeNoUserns)
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCasefoldDirectory$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), casefoldChildEnv+"="+dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: unix.CLONE_NEWNS} // and / made private by the runtime
	out, err := cmd.CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("--- PASS: TestCasefoldDirectory")) {
		t.Fatalf("the child: %v\n%s", err, out)
	}
	if m := casefoldAbsent.FindSubmatch(out); m != nil {
		_, ferr := os.Stat("/sys/fs/tmpfs/features/casefold")
		advertised := ferr == nil
		testenv.Require(t, false, fmt.Sprintf("tmpfs mounted with casefold (%s; /sys/fs/tmpfs/features/casefold present: %v)", m[1], advertised),
			append(kernelsBeforeCasefoldTmpfs, testenv.HostLacks(!advertised)...)...)
	}
	t.Logf("the child:\n%s", out)
}

// casefoldChild is TestCasefoldDirectory in the child: in its own mount
// namespace, it mounts a casefold tmpfs at dir, or says on a line
// "casefold-absent: ..." that the kernel refused it.
func casefoldChild(t *testing.T, dir string) {
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "casefold,mode=0755"); err != nil {
		fmt.Printf("casefold-absent: mount -t tmpfs -o casefold: %v\n", err)
		return
	}
	defer unix.Unmount(dir, unix.MNT_DETACH)
	// The workspace: a directory with the casefold attribute (the root
	// of a casefold tmpfs may or may not have it).
	ws := filepath.Join(dir, "ws")
	must(t, os.Mkdir(ws, 0o755))
	setCasefold(t, ws)
	write(t, filepath.Join(ws, ".git/config"), "[core]\n")
	write(t, filepath.Join(ws, "secrets/key"), "K\n")

	// The kernel takes these spellings for .git/config (the test is only
	// meaningful if it takes .GIT/config).
	var cfg, alt unix.Stat_t
	must(t, unix.Lstat(filepath.Join(ws, ".git/config"), &cfg))
	spellings := []string{".GIT", ".Git", ".g\u200dit", ".g\u200cit", ".gIT\ufeff"}
	for _, s := range spellings {
		err := unix.Lstat(filepath.Join(ws, s, "config"), &alt)
		same := err == nil && alt.Ino == cfg.Ino
		t.Logf("the kernel takes %+q/config for .git/config: %v", s, same)
		if s == ".GIT" && !same {
			t.Fatalf("the casefold tmpfs does not take .GIT/config for .git/config: %v", err)
		}
	}

	for _, d := range []string{ws, filepath.Join(ws, ".git")} {
		r, err := DetectCase(d)
		if err != nil || r.Casing != CaseInsensitive || r.FS != "tmpfs" || !strings.Contains(r.Why, "casefold attribute") {
			t.Errorf("DetectCase(%s) = %+v, %v; want case-insensitive by the casefold attribute on tmpfs", d, r, err)
		}
	}
	fd, err := unix.Open(filepath.Join(ws, ".git"), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	must(t, err)
	c, why := lookupCase(fd)
	unix.Close(fd)
	if c != CaseInsensitive || why != `looking "CONFIG" up finds "config"` {
		t.Errorf("the lookup in .git: %s (%s)", c, why)
	}

	// The file tools: every spelling refused, nothing written.
	g, _ := runGate(t, ws, []string{"**=allowed"}, nil, func(string) {})
	for _, p := range append(spellings, ".git") {
		o := call(g, "file_write", fmt.Sprintf(`{"path":%q,"content":"[core]\n\thooksPath = /tmp/evil\n"}`, p+"/config"))
		if o.Status != Refused || o.Reason != tools.ReasonDeniedPath {
			t.Errorf("file_write %+q/config on a casefold directory: %+v, want refused", p, o)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(ws, ".git/config")); string(b) != "[core]\n" {
		t.Errorf(".git/config was changed: %q", b)
	}
	g, _ = runGate(t, ws, []string{"secrets/**=denied", "**=allowed"}, nil, func(string) {})
	if o := call(g, "file_write", `{"path":"SECRETS/KEY","content":"mine\n"}`); o.Status != Refused || o.Reason != tools.ReasonDeniedPath {
		t.Errorf("file_write SECRETS/KEY under secrets/**=denied: %+v, want refused", o)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "secrets/key")); string(b) != "K\n" {
		t.Errorf("secrets/key was changed: %q", b)
	}
	ents, err := os.ReadDir(ws)
	must(t, err)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, []string{".git", "secrets"}) {
		t.Errorf("the workspace holds %v after the refusals", names)
	}

	// A run child that plants .GIT/hooks/post-checkout where there was no
	// .git: found by its own name, removed, the call failed.
	fresh := filepath.Join(dir, "fresh")
	must(t, os.Mkdir(fresh, 0o755))
	setCasefold(t, fresh)
	g, _ = runGate(t, fresh, []string{"**=allowed"}, nil, func(dir string) {
		write(t, filepath.Join(dir, ".GIT/hooks/post-checkout"), "#!/bin/sh\n")
	})
	o := call(g, "run", `{}`)
	if o.Status != Failed || o.Reason != tools.ReasonProtectedPath || !strings.Contains(o.Message, "created, removed again") {
		t.Errorf("a run child planted .GIT/hooks/post-checkout: %+v, want failed with protected_path, removed", o)
	}
	if ents, _ := os.ReadDir(fresh); len(ents) != 0 {
		t.Errorf("left in the workspace: %v", ents)
	}
}

// setCasefold gives the empty directory dir the casefold attribute
// (chattr +F).
func setCasefold(t *testing.T, dir string) {
	t.Helper()
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	must(t, err)
	defer unix.Close(fd)
	flags, err := unix.IoctlGetUint32(fd, unix.FS_IOC_GETFLAGS)
	must(t, err)
	if flags&fsCasefoldFL != 0 {
		return
	}
	if err := unix.IoctlSetPointerInt(fd, unix.FS_IOC_SETFLAGS, int(flags|fsCasefoldFL)); err != nil {
		t.Fatalf("chattr +F %s: %v", dir, err)
	}
}
