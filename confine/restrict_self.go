package confine

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// SelfPolicy says what the harness itself may still read and write once
// RestrictSelf has run: the workspace, and only the few other files it
// names. Paths are absolute; symlinks in them are resolved once, when
// RestrictSelf runs, and the grant attaches to the directory or file found
// then (renaming it later keeps the grant on it).
//
// The zero value is invalid (RestrictSelf requires a Workspace). It is a
// plain value; RestrictSelf does not keep or modify it.
type SelfPolicy struct {
	// Workspace is the workspace root: an existing directory. Everything
	// beneath it stays readable, writable and executable.
	Workspace string
	// WritePaths are further existing directories or files that stay
	// readable and writable: the harness's temporary directory, extra
	// paths. A missing path is an error.
	WritePaths []string
	// ReadPaths are further directories or files that stay readable and
	// executable (never writable): the programs of hooks and what they
	// need, the resolver's configuration. A path that does not exist is
	// skipped and listed in Applied.Skipped.
	ReadPaths []string
	// Devices are files that stay readable and writable but in which
	// nothing can be created or removed: typically /dev/null and /dev/tty
	// (see DefaultDevices). ioctl(2) stays allowed on them. A device that
	// does not exist is skipped and listed in Applied.Skipped. A directory
	// here (such as /dev/pts) grants the same file rights on what is
	// beneath it.
	Devices []string
	// Proc keeps /proc readable and listable (never writable): a hook init
	// that cannot have a PID namespace of its own finds the processes its
	// hook left behind there (/proc/*/stat). It lets the process read what
	// procfs shows of the processes it may inspect (their command lines
	// and, for its own user's, their environments); it never reaches a file
	// outside /proc (/proc/self/root and the like lead to paths checked as
	// themselves). The zero value keeps /proc closed.
	Proc bool
}

// DefaultDevices returns the devices the harness itself uses: /dev/null
// (os/exec opens it for nil stdio) and /dev/tty (the approver's prompt).
// A fresh slice on every call.
func DefaultDevices() []string { return []string{"/dev/null", "/dev/tty"} }

// Applied records what RestrictSelf enforced, for the run record. A plain
// value with stable JSON names; the zero value means nothing was enforced.
type Applied struct {
	ABI      int      `json:"abi"`               // the probed Landlock ABI the ruleset was built for
	Handled  []string `json:"handled"`           // rights denied everywhere except the grants
	Grants   []Grant  `json:"grants"`            // where some of them stay allowed
	Skipped  []string `json:"skipped,omitempty"` // devices that did not exist
	Verified string   `json:"verified"`          // the check that proved the domain in force
}

// Grant is one path beneath which the listed rights stay allowed (kernel
// right names such as "write_file"). A plain value.
type Grant struct {
	Path   string   `json:"path"`
	Rights []string `json:"rights"`
}

// Landlock write-class rights, by the ABI that introduced them.
const (
	writeRightsV1 landlock.AccessFSSet = ll.AccessFSWriteFile | ll.AccessFSRemoveDir | ll.AccessFSRemoveFile |
		ll.AccessFSMakeChar | ll.AccessFSMakeDir | ll.AccessFSMakeReg | ll.AccessFSMakeSock |
		ll.AccessFSMakeFifo | ll.AccessFSMakeBlock | ll.AccessFSMakeSym
	// fileRights are the handled write rights that apply to a file (as
	// opposed to a directory's entries).
	fileRights landlock.AccessFSSet = ll.AccessFSWriteFile | ll.AccessFSTruncate | ll.AccessFSIoctlDev
	// readRights are reading a file, listing a directory and executing a
	// file: ABI 1 has them all.
	readRights landlock.AccessFSSet = ll.AccessFSReadFile | ll.AccessFSReadDir | ll.AccessFSExecute
)

