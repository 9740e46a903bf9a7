package cgroup

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// DefaultName is the prefix of harness parent cgroups when Options.Name is
// empty.
const DefaultName = "b10x"

// teardownTimeout bounds how long Close and Sweep wait for a killed cgroup
// to empty before giving up on removing it.
const teardownTimeout = 5 * time.Second

// Options says where Open puts the harness's cgroups. The zero value probes
// the cgroup2 mount and uses the prefix DefaultName.
type Options struct {
	// Mount is the cgroup2 mount point to use instead of the one found in
	// /proc/self/mountinfo. It must be a cgroup2 filesystem through which
	// this process's cgroup is visible. "" probes.
	Mount string
	// Name prefixes the harness parent's directory name
	// (NAME-PID-STARTTIME); Sweep only considers directories with this
	// prefix. It may hold ASCII letters, digits, '_', '.' and '-' and start
	// with a letter or digit, at most 64 bytes. "" means DefaultName.
	Name string
}

func (o Options) name() (string, error) {
	if o.Name == "" {
		return DefaultName, nil
	}
	if len(o.Name) > 64 || !validName(o.Name) {
		return "", errorf("Options.Name %q: want 1 to 64 ASCII letters, digits, '_', '.' or '-', starting with a letter or digit", o.Name)
	}
	return o.Name, nil
}

