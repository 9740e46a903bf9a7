// Package tools implements the seven workspace operations: file_read,
// dir_list, search, find, file_write, file_edit and run. Each has a typed
// argument struct and a JSON Schema generated from it.
//
// Every path argument is resolved beneath the workspace root with kernel
// help, one component at a time; see Workspace.
//
// tools does not decide policy (publication, approval, write scope): that is
// the gate's job.
package tools
