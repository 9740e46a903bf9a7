package spawn

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/b10x/harness/cgroup"
	"github.com/b10x/harness/confine"
	"github.com/b10x/harness/confine/spawn/internal/helper"
	"github.com/b10x/harness/confine/spawn/internal/seccomp"
	"github.com/b10x/harness/internal/probecache"
	"github.com/b10x/harness/internal/reexec"
)

// helperEntry is the hidden entry point of the run helper. Its argv[0] is
// helper.Argv0; the helper package runs it from its init function.
const helperEntry = "spawn-helper"

func init() { reexec.Register(helperEntry, helper.Main) }

// helperEnv is the helper's whole environment (the program gets Spec.Env):
// one processor and no garbage collector keep the short-lived helper's Go
// runtime from starting threads it does not need.
var helperEnv = []string{"GOMAXPROCS=1", "GOGC=off"}

// NewDirect returns a Runner that starts each call's helper from this
// process. This process must be able to create namespaces and mounts for its
// children: it must not be Landlock-restricted (a restricted process's
// children can never mount, so every call would fail at its first mount
// step, which Run then reports as such). A harness that restricts itself
// starts a Broker before doing so.
//
// Concurrency: the Runner is safe for concurrent use.
//
// What it does not protect against: see the package documentation.
func NewDirect(o Options) Runner { return newDirect(o) }

// direct is the Runner both NewDirect and the broker process use.
type direct struct {
	opts   Options
	root   bool
	userns atomic.Int32 // usernsUnknown, usernsWorks, usernsMissing
	masks  *etcMasks
	seq    atomic.Uint64

	// helper, when set, replaces the process's helper (currentHelper):
	// tests and benchmarks run calls with this binary as the helper, or
	// with an image of their own.
	helper *helperExe

	// landlock holds the Landlock ABI probe once conclusive.
	landlock probecache.Value[landlockProbe]

	// pre, when set, keeps a pool of pre-started sandboxes (prestart.go).
	pre *prestarter

	// quiet gives one call at a time the turn to build a view that binds
	// workspace paths by name (quiet.go).
	quiet *quiet

	// answerEarly: a call whose init reported that nothing else of it is
	// left (helper.StatusAlone) is answered then; the init's exit, the
	// namespaces' teardown and the leaf's removal go on after it, counted
	// in teardowns. Only the broker sets it: it waits for them before it
	// exits. A teardown that fails (the leaf does not empty) is kept in
	// lateErr, and every later call fails with it.
	answerEarly bool
	teardowns   sync.WaitGroup
	lateErr     atomic.Pointer[error]
	// answeredEarly counts the calls answered so.
	answeredEarly atomic.Uint64
}

// landlockProbe is one ABI probe: the ABI, or the error that made it
// inconclusive.
type landlockProbe struct {
	abi int
	err error
}

// sharedMasks is the process's one scan of /etc (one inotify instance, kept
// for the life of the process): every Runner of the process uses it.
var sharedMasks = newEtcMasks(maskedRoot)

const (
	usernsUnknown int32 = iota
	usernsWorks
	usernsMissing
)

func newDirect(o Options) *direct {
	return &direct{opts: o, root: os.Geteuid() == 0, masks: sharedMasks, quiet: newQuiet()}
}

// landlockABI probes the Landlock ABI once; an inconclusive probe (an
// error) is not kept, the next call probes again.
func (d *direct) landlockABI() (int, error) {
	r := d.landlock.Get(func() (landlockProbe, probecache.Outcome) {
		info, err := confine.ProbeLandlock()
		switch {
		case err != nil:
			return landlockProbe{err: err}, probecache.Inconclusive
		case info.ABI == 0:
			return landlockProbe{}, probecache.NotSupported
		}
		return landlockProbe{abi: info.ABI}, probecache.Supported
	})
	return r.abi, r.err
}

// prepared is one call, ready to start.
type prepared struct {
	plan     *helper.Plan
	layers   []string // planned by the parent: namespaces and cgroup
	useUser  bool
	limits   cgroup.Limits
	leafWant bool
	// hostUID and hostGID are the host ids the program runs as.
	hostUID, hostGID int
	// workspace is the call's workspace, as pinned.
	workspace Pinned
	// idmapped are the writable paths root owns, each bound as an
	// idmapped mount whose root is hostUID (the k-th's tree is helper
	// descriptor treeFD+k).
	idmapped []Pinned
	// early, when set, is the workspace's idmapped tree begun before the
	// call was planned; launch takes it or discards it.
	early *earlyTree
}

