// Package workspace is the root a session acts beneath, and the plumbing
// that keeps every file operation there: resolving path arguments inside
// the root, opening what was resolved without following a link, walking
// the tree, and committing writes atomically. The tools (file_read,
// dir_list, search, find, file_write, file_edit, run) are built on it; the
// gate reads the workspace's state through it to hold what a run call must
// not change. It decides no policy and knows no tool: it imports the
// standard library, golang.org/x/sys/unix and internal/dirent, never
// tools (docs/decisions/0085-workspace-package.md).
//
// # Resolving
//
// Open takes one O_PATH descriptor of the canonical root. Resolve,
// ResolveForWrite and ResolveOpen walk a path argument from it one
// component at a time with openat2 (RESOLVE_BENEATH, RESOLVE_NO_SYMLINKS,
// RESOLVE_NO_MAGICLINKS), following symbolic links only while their
// targets stay inside the root, and return the canonical
// workspace-relative path: no link, no ".", no "..". Path arguments are
// taken byte for byte (never URL-decoded, never Unicode-normalised), and
// a name printed quoted by ShowPath is accepted back in that spelling
// (docs/decisions/0050-workspace-resolver.md).
//
// # Opening
//
// A canonical path is opened again with OpenBeneath, relative to the root
// descriptor WithRoot lends, or to a directory opened beneath it. It
// refuses any symbolic link and any step out, so a link swapped in after
// resolution fails the open instead of leading outside.
//
// # Walking
//
// A Walker walks a tree for search and find: every directory opened from
// its parent's descriptor with OpenBeneath, links never followed, .git not
// entered, writes' temporary files not shown, what it skips said to Skip.
// Workspace.Walk, Lstat and RemoveAll read and undo the state of paths for
// the gate's checks around a run call
// (docs/decisions/0039-gate-promises-bind-run.md).
//
// # Writing
//
// Commit creates or replaces one file: a temporary file in the target's
// directory (O_TMPFILE where the file system has it), fsynced and renamed
// over the target under a flock of the directory, the old file's owner,
// mode and extended attributes kept, and for an edit a compare and swap
// at the rename (docs/decisions/0049-what-an-edit-preserves.md and
// 0051-atomic-writes.md). A process killed mid-write can leave a file
// IsTempName recognises; a later write in its directory removes it once
// stale.
//
// # Errors
//
// The resolving, opening and writing methods return *Error: a Kind,
// spelled as the reason code the tools report it with, a public message
// that never names a host path a link points to, and the internal cause.
// Open, Lstat, Walk and RemoveAll return plain errors, for the record.
//
// # What it does not protect against
//
// A hard link inside the root to a file outside it, a mount point inside
// the root, device nodes and FIFOs placed in the root (opened, though
// refused by the read tools), and a directory moved out of the root while
// a walk is beneath it. Confining the process (Landlock) is the layer that
// covers those.
//
// A Workspace is safe for concurrent use by multiple goroutines.
package workspace
