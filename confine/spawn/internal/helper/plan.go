// Package helper is the run helper of package spawn: the code that runs as
// PID 1 of a call's new namespaces, builds the child's view, applies the
// layers and executes the program.
//
// It is its own package so that it can run before the rest of the binary
// initialises: its init function recognises the helper's argv[0] and runs
// Main right away, once the few packages it imports are initialised. The
// harness binary's other packages (providers, the CLI, the test framework)
// never initialise in a helper. So this package imports as little as it can
// (no fmt, no Landlock or seccomp library): the parent computes everything,
// down to the Landlock access masks and the raw BPF program, and the helper
// only executes the plan with raw system calls.
package helper

import (
	"errors"
	"strconv"
	"strings"
)

// Argv0 is the helper's argv[0]: internal/reexec's prefix and the entry
// point name "spawn-helper". Package spawn's tests check it matches
// reexec.Command.
const Argv0 = "b10x-reexec:spawn-helper"

// Descriptors of the helper, as the parent arranges them (ExtraFiles).
const (
	StatusFD = 3 // write end of the status pipe
	PlanFD   = 4 // read end of the plan pipe
)

// ExitSetup is the helper's exit status when a step failed; the status
// pipe says which.
const ExitSetup = 125

// Status message tags on the status pipe.
const (
	StatusReady  = 'R' // layers applied (u32 bits); execve is next
	StatusFailed = 'F' // a step failed: its name and error
	StatusExit   = 'X' // the program ended: its raw wait status (u32)
	// StatusRefused comes just before StatusExit when the filter's
	// refusals came to the init (Plan.SeccompNotify): how many in all
	// (u32), then the first of them (u32 count, each u32 nr and six u64
	// arguments), at most MaxRefused.
	StatusRefused = 'D'
	// StatusNoRoute comes just before StatusExit in a fresh network
	// namespace whose counters the init could read: how many packets of
	// the program's tree found no route out of it (u64; noRoutes).
	StatusNoRoute = 'N'
	// StatusMasked comes just before StatusExit when the init could
	// examine the view's masked files (masks.go): how many of them the
	// program's tree read (u32) and the index of each in Plan.Mounts
	// (u32), in that order, each once however often it was read.
	StatusMasked = 'M'
	// StatusAlone comes just before StatusExit when the init had no child
	// left once it reaped the program: every other process of the call has
	// ended (an orphan becomes the init's child, so a process still
	// running would be one), and the init exits next. Its caller may then
	// answer the call before the init's exit and the namespaces' teardown
	// are done.
	StatusAlone = 'A'
)

// MaxRefused is how many of a call's seccomp refusals the init keeps one
// by one (the rest it counts): the most a call lists.
const MaxRefused = 256

// Layer bits the helper reports as applied.
const (
	LayerMountNS uint32 = 1 << iota
	LayerNoNewPrivs
	LayerSeccomp
	LayerLandlock
	LayerLockedView // the program's user namespace is nested: the view's mounts are locked
	LayerNoCaps     // the program holds no capability (checked, bounding set included)
	LayerNProc      // RLIMIT_NPROC set to Plan.NProc, its enforcement proven
	// LayerSeccompListener: the filter's refusals go to the init through
	// a seccomp user notification (Plan.SeccompNotify), each answered
	// EPERM and reported (StatusRefused).
	LayerSeccompListener
)

// MountKind is one step of building the child's view.
type MountKind uint8

const (
	Bind     MountKind = iota + 1 // bind Src (a directory or, with File, a file) at Dst
	Symlink                       // a symlink at Dst whose target is Src
	Tmpfs                         // a fresh tmpfs at Dst with options Data
	Proc                          // a fresh proc at Dst for the new PID namespace
	MaskFile                      // hide the file at Dst behind an empty file of the call's own (masks.go)
	MaskDir                       // hide the directory at Dst behind an empty tmpfs
	// Rebind binds Dst over itself (read-only with RO), Dst resolved
	// beneath Src, the destination of an earlier bind, without following
	// any symbolic link; it must exist as a regular file or a directory.
	// See rebind.go.
	Rebind
	// MaskBeneath hides the regular file Dst, resolved beneath Src as a
	// Rebind's is, behind an empty file of the call's own. See rebind.go
	// and masks.go.
	MaskBeneath
	mountKindEnd
)

