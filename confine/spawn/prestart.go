package spawn

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/b10x/harness/confine/spawn/internal/helper"
	"github.com/b10x/harness/internal/mountinfo"
)

// A pre-started sandbox (BrokerOptions.Prestart; docs/decisions/0069)
// is a helper that built the view of the last call's Spec and whose
// program stage, confined (identity, capabilities, no_new_privs, seccomp,
// Landlock), waits for one call: the next call with the same view hands it
// its program, argv, environment, directory and standard streams, and
// only execve is left. A fresh one is started behind it; a runner may keep
// a pool of them (decision 0092), each taken by one call. It serves one
// call and is never reused: its stage executes once, and its namespaces,
// /tmp and leaf die with that call.
//
// A call takes it only when a cold start would build the same sandbox
// now: the plan it would compute (view, masks of /etc, Landlock rules,
// seccomp filter, identity, limits) is byte for byte the one the sandbox
// was built from, every pinned path is still the file pinned, and every
// path held read-only or in place is still the file it was when the
// sandbox was started. Otherwise the sandbox is discarded and the call
// starts cold.

// warm is one pre-started sandbox.
type warm struct {
	key    string
	l      *launched
	goSock *os.File      // the parent's end of the go socket
	proxy  *os.File      // the parent's end of the helper's proxy socket, or nil
	ready  chan struct{} // closed when the stage said GoReady, or the socket ended
	// said is true when GoReady came (set before ready is closed): a
	// sandbox whose socket ended without it failed a step and is dead.
	said bool
	held []heldPath
}

// heldPath is the identity of a path the view binds by name (a Rebind)
// when the sandbox was started.
type heldPath struct {
	path     string
	dev, ino uint64
	dir      bool
}

// MaxPrestartPool bounds BrokerOptions.PrestartPool: each sandbox kept
// ready costs two processes, a cgroup leaf, its namespaces and two tmpfs
// mounts while it waits (docs/decisions/0092-prestart-pool.md measures
// it), and a burst larger than this is rare enough that its later calls
// may start cold.
const MaxPrestartPool = 4

// prestarter holds a direct runner's pool of pre-started sandboxes: up to
// size of them, ready or being built. Each serves one call.
type prestarter struct {
	mu       sync.Mutex
	size     int      // sandboxes kept, ready and in flight; 0 means 1
	ready    []*warm  // built, oldest first, taken by no call
	builds   []*build // in flight, claimed by no call
	inflight int      // builds in flight, claimed or not
	running  int      // calls between begin and prestartAfter
	closed   bool
	wg       sync.WaitGroup // prestarts and discards in flight
	taken    atomic.Int64   // calls that ran in a pre-started sandbox
}

// build is one sandbox being built. A call that finds none ready claims
// one and waits for it; an unclaimed one joins the ready sandboxes when
// done.
type build struct {
	done    chan struct{} // closed when w is set
	w       *warm         // nil: it could not be built, or the pool closed
	claimed bool          // guarded by prestarter.mu
}

// newPrestarter keeps n sandboxes ready (at least 1, at most
// MaxPrestartPool).
func newPrestarter(n int) *prestarter {
	return &prestarter{size: min(max(n, 1), MaxPrestartPool)}
}

func (ps *prestarter) capacity() int { return min(max(ps.size, 1), MaxPrestartPool) }

// warmKey is what must be equal between the sandbox and the call: the
// plan without the call's own fields, and what the parent does around
// it.
func warmKey(p *prepared) string {
	pl := *p.plan
	pl.Path, pl.ProgDev, pl.ProgIno, pl.Argv, pl.Env, pl.Dir, pl.Probe, pl.GoFD = "", 0, 0, nil, nil, "", false, 0
	pl.DomainName = "" // each sandbox's own
	if pl.ProxyFD > 0 {
		pl.ProxyFD = 1
	}
	var e helper.Encoder
	pl.Encode(&e)
	return fmt.Sprintf("%x|%+v|%t|%t|%d|%d|%+v|%q", e.B, p.limits, p.leafWant, p.useUser, p.hostUID, p.hostGID, p.idmapped, p.layers)
}