// prepare checks the Spec, plans the view and the layers, and refuses
// (SetupError "requirements") when a required layer is absent on this host.
func (d *direct) prepare(s Spec) (*prepared, error) {
	if err := s.validate(); err != nil {
		return nil, err
	}
	req := d.opts.Require.required(s, d.root)
	abi, filter, err := d.planKernelLayers(req)
	if err != nil {
		return nil, err
	}
	// User namespace: always when it works (the child then holds no
	// capability on the host); as root without one, the helper drops every
	// capability before execve instead.
	useUser := !d.root || d.userns.Load() != usernsMissing
	if !useUser && slices.Contains(req, confine.LayerUserNS) {
		return nil, missingLayer(confine.LayerUserNS)
	}
	p := &prepared{useUser: useUser}
	if err := d.planCgroup(p, s, req); err != nil {
		return nil, err
	}
	masks, err := d.masks.get()
	if err != nil {
		return nil, &SetupError{Step: "scan " + maskedRoot, Err: err}
	}
	mounts, rules, err := buildView(s, masks)
	if err != nil {
		var se *SetupError
		if !errors.As(err, &se) {
			err = &SetupError{Step: "view", Err: err}
		}
		return nil, err
	}
	if err := d.planIdentity(p, s, mounts); err != nil {
		return nil, err
	}
	pl := &helper.Plan{
		Path: s.Program.Path, ProgDev: s.Program.Dev, ProgIno: s.Program.Ino, Argv: s.Argv, Env: s.Env, Dir: s.Dir,
		Hostname: "sandbox",
		Mounts:   mounts,
		Loopback: !s.Net,
		Seccomp:  filter,
		Probe:    s.Probe,
		NProc:    s.NProc,
		// The filter's refusals go to the call's init, each tied to this
		// call (decision 0090), where the kernel can notify.
		SeccompNotify: len(filter) > 0 && ProbeSeccompDenials().Attributable,
	}
	if s.ProxyPort > 0 {
		// After the trees: startOnce passes Stdio.Proxy there.
		pl.ProxyFD, pl.ProxyPort = treeFD+len(p.idmapped), uint16(s.ProxyPort)
	}
	setIdentity(pl, useUser, d.root, s.CallerIDs, p.hostUID, p.hostGID)
	if abi >= 1 {
		if err := landlockPlan(pl, abi, rules); err != nil {
			return nil, &SetupError{Step: "landlock ruleset", Err: err}
		}
	}
	p.plan = pl
	return p, nil
}

// missingLayer is the refusal of a call whose required layer l is absent.
func missingLayer(l string) error {
	return &SetupError{Step: "requirements", Err: fmt.Errorf("layer %s is required but %s", l, absentReason(l))}
}

// planKernelLayers probes the Landlock ABI and assembles the seccomp
// filter for it (nil where this architecture has none), refusing when
// either is absent and required.
func (d *direct) planKernelLayers(req []string) (abi int, filter []byte, err error) {
	abi, err = d.landlockABI()
	if err != nil {
		return 0, nil, &SetupError{Step: "probe Landlock", Err: err}
	}
	if abi < 1 && slices.Contains(req, confine.LayerLandlockChild) {
		return 0, nil, missingLayer(confine.LayerLandlockChild)
	}
	if seccomp.Supported {
		if filter, err = seccomp.Filter(abi); err != nil {
			return 0, nil, &SetupError{Step: "seccomp filter", Err: err}
		}
	} else if slices.Contains(req, confine.LayerSeccomp) {
		return 0, nil, missingLayer(confine.LayerSeccomp)
	}
	return abi, filter, nil
}

// planCgroup plans the call's leaf and the limits its controllers can
// apply (p.leafWant, p.limits and their layers), refusing when a required
// one cannot be had: a limit whose controller the leaves lack, or a leaf
// or a limit at all without a cgroup manager.
func (d *direct) planCgroup(p *prepared, s Spec, req []string) error {
	m := d.opts.Cgroup
	if m == nil {
		for _, l := range append([]confine.LayerName{confine.LayerCgroupLeaf}, confine.LimitLayers(s.Limits)...) {
			if slices.Contains(req, string(l)) {
				return &SetupError{Step: "requirements", Err: fmt.Errorf("layer %s is required but this runner has no cgroup manager", l)}
			}
		}
		return nil
	}
	p.leafWant = true
	ctl := m.Controllers()
	var kept []cgroup.Controller
	for _, need := range s.Limits.Needs() {
		layer := string(confine.LimitLayer(need.Controller))
		if slices.Contains(ctl, string(need.Controller)) {
			kept = append(kept, need.Controller)
			p.layers = append(p.layers, layer)
		} else if slices.Contains(req, layer) {
			return &SetupError{Step: "requirements", Err: fmt.Errorf("layer %s is required but the cgroup leaves here have no %s controller", layer, need.Controller)}
		}
	}
	p.limits = s.Limits.Only(kept)
	p.layers = append(p.layers, confine.LayerCgroupLeaf)
	return nil
}

// planIdentity settles the host ids the program runs as (p.hostUID,
// p.hostGID, p.workspace) and, as root with a user namespace, which
// writable paths root owns are bound idmapped onto them: each such bind of
// mounts gets its tree's descriptor (Mount.TreeFD) and joins p.idmapped.
func (d *direct) planIdentity(p *prepared, s Spec, mounts []helper.Mount) error {
	uid, gid, idmap, err := d.childIdentity(s.Workspace, p.useUser)
	if err != nil {
		step := "identity"
		if !errors.Is(err, ErrRootWorkspace) {
			step = "bind " + s.Workspace.Path // no longer the workspace pinned
		}
		return &SetupError{Step: step, Err: err}
	}
	p.hostUID, p.hostGID, p.workspace = uid, gid, s.Workspace
	if !(d.root && p.useUser) {
		if idmap {
			return &SetupError{Step: "identity", Err: errors.New("bug: an idmapped workspace without a user namespace")}
		}
		return nil
	}
	// Every writable path root owns is bound idmapped onto the program's
	// host id: the workspace when it is root's (the program is then
	// nobody), and the extra write paths.
	for _, w := range append([]Pinned{s.Workspace}, s.WritePaths...) {
		if w == s.Workspace && !idmap {
			continue
		}
		st, err := w.stat()
		if err != nil {
			return &SetupError{Step: "bind " + w.Path, Err: err}
		}
		if st.Uid != 0 {
			continue
		}
		i := slices.IndexFunc(mounts, func(m helper.Mount) bool { return m.Kind == helper.Bind && m.Dst == w.Path && !m.RO })
		if i < 0 || mounts[i].TreeFD != 0 {
			continue // bound read-only, or already idmapped
		}
		mounts[i].TreeFD = treeFD + len(p.idmapped)
		p.idmapped = append(p.idmapped, w)
	}
	return nil
}

