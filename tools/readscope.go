package tools

// Read scope (read_scope): workspace paths whose content the model must not
// be shown (a repository's .env, its private keys). The gate decides which;
// the tools only ask. See docs/decisions/0079-read-scope.md.

// ReadVerdict says whether the content of the canonical workspace-relative
// path rel may be shown, and by which rule it may not: Rule is the rule
// as written, Denied true when it denies. A nil ReadVerdict denies nothing.
type ReadVerdict func(rel string) (rule string, denied bool)

// Reader is implemented by a prepared call that reads the content of
// paths it can name before it runs (file_read, file_edit, and the path a
// walking tool starts from): the gate refuses the call when one of them is
// denied.
type Reader interface {
	Reads() []string
}

// ReadFilterer is implemented by a prepared call that walks the workspace
// (dir_list, search, find): the gate gives it the read scope's verdict
// before Execute, and the call shows no content of a denied path (search
// skips it, saying so; dir_list and find name it, marked, without its
// size).
type ReadFilterer interface {
	FilterReads(ReadVerdict)
}

// deniedMark is how dir_list and find mark a path whose content is denied.
func deniedMark(rule string) string { return " (content denied by read_scope " + rule + ")" }