// heldIdentities reads the identity of every path the plan binds by name
// beneath the workspace.
func heldIdentities(pl *helper.Plan) ([]heldPath, error) {
	var out []heldPath
	for _, m := range pl.Mounts {
		if m.Kind != helper.Rebind && m.Kind != helper.MaskBeneath {
			continue // a mask's file replaced since must be masked anew
		}
		fd, st, err := openNoFollow(m.Dst)
		if err != nil {
			return nil, err
		}
		unix.Close(fd)
		out = append(out, heldPath{m.Dst, uint64(st.Dev), uint64(st.Ino), st.Mode&unix.S_IFMT == unix.S_IFDIR})
	}
	return out, nil
}

// current reports whether a cold start would bind the same files now:
// every pinned source is still the file pinned, every held path the file
// it was.
func (w *warm) current() bool {
	for _, m := range w.l.p.plan.Mounts {
		if m.Kind == helper.Bind && m.Pinned {
			if _, err := (Pinned{Path: m.Src, Dev: m.PinDev, Ino: m.PinIno, Dir: !m.File}).stat(); err != nil {
				return false
			}
		}
	}
	now, err := heldIdentities(w.l.p.plan)
	if err != nil || len(now) != len(w.held) {
		return false
	}
	for i := range now {
		if now[i] != w.held[i] {
			return false
		}
	}
	if !w.stillMounted() {
		return false
	}
	select {
	case <-w.l.exited:
		return false // it died while it waited (looked at first: a
		// sandbox can be ready and dead)
	default:
	}
	select {
	case <-w.ready:
		return w.said // false: it failed a step
	default:
	}
	return true
}

// unpinnedBinds reports whether pl binds a workspace path by name (a
// rebind or a mask) without the identity the helper checks.
func unpinnedBinds(pl *helper.Plan) bool {
	for _, m := range pl.Mounts {
		if (m.Kind == helper.Rebind || m.Kind == helper.MaskBeneath) && !m.Pinned {
			return true
		}
	}
	return false
}

// stillMounted reports whether every path the sandbox's view binds by
// name in the workspace (its holds and masks) is still a mount point of
// its view, at that path. A file removed or replaced since (an editor's
// rename over it, say) took its mount with it: the kernel detaches the
// mounts on a name that goes away, in every namespace. The file now at
// that name is then not covered, though it may carry the same device and
// inode (numbers are reused; a hard link keeps them), which current's
// identities cannot tell.
func (w *warm) stillMounted() bool {
	var want []string
	for _, m := range w.l.p.plan.Mounts {
		if m.Kind == helper.Rebind || m.Kind == helper.MaskBeneath {
			want = append(want, m.Dst)
		}
	}
	if len(want) == 0 {
		return true
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(w.l.cmd.Process.Pid) + "/mountinfo")
	if err != nil {
		return false
	}
	points := map[string]bool{}
	for line := range strings.SplitSeq(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 {
			points[mountinfo.Unescape(f[4])] = true
		}
	}
	for _, p := range want {
		if !points[p] {
			return false
		}
	}
	return true
}

// begin counts a call that will end with prestartAfter.
func (ps *prestarter) begin() {
	ps.mu.Lock()
	ps.running++
	ps.mu.Unlock()
}

// prestartAfter ends a call counted by begin and tops the pool up with
// sandboxes for s's view, built in the background: when no other call
// runs, as many as make the ready ones and those in flight the pool's
// size; while others run, only one when there is none (what a pool of
// one would do), so that a burst's builds do not compete with its own
// calls for the CPU (decision 0092 measured it). None once the runner is
// closed.
func (d *direct) prestartAfter(s Spec) {
	ps := d.pre
	if ps == nil {
		return
	}
	s.Probe = false
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.running--
	if ps.closed {
		return
	}
	want := ps.capacity()
	if ps.running > 0 {
		want = 1
	}
	for n := want - len(ps.ready) - ps.inflight; n > 0; n-- {
		b := &build{done: make(chan struct{})}
		ps.builds = append(ps.builds, b)
		ps.inflight++
		ps.wg.Add(1)
		go d.build(s, b)
	}
}