// absentReason says why a baseline layer is absent on this host.
func absentReason(l string) string {
	switch l {
	case confine.LayerLandlockChild:
		return "this kernel offers no Landlock (Linux 5.13+ with landlock in the lsm= list)"
	case confine.LayerSeccomp:
		return "this build has no seccomp filter for " + runtime.GOARCH
	case confine.LayerUserNS:
		return "user namespaces cannot be created here (user.max_user_namespaces, or a security module)"
	}
	return "it is not available on this host"
}

// Run implements Runner.
func (d *direct) Run(ctx context.Context, s Spec, stdio Stdio) (Result, error) {
	return d.run(ctx, s, stdio, nil)
}

// admission is what a call holds before it plans: the pre-started
// sandbox it claimed while none was ready (nil for none), then its quiet
// turn (quiet.go). The claim comes first: the build it waits for may need
// the turn itself.
type admission struct {
	claimed *warm
	turn    *quietTurn
}

// admit claims a sandbox being built when none is ready (not for a probe,
// which never takes one), then takes the call's turn, pausing the others
// with pause. On error nothing is held.
func (d *direct) admit(ctx context.Context, pause, probe bool) (*admission, error) {
	a := &admission{}
	if d.pre != nil && !probe {
		var ok bool
		if a.claimed, ok = d.awaitBuild(ctx); !ok {
			return nil, fmt.Errorf("spawn: not started: %w", ctx.Err())
		}
	}
	t, err := d.quiet.begin(ctx, pause)
	if err != nil {
		d.discardLater(a.claimed)
		return nil, err
	}
	a.turn = t
	return a, nil
}

// unadmit gives back what a holds and the call did not use (nil: nothing).
func (d *direct) unadmit(a *admission) {
	if a == nil {
		return
	}
	a.turn.end()
	if a.claimed != nil {
		d.discardLater(a.claimed)
		a.claimed = nil
	}
}

// run is Run with the call admitted already (the broker admits a call
// before its caller reads Spec.Hold), or, when a is nil, admitted here.
func (d *direct) run(ctx context.Context, s Spec, stdio Stdio, a *admission) (Result, error) {
	notRun := Result{ExitCode: -1, MemoryPeak: -1, PidsPeak: -1}
	defer d.unadmit(a)
	if err := d.lateErr.Load(); err != nil {
		return notRun, *err
	}
	if d.helper == nil {
		// The first call of a process loads the helper image into its memfd
		// on another thread while this one plans the call (the /etc scan).
		helperWarm.Do(func() { go currentHelper() })
	}
	if (s.ProxyPort > 0) != (stdio.Proxy != nil) {
		return notRun, errors.New("spawn: Spec.ProxyPort and Stdio.Proxy go together")
	}
	if err := s.validate(); err != nil {
		return notRun, err
	}
	if a == nil {
		var err error
		if a, err = d.admit(ctx, s.Hold != nil || s.bindsByName(), s.Probe); err != nil {
			return notRun, err
		}
		defer d.unadmit(a)
	}
	t := a.turn
	if s.Hold != nil {
		h, err := s.Hold()
		if err == nil {
			s, err = s.withHeld(h)
		}
		if err != nil {
			return notRun, err
		}
		if after := s.After; after != nil {
			// Once the call has ended, in a turn of its own (this one
			// ended first: a runner has one).
			defer func() {
				t.end()
				d.quiet.paused(after)
			}()
		}
	}
	var early *earlyTree
	if d.pre == nil {
		// A runner without pre-started sandboxes starts every call cold:
		// the workspace's idmapped tree, when it needs one, is made while
		// the call is planned.
		early = d.startEarlyTree(s)
	}
	p, err := d.prepare(s)
	if err != nil {
		early.discard()
		return notRun, err
	}
	if err := ctx.Err(); err != nil {
		early.discard()
		return notRun, fmt.Errorf("spawn: not started: %w", err)
	}
	if d.pre == nil {
		p.early = early
		return d.start(ctx, s, p, stdio, t)
	}
	// The next call's sandbox is started when this one has ended: while
	// the model takes its turn, not while this call's program runs (it
	// would compete with it, and build a view the program may be
	// changing). With other calls still running, one is started, as with
	// a pool of one; the last call of a burst to end fills the pool.
	d.pre.begin()
	defer d.prestartAfter(s)
	if !s.Probe {
		claimed := a.claimed
		a.claimed = nil
		if w := d.takeWarm(p, claimed); w != nil {
			return d.runWarm(ctx, s, w, stdio, t)
		}
	}
	return d.start(ctx, s, p, stdio, t)
}

