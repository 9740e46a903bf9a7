// Package policy is the harness's settings as pure data: the Policy value
// a command line or a policy file gives, and the one table every setting
// comes from (Settings). It starts nothing, reads no host state but the
// policy file it is asked to read, and imports nothing of the project but
// the cgroup package's names for controllers and limits.
//
// # The table
//
// Each Setting is one row: its key (the policy file's spelling; the flag
// is the key with "-" for "_"), its Kind, its default, its help (the
// file's, and the flag's where it says more), the commands that take it,
// for a resource limit the cgroup controller and the layer it needs, its
// check, and the field of Policy it fills. From the rows come:
//
//   - Defaults, the policy every command starts from;
//   - Parse and Load, the policy file's strict loader, whose errors name
//     the file's position and the key (FILE:LINE:COL);
//   - Schema, the JSON Schema editors read;
//   - Validate, every check the host is not needed for;
//   - Effective, policy show's lines and the record's policy, each value
//     with its source;
//   - the command line's flags, which cmd/b10x-harness builds from the rows
//     each command takes (a kong struct made at run time).
//
// # Adding a setting
//
// Add the field it fills to Policy (or RunPolicy, or Agent) and its row to the
// table, and write the code that uses the field. Nothing else names it:
// its flag, its key, its schema, its check, its line in policy show and
// in the record follow from the row (TestAddedSetting, in cmd, adds a
// fake row and finds it in each).
//
// # Precedence and sources
//
// A flag given on the command line wins, then the policy file's key, then
// the user defaults file's, then the default. Policy.Sources says which,
// key by key; a resource limit that was given (by a flag or either file)
// is Required: it must hold or the session refuses to start, where a
// default limit degrades with a note.
//
// # The user defaults file
//
// A user's own defaults (UserDefaultsPath: under $XDG_CONFIG_HOME) are a
// policy file like any other, with the same keys and checks
// (LoadUserDefaults). What differs is that no flag names it, so its keys'
// sources and its errors name it by UserDefaultsOrigin and its path, and
// that it is not an error for it to be missing. Policy.UserDefaults names
// it and its SHA-256 for the record. Whether a command reads it, and where
// it must not lie (a workspace a model may write), the command decides.
//
// # Syntaxes others own
//
// A write-scope rule, a hook command line and a domain pattern are parsed
// by the packages that use them (gate, egress), above this one. Their
// rows name the Syntax, and Parse and Validate take the Checks that parse
// it; session.Checks is the complete set. With nil Checks those values
// are taken unchecked.
//
// # What it does not do
//
// It does not check what only the host can tell (that a program exists,
// that a cgroup controller is there, that a path resolves): session.Open
// does, naming the key. It does not decide what a command does with a
// setting, and holds nothing a command decides at run time.
package policy