// validName reports whether s is a safe cgroup directory name: ASCII
// letters, digits, '_', '.', '-', starting with a letter or digit (so never
// "", ".", ".." nor a reserved "_" name).
func validName(s string) bool {
	if s == "" || !isAlnum(s[0]) {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !isAlnum(c) && c != '_' && c != '.' && c != '-' {
			return false
		}
	}
	return true
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// openMu guards openParent: one Manager from Open per process at a time,
// because the parent's name is derived from the process's identity.
var (
	openMu     sync.Mutex
	openParent string
)

// Manager owns a harness parent cgroup: the directory whose children are
// the per-call leaves. It is made by Open (which creates the parent) or by
// Attach (which adopts a parent another process opened).
//
// The zero Manager is not usable: get one from Open or Attach. All methods
// are safe for concurrent use. A Manager must be closed with
// Close; after Close, NewLeaf fails and the other methods report the state
// at the time of closing.
//
// A Manager does not protect against processes that can write the cgroup
// hierarchy themselves (root outside the harness's confinement, or the
// owner of a delegated subtree): they can move processes out of a leaf,
// raise its limits or remove it.
type Manager struct {
	loc    location // the mount; loc.dir is unused after setup
	base   string   // the cgroup whose children are harness parents
	parent string   // this Manager's parent
	name   string   // the parent name prefix, for Sweep

	opened      bool     // made by Open: Close removes the parent
	selfDir     string   // the leaf Open moved this process into; "" when not moved
	enabledBase []string // controllers Open enabled in base's subtree_control (non-root base only)
	pid         int      // this process, as Open saw it

	controllers []string
	missing     []string
	hasKill     bool

	// freezeKill makes leaves use the freeze-and-SIGKILL path even where
	// cgroup.kill exists (tests exercise that path on new kernels).
	freezeKill bool

	mu     sync.Mutex
	leaves map[*Leaf]struct{}
	closed bool
}

// Open finds this process's cgroup on the cgroup2 mount and creates the
// harness parent, BASE/NAME-PID-STARTTIME, where BASE is this process's
// cgroup and PID and STARTTIME identify this process (Sweep uses them to
// tell live harnesses from dead ones).
//
// For each of the pids, memory and cpu controllers that BASE offers but does
// not enable for its children, Open enables it in BASE's
// cgroup.subtree_control. When BASE is the hierarchy's root that is all.
// Otherwise cgroup v2 permits it only while BASE holds no process, so Open
// first moves this process (all its threads) into PARENT/_harness, but only
// when this process is alone in BASE: it never moves another process. When
// other processes share BASE (a CI job's shell, the process that started
// the harness), nothing is moved, no controller is enabled, and Missing
// says why and what to do. Finally Open enables in the parent's
// cgroup.subtree_control every managed controller the parent has.
// Controllers then lists what leaves get.
//
// A missing controller is not an error: limits that need it are refused by
// NewLeaf. Open fails, with nothing left behind, when there is no cgroup2
// mount (the error matches ErrNotSupported), when the parent cannot be
// created (for instance no write permission on BASE), when Options are
// invalid, or when another Manager from Open is still open in this process.
//
// Processes this harness starts later (before Close) are placed in
// PARENT/_harness when this process was moved; they are not leaves and get
// no limits.
func Open(opts Options) (*Manager, error) {
	name, err := opts.name()
	if err != nil {
		return nil, err
	}
	loc, err := locateSelf(opts.Mount)
	if err != nil {
		return nil, err
	}
	openMu.Lock()
	defer openMu.Unlock()
	if openParent != "" {
		return nil, errorf("a Manager is already open in this process (parent %s); close it first", openParent)
	}
	pid := os.Getpid()
	st, err := startTime(pid)
	if err != nil {
		return nil, err
	}
	m := &Manager{
		loc:    loc,
		base:   loc.dir,
		parent: filepath.Join(loc.dir, fmt.Sprintf("%s-%d-%d", name, pid, st)),
		name:   name,
		opened: true,
		pid:    pid,
		leaves: map[*Leaf]struct{}{},
	}
	if err := m.setup(); err != nil {
		if terr := m.teardown(); terr != nil {
			err = fmt.Errorf("%w (and undoing it: %v)", err, terr)
		}
		return nil, err
	}
	openParent = m.parent
	return m, nil
}

// setup creates the parent and enables controllers; see Open.
func (m *Manager) setup() error {
	baseCtl, err := readList(filepath.Join(m.base, "cgroup.controllers"))
	if err != nil {
		return err
	}
	baseSub, err := readList(filepath.Join(m.base, "cgroup.subtree_control"))
	if err != nil {
		return err
	}
	var need []string
	for _, c := range managed {
		if slices.Contains(baseCtl, c) && !slices.Contains(baseSub, c) {
			need = append(need, c)
		}
	}
	if err := unix.Mkdir(m.parent, 0o755); err != nil {
		return errorf("create harness parent %s: %w", m.parent, err)
	}
	failed := map[string]error{}
	baseSubFile := filepath.Join(m.base, "cgroup.subtree_control")
	switch {
	case len(need) == 0:
	case isRootCgroup(m.base):
		for _, c := range need {
			if err := writeFile(baseSubFile, "+"+c); err != nil {
				failed[c] = err
			}
		}
	default:
		procs, err := readPids(filepath.Join(m.base, "cgroup.procs"))
		if err != nil {
			return err
		}
		if len(procs) != 1 || procs[0] != m.pid {
			break // not alone: never move others; diagnose explains
		}
		self := filepath.Join(m.parent, selfLeaf)
		if err := unix.Mkdir(self, 0o755); err != nil {
			return errorf("create %s to move this process into: %w", self, err)
		}
		m.selfDir = self
		if err := writeFile(filepath.Join(self, "cgroup.procs"), strconv.Itoa(m.pid)); err != nil {
			return errorf("move this process (%d) out of %s: %w", m.pid, m.base, err)
		}
		for _, c := range need {
			if err := writeFile(baseSubFile, "+"+c); err != nil {
				failed[c] = err
				continue
			}
			m.enabledBase = append(m.enabledBase, c)
		}
	}
	parentCtl, err := readList(filepath.Join(m.parent, "cgroup.controllers"))
	if err != nil {
		return err
	}
	for _, c := range managed {
		if slices.Contains(parentCtl, c) {
			if err := writeFile(filepath.Join(m.parent, "cgroup.subtree_control"), "+"+c); err != nil {
				failed[c] = err
			}
		}
	}
	usable, missing, err := diagnose(m.loc, m.base, m.parent, 0)
	if err != nil {
		return err
	}
	for i, line := range missing {
		c, _, _ := strings.Cut(line, " ")
		if err := failed[c]; err != nil {
			missing[i] = line + " (" + err.Error() + ")"
		}
	}
	m.controllers, m.missing = usable, missing
	m.hasKill = exists(filepath.Join(m.parent, "cgroup.kill"))
	return nil
}

// Attach adopts a harness parent that Open created in another process (the
// harness opens the parent, then starts a broker process that creates the
// leaves). parent is the absolute path Manager.Parent returned there.
//
// Attach checks that parent is a directory on a cgroup2 filesystem, not a
// hierarchy root, named NAME-PID-STARTTIME, writable by this process, and
// reads back its cgroup.subtree_control; Controllers and Missing are
// computed from the hierarchy's state exactly as Open computes them, so
// they agree with the opening Manager's (except for the text of a write
// error Open itself met, which only Open's Missing carries). Attach moves
// no process and creates nothing; Close closes this Manager's leaves and
// leaves the parent in place. Errors name the check that failed.
func Attach(parent string) (*Manager, error) {
	if !filepath.IsAbs(parent) {
		return nil, errorf("attach: parent %q is not an absolute path", parent)
	}
	parent = filepath.Clean(parent)
	if err := checkCgroup2(parent); err != nil {
		return nil, errorf("attach %s: %w", parent, err)
	}
	fi, err := os.Stat(parent)
	if err != nil {
		return nil, errorf("attach: %w", err)
	}
	if !fi.IsDir() {
		return nil, errorf("attach: %s is not a directory", parent)
	}
	if isRootCgroup(parent) {
		return nil, errorf("attach: %s is the root of its hierarchy, not a harness parent", parent)
	}
	name, ok := parentPrefix(filepath.Base(parent))
	if !ok {
		return nil, errorf("attach: %s is not named like a harness parent (NAME-PID-STARTTIME)", parent)
	}
	if err := unix.Access(parent, unix.W_OK); err != nil {
		return nil, errorf("attach: %s is not writable: %w", parent, err)
	}
	loc, err := locateDir(parent)
	if err != nil {
		return nil, err
	}
	m := &Manager{
		loc:    loc,
		base:   filepath.Dir(parent),
		parent: parent,
		name:   name,
		pid:    os.Getpid(),
		leaves: map[*Leaf]struct{}{},
	}
	usable, missing, err := diagnose(loc, m.base, parent, 0)
	if err != nil {
		return nil, errorf("attach %s: %w", parent, err)
	}
	m.controllers, m.missing = usable, missing
	m.hasKill = exists(filepath.Join(parent, "cgroup.kill"))
	return m, nil
}

// parentPrefix returns NAME from "NAME-PID-STARTTIME".
func parentPrefix(base string) (string, bool) {
	i := strings.LastIndexByte(base, '-')
	if i <= 0 {
		return "", false
	}
	j := strings.LastIndexByte(base[:i], '-')
	if j <= 0 {
		return "", false
	}
	name := base[:j]
	if _, _, ok := parseParentName(base, name); !ok || !validName(name) {
		return "", false
	}
	return name, true
}

// locateDir finds the cgroup2 mount that holds dir, from
// /proc/self/mountinfo (the longest matching mount point).
func locateDir(dir string) (location, error) {
	mi, err := readFile("/proc/self/mountinfo")
	if err != nil {
		return location{}, errorf("read mount table: %w", err)
	}
	mounts, err := parseMountInfo(mi)
	if err != nil {
		return location{}, errorf("parse /proc/self/mountinfo: %w", err)
	}
	var loc location
	for _, m := range mounts {
		switch m.FSType {
		case "cgroup":
			loc.v1 = append(loc.v1, m)
		case "cgroup2":
			if _, ok := within(dir, m.MountPoint); ok && len(m.MountPoint) > len(loc.mount) {
				loc.mount, loc.mountRoot = m.MountPoint, m.Root
			}
		}
	}
	if loc.mount == "" {
		return loc, errorf("%s is under no cgroup2 mount in /proc/self/mountinfo: %w", dir, ErrNotSupported)
	}
	rel, _ := within(dir, loc.mount)
	loc.dir, loc.rel = dir, rel
	return loc, nil
}

// Parent returns the absolute path of the harness parent cgroup, the
// directory whose children are the leaves. Pass it to Attach in another
// process.
func (m *Manager) Parent() string { return m.parent }

// Moved reports the cgroup Open moved this process out of (its original,
// which Close moves it back into), or "" when Open moved nothing. Close
// then writes that cgroup's cgroup.procs and cgroup.subtree_control and
// removes the parent beneath it: a caller that restricts its own writes
// must keep that directory writable.
func (m *Manager) Moved() string {
	if m.selfDir == "" {
		return ""
	}
	return m.base
}

// Controllers returns the controllers leaves get, a subset of pids, memory
// and cpu in that order; empty when none (limits are then unavailable but
// leaves still give placement, whole-tree kill and CPU figures).
func (m *Manager) Controllers() []string { return slices.Clone(m.controllers) }

// Missing returns one line for each of pids, memory and cpu that leaves do
// not get, saying where it is missing and how to get it, e.g. "pids
// controller: not offered by the cgroup2 hierarchy at ... because it is
// bound to the cgroup v1 hierarchy at ...; to get it, boot with ...".
// Empty when all three are available.
func (m *Manager) Missing() []string { return slices.Clone(m.missing) }

func (m *Manager) missingFor(c string) string {
	for _, line := range m.missing {
		if rest, ok := strings.CutPrefix(line, c+" controller: "); ok {
			return rest
		}
	}
	return "not enabled for " + m.parent
}

// Sweep removes what dead harnesses left beside this Manager's parent: the
// directories NAME-PID-STARTTIME (and ProbeHost's NAME-probe-PID-STARTTIME)
// in the same base cgroup whose process PID is gone or has another start
// time. For each it kills everything inside (cgroup.kill, or freezing and
// SIGKILL), waits until it is empty and removes it with all its leaves.
// It returns the directories removed; err joins the failures, each naming
// its directory, and the others are still removed.
//
// Sweep trusts /proc of this process's PID namespace: a harness in another
// PID namespace sharing the base cgroup would look dead and be swept.
// A directory whose owner's liveness cannot be read is left alone.
func (m *Manager) Sweep() (removed []string, err error) {
	names, err := subdirs(m.base)
	if err != nil {
		return nil, err
	}
	var errs []error
	for _, n := range names {
		pid, st, ok := parseParentName(n, m.name)
		if !ok {
			pid, st, ok = parseParentName(n, m.name+"-"+probeInfix)
		}
		if !ok {
			continue
		}
		dir := filepath.Join(m.base, n)
		if dir == m.parent {
			continue
		}
		cur, err := startTime(pid)
		switch {
		case err == nil && cur == st:
			continue // alive
		case err != nil && !errors.Is(err, os.ErrNotExist):
			continue // unknown: do not kill what may be alive
		}
		if err := m.destroy(dir); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, dir)
	}
	return removed, errors.Join(errs...)
}

