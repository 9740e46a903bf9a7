package spawn

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/b10x/harness/cgroup"
	"github.com/b10x/harness/confine"
	"github.com/b10x/harness/confine/spawn/internal/helper"
)

// Spec is one program to run. It is a plain value; Run does not keep it.
//
// Every path is absolute. Run never looks anything up through PATH and never
// passes anything through a shell: Argv reaches execve(2) byte for byte.
// The zero value is not runnable (Path and Workspace are required).
type Spec struct {
	// Program is the file to execute, pinned once, at start (see Pin), as
	// the workspace is: Run executes exactly that inode or nothing. When it
	// lies outside every directory of the child's view, that one file is
	// bound into the view read-only at Program.Path (only while it is still
	// the file pinned); either way the program's stage opens Program.Path
	// in the view without following any link, checks it is the pinned file
	// and executes it by descriptor (execveat with AT_EMPTY_PATH). A call
	// whose program was moved or replaced since it was pinned fails at its
	// "program <path>" step, before anything runs.
	//
	// What it does not protect against: the content of the pinned file
	// itself (a child that may write it can change what runs, inside the
	// same view and domain), and a "#!" script's text, which its
	// interpreter opens by name after the check (the kernel can only pass
	// a script's interpreter a name); a child of another call that replaces
	// the script in that instant has its own file of the view interpreted,
	// never a file outside the view. See
	// docs/decisions/0071-programs-pinned.md.
	Program Pinned
	// Argv is the argument vector as given; Argv[0] is the name the caller
	// matched. It must not be empty. No element may hold a NUL byte.
	Argv []string
	// Env is the complete environment of the child, "NAME=value" strings.
	// Nothing else reaches it: not the harness's environment, not PATH.
	Env []string
	// Dir is the absolute working directory. It must exist in the child's
	// view (normally beneath Workspace); otherwise the call fails at the
	// "chdir" step and the program never runs.
	Dir string
	// Workspace is the workspace root, a directory pinned at start (see
	// Pin). The child sees it at Workspace.Path, readable, writable and
	// executable. A call whose workspace is no longer the pinned directory
	// fails at its "bind <path>" step.
	Workspace Pinned
	// ReadPaths are extra files or directories the child may read and
	// execute (--allow-read), each pinned at start as Workspace is and seen
	// at its Path. The entries of /etc that are hidden from the child stay
	// visible at and beneath a path named here.
	ReadPaths []Pinned
	// WritePaths are extra files or directories the child may read, write
	// and execute (--allow-write), pinned as ReadPaths are.
	WritePaths []Pinned
	// ReadOnly are files and directories strictly beneath Workspace.Path,
	// canonical absolute paths, that the child sees read-only: each is
	// bound over itself, read-only, and since the program's mount
	// namespace is nested in the helper's, the kernel locks the bind. The
	// child cannot write, truncate, chmod, chown, rename, unlink or
	// replace such a path (EROFS or EBUSY), nor anything beneath a
	// directory named here. Each must exist as a regular file or a
	// directory when the call starts, reached from the workspace without
	// any symbolic link; otherwise the call fails at its
	// "hold read-only <path>" step and the program never runs.
	//
	// Every directory between Workspace.Path and a ReadOnly or Anchored
	// path is anchored too (see Anchored), so the path cannot be moved
	// away with a parent either and another put in its place.
	//
	// What it does not protect against: a hard link to the same file that
	// already exists elsewhere in the workspace (writes through it change
	// the file); a path that does not exist at the start of the call (there
	// is nothing to bind: the caller must check afterwards). At most
	// MaxHeld paths, ReadOnly and Anchored together.
	ReadOnly []string
	// Anchored are directories strictly beneath Workspace.Path, canonical
	// absolute paths, that the child may write in but cannot rename,
	// remove or replace: each is bound over itself read-write, and a mount
	// point cannot be renamed or removed (EBUSY). They must exist as
	// ReadOnly paths must; the step is "hold in place <path>".
	Anchored []string
	// Masked are regular files strictly beneath Workspace.Path, canonical
	// absolute paths, that the child sees as empty: an empty file of the
	// call's own is bound over each (a write to it fails), and (as every
	// mount of the view) locked, so it cannot be unmounted, renamed or
	// removed, nor linked elsewhere (EXDEV); the ones the program reads
	// are told in Result.MaskedOpened. Each must exist as a regular file reached from the
	// workspace without any symbolic link when the call starts; otherwise
	// the call fails at its "mask <path>" step and the program never runs.
	// At most MaxHeld paths. (The caller's read scope: what the model must
	// not be shown.)
	//
	// What it does not protect against: another name of the same file (a
	// hard link that already exists elsewhere in the workspace), and a
	// file created during the call.
	Masked []string
	// HeldIDs are, by path, the files ReadOnly, Anchored and Masked paths
	// were when the caller found them: such a path is bound only while it
	// is still that file (device and inode), else the call fails at its
	// step (ESTALE) before the program runs. A path without one is bound
	// as it is found.
	HeldIDs map[string]FileID
	// Hold, when not nil, says ReadOnly, Anchored and Masked at the
	// moment the view is built, while no program of the same Runner can
	// change the workspace (docs/decisions/0097-quiet-while-binding.md):
	// Run calls it once, after every other call of the Runner whose
	// program may run has been paused (its cgroup leaf frozen; a call
	// without a leaf, or whose leaf cannot be frozen, runs on: nothing
	// pauses it) and
	// before this call's view is built, and no other call's program runs
	// again until the view holds them (the program is about to start) or
	// the start failed. So a program of another call cannot move a path
	// between the moment the caller finds it and the moment it is bound.
	// (Pre-started sandboxes may be built meanwhile: each path they bind
	// by name is checked against its identity, HeldIDs.)
	// What it returns replaces the three fields; its error fails the call
	// before anything starts and is Run's error, as is. Calls whose Spec
	// binds paths by name (ReadOnly, Anchored, Masked) are started in such
	// a pause whether or not Hold is set.
	//
	// What it does not protect against: a process outside the Runner's
	// calls (the user, another harness) changing the workspace meanwhile.
	Hold func() (Held, error)
	// After, when not nil, is called by Run once the call's whole tree is
	// gone, when Hold was called and returned no error and Held.After, with the Runner's
	// other calls paused as for Hold (it waits for the turn; when the
	// others cannot be paused within the bound a turn has, it is called
	// without). The caller checks there what the program left, where no
	// other program of the Runner can move it meanwhile.
	After func()
	// CallerIDs runs the program, inside its user namespace, as the host
	// uid and gid it runs as (the harness's own, or the workspace owner's
	// when the harness is root; docs/decisions/0037-child-identity.md),
	// so that id(1), $(id -u) and the owner of the files it makes tell
	// the truth, and programs that refuse root (or act differently as
	// root: npm, pip, initdb) run as they would for the user. False: it
	// is root of that namespace. Either way it is the same host id and
	// holds no capability. Where there is no user namespace the program
	// switches to the host ids, whichever this says.
	CallerIDs bool
	// Net false (the default) gives the child a fresh network namespace that
	// holds only a loopback interface: nothing outside the call is
	// reachable. Net true leaves the host's network reachable; the Landlock
	// domain, the seccomp filter and the other namespaces still apply.
	Net bool
	// ProxyPort, when not 0, has the helper open the proxy listener at
	// 127.0.0.1:ProxyPort inside the call's network namespace and hand it
	// over on Stdio.Proxy (which it requires); Net must be false.
	ProxyPort int
	// Limits are the cgroup limits of the call's leaf. The zero value sets
	// none. A limit is applied only when the Runner has a cgroup manager
	// whose leaves offer its controller; Result.Layers says which were, and
	// Requirements can make a missing one fatal.
	Limits cgroup.Limits
	// NProc, when not 0, is the program's RLIMIT_NPROC: its processes and
	// threads, which the kernel counts per real uid in the call's own user
	// namespace, for calls that get no cgroup leaf (limits_from
	// enclosing, where a pod's pids.max is out of sight). The helper
	// proves it enforced before the program starts, or the call fails at
	// its "pids rlimit" step; Result.Layers then names
	// confine.LayerPidsRlimit.
	NProc uint64
	// Timeout is the wall-clock lifetime of the whole process tree, counted
	// from the start of the helper, or in a pre-started sandbox from the
	// moment the call is handed to it (the time it waited for the call is
	// not the call's). At the deadline every process of the
	// call is killed and Result.TimedOut is true. 0 means no deadline (the
	// context still applies).
	Timeout time.Duration
	// Grace is how long the program has to end after its call's context
	// ends before the whole tree is killed: the sandbox's init is sent
	// SIGTERM, which it forwards to the program, and the tree is killed
	// Grace later if it has not ended by then (it is killed at once at
	// Timeout, whatever Grace says). The zero value kills at once, as a
	// negative one does. The Result is then the program's own, and the
	// error still says the context ended it.
	Grace time.Duration
	// TmpSize caps, in bytes, each of the child's private /tmp and /dev/shm
	// (two tmpfs mounts, so the child may hold up to twice TmpSize there). A
	// write past the cap fails with ENOSPC. The zero value means
	// DefaultTmpSize; a negative value is an error. The kernel rounds the
	// cap up to whole pages.
	//
	// What is written there is memory. With a memory controller it is also
	// charged to the call's leaf, so Limits.MemoryMax bounds it as well;
	// without one this cap is the only bound. It is a cap, not a
	// reservation: a cap larger than the host's memory is accepted and then
	// bounds nothing. The number of files is capped too, at one per 4 KiB
	// of the cap (at least 1024): empty files cost kernel memory that the
	// size does not count.
	TmpSize int64
	// Probe makes Run do everything a call does — namespaces, cgroup leaf,
	// every mount of the view, identity, capabilities, no_new_privs,
	// seccomp, Landlock — and stop just before executing Path, which is
	// never run (it must still exist: it is bound as a call binds it).
	// Result.ExitCode is 0 when every step succeeded. It proves, on this
	// host, that a call with this Spec would reach its program.
	Probe bool
}