// callStatus is what the helper reported on its status pipe.
type callStatus struct {
	layers   []string // sent just before execve
	locked   bool     // the view's mounts are locked for the program
	exit     *syscall.WaitStatus
	sawReady bool
	setupErr *SetupError
	readErr  error
	// listening: the filter's refusals went to the init
	// (LayerSeccompListener); refusedAll and refused are what it reported.
	listening  bool
	refusedAll int
	refused    []helper.Refusal
	// noRouteRead: the init read its namespace's counters (StatusNoRoute),
	// noRoute what they said.
	noRouteRead bool
	noRoute     uint64
	// masksRead: the init examined the view's masked files
	// (StatusMasked); masksOpened are the indexes in the plan's mounts of
	// those the program read.
	masksRead   bool
	masksOpened []int
	// alone: nothing of the call but its init was left when the program
	// ended (helper.StatusAlone).
	alone bool
}

// start starts the call cold, in turn t.
func (d *direct) start(ctx context.Context, s Spec, p *prepared, stdio Stdio, t *quietTurn) (Result, error) {
	l, err := d.launch(p, stdio, nil, t)
	if err != nil {
		return Result{ExitCode: -1, MemoryPeak: -1, PidsPeak: -1}, err
	}
	l.signals = stdio.Signals
	return d.finish(ctx, s, l, l.started)
}

// launched is a started helper: its process, its status and wait readers,
// and the call's leaf, until finish ends them.
type launched struct {
	p       *prepared
	leaf    *cgroup.Leaf
	cmd     *exec.Cmd
	started time.Time
	statusC chan callStatus
	// early gets the status as soon as it says the program ended and
	// nothing else of the call is left (callStatus.alone), before the
	// pipe's end.
	early chan callStatus
	// exited is closed when the helper has been waited for; waitErr is
	// then its error.
	exited  chan struct{}
	waitErr error
	// signals are sent to the helper (the sandbox's init) while the call
	// runs (Stdio.Signals).
	signals <-chan os.Signal
	// domainName is the token the program's stage takes before it creates
	// its Landlock domain (Result.DomainName), "" for none.
	domainName string
	// begun is closed when the status pipe's first message came (the view
	// is built: the program is about to start, or the start failed) or it
	// ended; turn, when set, is the quiet turn that ends then.
	begun chan struct{}
	turn  *quietTurn
	// gone is closed once the call has left the runner's quiet (its
	// whole tree is gone).
	gone chan struct{}
}

// launch creates the call's leaf and starts its helper in turn t, which
// it joins (nil: a pre-started sandbox, which joins when a call takes it).
// extra are the descriptors of a pre-started sandbox (its go socket, and
// its proxy socket), placed after the ones the plan names. On error
// nothing is left.
func (d *direct) launch(p *prepared, stdio Stdio, extra []*os.File, t *quietTurn) (*launched, error) {
	l := &launched{p: p, statusC: make(chan callStatus, 1), early: make(chan callStatus, 1), exited: make(chan struct{}), begun: make(chan struct{}), gone: make(chan struct{})}
	if p.leafWant {
		name := "call-" + strconv.Itoa(os.Getpid()) + "-" + strconv.FormatUint(d.seq.Add(1), 10)
		leaf, err := d.opts.Cgroup.NewLeaf(name, p.limits)
		if err != nil {
			return nil, &SetupError{Step: "cgroup leaf", Err: err}
		}
		l.leaf = leaf
	}
	fail := func(err error) (*launched, error) {
		if l.leaf != nil {
			_ = l.leaf.Close()
		}
		return nil, err
	}

	if p.plan.LandlockFlags != 0 {
		// A name of this sandbox alone, for its denials (Result.DomainName).
		name, err := newDomainName()
		if err != nil {
			return fail(&SetupError{Step: "domain name", Err: err})
		}
		p.plan.DomainName, l.domainName = name, name
	}
	var enc helper.Encoder
	p.plan.Encode(&enc)
	blob := enc.B

	var trees []*os.File
	defer func() {
		for _, t := range trees {
			t.Close()
		}
	}()
	early := p.early
	p.early = nil
	defer early.discard()
	for _, w := range p.idmapped {
		t := early.take(w, p.hostUID)
		if t == nil {
			var err error
			if t, err = idmappedTree(w, p.hostUID, w == p.workspace); err != nil {
				return fail(&SetupError{Step: "identity", Err: err})
			}
		}
		trees = append(trees, t)
	}

	l.started = time.Now()
	cmd, statusR, planned, err := d.startHelper(p, l.leaf, stdio, blob, trees, extra)
	if err != nil {
		return fail(err)
	}
	l.cmd = cmd
	if t != nil {
		l.turn = t
		t.join(l)
	}

	// The status reader: layers before execve, or a setup error, then EOF
	// (execve closed the close-on-exec write end, or the helper died). The
	// status is sent last, once this call's pipes are closed: a Run that
	// returns holds none of them.
	go func() {
		var once sync.Once
		begun := func() { once.Do(func() { close(l.begun) }) }
		st := readStatus(firstRead{statusR, begun}, func(st callStatus) { l.early <- st })
		begun()
		statusR.Close()
		<-planned
		l.statusC <- st
	}()
	go func() {
		l.waitErr = cmd.Wait()
		close(l.exited)
	}()
	return l, nil
}

// kill ends a launched call's whole tree: its leaf, and its namespace's
// init (and with it the namespace).
func (l *launched) kill() {
	if l.leaf != nil {
		_ = l.leaf.Kill()
	}
	_ = l.cmd.Process.Kill()
}

