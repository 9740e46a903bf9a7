package spawn

import (
	"fmt"

	"github.com/b10x/harness/confine/spawn/internal/helper"
	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
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
	p.Rules = p.Rules[:0]
	for _, r := range rules {
		if rights := childRights(r.Kind, r.Dir, cfg); rights != 0 {
			p.Rules = append(p.Rules, helper.Rule{Path: r.Path, Access: uint64(rights)})
		}
	}
	return nil
}