// build builds b's sandbox and hands it to the call that claimed b, or to
// the ready ones; a pool closed meanwhile discards it.
func (d *direct) build(s Spec, b *build) {
	ps := d.pre
	defer ps.wg.Done()
	w := d.prestart(s)
	ps.mu.Lock()
	ps.inflight--
	if !b.claimed {
		ps.builds = slices.DeleteFunc(ps.builds, func(o *build) bool { return o == b })
	}
	var drop *warm
	switch {
	case w == nil:
	case ps.closed:
		drop, w = w, nil
	case !b.claimed:
		ps.ready = append(ps.ready, w)
	}
	b.w = w
	close(b.done)
	ps.mu.Unlock()
	if drop != nil {
		d.discard(drop)
	}
}

// prestart builds one sandbox for s's view; nil when it cannot (the call
// that takes its place then starts cold and says why).
func (d *direct) prestart(s Spec) *warm {
	p, err := d.prepare(s)
	if err != nil {
		return nil
	}
	w := &warm{key: warmKey(p), ready: make(chan struct{})}
	// A view that binds a workspace path by name without its identity (a
	// Spec without HeldIDs, or the directories above a held path, which
	// are anchored) is built in a turn (quiet.go): the identities read
	// here are those of the files bound, which the call that takes it
	// checks again in its own turn. One whose every such bind carries its
	// identity needs none: the helper binds each only while it is that
	// file, and a call takes the sandbox only when its own paths and
	// identities are the same.
	if unpinnedBinds(p.plan) {
		t, err := d.quiet.begin(context.Background(), true)
		if err != nil {
			return nil
		}
		defer t.end()
	}
	if w.held, err = heldIdentities(p.plan); err != nil {
		return nil
	}
	pair := func() (parent, child *os.File, err error) {
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return nil, nil, err
		}
		return os.NewFile(uintptr(fds[0]), "go"), os.NewFile(uintptr(fds[1]), "go-child"), nil
	}
	var extra []*os.File
	defer func() {
		for _, f := range extra {
			f.Close()
		}
	}()
	var goChild *os.File
	if w.goSock, goChild, err = pair(); err != nil {
		return nil
	}
	extra = append(extra, goChild)
	p.plan.GoFD = treeFD + len(p.idmapped)
	if p.plan.ProxyFD > 0 {
		var proxyChild *os.File
		if w.proxy, proxyChild, err = pair(); err != nil {
			w.goSock.Close()
			return nil
		}
		extra = append(extra, proxyChild)
		p.plan.ProxyFD = p.plan.GoFD + 1
	}
	p.plan.Path, p.plan.ProgDev, p.plan.ProgIno, p.plan.Argv, p.plan.Env, p.plan.Dir = "", 0, 0, nil, nil, ""
	if w.l, err = d.launch(p, Stdio{}, extra, nil); err != nil {
		w.closeSockets()
		return nil
	}
	sock := w.goSock // closeSockets may clear the field while this reads
	go func() {
		var b [1]byte
		n, _ := sock.Read(b[:])
		w.said = n == 1 && b[0] == helper.GoReady
		close(w.ready)
	}()
	// It is built once its view is: the stage said GoReady, or the
	// sandbox ended (a step failed: a held path that was moved since it
	// was read, say), which a call that takes it then sees (current). A
	// turn, when it took one, ends here. One that takes longer than a cold
	// start ever should is not kept.
	timer := time.NewTimer(prestartBuildTimeout)
	defer timer.Stop()
	select {
	case <-w.ready:
	case <-w.l.exited:
	case <-timer.C:
		d.discard(w)
		return nil
	}
	return w
}

// prestartBuildTimeout bounds how long a pre-started sandbox may take to
// build its view (while a turn, when it took one, keeps the runner's other
// calls paused).
const prestartBuildTimeout = 10 * time.Second

// closeSockets closes the parent's ends of the sandbox's sockets, once.
func (w *warm) closeSockets() {
	for _, f := range []**os.File{&w.goSock, &w.proxy} {
		if *f != nil {
			(*f).Close()
			*f = nil
		}
	}
}

