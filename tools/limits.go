package tools

import "github.com/b10x/harness/workspace"

// Limits on argument fields, in bytes, after JSON unescaping. A longer
// value is refused with ReasonInvalidArgument before the tool looks at it,
// in a message naming the field, the limit and the size:
//
//	field "pattern" is 8388608 bytes; the limit is 4096 bytes
//
// The struct tags (max:"N") of the argument types carry these numbers;
// TestFieldLimits checks they agree.
const (
	// MaxPathFieldBytes bounds a path field as given: the workspace's
	// limit on a path argument (workspace.MaxPathArgBytes: MaxPathBytes
	// of name, each byte of which a quoted name may spell in up to 4).
	MaxPathFieldBytes = workspace.MaxPathArgBytes
	// MaxPatternBytes bounds search's pattern and glob and find's pattern:
	// a regular expression is compiled, and a glob matched against every
	// path, so their size is work per file.
	MaxPatternBytes = 4096
	// MaxEditStringBytes bounds file_edit's old_string and new_string.
	MaxEditStringBytes = 4 << 20
	// MaxWriteBytes bounds the content of a file a write tool produces:
	// file_write's content field, and the file file_edit would make (its
	// size is computed from the occurrences before anything is built;
	// over the limit the call fails with ReasonTooLarge). It equals
	// MaxReadBytes, so whatever is written can be read and edited again.
	MaxWriteBytes = MaxReadBytes
)
