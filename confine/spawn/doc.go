// Package spawn runs one program per call under the run layers, and makes
// sure nothing it started outlives the call.
//
// # One call
//
// Run starts the run helper cloned into new user, PID, mount, IPC and UTS
// namespaces, a new network namespace unless Spec.Net, and, with a cgroup
// manager, directly into the call's cgroup v2 leaf (CLONE_INTO_CGROUP).
//
// The helper is a small program of its own, embedded in binaries make
// builds (package internal/helperimage; docs/decisions/0043-helper-image.md):
// at a process's first call its image is copied into a sealed memfd and
// hashed against the SHA-256 make linked in, and every call executes that
// memfd. A binary without a stamped image (go build, go test), or one whose
// image fails to start, re-executes itself (/proc/self/exe) under the
// hidden entry point "spawn-helper" instead: the same code, dispatched by
// the init function of this package's internal/helper before the rest of
// the binary initialises, only slower to start. The broker's entry point
// needs internal/reexec's Init, which main and every TestMain must call
// first. The parent computes everything the helper will do (the plan:
// mounts, Landlock access masks, the seccomp program) and passes it
// through a pipe. The helper, as PID 1 of its namespace, then:
//
//  1. makes every mount private;
//  2. assembles the child's view on a fresh tmpfs: read-only binds of /usr,
//     /bin, /sbin, /lib*, /etc and /opt where they exist (symlinks such as
//     merged-/usr's /bin -> usr/bin recreated as symlinks), the workspace
//     read-write at its own path, the extra read and write paths (each
//     bound only while it is still the file pinned at start; see Pinned),
//     a private /tmp, a minimal /dev (null, zero, full, random, urandom, shm, fd
//     links) and a fresh /proc (/tmp and /dev/shm are tmpfs mounts, each
//     capped at Spec.TmpSize); entries of /etc that not every user may
//     read (/etc/shadow, private keys) are hidden; then pivot_root into it
//     and detach the old root, so nothing else of the host is reachable;
//  3. sets the hostname and brings lo up in the new network namespace;
//  4. starts the program's stage from its own executable in a new user,
//     mount and cgroup namespace nested in its own (so the kernel locks
//     every mount of the view: no mount call can remove a mask, clone a
//     directory without what covers it, or make a read-only mount
//     writable) whose root maps onto the program's host id, or, where
//     user namespaces are refused (root only), as that id; and stays as
//     the namespace's init.
//
// The program's stage then:
//
//  1. checks its ids, changes to Spec.Dir;
//  2. empties every capability set, the bounding set included, and reads
//     them back;
//  3. marks every descriptor but 0, 1 and 2 close-on-exec;
//  4. sets no_new_privs, installs the seccomp filter, and enforces a fresh
//     Landlock domain (the probed ABI's full right set, never best-effort);
//  5. executes Spec.Path with Spec.Argv and Spec.Env, exactly.
//
// The program is never host root: it runs as the harness's own ids, or, when
// the harness is root, as the workspace owner's (a root-owned workspace, and
// each root-owned write path, is bound as an idmapped mount onto uid 65534;
// see ErrRootWorkspace and Result.HostUID). The seccomp filter refuses
// set-user-ID and set-group-ID mode bits, so it leaves no set-id file behind.
// See docs/decisions/0037-child-identity.md.
//
// A failure at any step is reported on a close-on-exec status pipe and Run
// returns a *SetupError naming the step: the program never ran, and its
// exit status is never confused with the helper's.
//
// # Lifetime
//
// The helper stays as PID 1 of the call's PID namespace, a minimal init: it
// forwards SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2 and SIGWINCH
// to the program, reaps every orphan, and when the program ends reports its
// wait status and exits; the kernel then kills every other process of the
// namespace (background children, setsid'd double forks) before Run sees
// the exit, so a call ends when argv[0]'s process ends and leaves nothing.
// At Spec.Timeout or when the context ends, Run kills the leaf
// (cgroup.kill) and the namespace's init, with the same effect. If the
// harness dies, the helper's parent-death signal (SIGKILL) ends the
// namespace the same way.
//
// # Runners
//
// NewDirect spawns from the calling process. It must not be Landlock
// restricted: a Landlock domain forbids mount(2) to its process and every
// descendant, so its helpers could not build the view. A harness that
// restricts itself first starts a Broker (StartBroker), an unrestricted
// copy of itself that spawns on its behalf; see
// docs/decisions/0030-spawn-broker.md.
//
// # Pre-started sandboxes
//
// A Broker started with BrokerOptions.Prestart builds the sandbox of the
// next call when a call ends: the helper above, up to the program stage
// confined and waiting (the helper writes helper.GoReady and waits for the
// call, which it hands to the stage). The next
// call whose plan is byte for byte the one it was built from, and whose
// pinned and held paths are still the files they were, only hands it the
// program, argv, environment, directory and streams; any other call
// discards it and starts cold. Spec.Timeout and Result.Duration count
// from the hand-over, Result.Prestarted says so, and a sandbox serves one
// call, never a second. BrokerOptions.PrestartPool keeps several ready
// (at most MaxPrestartPool), so that calls that come together each take
// one. See prestart.go, docs/decisions/0069-prestarted-sandbox.md and
// docs/decisions/0092-prestart-pool.md.
//
// # What it does not protect against
//
//   - Kernel bugs: the layers are the kernel's; a kernel exploit reachable
//     through an allowed system call escapes them.
//   - What the caller grants: the workspace, ReadPaths and WritePaths are
//     the child's to read (and write); a secret placed there is readable.
//     They are pinned (Pin) by the process that built the Spec; a later
//     process that pins the same names resolves them again, and must not
//     follow a link a child could have planted there (tools.PinRunView
//     refuses those).
//     The system directories are readable by design, except the entries of
//     /etc that not every user may read; secrets elsewhere under /usr or
//     /opt that are world-readable are visible.
//   - With Spec.Net true the host's network is reachable, and below Landlock
//     ABI 6 so are the host's abstract unix sockets.
//   - Resource exhaustion without a cgroup manager (or without the pids,
//     memory and cpu controllers): the program can fork, allocate and spin
//     until the deadline.
//   - Descriptors the caller passes in Stdio are the child's: a terminal
//     there is a terminal the child can use (TIOCSTI is denied).
package spawn