// Mount is one entry of the view, applied in order.
type Mount struct {
	Kind MountKind
	Src  string
	Dst  string
	RO   bool // read-only (binds, tmpfs, masks)
	File bool // the bind source is a file, not a directory
	Dev  bool // a device bind: devices stay usable (no nodev)
	Data string
	// TreeFD, when not 0, is the descriptor of a detached mount tree the
	// parent prepared (an idmapped workspace, already nosuid and nodev):
	// a Bind attaches it instead of cloning Src.
	TreeFD int
	// Pinned binds only the file the harness pinned at start: Src is
	// opened without following any symbolic link, and the bind fails
	// unless that file's st_dev and st_ino are PinDev and PinIno and its
	// kind (directory or not) is as File says. See pinned.go. On a
	// Rebind or MaskBeneath it is Dst that must be that file (rebind.go).
	Pinned         bool
	PinDev, PinIno uint64
}

// Rule is one Landlock rule: beneath Path, Access (LANDLOCK_ACCESS_FS_*
// bits) is allowed.
type Rule struct {
	Path   string
	Access uint64
}

// Plan is everything the helper does, computed by the parent: the helper
// only executes it, in order, and reports the first failure.
type Plan struct {
	// Path is the program, as the view shows it; ProgDev and ProgIno are
	// the st_dev and st_ino of the file pinned there at start. The second
	// stage opens Path without following any link and executes it by
	// descriptor only when it is that file (see execProgram).
	Path             string
	ProgDev, ProgIno uint64
	Argv             []string
	Env              []string
	Dir              string
	Hostname         string
	Mounts           []Mount
	Loopback         bool // bring lo up (a fresh network namespace)
	// NestUser runs the program in a user namespace nested in the
	// helper's, so every mount of the view is locked (made in a more
	// privileged namespace than the program's). It needs the helper to
	// have a user namespace of its own.
	NestUser bool
	// ChildUID and ChildGID are the ids, in the helper's user namespace,
	// that the program runs as: with NestUser its namespace maps NSUID
	// and NSGID onto them, else it switches to them. Either way it holds
	// no capability.
	ChildUID, ChildGID uint32
	// NSUID and NSGID are the program's ids in its own user namespace
	// (NestUser): 0, root of it, or the host ids it runs as, so that
	// id(1) tells the truth (spawn.Spec.CallerIDs).
	NSUID, NSGID uint32
	Seccomp      []byte // raw classic BPF (struct sock_filter, 8 bytes each); empty: none
	// SeccompNotify makes every EPERM of the filter a seccomp user
	// notification (SECCOMP_RET_USER_NOTIF, Linux 5.0): the program's stage
	// loads it with SECCOMP_FILTER_FLAG_NEW_LISTENER and hands the listener
	// to the init, which answers each refused call with EPERM, as the
	// filter would have, and reports it before the program's exit
	// (StatusRefused), so each refusal is tied to this call (decision
	// 0090). Where the stage's filter stack already has a listener (EBUSY:
	// the harness runs under one) the stage loads the filter as it is.
	SeccompNotify bool
	// Landlock: LandlockFS and LandlockScoped are the ruleset's handled
	// filesystem rights and scopes; both zero applies no domain.
	LandlockFS     uint64
	LandlockScoped uint64
	// LandlockFlags is landlock_restrict_self's flags argument
	// (LANDLOCK_RESTRICT_SELF_LOG_*, Landlock ABI 7): 0, the kernel's
	// default, logs only the denials of this stage before its execve, so
	// none of the program's; RestrictSelfLogNewExecOn makes the kernel
	// log the program's denials as audit records (when audit is enabled),
	// for the harness to attribute to the call (decision 0080).
	LandlockFlags uint32
	// DomainName, when not "", is the name (comm) the program's stage
	// takes just before it creates its Landlock domain: a token of the
	// sandbox, at most 15 bytes, by which the kernel's audit record of the
	// domain names its creator (decision 0080). The stage reads it back
	// and fails otherwise; the program gets its own name at execve.
	DomainName string
	Rules      []Rule
	// Probe stops the program's stage after every step before execve has
	// succeeded and its StatusReady is written: it exits 0 and Path is
	// never executed. It proves a call would get that far.
	Probe bool
	// ProxyFD, when not 0, is the helper's end of a Unix stream socket:
	// in the fresh network namespace the helper opens a TCP listener at
	// 127.0.0.1:ProxyPort and sends it there (SCM_RIGHTS) before the
	// program starts, for the harness to serve the program's proxy.
	ProxyFD   int
	ProxyPort uint16
	// GoFD, when not 0, is the helper's end of a Unix stream socket and
	// makes the sandbox a pre-started one: Path, Argv, Env and Dir are
	// empty here, and once the program's stage is confined the helper
	// writes GoReady on it and waits for the call (see Go), which it hands
	// to the stage. A pre-started sandbox serves one call, never a second.
	GoFD int
	// NProc, when not 0, is the program's RLIMIT_NPROC, soft and hard:
	// its processes and threads, counted by the kernel per user
	// namespace, for calls without a cgroup leaf (limits_from enclosing).
	// The program's stage proves the kernel enforces it (limitProcs).
	NProc uint64
}