// selfRights is the set of rights the harness's own domain handles at a
// given ABI: reading, listing and executing, everything that creates,
// changes or removes a file or directory entry, and ioctl on devices.
// ABI 0 gives 0.
func selfRights(abi int) landlock.AccessFSSet {
	if abi < 1 {
		return 0
	}
	r := readRights | writeRightsV1
	if abi >= 2 {
		r |= ll.AccessFSRefer
	}
	if abi >= 3 {
		r |= ll.AccessFSTruncate
	}
	if abi >= 5 {
		r |= ll.AccessFSIoctlDev
	}
	return r
}

// rightNames lists the kernel's names of the rights in s, in bit order.
var rightNameTable = []struct {
	bit  landlock.AccessFSSet
	name string
}{
	{ll.AccessFSExecute, "execute"}, {ll.AccessFSWriteFile, "write_file"}, {ll.AccessFSReadFile, "read_file"},
	{ll.AccessFSReadDir, "read_dir"}, {ll.AccessFSRemoveDir, "remove_dir"}, {ll.AccessFSRemoveFile, "remove_file"},
	{ll.AccessFSMakeChar, "make_char"}, {ll.AccessFSMakeDir, "make_dir"}, {ll.AccessFSMakeReg, "make_reg"},
	{ll.AccessFSMakeSock, "make_sock"}, {ll.AccessFSMakeFifo, "make_fifo"}, {ll.AccessFSMakeBlock, "make_block"},
	{ll.AccessFSMakeSym, "make_sym"}, {ll.AccessFSRefer, "refer"}, {ll.AccessFSTruncate, "truncate"},
	{ll.AccessFSIoctlDev, "ioctl_dev"}, {ll.AccessFSResolveUnix, "resolve_unix"},
}

func rightNames(s landlock.AccessFSSet) []string {
	var out []string
	for _, r := range rightNameTable {
		if s&r.bit != 0 {
			out = append(out, r.name)
		}
	}
	return out
}

// selfGrant is one validated path with the rights it gets.
type selfGrant struct {
	path   string
	rights landlock.AccessFSSet
}

// selfPlan is a validated SelfPolicy for one ABI.
type selfPlan struct {
	handled landlock.AccessFSSet
	grants  []selfGrant
	skipped []string
}

// planSelf validates p and works out the rules for the given ABI without
// touching the process. ABI 0 is an error matching ErrNotSupported.
func planSelf(p SelfPolicy, abi int) (selfPlan, error) {
	if p.Workspace == "" {
		return selfPlan{}, errors.New("confine: restrict self: no workspace given")
	}
	var sp selfPlan
	// dirRights apply to a directory, fileRights to a file (the kernel
	// refuses directory rights on a file's rule).
	add := func(kind, path string, dirRights, fileRights landlock.AccessFSSet, optional bool) error {
		resolved, fi, err := resolveGrant(kind, path)
		if err != nil {
			if optional && errors.Is(err, os.ErrNotExist) {
				sp.skipped = append(sp.skipped, path)
				return nil
			}
			return err
		}
		r := fileRights
		if fi.IsDir() {
			r = dirRights
		}
		if kind == "workspace" && !fi.IsDir() {
			return fmt.Errorf("confine: restrict self: workspace %q is not a directory", path)
		}
		sp.grants = append(sp.grants, selfGrant{path: resolved, rights: r & selfRights(abi)})
		return nil
	}
	all := selfRights(abi)
	if err := add("workspace", p.Workspace, all, fileRights|ll.AccessFSReadFile|ll.AccessFSExecute, false); err != nil {
		return selfPlan{}, err
	}
	for _, w := range p.WritePaths {
		if err := add("write path", w, all, fileRights|ll.AccessFSReadFile, false); err != nil {
			return selfPlan{}, err
		}
	}
	for _, r := range p.ReadPaths {
		if err := add("read path", r, readRights, ll.AccessFSReadFile|ll.AccessFSExecute, true); err != nil {
			return selfPlan{}, err
		}
	}
	if p.Proc && abi >= 1 {
		// Not through resolveGrant, which refuses /proc for every other
		// field: only read and list, only here.
		sp.grants = append(sp.grants, selfGrant{path: "/proc", rights: ll.AccessFSReadFile | ll.AccessFSReadDir})
	}
	devRights := fileRights | ll.AccessFSReadFile
	for _, d := range p.Devices {
		if err := add("device", d, devRights, devRights, true); err != nil {
			return selfPlan{}, err
		}
	}
	if abi < 1 {
		return selfPlan{}, fmt.Errorf("confine: restrict self: %w", &UnsupportedFeatureError{Name: "Landlock", MinimumVersion: "Linux 5.13 (Landlock ABI 1)"})
	}
	sp.handled = selfRights(abi)
	return sp, nil
}