// destroy kills every process in the tree at dir, waits until it is empty
// and removes it.
func (m *Manager) destroy(dir string) error {
	deadline := time.Now().Add(teardownTimeout)
	if err := killTree(dir, m.hasKill && !m.freezeKill, m.loc, deadline); err != nil {
		return err
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	if err := waitEmpty(ctx, dir); err != nil {
		return err
	}
	return removeTree(dir)
}

// removeTree removes the cgroup at dir and its descendants, deepest first.
func removeTree(dir string) error {
	subs, err := subdirs(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return err
	}
	for _, s := range subs {
		if err := removeTree(filepath.Join(dir, s)); err != nil {
			return err
		}
	}
	return rmdirRetry(dir)
}

// forget drops a closed leaf from the Manager's set.
func (m *Manager) forget(l *Leaf) {
	m.mu.Lock()
	delete(m.leaves, l)
	m.mu.Unlock()
}

// Close closes every leaf of this Manager (killing what runs in them). For
// a Manager from Open it then also kills and removes any other leaf in the
// parent (such as those an attached broker left), moves this process back
// into its original cgroup when Open moved it (first disabling in the base
// cgroup the controllers Open enabled there), and removes the parent. For a
// Manager from Attach the parent stays.
//
// Close is idempotent: later calls return nil. Errors join every step that
// failed, naming its directory; what could be removed is removed, and a
// parent left behind is removed by the next harness's Sweep. Close of an
// Open Manager must not race with processes still creating leaves in the
// parent (stop the broker first); a process still running in
// PARENT/_harness keeps the parent from being removed.
func (m *Manager) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	leaves := make([]*Leaf, 0, len(m.leaves))
	for l := range m.leaves {
		leaves = append(leaves, l)
	}
	m.mu.Unlock()
	var errs []error
	for _, l := range leaves {
		if err := l.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	if m.opened {
		if err := m.teardown(); err != nil {
			errs = append(errs, err)
		}
		openMu.Lock()
		if openParent == m.parent {
			openParent = ""
		}
		openMu.Unlock()
	}
	return errors.Join(errs...)
}

// RemoveParent is Close for a Manager from Attach whose owner cannot remove
// the parent itself (a harness that has restricted its own writes with
// Landlock): it closes every leaf, kills and removes any other leaf in the
// parent, and removes the parent — unless the owner lives in it (Open moved
// it into PARENT/_harness), in which case the owner's own Close or the next
// Sweep does that. For a Manager from Open it is Close.
func (m *Manager) RemoveParent() error {
	if m.opened {
		return m.Close()
	}
	err := m.Close()
	if _, serr := os.Lstat(filepath.Join(m.parent, selfLeaf)); serr == nil {
		return err
	}
	if _, serr := os.Lstat(m.parent); errors.Is(serr, os.ErrNotExist) {
		return err
	}
	return errors.Join(err, m.destroy(m.parent))
}

// teardown undoes setup: kills and removes the parent's leaves, restores
// this process's cgroup and the base's subtree_control, removes the parent.
// It tolerates a partial setup.
func (m *Manager) teardown() error {
	if _, err := os.Lstat(m.parent); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	var errs []error
	subs, err := subdirs(m.parent)
	if err != nil {
		errs = append(errs, err)
	}
	for _, s := range subs {
		if s == selfLeaf && m.selfDir != "" {
			continue
		}
		if err := m.destroy(filepath.Join(m.parent, s)); err != nil {
			errs = append(errs, err)
		}
	}
	if m.selfDir != "" {
		sub, err := readList(filepath.Join(m.parent, "cgroup.subtree_control"))
		if err != nil {
			errs = append(errs, err)
		}
		for _, c := range slices.Backward(sub) {
			if err := writeFile(filepath.Join(m.parent, "cgroup.subtree_control"), "-"+c); err != nil {
				errs = append(errs, err)
			}
		}
		for _, c := range slices.Backward(m.enabledBase) {
			if err := writeFile(filepath.Join(m.base, "cgroup.subtree_control"), "-"+c); err != nil {
				errs = append(errs, err)
			}
		}
		m.enabledBase = nil
		if err := writeFile(filepath.Join(m.base, "cgroup.procs"), strconv.Itoa(m.pid)); err != nil {
			errs = append(errs, errorf("move this process back into %s: %w", m.base, err))
		}
		if err := rmdirRetry(m.selfDir); err != nil {
			errs = append(errs, err)
		} else {
			m.selfDir = ""
		}
	}
	if len(errs) == 0 {
		if err := rmdirRetry(m.parent); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