// DefaultTmpSize is the cap of each of a child's /tmp and /dev/shm when
// Spec.TmpSize is zero: 512 MiB.
const DefaultTmpSize int64 = 512 << 20

// tmpInodes is the cap on the number of files of a tmpfs of size bytes.
func tmpInodes(size int64) int64 { return max(size>>12, 1024) }

// tmpfsData is the mount data of the child's /tmp and /dev/shm.
func tmpfsData(s Spec) string {
	size := s.TmpSize
	if size == 0 {
		size = DefaultTmpSize
	}
	return fmt.Sprintf("mode=1777,size=%d,nr_inodes=%d", size, tmpInodes(size))
}

// Stdio are the child's standard streams. A nil field means /dev/null. The
// caller owns the files and closes its ends; Run does not close them.
//
// The child gets these descriptors themselves (dup'ed), not copies of the
// data: a terminal passed here is the child's terminal. Pass pipes when the
// output must be captured or bounded (see Capture).
type Stdio struct {
	Stdin, Stdout, Stderr *os.File
	// Proxy, with Spec.ProxyPort, is the helper's end of a Unix stream
	// socket (the caller keeps the other): in the call's fresh network
	// namespace the helper opens a TCP listener at 127.0.0.1:ProxyPort and
	// sends it on Proxy (SCM_RIGHTS, one byte 'L') before the program
	// starts. The caller serves it (package egress); the program holds
	// neither descriptor.
	Proxy *os.File
	// Signals, when not nil, carries signals to the program while the call
	// runs: each is sent to the sandbox's init, which forwards SIGTERM,
	// SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2 and SIGWINCH to the
	// program (others are not forwarded). It is how a supervisor such as
	// exec passes on what it is sent; the Runner never closes it. A
	// broker's calls do not carry it (Spec.Grace does cross).
	Signals <-chan os.Signal
}