// resolveGrant checks one path of a policy: absolute, existing, not the
// whole filesystem, not /proc. It returns the path with symlinks resolved.
func resolveGrant(kind, path string) (string, os.FileInfo, error) {
	if !filepath.IsAbs(path) {
		return "", nil, fmt.Errorf("confine: restrict self: %s %q is not an absolute path", kind, path)
	}
	resolved, err := filepath.EvalSymlinks(path)
	if err != nil {
		return "", nil, fmt.Errorf("confine: restrict self: %s %q: %w", kind, path, err)
	}
	if resolved == "/" {
		return "", nil, fmt.Errorf("confine: restrict self: %s %q resolves to /, which would leave the whole filesystem open", kind, path)
	}
	if resolved == "/proc" || strings.HasPrefix(resolved, "/proc/") {
		return "", nil, fmt.Errorf("confine: restrict self: %s %q resolves beneath /proc, which is never granted", kind, path)
	}
	fi, err := os.Stat(resolved)
	if err != nil {
		return "", nil, fmt.Errorf("confine: restrict self: %s %q: %w", kind, path, err)
	}
	return resolved, fi, nil
}

// verifyTarget is opened for writing after the restriction: the process
// owns it and may write it without Landlock, opening it has no effect, and
// no policy may grant it (paths beneath /proc are refused, SelfPolicy.Proc
// grants only reads). verifyReadTarget
// is opened for reading: every process may list /, and no policy may grant
// it either.
const (
	verifyTarget     = "/proc/self/comm"
	verifyReadTarget = "/"
)

