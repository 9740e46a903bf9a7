package spawn

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"

	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"

	"github.com/b10x/harness/confine/spawn/internal/helper"
)

// presets maps a Landlock ABI to go-landlock's configuration that handles
// every right of that ABI. The child's Config is always one of these,
// explicitly, never BestEffort: a kernel below the ABI makes the ruleset
// fail, and the helper then refuses to run the program.
var presets = []landlock.Config{1: landlock.V1, 2: landlock.V2, 3: landlock.V3, 4: landlock.V4, 5: landlock.V5, 6: landlock.V6, 7: landlock.V7, 8: landlock.V8, 9: landlock.V9, 10: landlock.V10, 11: landlock.V11}

// maxKnownABI is the newest ABI this build can express; a newer kernel is
// used at this level (it keeps supporting every older ABI).
const maxKnownABI = 11

// childConfig is the Config of the child's domain at abi: every filesystem
// right of that ABI handled, and on ABI 6 and later signals and abstract
// unix sockets scoped to the domain. Network rights are not handled: with
// Net false the call's network namespace is the boundary (see
// docs/decisions/0032-spawn-seccomp-and-landlock.md).
func childConfig(abi int) (landlock.Config, error) {
	if abi < 1 {
		return landlock.Config{}, fmt.Errorf("spawn: Landlock ABI %d: Landlock is not available", abi)
	}
	if abi > maxKnownABI {
		abi = maxKnownABI
	}
	c := presets[abi]
	return landlock.Config{HandledAccessFS: c.HandledAccessFS, Scoped: c.Scoped}, nil
}

// childRights is what a rule of kind k grants on a directory (dir) or a
// file, limited to what cfg handles.
func childRights(k llKind, dir bool, cfg landlock.Config) landlock.AccessFSSet {
	const (
		read  = ll.AccessFSExecute | ll.AccessFSReadFile
		write = ll.AccessFSWriteFile | ll.AccessFSTruncate
		// directory rights on top of the file rights; never MakeChar or
		// MakeBlock: no device nodes, whoever the child is.
		dirRead  = ll.AccessFSReadDir
		dirWrite = ll.AccessFSRemoveDir | ll.AccessFSRemoveFile | ll.AccessFSMakeDir | ll.AccessFSMakeReg |
			ll.AccessFSMakeSym | ll.AccessFSMakeFifo | ll.AccessFSMakeSock | ll.AccessFSRefer
	)
	var r landlock.AccessFSSet
	switch k {
	case llRead:
		r = read
		if dir {
			r |= dirRead
		}
	case llWrite:
		r = read | write
		if dir {
			r |= dirRead | dirWrite
		}
	case llDev:
		r = ll.AccessFSReadFile | write | ll.AccessFSIoctlDev
	case llList:
		if dir {
			r = dirRead
		}
	}
	return r & cfg.HandledAccessFS
}

// landlockPlan sets the plan's Landlock fields for abi: the handled rights
// and scopes of the ABI's preset, and each rule's access mask. The helper
// then only makes the three system calls.
func landlockPlan(p *helper.Plan, abi int, rules []llRule) error {
	cfg, err := childConfig(abi)
	if err != nil {
		return err
	}
	p.LandlockFS, p.LandlockScoped = uint64(cfg.HandledAccessFS), uint64(cfg.Scoped)
	if p.LandlockFS == 0 {
		return fmt.Errorf("bug: Landlock ABI %d handles no filesystem right", abi)
	}
	p.LandlockFlags = 0
	if abi >= 7 {
		// The program's denials become audit records (where the kernel's
		// audit is enabled), for the harness to attribute to the call
		// (docs/decisions/0080-landlock-denials-attributed.md).
		p.LandlockFlags = helper.RestrictSelfLogNewExecOn
	}
	p.Rules = p.Rules[:0]
	for _, r := range rules {
		if rights := childRights(r.Kind, r.Dir, cfg); rights != 0 {
			p.Rules = append(p.Rules, helper.Rule{Path: r.Path, Access: uint64(rights)})
		}
	}
	return nil
}

// PathnameSocketsScoped reports whether a run child on a kernel of Landlock
// ABI abi is refused connect(2) and sendmsg(2) on pathname Unix sockets it
// did not create: from ABI 9 the child's domain handles the resolve_unix
// right and no rule grants it, so only sockets made inside the call's own
// domain can be reached (the kernel answers EACCES for the others). Below
// ABI 9 (and without Landlock, abi 0) nothing but the socket file's own
// permissions stands between the child and a socket in its view. See
// docs/decisions/0047-unix-sockets.md.
func PathnameSocketsScoped(abi int) bool {
	cfg, err := childConfig(abi)
	return err == nil && cfg.HandledAccessFS&ll.AccessFSResolveUnix != 0
}

// PathnameSockets says in one sentence what a run child can reach through
// pathname Unix sockets on a kernel of Landlock ABI abi (0: none), for
// doctor and the run tool's description.
func PathnameSockets(abi int) string {
	if PathnameSocketsScoped(abi) {
		return "Unix sockets: a program can connect only to pathname sockets its own call created; a socket a process outside the sandbox listens on is refused (Landlock ABI 9 resolve_unix)."
	}
	return fmt.Sprintf("Unix sockets are NOT confined on this kernel (Landlock ABI %d; confining them needs ABI 9): "+
		"a program can connect to a pathname Unix socket that a process outside the sandbox listens on in the workspace "+
		"or another directory of its view (the host's /tmp and /run are not in it).", abi)
}

// newDomainName is a sandbox's token for its program's Landlock domain
// (helper.Plan.DomainName): "b10x" and 11 hex digits, as long as the
// kernel keeps a name, 44 random bits that no program of another call can
// guess.
func newDomainName() (string, error) {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return "b10x" + hex.EncodeToString(b[:])[:11], nil
}