// finish waits for a launched call to end, at most until s.Timeout past
// started or until ctx ends (then it kills the tree), drains its leaf and
// returns its outcome.
func (d *direct) finish(ctx context.Context, s Spec, l *launched, started time.Time) (Result, error) {
	res := Result{ExitCode: -1, MemoryPeak: -1, PidsPeak: -1}
	defer d.quiet.leave(l) // after the leaf is drained and closed, or the tree is gone
	handedOff := false     // the leaf is teardown's
	defer func() {
		if l.leaf != nil && !handedOff {
			_ = l.leaf.Close()
		}
	}()
	// The turn ends when the view is built (begun), or with the call.
	defer l.turn.end()
	begun := l.begun
	if l.turn == nil {
		begun = nil
	}
	var timer <-chan time.Time
	if s.Timeout > 0 {
		t := time.NewTimer(s.Timeout - time.Since(started))
		defer t.Stop()
		timer = t.C
	}
	var ctxErr error
	done := ctx.Done()
	var grace <-chan time.Time
	var early <-chan callStatus
	if d.answerEarly {
		early = l.early
	}
wait:
	for {
		select {
		case <-begun:
			l.turn.end()
			begun = nil
		case st := <-early:
			// Nothing of the call runs any more: answer now, and leave the
			// init's exit and the leaf to teardown.
			res.Duration = time.Since(started)
			if l.leaf != nil {
				leafStats(l.leaf, &res)
			}
			res.DomainName = l.domainName
			handedOff = true
			d.answeredEarly.Add(1)
			d.teardowns.Add(1)
			go d.teardown(l)
			return callOutcome(res, l.p, st, nil, true, nil, ctxErr)
		case <-l.exited:
			break wait
		case <-timer:
			res.TimedOut = true
			l.kill()
			<-l.exited
			break wait
		case sig := <-l.signals:
			_ = l.cmd.Process.Signal(sig)
		case <-done:
			ctxErr, done = ctx.Err(), nil
			// SIGTERM first, when there is a grace: the init forwards it
			// to the program, which may clean up and exit.
			if s.Grace <= 0 || l.cmd.Process.Signal(syscall.SIGTERM) != nil {
				l.kill()
				<-l.exited
				break wait
			}
			g := time.NewTimer(s.Grace)
			defer g.Stop()
			grace = g.C
		case <-grace:
			l.kill()
			<-l.exited
			break wait
		}
	}
	st := <-l.statusC
	res.Duration = time.Since(started)

	if l.leaf != nil {
		err := drainLeaf(l.leaf, &res)
		l.leaf = nil
		if err != nil {
			return res, err
		}
	}
	res.DomainName = l.domainName
	return callOutcome(res, l.p, st, l.cmd.ProcessState, false, l.waitErr, ctxErr)
}

// drainLeaf ends the call's leaf after the helper ended. The PID namespace
// died with its init, and everything in it; the leaf is killed once more
// and must be empty before it is removed (two locks on one door: a leaf
// that does not empty is an error, not a leak). Its peaks go into res.
// The leaf is closed whatever happens.
func drainLeaf(leaf *cgroup.Leaf, res *Result) error {
	_ = leaf.Kill()
	wctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	werr := leaf.WaitEmpty(wctx)
	cancel()
	if werr == nil {
		leafStats(leaf, res)
	}
	cerr := leaf.Close()
	if werr != nil || cerr != nil {
		return fmt.Errorf("spawn: the call's cgroup leaf did not empty: %w", errors.Join(werr, cerr))
	}
	return nil
}

// leafStats puts the leaf's peaks and OOM kills into res, when it can
// read them.
func leafStats(leaf *cgroup.Leaf, res *Result) {
	stats, err := leaf.Stats()
	if err != nil {
		return
	}
	if stats.Has(cgroup.KnownMemoryPeak) {
		res.MemoryPeak = stats.MemoryPeak
	}
	if stats.Has(cgroup.KnownPidsPeak) {
		res.PidsPeak = stats.PidsPeak
	}
	res.OOMKilled = stats.OOMKills > 0
}

// teardownWait bounds how long a call answered early (answerEarly) waits
// for its init, which exits right after its status, before killing it.
// With the leaf's drain (at most 5 s) it stays within what Broker.Close
// waits for the broker (brokerStartTimeout).
const teardownWait = 2 * time.Second

// teardown ends a call answered early: its init's exit (killed past
// teardownWait), its status pipe, and its leaf, drained and removed. A
// leaf that does not empty fails every later call (lateErr).
func (d *direct) teardown(l *launched) {
	defer d.teardowns.Done()
	t := time.NewTimer(teardownWait)
	select {
	case <-l.exited:
	case <-t.C:
		l.kill()
		<-l.exited
	}
	t.Stop()
	<-l.statusC
	if l.leaf == nil {
		return
	}
	if err := drainLeaf(l.leaf, &Result{}); err != nil {
		err = fmt.Errorf("spawn: an earlier call, answered once its program and every process of it had ended, left its leaf: %w", err)
		d.lateErr.CompareAndSwap(nil, &err)
	}
}