// discard kills a sandbox no call will take and removes its leaf.
func (d *direct) discard(w *warm) {
	w.l.kill()
	<-w.l.exited
	<-w.l.statusC
	w.closeSockets()
	if w.l.leaf != nil {
		var res Result
		_ = drainLeaf(w.l.leaf, &res)
	}
	d.quiet.leave(w.l) // taken by a call that then abandoned it
}

// awaitBuild is the first half of taking a pre-started sandbox, before
// the call's turn (a build may need the turn itself): when none is ready,
// the call claims one in flight and waits for it (at most until ctx ends:
// false). It was started before the call, so the wait is at most about a
// cold start. The sandbox it returns (or nil) is the call's to take or
// discard (takeWarm).
func (d *direct) awaitBuild(ctx context.Context) (*warm, bool) {
	ps := d.pre
	var b *build
	ps.mu.Lock()
	if len(ps.ready) == 0 && len(ps.builds) > 0 {
		b = ps.builds[0]
		ps.builds = ps.builds[1:]
		b.claimed = true
	}
	ps.mu.Unlock()
	if b == nil {
		return nil, true
	}
	select {
	case <-b.done:
		return b.w, true
	case <-ctx.Done():
		d.unclaim(b)
		return nil, false
	}
}

// takeWarm returns a pre-started sandbox that fits the call p plans, or
// nil, in the call's turn: claimed (awaitBuild's) first, then the ready
// ones, oldest first; each that does not fit (another view, a changed
// held or pinned path, a dead sandbox) is discarded in the background.
// Each sandbox goes to one call: it leaves the pool under ps.mu before it
// is used.
func (d *direct) takeWarm(p *prepared, claimed *warm) *warm {
	ps := d.pre
	if ps == nil {
		d.discardLater(claimed)
		return nil
	}
	key := warmKey(p)
	fits := func(w *warm) bool { return w.key == key && w.current() }
	var w *warm
	var stale []*warm
	if claimed != nil {
		if fits(claimed) {
			w = claimed
		} else {
			stale = append(stale, claimed)
		}
	}
	ps.mu.Lock()
	for w == nil && len(ps.ready) > 0 {
		c := ps.ready[0]
		ps.ready = ps.ready[1:]
		if fits(c) {
			w = c
		} else {
			stale = append(stale, c)
		}
	}
	ps.mu.Unlock()
	d.discardLater(stale...)
	if w == nil {
		return nil
	}
	ps.taken.Add(1)
	return w
}

// unclaim gives back a build a call stopped waiting for: to the ones in
// flight, or, done meanwhile, to the ready ones.
func (d *direct) unclaim(b *build) {
	ps := d.pre
	ps.mu.Lock()
	select {
	case <-b.done:
		if b.w != nil && !ps.closed {
			ps.ready = append(ps.ready, b.w)
			b.w = nil
		}
	default:
		b.claimed = false
		ps.builds = append(ps.builds, b)
	}
	w := b.w
	ps.mu.Unlock()
	if w != nil {
		d.discard(w)
	}
}

// discardLater discards sandboxes in the background; closePrestart waits
// for it.
func (d *direct) discardLater(ws ...*warm) {
	ps := d.pre
	for _, w := range ws {
		if w == nil {
			continue
		}
		ps.wg.Add(1)
		go func() {
			defer ps.wg.Done()
			d.discard(w)
		}()
	}
}

// closePrestart discards every ready sandbox and waits for every prestart
// and discard in flight (a build that ends after this began is discarded
// too); later calls start cold.
func (d *direct) closePrestart() {
	ps := d.pre
	if ps == nil {
		return
	}
	ps.mu.Lock()
	ps.closed = true
	ready := ps.ready
	ps.ready = nil
	ps.mu.Unlock()
	d.discardLater(ready...)
	ps.wg.Wait()
}