// Result is how one call ended. It is a plain value.
type Result struct {
	// ExitCode is the program's exit status, or -1 when a signal ended it.
	ExitCode int
	// Signal names the signal that ended the program ("SIGKILL"), "" when it
	// exited.
	Signal string
	// TimedOut is true when Spec.Timeout ended the call.
	TimedOut bool
	// OOMKilled is true when the cgroup's memory limit killed a process of
	// the call (memory.events oom_kill went up).
	OOMKilled bool
	// Duration is the wall-clock time from starting the helper (in a
	// pre-started sandbox: from handing it the call) to the end of the
	// whole tree.
	Duration time.Duration
	// MemoryPeak is the leaf's memory.peak in bytes, -1 when unknown (no
	// leaf, or no memory controller).
	MemoryPeak int64
	// PidsPeak is the leaf's pids.peak, -1 when unknown.
	PidsPeak int64
	// HostUID and HostGID are the host ids the program ran as: never 0
	// (see ErrRootWorkspace). Zero when the program did not start.
	HostUID, HostGID int
	// LockedView is true when the program ran in a user namespace nested
	// in the helper's, so the kernel locked every mount of its view.
	LockedView bool
	// Prestarted is true when the call ran in a sandbox started before
	// it came (BrokerOptions.Prestart): the same layers and view a cold
	// start would have built at that moment; Duration counts from the
	// hand-over.
	Prestarted bool
	// DomainName is the name (comm) the program's stage took just before
	// it created the program's Landlock domain, where Landlock logs the
	// program's denials (ABI 7): a random token of this call's sandbox,
	// by which the kernel's audit record of the domain names its creator,
	// so the denials can be tied to this call alone
	// (audit.Reader.WatchName; decision 0080). "" where none was taken.
	// The program gets its own name at execve.
	DomainName string
	// SeccompAttributed is true when the child's seccomp filter handed
	// every call it refused to the call's init (a seccomp user
	// notification, answered EPERM as the filter would have; decision
	// 0090): SeccompRefused then lists the first of them, in order, each
	// as a denial line's operation ("socket(AF_PACKET)",
	// "unshare(CLONE_NEWUSER)", "mount"), at most helper.MaxRefused (256),
	// and SeccompRefusedAll says how many there were in all. False where
	// the kernel cannot notify (ProbeSeccompDenials says why), where the
	// harness's own filter stack holds a listener already, or when the
	// program never ran.
	SeccompAttributed bool
	SeccompRefused    []string
	SeccompRefusedAll int
	// NoRouteCounted is true when the call had a network namespace of its
	// own and its init read the namespace's counters when the program
	// ended: NoRoute is then how many connections and datagrams the
	// program's tree tried to send to an address outside it, each
	// refused with ENETUNREACH (the namespace has only loopback; with the
	// proxy, a program that ignores the proxy variables). The kernel
	// counts them and keeps no destination. False with the host's
	// network, or where the counters could not be read.
	NoRouteCounted bool
	NoRoute        int
	// MaskedWatched is true when the call's init examined every file the
	// view masks (the entries of /etc not every user may read, and
	// Spec.Masked): each mask is an empty file of its own whose access
	// time the init reads when the program ends (decision 0095).
	// MaskedOpened then lists, in the view's order, each masked path the
	// program's tree read (as empty: no layer refuses such a read), once
	// however often; an open without a read, an O_PATH open, a stat and an
	// open the kernel refused (a write) are not listed. Where the harness
	// is not root the program owns the masks' files and could hide a read
	// (see the decision). False when the program never ran. A masked
	// directory (an empty tmpfs) is not told.
	MaskedWatched bool
	MaskedOpened  []string
	// Layers names the confinement layers actually applied to this child,
	// with the names of package confine (confine.LayerLandlockChild, ...),
	// in that package's report order.
	Layers []string
}

