// Package tools implements the seven workspace operations: file_read,
// dir_list, search, find, file_write, file_edit and run. Each has a typed
// argument struct and a JSON Schema generated from it.
//
// tools does not decide policy (publication, approval, write scope): that is
// the gate's job. A call goes Prepare (strict decoding, path resolution, no
// effect) then Execute; Prepared.Writes tells the gate, before anything
// happens, which canonical paths a write tool would change.
//
// # Paths
//
// The workspace package holds the plumbing beneath the tools: every path
// argument is resolved beneath the workspace root with kernel help, one
// component at a time, from a descriptor of the root taken when the
// workspace is opened (workspace.Workspace and its Resolve). Later opens
// use the canonical path with openat2 and RESOLVE_BENEATH,
// RESOLVE_NO_SYMLINKS and RESOLVE_NO_MAGICLINKS (workspace.OpenBeneath),
// so a symbolic link swapped in after resolution makes the call fail with
// ReasonDeniedPath instead of leading outside. search and find open every
// directory and file they traverse the same way, from its parent's
// descriptor, and never follow a link (workspace.Walker).
//
// # Errors
//
// Every error a tool returns is an *Error (the workspace's own errors,
// *workspace.Error, are turned into the *Error of the reason their kind is
// spelled as): ReasonInvalidArgument (bad
// arguments, named by field), ReasonDeniedPath (a path that leaves the
// workspace, or changed under the call), ReasonTimeout (the context's
// deadline passed), ReasonCancelled (the context was cancelled),
// ReasonTooLarge (a write's new content over MaxWriteBytes),
// ReasonConflict (a write's target kept changing, or its directory stayed
// locked) and ReasonToolError (anything else that failed). Public
// messages name paths as the model gave them or as canonical
// workspace-relative paths, never a host path a link points to.
//
// # Writes
//
// file_write and file_edit commit through workspace.Workspace.Commit: a
// temporary file in the target's directory (O_TMPFILE where available),
// fsynced and renamed over the target, so a crash leaves the old or the
// new content. Harness writes in one directory are serialised by a flock
// on it, and file_edit commits only if the file is still the one it read
// (docs/decisions/0049). A process killed at the wrong instant can leave a
// temporary file named workspace.TempPrefix + 16 hex digits +
// workspace.TempSuffix; workspace.IsTempName recognises it, the read tools
// never show it, and a later write in its directory removes it once stale.
//
// # Names in results
//
// Names that are not plain (control characters, invalid UTF-8, a leading
// '"') are printed as Go double-quoted strings, and path arguments accept
// that spelling, whole or per component, so every name shown can be given
// back and none can forge a line (workspace.ShowPath, workspace.ShowName).
//
// # Limits
//
// Arguments: every string field has a byte limit (limits.go), refused
// with ReasonInvalidArgument before the tool looks at the value.
// Paths: workspace.MaxPathBytes and workspace.MaxNameBytes. Reads:
// MaxReadBytes of text per call (a memory guard; the gate's result cap is
// far lower and applies first in practice). search: DefaultSearchResults
// matching lines unless max_results says otherwise; find:
// DefaultFindResults paths. Both say when they stopped.
package tools