// runWarm runs the call s in a pre-started sandbox: the proxy listener
// (already opened in its network namespace) goes to the caller, the
// call's program, argv, environment, directory and streams go to the
// waiting stage, and from then on the call is any call's: Spec.Timeout
// counts from here.
func (d *direct) runWarm(ctx context.Context, s Spec, w *warm, stdio Stdio, t *quietTurn) (Result, error) {
	res := Result{ExitCode: -1, MemoryPeak: -1, PidsPeak: -1}
	defer w.closeSockets()
	abandon := func(err error) (Result, error) {
		d.discard(w)
		return res, err
	}
	// From here the sandbox is the call's: its program may run. Its view
	// was built before, and its paths checked in this turn (current): the
	// turn ends as soon as the next one would pause it.
	t.join(w.l)
	t.end()
	if w.proxy != nil {
		if err := forwardListener(w.proxy, stdio.Proxy); err != nil {
			// The helper did not hand one over: it failed, and its
			// status says why.
			w.l.kill()
			return d.finish(ctx, s, w.l, time.Now())
		}
	}
	g := helper.Go{Path: s.Program.Path, Dev: s.Program.Dev, Ino: s.Program.Ino, Argv: s.Argv, Env: s.Env, Dir: s.Dir}
	var fds []int
	for i, f := range []*os.File{stdio.Stdin, stdio.Stdout, stdio.Stderr} {
		if f == nil {
			continue
		}
		fd, err := rawFD(f)
		if err != nil {
			return abandon(fmt.Errorf("spawn: standard stream %d: %w", i, err))
		}
		fds = append(fds, fd)
		g.Stdio |= 1 << i
	}
	var e helper.Encoder
	g.Encode(&e)
	started := time.Now()
	w.l.signals = stdio.Signals
	if err := sendAll(w.goSock, e.B, unix.UnixRights(fds...)); err != nil {
		// The stage is gone: its status says why.
		w.l.kill()
	}
	res, err := d.finish(ctx, s, w.l, started)
	res.Prestarted = true
	return res, err
}

// rawFD is f's descriptor, without the blocking-mode change of Fd.
func rawFD(f *os.File) (int, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return -1, err
	}
	fd := -1
	if err := rc.Control(func(u uintptr) { fd = int(u) }); err != nil {
		return -1, err
	}
	return fd, nil
}

// sendAll writes b on a stream socket, with rights on its first part.
func sendAll(f *os.File, b, rights []byte) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	werr := rc.Write(func(fd uintptr) bool {
		for len(b) > 0 {
			n, err := unix.SendmsgN(int(fd), b, rights, nil, unix.MSG_NOSIGNAL)
			if errors.Is(err, unix.EAGAIN) {
				return false
			}
			if errors.Is(err, unix.EINTR) {
				continue
			}
			if err != nil {
				serr = err
				return true
			}
			b, rights = b[n:], nil
		}
		return true
	})
	if werr != nil {
		return werr
	}
	return serr
}

// forwardListener receives the proxy listener the helper sent on from
// and sends it on to, as the helper of a cold start would have.
func forwardListener(from, to *os.File) error {
	if to == nil {
		return errors.New("bug: a proxy without Stdio.Proxy")
	}
	rc, err := from.SyscallConn()
	if err != nil {
		return err
	}
	var lfd = -1
	var rerr error
	buf := make([]byte, 1)
	oob := make([]byte, unix.CmsgSpace(4))
	err = rc.Read(func(fd uintptr) bool {
		n, oobn, _, _, err := unix.Recvmsg(int(fd), buf, oob, unix.MSG_CMSG_CLOEXEC)
		if errors.Is(err, unix.EAGAIN) {
			return false
		}
		if err != nil || n != 1 || buf[0] != 'L' {
			rerr = fmt.Errorf("no proxy listener from the helper (%d bytes, %v)", n, err)
			return true
		}
		fds, err := parseRights(oob[:oobn])
		if err != nil || len(fds) != 1 {
			for _, fd := range fds {
				unix.Close(fd)
			}
			rerr = fmt.Errorf("no proxy listener from the helper: %v", err)
			return true
		}
		lfd = fds[0]
		return true
	})
	if err != nil {
		return err
	}
	if rerr != nil {
		return rerr
	}
	defer unix.Close(lfd)
	return sendAll(to, []byte{'L'}, unix.UnixRights(lfd))
}