// callOutcome is the call's result from the helper's wait status and what
// its status pipe said: a setup error, a helper that ended before the
// program started, or the program's own status.
//
// early: the call is answered before its helper was waited for (ps is
// nil), as its status said the program ended and nothing else of the call
// is left. Otherwise a helper that could not be waited for is an error.
func callOutcome(res Result, p *prepared, st callStatus, ps *os.ProcessState, early bool, waitErr, ctxErr error) (Result, error) {
	var ws syscall.WaitStatus
	switch {
	case early && st.alone && st.exit != nil:
	case ps == nil:
		return res, fmt.Errorf("spawn: wait for helper: %w", waitErr)
	default:
		ws, _ = ps.Sys().(syscall.WaitStatus)
	}
	switch {
	case st.setupErr != nil:
		return res, st.setupErr
	case !st.sawReady:
		why := fmt.Sprintf("the helper ended (%s) before the program started", describeWait(ws))
		if res.TimedOut {
			why += ", killed at the deadline"
		}
		if st.readErr != nil {
			why += "; status pipe: " + st.readErr.Error()
		}
		se := &SetupError{Step: "helper", Err: errors.New(why)}
		if ctxErr != nil {
			return res, fmt.Errorf("%w (%w)", se, ctxErr)
		}
		return res, se
	}
	if st.exit != nil {
		// The program's own status, as its init saw it (the helper's
		// mirrors it, but cannot carry a signal).
		ws = *st.exit
	}
	if ws.Signaled() {
		res.Signal = signalName(ws.Signal())
	} else {
		res.ExitCode = ws.ExitStatus()
	}
	res.Layers = orderLayers(append(p.layers, st.layers...))
	res.HostUID, res.HostGID, res.LockedView = p.hostUID, p.hostGID, st.locked
	if st.listening {
		res.SeccompAttributed = true
		res.SeccompRefused, res.SeccompRefusedAll = refusedOps(st.refused), st.refusedAll
	}
	if st.noRouteRead {
		res.NoRouteCounted, res.NoRoute = true, int(min(st.noRoute, math.MaxInt32))
	}
	if st.masksRead {
		if opened, ok := maskedPaths(p.plan.Mounts, st.masksOpened); ok {
			res.MaskedWatched, res.MaskedOpened = true, opened
		}
	}
	if ctxErr != nil {
		return res, fmt.Errorf("spawn: call ended by its context: %w", ctxErr)
	}
	return res, nil
}

// maskedPaths names the masks the init reported read (StatusMasked) by
// their paths in the view: idx are indexes in mounts, increasing, each a
// mask of a file. Anything else is not a report of this plan: false, and
// the call claims nothing of its masks.
func maskedPaths(mounts []helper.Mount, idx []int) ([]string, bool) {
	var out []string
	for n, i := range idx {
		if i < 0 || i >= len(mounts) || n > 0 && i <= idx[n-1] {
			return nil, false
		}
		if k := mounts[i].Kind; k != helper.MaskFile && k != helper.MaskBeneath {
			return nil, false
		}
		out = append(out, mounts[i].Dst)
	}
	return out, true
}

func describeWait(ws syscall.WaitStatus) string {
	if ws.Signaled() {
		return "killed by " + signalName(ws.Signal())
	}
	return "exit status " + strconv.Itoa(ws.ExitStatus())
}

// orderLayers sorts layer names into confine's report order and drops
// duplicates.
func orderLayers(ls []string) []string {
	out := make([]string, 0, len(ls))
	for _, name := range confine.LayerNames() {
		if slices.Contains(ls, name) {
			out = append(out, name)
		}
	}
	return out
}

// helperExe is what this runner's calls execute as their helper.
func (d *direct) helperExe() *helperExe {
	if d.helper != nil {
		return d.helper
	}
	return currentHelper()
}

// cloneOnly reports whether a failed start's error can only have come from
// clone (a namespace or process limit), never from executing the
// helper: starting another file would only repeat it (and, without a user
// namespace, leak Go's id-map pipe once more).
func cloneOnly(err error) bool {
	return errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.EUSERS) || errors.Is(err, unix.EAGAIN)
}

// startHelper starts the helper in its namespaces (from the image, or this
// binary when the image will not start; retrying once without a user
// namespace when running as root and the kernel refuses one, unless one is
// required) and hands it the plan. planned is closed once the plan is
// written and its pipe closed.
func (d *direct) startHelper(p *prepared, leaf *cgroup.Leaf, stdio Stdio, blob []byte, trees, extra []*os.File) (cmd *exec.Cmd, statusR *os.File, planned <-chan struct{}, err error) {
	h := d.helperExe()
	for {
		var image *os.File
		if h.use() {
			image = h.file
		}
		cmd, statusR, planned, err = d.startOnce(p, leaf, stdio, blob, image, trees, extra)
		if err != nil && image != nil && !cloneOnly(err) {
			// The image could not be started. Before reading anything
			// into the error (a refused user namespace, below), start this
			// binary instead: if that works, the image was the cause, and
			// it is not used again.
			imageErr := err
			cmd, statusR, planned, err = d.startOnce(p, leaf, stdio, blob, nil, trees, extra)
			if err == nil {
				why := imageErr.Error()
				h.failed.CompareAndSwap(nil, &why)
			} else {
				// Only this binary's error decides what follows (the
				// image's is kept as text: it must not pass for a refused
				// user namespace).
				err = fmt.Errorf("%w (with the helper image: %v)", err, imageErr)
			}
		}
		if err == nil {
			if p.useUser {
				d.userns.CompareAndSwap(usernsUnknown, usernsWorks)
				p.layers = append(p.layers, confine.LayerUserNS)
			}
			p.layers = append(p.layers, confine.LayerPidNS, confine.LayerIPCNS, confine.LayerUTSNS)
			if p.plan.Loopback {
				p.layers = append(p.layers, confine.LayerNetNS)
			}
			return cmd, statusR, planned, nil
		}
		if p.useUser && d.root && d.userns.Load() == usernsUnknown && usernsRefused(err) &&
			!slices.Contains(d.opts.Require.Layers, confine.LayerUserNS) {
			d.userns.Store(usernsMissing)
			if len(p.idmapped) > 0 {
				w := p.idmapped[0]
				return nil, nil, nil, &SetupError{Step: "identity", Err: notIdmapped(w.Path, w == p.workspace, "the kernel refused a user namespace")}
			}
			p.useUser = false
			setIdentity(p.plan, false, d.root, false, p.hostUID, p.hostGID)
			var enc helper.Encoder
			p.plan.Encode(&enc)
			blob = enc.B
			continue
		}
		return nil, nil, nil, &SetupError{Step: "clone", Err: err}
	}
}

