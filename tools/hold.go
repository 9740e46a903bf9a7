package tools

import "strings"

// Hold names the workspace paths a run call's child must not change
// (canonical workspace-relative paths, never "."): ReadOnly are bound
// read-only over themselves in the child's view, Anchored are directories
// bound over themselves read-write, so they cannot be renamed or removed
// (spawn.Spec.ReadOnly and Anchored say what the kernel then holds).
//
// Masked are regular files whose content the model must not be shown (the
// read scope): the child sees each as an empty file (spawn.Spec.Masked).
//
// IDs are, by path, the files those paths were when they were read
// (device and inode): the child's view binds such a path only while it is
// still that file, and the call fails before its program runs otherwise
// (spawn.Spec.HeldIDs).
type Hold struct {
	ReadOnly []string
	Anchored []string
	Masked   []string
	IDs      map[string]FileID
	// CheckAfter says the gate's check after the call walks the
	// workspace, so it wants the other calls paused (Holder's after); when
	// false, the runner need not call after.
	CheckAfter bool
}

// FileID is a file's device and inode.
type FileID struct{ Dev, Ino uint64 }

// Holder is implemented by a prepared call that runs a program (run): the
// gate hands it, before Execute, the function that reads what its child
// must not change. Execute must call it once before its program starts,
// at the moment the child's view is built while no other run call's
// program can change the workspace (spawn.Spec.Hold does both); its error
// fails the call before the program runs and is returned by Execute. A
// Hold whose path does not exist as a regular file or directory when the
// view is built fails the call before the program runs. The gate fails a
// call whose Execute succeeded without reading it.
//
// after, when read succeeded, is to be called once the program's whole
// tree is gone, again while no other run call's program runs
// (spawn.Spec.After): the gate checks there what the program left. The
// gate checks by itself, unpaused, when Execute returns without calling it.
type Holder interface {
	Hold(read func() (Hold, error), after func())
}

// holdPaths turns workspace-relative paths into the absolute ones spawn
// wants.
func holdPaths(ws string, rels []string) []string {
	if len(rels) == 0 {
		return nil
	}
	out := make([]string, 0, len(rels))
	for _, r := range rels {
		out = append(out, ws+"/"+strings.TrimPrefix(r, "./"))
	}
	return out
}