// SetupError reports that a confinement step failed before execve(2): the
// target program never ran. Step names the step ("mount /usr", "seccomp",
// "landlock", "exec", "requirements", ...). Err is the cause; when it came
// from a system call, errors.Is(err, syscall.EPERM) and the like work, also
// across the broker.
type SetupError struct {
	Step string
	Err  error
}

// Error says which step failed and why, on one line.
func (e *SetupError) Error() string {
	return fmt.Sprintf("spawn: confinement step %q failed, the program did not run: %v", e.Step, e.Err)
}

// Unwrap returns the cause.
func (e *SetupError) Unwrap() error { return e.Err }

// ProcStep is the step of a call that mounts its fresh /proc.
const ProcStep = "mount proc /proc"

// ProcHint says why a host refuses a call's new /proc, and the fix (see
// ProcRefused). A run call's error there carries it.
const ProcHint = helper.ProcHint

// ProcRefused reports whether err is a call's failure to mount its fresh
// /proc because the kernel refused it (EPERM): the host is a container
// whose /proc has masked or read-only paths, which the kernel requires to
// be fully visible before it lets a user namespace mount a new proc. No
// call can run on such a host.
func ProcRefused(err error) bool {
	var se *SetupError
	return errors.As(err, &se) && se.Step == ProcStep && errors.Is(err, syscall.EPERM)
}