// usernsRefused reports whether a failed start looks like the kernel
// refusing a new user namespace.
func usernsRefused(err error) bool {
	return errors.Is(err, unix.EPERM) || errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.EUSERS) || errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EACCES)
}

// startOnce starts one helper: the sealed image when image is not nil,
// else this binary. planned is closed once the plan is written and its
// pipe closed.
func (d *direct) startOnce(p *prepared, leaf *cgroup.Leaf, stdio Stdio, blob []byte, image *os.File, trees, extra []*os.File) (*exec.Cmd, *os.File, <-chan struct{}, error) {
	statusR, statusW, err := os.Pipe()
	if err != nil {
		return nil, nil, nil, fmt.Errorf("status pipe: %w", err)
	}
	planR, planW, err := os.Pipe()
	if err != nil {
		statusR.Close()
		statusW.Close()
		return nil, nil, nil, fmt.Errorf("plan pipe: %w", err)
	}
	cmd := reexec.Command(helperEntry)
	cmd.Env = helperEnv
	cmd.Dir = "/"
	if image != nil {
		cmd.Path = imagePath
	}
	cmd.ExtraFiles, err = helperFiles(p.plan, stdio, []*os.File{statusW, planR}, image, trees, extra)
	if err != nil {
		for _, f := range []*os.File{statusR, statusW, planR, planW} {
			f.Close()
		}
		return nil, nil, nil, err
	}
	if stdio.Stdin != nil {
		cmd.Stdin = stdio.Stdin
	}
	if stdio.Stdout != nil {
		cmd.Stdout = stdio.Stdout
	}
	if stdio.Stderr != nil {
		cmd.Stderr = stdio.Stderr
	}
	cmd.SysProcAttr = d.helperAttr(p, leaf)
	rest := writePlanNow(planW, blob)
	if len(rest) == 0 {
		planW.Close()
	}
	err = cmd.Start()
	statusW.Close()
	planR.Close()
	if err != nil {
		statusR.Close()
		if len(rest) != 0 {
			planW.Close()
		}
		return nil, nil, nil, err
	}
	planned := make(chan struct{})
	if len(rest) == 0 {
		close(planned)
		return cmd, statusR, planned, nil
	}
	go func() {
		// A write error means the helper died; its status says why.
		_, _ = planW.Write(rest)
		planW.Close()
		close(planned)
	}()
	return cmd, statusR, planned, nil
}

// helperFiles lays out the helper's descriptors from 3 on (ExtraFiles):
// pipes (the status pipe's write end and the plan's read end), then the
// image (imageFD; closed when nil, and left out when nothing follows it),
// the idmapped trees (treeFD, treeFD+1, ...), then either the proxy socket
// (pl.ProxyFD) or a pre-started sandbox's extra descriptors (its go socket
// at pl.GoFD, then its own proxy socket). It fails, naming the bug, when
// the plan expects a descriptor elsewhere.
func helperFiles(pl *helper.Plan, stdio Stdio, pipes []*os.File, image *os.File, trees, extra []*os.File) ([]*os.File, error) {
	files := pipes
	if image != nil || len(trees) > 0 || pl.ProxyFD > 0 || pl.GoFD > 0 {
		files = append(files, image) // imageFD (closed when nil)
	}
	files = append(files, trees...) // treeFD, treeFD+1, ...
	if pl.ProxyFD > 0 && pl.GoFD == 0 {
		if 3+len(files) != pl.ProxyFD {
			return nil, fmt.Errorf("bug: the proxy descriptor would be %d, the plan says %d", 3+len(files), pl.ProxyFD)
		}
		files = append(files, stdio.Proxy)
	}
	if pl.GoFD > 0 {
		// A pre-started sandbox: its go socket, then its own proxy socket.
		if 3+len(files) != pl.GoFD || (pl.ProxyFD > 0 && pl.ProxyFD != pl.GoFD+1) {
			return nil, fmt.Errorf("bug: a pre-started sandbox's descriptors would be %d, the plan says %d and %d", 3+len(files), pl.GoFD, pl.ProxyFD)
		}
		files = append(files, extra...)
	}
	return files, nil
}