// GoReady is the byte a pre-started sandbox's helper writes on Plan.GoFD
// once its program's stage has taken every step it can before the call.
const GoReady = 'r'

// Go is the call a pre-started sandbox runs: what Plan.Path, Argv, Env and
// Dir would have said, and which of the program's standard streams are
// sent with it (bit i for descriptor i; the others stay /dev/null).
type Go struct {
	Path     string
	Dev, Ino uint64 // the program's pinned identity (Plan.ProgDev, ProgIno)
	Argv     []string
	Env      []string
	Dir      string
	Stdio    uint8
}

// Encode appends the call to e, behind its length.
func (g *Go) Encode(e *Encoder) {
	var body Encoder
	body.Str(g.Path)
	body.U64(g.Dev)
	body.U64(g.Ino)
	body.Strs(g.Argv)
	body.Strs(g.Env)
	body.Str(g.Dir)
	body.U8(g.Stdio)
	e.U32(uint32(len(body.B)))
	e.B = append(e.B, body.B...)
}

// DecodeGo reads a call (without its length); d.Err says whether it was
// well formed.
func DecodeGo(d *Decoder) *Go {
	g := &Go{Path: d.Str(), Dev: d.U64(), Ino: d.U64(), Argv: d.Strs(), Env: d.Strs(), Dir: d.Str(), Stdio: d.U8()}
	if d.Err == nil && (len(g.Argv) == 0 || g.Path == "" || g.Ino == 0 || g.Stdio > 7) {
		d.Err = errors.New("spawn: malformed call: empty argv or path, no program identity, or unknown streams")
	}
	return g
}