// Runner runs programs under confinement. Implementations (NewDirect,
// *Broker) are safe for concurrent use: calls run side by side, each with its
// own namespaces, view, Landlock domain and cgroup leaf.
//
// Run returns a Result and a nil error whenever the program was started,
// whatever its exit status, including a timeout (Result.TimedOut). It
// returns a *SetupError when a confinement step failed before execve (the
// program never ran), and another error for bad input or when ctx ended the
// call (the tree is then killed and the Result says how it ended, with
// errors.Is(err, ctx.Err())).
type Runner interface {
	Run(ctx context.Context, s Spec, io Stdio) (Result, error)
}

// Options configure a Runner. The zero value runs without a cgroup and with
// the baseline requirements (see Requirements).
type Options struct {
	// Cgroup gives each call its own leaf (CLONE_INTO_CGROUP), whose
	// cgroup.kill ends the tree and whose figures fill the Result. nil: no
	// leaf; the whole tree still dies with its PID namespace's init.
	Cgroup *cgroup.Manager
	// Require says which layers must hold. A required layer that cannot be
	// applied makes Run return a *SetupError; the program never runs.
	Require Requirements
}

// Requirements name the layers a call must have. The zero value requires
// the baseline: a Landlock domain for the child, PID, mount, network (unless
// Spec.Net), IPC and UTS namespaces, no_new_privs and the seccomp filter, and
// a user namespace when the harness is not root. It is a plain value.
//
// Whatever the requirements, a layer the host offers is always applied, and
// a layer whose application fails is always fatal: only the absence of a
// layer on this host can be tolerated, and only when it is neither in the
// baseline nor in Layers, or is named in AllowMissing. Three layers can be
// absent: landlock-child (a kernel without Landlock), seccomp (an
// architecture without a filter) and userns (root on a kernel that refuses
// one; the helper then drops every capability instead). The PID, mount,
// network, IPC and UTS namespaces are always asked for: a kernel that
// refuses one fails the call at its "clone" step.
type Requirements struct {
	// Layers are required in addition to the baseline, e.g.
	// confine.LayerCgroupLeaf, confine.LayerPidsLimit, confine.LayerUserNS.
	// A limit layer is needed only when Spec.Limits sets that limit.
	Layers []string
	// AllowMissing lists baseline layers the caller accepts to run without
	// when the host lacks them: an explicit opt-in, e.g. for a host without
	// Landlock (confine.LayerLandlockChild) or without seccomp
	// (confine.LayerSeccomp).
	AllowMissing []string
}

// baseline is the set of layers required unless waived.
func (r Requirements) required(s Spec, root bool) []string {
	req := []string{confine.LayerLandlockChild, confine.LayerPidNS, confine.LayerMountNS, confine.LayerIPCNS, confine.LayerUTSNS, confine.LayerNoNewPrivs, confine.LayerSeccomp}
	if !s.Net {
		req = append(req, confine.LayerNetNS)
	}
	if !root {
		req = append(req, confine.LayerUserNS)
	}
	req = slices.DeleteFunc(req, func(l string) bool { return slices.Contains(r.AllowMissing, l) })
	for _, l := range r.Layers {
		if !slices.Contains(req, l) {
			req = append(req, l)
		}
	}
	return req
}