// RestrictSelf confines the reads and writes of the calling process, all
// of its threads and every process it starts afterwards to the places p
// names, with a Landlock domain built for the probed ABI.
//
// What it restricts: reading files, listing directories and executing
// files, and every write-class right the probed ABI knows — writing to a
// file, creating regular files, directories, symlinks, fifos, sockets and
// device nodes, removing files and directories, and from ABI 2 linking or
// renaming between directories (refer), from ABI 3 truncation (truncate,
// ftruncate, O_TRUNC), from ABI 5 ioctl on devices. All of them stay
// allowed beneath p.Workspace and p.WritePaths (p.WritePaths are not
// executable); reading, listing and executing beneath p.ReadPaths; reading,
// writing, truncating and ioctl on p.Devices. Everything else is denied: a
// bug in the caller's path handling cannot read a file beside the
// workspace. Walking through a directory to reach a granted path needs no
// right.
//
// The time package reads the local time zone lazily, on first use; it is
// loaded before the domain is applied. Other lazy readers (the system's CA
// certificates, the resolver's files) are the caller's to load first or
// to grant in p.ReadPaths.
//
// How: the ABI is probed with the raw syscall (never go-landlock's
// BestEffort, never the landlocktsync build tag) and the go-landlock Config
// is built for exactly that ABI, so go-landlock fails rather than degrades
// if it disagrees. With CGO_ENABLED=0, go-landlock applies the domain to
// every OS thread through syscall.AllThreadsSyscall (TSYNC from ABI 8). It
// also sets no_new_privs on every thread. After the call, RestrictSelf
// opens /proc/self/comm for writing and / for reading and requires EACCES
// from both, so a domain that is not in force is an error, not a silent
// success.
//
// Errors: a bad policy (relative, missing, "/" or /proc paths; a workspace
// that is not a directory) is reported before anything is changed. ABI 0
// gives an error matching ErrNotSupported (with *UnsupportedFeatureError),
// also before anything is changed. A failure inside go-landlock or of the
// final check leaves the process in an unknown state: the caller must exit
// and must not go on to publish write tools. Applied is the zero value on
// any error.
//
// Irreversible: a domain can only be tightened. Calling RestrictSelf again
// stacks a further domain (at most 16 per process). After it, mount(2) and
// every other mount-table change fail with EPERM, even where the paths are
// granted: mounts a run needs must be made by a process started before the
// call (the broker). The same holds for writing a child's uid_map and
// gid_map (beneath /proc, which no policy can grant), for reading /proc and
// /sys at all, and for cgroup files unless their directory is in
// WritePaths; run Probe before this call. Safe to call from any goroutine,
// once.
//
// Not protected against:
//   - chmod(2), chown(2), utime(2), setxattr(2), getxattr(2), stat(2),
//     readlink(2) and similar metadata calls: no Landlock ABI up to at
//     least 7 covers them, so a harness running as root can still change
//     the mode or owner of any file, and any process can learn whether a
//     path exists (the test asserts these gaps as they are);
//   - truncate(2) and open(O_TRUNC|O_RDONLY) below ABI 3, and ioctl(2) on
//     devices below ABI 5;
//   - reads and writes through file descriptors opened before the call
//     (Landlock checks at open time);
//   - anything that does not go through a path: sockets, pipes, signals,
//     ptrace of processes outside the domain is denied but of those inside
//     it is not.
func RestrictSelf(p SelfPolicy) (Applied, error) {
	info, err := probedLandlock()
	if err != nil {
		return Applied{}, fmt.Errorf("confine: restrict self: probe Landlock: %w", err)
	}
	sp, err := planSelf(p, info.ABI)
	if err != nil {
		return Applied{}, err
	}
	_ = time.Local.String() // loads the zone (see above); the result is not needed
	rules := make([]landlock.Rule, 0, len(sp.grants))
	for _, g := range sp.grants {
		rules = append(rules, landlock.PathAccess(g.rights, g.path))
	}
	cfg := landlock.Config{HandledAccessFS: sp.handled}
	if err := cfg.RestrictPaths(rules...); err != nil {
		return Applied{}, fmt.Errorf("confine: restrict self: landlock (ABI %d, handled %s): %w", info.ABI, strings.Join(rightNames(sp.handled), ","), err)
	}
	verified, err := verifySelfDomain()
	if err != nil {
		return Applied{}, err
	}
	a := Applied{ABI: info.ABI, Handled: rightNames(sp.handled), Skipped: sp.skipped, Verified: verified}
	for _, g := range sp.grants {
		a.Grants = append(a.Grants, Grant{Path: g.path, Rights: rightNames(g.rights)})
	}
	return a, nil
}

// verifySelfDomain proves the domain is in force: opening a file the process
// may otherwise write, and a directory it may otherwise list, must now fail
// with EACCES.
func verifySelfDomain() (string, error) {
	for _, c := range []struct {
		path  string
		flags int
		name  string
	}{{verifyTarget, unix.O_WRONLY, "O_WRONLY"}, {verifyReadTarget, unix.O_RDONLY | unix.O_DIRECTORY, "O_RDONLY|O_DIRECTORY"}} {
		fd, err := unix.Open(c.path, c.flags|unix.O_CLOEXEC, 0)
		if err == nil {
			unix.Close(fd)
			return "", fmt.Errorf("confine: restrict self: Landlock reported success but open(%s, %s) still succeeds: the domain is not in force", c.path, c.name)
		}
		if !errors.Is(err, unix.EACCES) {
			return "", fmt.Errorf("confine: restrict self: cannot verify the domain: open(%s, %s): %w (want EACCES)", c.path, c.name, err)
		}
	}
	return fmt.Sprintf("open(%s, O_WRONLY) and open(%s, O_RDONLY|O_DIRECTORY) denied with EACCES", verifyTarget, verifyReadTarget), nil
}