// Encode appends the plan to e.
func (p *Plan) Encode(e *Encoder) {
	e.Str(p.Path)
	e.U64(p.ProgDev)
	e.U64(p.ProgIno)
	e.Strs(p.Argv)
	e.Strs(p.Env)
	e.Str(p.Dir)
	e.Str(p.Hostname)
	e.U32(uint32(len(p.Mounts)))
	for _, m := range p.Mounts {
		e.U8(uint8(m.Kind))
		e.Str(m.Src)
		e.Str(m.Dst)
		e.Bool(m.RO)
		e.Bool(m.File)
		e.Bool(m.Dev)
		e.Str(m.Data)
		e.U32(uint32(m.TreeFD))
		e.Bool(m.Pinned)
		e.U64(m.PinDev)
		e.U64(m.PinIno)
	}
	e.Bool(p.Loopback)
	e.Bool(p.NestUser)
	e.U32(p.ChildUID)
	e.U32(p.ChildGID)
	e.U32(p.NSUID)
	e.U32(p.NSGID)
	e.Str(string(p.Seccomp))
	e.Bool(p.SeccompNotify)
	e.U64(p.LandlockFS)
	e.U64(p.LandlockScoped)
	e.U32(p.LandlockFlags)
	e.Str(p.DomainName)
	e.U32(uint32(len(p.Rules)))
	for _, r := range p.Rules {
		e.Str(r.Path)
		e.U64(r.Access)
	}
	e.Bool(p.Probe)
	e.U32(uint32(p.ProxyFD))
	e.U32(uint32(p.ProxyPort))
	e.U32(uint32(p.GoFD))
	e.U64(p.NProc)
}

// DecodePlan reads a plan; d.Err says whether it was well formed.
func DecodePlan(d *Decoder) *Plan {
	p := &Plan{}
	p.Path = d.Str()
	p.ProgDev = d.U64()
	p.ProgIno = d.U64()
	p.Argv = d.Strs()
	p.Env = d.Strs()
	p.Dir = d.Str()
	p.Hostname = d.Str()
	n := d.Count(33, "mounts")
	for i := 0; i < n && d.Err == nil; i++ {
		var m Mount
		m.Kind = MountKind(d.U8())
		m.Src = d.Str()
		m.Dst = d.Str()
		m.RO = d.Bool()
		m.File = d.Bool()
		m.Dev = d.Bool()
		m.Data = d.Str()
		m.TreeFD = int(d.U32())
		m.Pinned = d.Bool()
		m.PinDev = d.U64()
		m.PinIno = d.U64()
		if m.Kind == 0 || m.Kind >= mountKindEnd {
			d.Failf("mount kind " + strconv.Itoa(int(m.Kind)))
		}
		p.Mounts = append(p.Mounts, m)
	}
	p.Loopback = d.Bool()
	p.NestUser = d.Bool()
	p.ChildUID = d.U32()
	p.ChildGID = d.U32()
	p.NSUID = d.U32()
	p.NSGID = d.U32()
	p.Seccomp = []byte(d.Str())
	if len(p.Seccomp)%8 != 0 {
		d.Failf("seccomp program of " + strconv.Itoa(len(p.Seccomp)) + " bytes")
	}
	p.SeccompNotify = d.Bool()
	p.LandlockFS = d.U64()
	p.LandlockScoped = d.U64()
	p.LandlockFlags = d.U32()
	p.DomainName = d.Str()
	if len(p.DomainName) > maxDomainName || strings.IndexByte(p.DomainName, 0) >= 0 {
		d.Failf("domain name of " + strconv.Itoa(len(p.DomainName)) + " bytes, or holding a NUL")
	}
	n = d.Count(12, "rules")
	for i := 0; i < n && d.Err == nil; i++ {
		p.Rules = append(p.Rules, Rule{Path: d.Str(), Access: d.U64()})
	}
	p.Probe = d.Bool()
	p.ProxyFD = int(d.U32())
	if port := d.U32(); port > 65535 {
		d.Failf("proxy port " + strconv.Itoa(int(port)))
	} else {
		p.ProxyPort = uint16(port)
	}
	p.GoFD = int(d.U32())
	p.NProc = d.U64()
	if d.Err == nil && (len(p.Argv) == 0 || p.ProgIno == 0) && p.GoFD == 0 {
		d.Err = errors.New("spawn: malformed plan: empty argv or no program identity")
	}
	return p
}