// validate checks a Spec for bad input: one clear error, never a panic.
func (s Spec) validate() error {
	if err := s.Program.check("Spec.Program"); err != nil {
		return err
	}
	if s.Program.Dir {
		return fmt.Errorf("spawn: Spec.Program %q: a directory, not a program", s.Program.Path)
	}
	if len(s.Argv) == 0 {
		return errors.New("spawn: Spec.Argv is empty: want at least argv[0]")
	}
	if err := s.Workspace.check("Spec.Workspace"); err != nil {
		return err
	}
	if !s.Workspace.Dir {
		return fmt.Errorf("spawn: Spec.Workspace %q: not a directory", s.Workspace.Path)
	}
	if s.Dir == "" || !isAbs(s.Dir) {
		return fmt.Errorf("spawn: Spec.Dir %q: want an absolute path", s.Dir)
	}
	if s.Timeout < 0 {
		return fmt.Errorf("spawn: Spec.Timeout %v is negative", s.Timeout)
	}
	if s.ProxyPort < 0 || s.ProxyPort > 65535 || (s.ProxyPort > 0 && s.Net) {
		return fmt.Errorf("spawn: Spec.ProxyPort %d: want a port, and a fresh network namespace (Net false)", s.ProxyPort)
	}
	if s.TmpSize < 0 {
		return fmt.Errorf("spawn: Spec.TmpSize %d is negative", s.TmpSize)
	}
	check := func(what string, v string) error {
		if strings.IndexByte(v, 0) >= 0 {
			return fmt.Errorf("spawn: %s holds a NUL byte: %q", what, v)
		}
		return nil
	}
	for _, f := range []struct{ what, v string }{{"Spec.Dir", s.Dir}} {
		if err := check(f.what, f.v); err != nil {
			return err
		}
	}
	for i, a := range s.Argv {
		if err := check(fmt.Sprintf("Spec.Argv[%d]", i), a); err != nil {
			return err
		}
	}
	for i, e := range s.Env {
		if err := check(fmt.Sprintf("Spec.Env[%d]", i), e); err != nil {
			return err
		}
		if !strings.Contains(e, "=") {
			return fmt.Errorf("spawn: Spec.Env[%d] %q: want NAME=value", i, e)
		}
	}
	if err := s.checkHeld(); err != nil {
		return err
	}
	for _, list := range []struct {
		what  string
		paths []Pinned
	}{{"Spec.ReadPaths", s.ReadPaths}, {"Spec.WritePaths", s.WritePaths}} {
		for i, p := range list.paths {
			if err := p.check(fmt.Sprintf("%s[%d]", list.what, i)); err != nil {
				return err
			}
		}
	}
	return nil
}

func isAbs(p string) bool { return strings.HasPrefix(p, "/") }

// Held are the paths a call's view holds by name (Spec.Hold): Spec's
// ReadOnly, Anchored, Masked and HeldIDs, with the same meaning and bounds.
type Held struct {
	ReadOnly, Anchored, Masked []string
	IDs                        map[string]FileID
	// After says whether Spec.After is wanted for this call: false drops
	// it (there is nothing to check that another call could hide, and no
	// turn is taken for it).
	After bool
}

// FileID is a file's identity: its device and inode (st_dev, st_ino).
type FileID struct{ Dev, Ino uint64 }

// withHeld is s with h's paths, checked as a Spec's.
func (s Spec) withHeld(h Held) (Spec, error) {
	s.ReadOnly, s.Anchored, s.Masked, s.HeldIDs, s.Hold = h.ReadOnly, h.Anchored, h.Masked, h.IDs, nil
	if !h.After {
		s.After = nil
	}
	return s, s.checkHeld()
}

// bindsByName reports whether s's view binds workspace paths by name.
func (s Spec) bindsByName() bool {
	return len(s.ReadOnly)+len(s.Anchored)+len(s.Masked) > 0
}

// pin sets m's identity from s.HeldIDs, when it holds one for m.Dst.
func (s Spec) pin(m helper.Mount) helper.Mount {
	if id, ok := s.HeldIDs[m.Dst]; ok {
		m.Pinned, m.PinDev, m.PinIno = true, id.Dev, id.Ino
	}
	return m
}