// helperAttr is how the helper is cloned: into new PID, mount, IPC and
// UTS namespaces (and network, unless the call has the host's), a user
// namespace when p uses one, with its parent-death signal, in a session of
// its own, and straight into leaf when there is one.
func (d *direct) helperAttr(p *prepared, leaf *cgroup.Leaf) *syscall.SysProcAttr {
	flags := uintptr(unix.CLONE_NEWPID | unix.CLONE_NEWNS | unix.CLONE_NEWIPC | unix.CLONE_NEWUTS)
	if p.plan.Loopback {
		flags |= unix.CLONE_NEWNET
	}
	attr := &syscall.SysProcAttr{
		Cloneflags: flags,
		Pdeathsig:  syscall.SIGKILL,
		Setsid:     true,
	}
	if p.useUser {
		attr.Cloneflags |= unix.CLONE_NEWUSER
		attr.UidMappings, attr.GidMappings = idMaps(d.root)
		attr.GidMappingsEnableSetgroups = false
		if d.root {
			// The helper's namespace maps every id onto itself; it drops
			// the harness's supplementary groups (root's), which its
			// program's namespace would otherwise carry along.
			attr.GidMappingsEnableSetgroups = true
			attr.Credential = &syscall.Credential{Uid: 0, Gid: 0, Groups: []uint32{}}
		}
	}
	if leaf != nil {
		attr.UseCgroupFD = true
		attr.CgroupFD = leaf.FD()
	}
	return attr
}

// writePlanNow writes what of the plan fits the pipe now, without
// blocking (it usually all fits), and returns the rest: a goroutine writes
// it once the helper reads.
func writePlanNow(planW *os.File, blob []byte) (rest []byte) {
	rest = blob
	if rc, err := planW.SyscallConn(); err == nil {
		_ = rc.Write(func(fd uintptr) bool {
			if n, err := unix.Write(int(fd), rest); err == nil {
				rest = rest[n:]
			}
			return true
		})
	}
	return rest
}

// idMaps maps the child's root: as root, the whole id range onto itself (so
// every file keeps its owner and the child's capabilities, valid only in its
// own namespace, apply to files as a root's would); otherwise uid and gid 0
// onto the harness's own.
func idMaps(root bool) (uids, gids []syscall.SysProcIDMap) {
	if root {
		full := []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 1<<32 - 1}}
		return full, full
	}
	return []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}},
		[]syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}}
}

// firstRead is a reader that calls first when its first read returns.
type firstRead struct {
	r     io.Reader
	first func()
}

func (f firstRead) Read(b []byte) (int, error) {
	n, err := f.r.Read(b)
	f.first()
	return n, err
}

// readStatus reads the helper's messages until EOF (at most
// helper.MaxWire bytes). early, when not nil, is called once, as soon as
// what came so far decodes whole and says the program started, ended, and
// left nothing else of the call (StatusAlone, then StatusExit).
func readStatus(r io.Reader, early func(callStatus)) callStatus {
	var b []byte
	var err error
	lr := io.LimitReader(r, helper.MaxWire)
	buf := make([]byte, 4096)
	for {
		n, rerr := lr.Read(buf)
		b = append(b, buf[:n]...)
		if n > 0 && early != nil {
			if st := decodeStatus(b); st.readErr == nil && st.sawReady && st.alone && st.exit != nil {
				early(st)
				early = nil
			}
		}
		if rerr != nil {
			if rerr != io.EOF {
				err = rerr
			}
			break
		}
	}
	st := decodeStatus(b)
	if err != nil {
		st.readErr = err
	}
	return st
}

// decodeStatus decodes the helper's messages in b; a message cut short or
// not understood is its readErr.
func decodeStatus(b []byte) callStatus {
	var st callStatus
	dec := helper.Decoder{B: b}
	for len(dec.B) > 0 && dec.Err == nil {
		switch dec.U8() {
		case helper.StatusReady:
			bits := dec.U32()
			st.layers = helperLayers(bits)
			st.locked = bits&helper.LayerLockedView != 0
			st.listening = bits&helper.LayerSeccompListener != 0
			st.sawReady = true
		case helper.StatusRefused:
			st.refusedAll, st.refused = helper.DecodeRefused(&dec)
		case helper.StatusNoRoute:
			st.noRoute, st.noRouteRead = dec.U64(), true
		case helper.StatusMasked:
			st.masksOpened = helper.DecodeMasked(&dec)
			st.masksRead = true
		case helper.StatusAlone:
			st.alone = true
		case helper.StatusExit:
			ws := syscall.WaitStatus(dec.U32())
			st.exit = &ws
		case helper.StatusFailed:
			step := dec.Str()
			e := dec.Error()
			if dec.Err == nil {
				st.setupErr = &SetupError{Step: step, Err: e}
			}
		default:
			dec.Failf("unknown status tag")
		}
	}
	if dec.Err != nil {
		st.readErr = dec.Err
	}
	if st.setupErr != nil {
		st.sawReady = false
	}
	return st
}

// helperLayers names the layers the helper reported applying.
func helperLayers(bits uint32) []string {
	var out []string
	for _, l := range []struct {
		bit  uint32
		name string
	}{
		{helper.LayerMountNS, confine.LayerMountNS},
		{helper.LayerNoNewPrivs, confine.LayerNoNewPrivs},
		{helper.LayerSeccomp, confine.LayerSeccomp},
		{helper.LayerLandlock, confine.LayerLandlockChild},
		{helper.LayerNProc, confine.LayerPidsRlimit},
	} {
		if bits&l.bit != 0 {
			out = append(out, l.name)
		}
	}
	return out
}
