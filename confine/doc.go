// Package confine probes what the running kernel can enforce and applies it:
// Landlock rulesets for the harness itself and for run children, the confine
// modes (strict, auto, off) and the layers each mode requires.
//
// It knows nothing about tools or models.
//
// # Probing
//
// Probe returns a Report. Each item has three outcomes (Supported,
// NotSupported, Inconclusive); only Supported counts as available, and an
// Inconclusive item is never cached. Nothing is inferred from a sysctl or
// from being root: the Landlock ABI comes from the raw
// landlock_create_ruleset(NULL, 0, VERSION) syscall, each namespace type is
// created for real in a re-executed child of the binary, and no_new_privs
// and a seccomp filter are installed for real in another child. The cgroup
// part comes from cgroup.ProbeHost. LandlockFeatures tables which rights and
// abilities each Landlock ABI brings, with the minimum ABI of each.
//
// Because of the children, every binary that imports this package must call
// reexec.Init first thing in main and in TestMain.
//
// # Modes and layers
//
// Report.Layers evaluates a fixed list of named layers (LayerNames), each
// with what was found and, when missing, how to get it. Report.Plan turns a
// Mode into the capability classes that hold: ConfinedWorkspace (the
// harness's own Landlock domain: file_write and file_edit may be
// published), ConfinedExecution (Landlock, namespaces, no_new_privs, seccomp
// and a whole-tree kill for each run child: run may be published), and
// ResourceLimits (pids, memory and cpu controllers). Strict refuses with a
// *StrictError, one line per missing layer; Auto takes what is there; Off
// takes nothing.
//
// # The confined workspace
//
// RestrictSelf applies the harness's own Landlock domain: from then on the
// process and everything it starts can write only beneath the workspace and
// the other paths of its SelfPolicy. It is built for the probed ABI and
// fails closed (ErrNotSupported) where Landlock is absent; go-landlock's
// best-effort mode is never used, because it reports success while
// enforcing nothing.
//
// # Errors
//
// Errors caused by a missing kernel feature match ErrNotSupported with
// errors.Is (*UnsupportedFeatureError, *StrictError). Other errors name the
// operation and operand and wrap the cause.
package confine