// MaxHeld bounds Spec.ReadOnly and Spec.Anchored together: each path is a
// mount of the child's view (and each directory above one another), made
// on every call.
const MaxHeld = 1024

// checkHeld validates Spec.ReadOnly and Spec.Anchored.
func (s Spec) checkHeld() error {
	if n := len(s.ReadOnly) + len(s.Anchored); n > MaxHeld {
		return fmt.Errorf("spawn: Spec.ReadOnly and Spec.Anchored hold %d paths, above MaxHeld (%d)", n, MaxHeld)
	}
	if n := len(s.Masked); n > MaxHeld {
		return fmt.Errorf("spawn: Spec.Masked holds %d paths, above MaxHeld (%d)", n, MaxHeld)
	}
	for _, list := range []struct {
		what  string
		paths []string
	}{{"Spec.ReadOnly", s.ReadOnly}, {"Spec.Anchored", s.Anchored}, {"Spec.Masked", s.Masked}} {
		for i, p := range list.paths {
			switch {
			case strings.IndexByte(p, 0) >= 0:
				return fmt.Errorf("spawn: %s[%d] holds a NUL byte: %q", list.what, i, p)
			case !isAbs(p) || filepath.Clean(p) != p:
				return fmt.Errorf("spawn: %s[%d] %q: want a canonical absolute path", list.what, i, p)
			case p == s.Workspace.Path || !within(p, s.Workspace.Path):
				return fmt.Errorf("spawn: %s[%d] %q: not strictly beneath the workspace %s", list.what, i, p, s.Workspace.Path)
			}
		}
	}
	return nil
}

// masks returns the mounts of the child's view for Spec.Masked, sorted.
func (s Spec) masks() []helper.Mount {
	out := make([]helper.Mount, 0, len(s.Masked))
	for _, p := range slices.Sorted(slices.Values(s.Masked)) {
		out = append(out, s.pin(helper.Mount{Kind: helper.MaskBeneath, Src: s.Workspace.Path, Dst: p, RO: true, File: true}))
	}
	return slices.CompactFunc(out, func(a, b helper.Mount) bool { return a.Dst == b.Dst })
}

// held returns the rebinds of the child's view for Spec.ReadOnly and
// Spec.Anchored: a path beneath a read-only one is dropped (the read-only
// bind covers it), and every directory between the workspace and a held
// path is anchored. Parents come before their children.
func (s Spec) held() []helper.Mount {
	if len(s.ReadOnly) == 0 && len(s.Anchored) == 0 {
		return nil
	}
	ro := map[string]bool{}
	for _, p := range s.ReadOnly {
		ro[p] = true
	}
	covered := func(p string) bool {
		for d := filepath.Dir(p); d != s.Workspace.Path && len(d) > len(s.Workspace.Path); d = filepath.Dir(d) {
			if ro[d] {
				return true
			}
		}
		return false
	}
	kind := map[string]bool{} // path -> read-only
	for _, p := range s.ReadOnly {
		if !covered(p) {
			kind[p] = true
		}
	}
	for _, p := range s.Anchored {
		if !ro[p] && !covered(p) {
			kind[p] = false
		}
	}
	for p := range kind {
		for d := filepath.Dir(p); d != s.Workspace.Path && len(d) > len(s.Workspace.Path); d = filepath.Dir(d) {
			if _, ok := kind[d]; !ok {
				kind[d] = false
			}
		}
	}
	out := make([]helper.Mount, 0, len(kind))
	for p, r := range kind {
		out = append(out, s.pin(helper.Mount{Kind: helper.Rebind, Src: s.Workspace.Path, Dst: p, RO: r}))
	}
	slices.SortFunc(out, func(a, b helper.Mount) int {
		if d := depth(a.Dst) - depth(b.Dst); d != 0 {
			return d
		}
		return strings.Compare(a.Dst, b.Dst)
	})
	return out
}

// signalName names a signal the way Result.Signal does ("SIGKILL").
func signalName(sig syscall.Signal) string {
	if n := unix.SignalName(sig); n != "" {
		return n
	}
	return fmt.Sprintf("signal %d", int(sig))
}
