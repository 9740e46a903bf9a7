package spawn

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/b10x/harness/cgroup"
)

// Quiet while binding (docs/decisions/0097-quiet-while-binding.md).
//
// A call's view binds workspace paths by name: the files the read scope
// masks, the paths the write scope and the protected names hold. Its
// caller finds them (a walk of the workspace) and the helper binds them,
// each resolved again by name. Another call's program, running meanwhile
// in the same workspace, could move them in between (swap a directory
// holding .env with one that does not, back and forth with
// RENAME_EXCHANGE, while the walk reads one and then the other), and the
// view would mask a decoy and show the secret. So a runner gives one call
// at a time a turn: while a call holds it, every other call whose program
// may run is paused (its cgroup leaf frozen; see below for calls without
// one), and no call starts; the turn ends once the call's view is built (its status
// pipe's first message: the program is about to start, or the start
// failed). Every path bound by name carries the identity the caller read
// (Spec.HeldIDs), which the helper checks as it binds; a pre-started
// sandbox whose binds all carry theirs is built without a turn (one that
// raced a swap fails its step), one with a bind that does not in a turn,
// and either is taken only when its plan, identities included, is the
// call's and every path it bound is still the same file and still mounted
// at its name (warm.current, read in the taking call's turn).
//
// Calls without a cgroup leaf, or on a kernel without cgroup.freeze, have
// nothing to pause them by: they run on during another call's turn, as
// before the turn existed (a swap can then hide a file from the walk; a
// moved file still fails its bind), and a runner with one call at a time
// (max_parallel 1) is what shields them. Waiting for them to end instead
// would hold every call behind a long one (a server a model started).
//
// Calls that bind nothing by name take the turn only to join the calls
// the next turn pauses, and give it back at once. A call's caller may
// check what it left in another turn once its tree is gone (Spec.After).

// freezeTimeout bounds how long a turn waits for one call's leaf to be
// reported frozen (a process in uninterruptible sleep delays it): past
// it the turn fails, and the call that wanted it does not start.
const freezeTimeout = 5 * time.Second

// quiet is a runner's turns and the calls whose programs may run. Its
// zero value is not usable; newQuiet makes one. Safe for concurrent use.
type quiet struct {
	turn chan struct{} // capacity 1: a value in it is the turn held

	mu   sync.Mutex
	live map[*launched]*cgroup.Leaf // each call's leaf, nil for none
}

func newQuiet() *quiet {
	return &quiet{turn: make(chan struct{}, 1), live: map[*launched]*cgroup.Leaf{}}
}

// quietTurn is one turn. end gives it back; it is safe to call more than
// once, and on a nil turn.
type quietTurn struct {
	q       *quiet
	pausing bool           // every other call is paused while it is held
	frozen  []*cgroup.Leaf // the leaves it froze, thawed at its end
	once    sync.Once
}

// begin takes the turn, waiting for it at most until ctx ends. With pause,
// every call that may run a program is then paused or has ended. Errors:
// ctx ended first, or a leaf could not be frozen (then nothing stays
// frozen and the turn is not held).
func (q *quiet) begin(ctx context.Context, pause bool) (*quietTurn, error) {
	select {
	case q.turn <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("spawn: not started: waiting for another call's view to be built: %w", context.Cause(ctx))
	}
	t := &quietTurn{q: q, pausing: pause}
	if !pause {
		return t, nil
	}
	type member struct {
		l    *launched
		leaf *cgroup.Leaf
	}
	q.mu.Lock()
	live := make([]member, 0, len(q.live))
	for l, leaf := range q.live {
		live = append(live, member{l, leaf})
	}
	q.mu.Unlock()
	// No call joins while the turn is held: live is every call that
	// may run a program.
	var waitFor []*launched
	for _, m := range live {
		if m.leaf == nil {
			// Nothing to pause it by: it runs on (see the package's
			// note on calls without a leaf).
			continue
		}
		fctx, cancel := context.WithTimeout(ctx, freezeTimeout)
		err := m.leaf.Freeze(fctx)
		cancel()
		switch {
		case err == nil:
			t.frozen = append(t.frozen, m.leaf)
		case errors.Is(err, cgroup.ErrNotSupported):
			// No freezer (before Linux 5.2): as without a leaf.
			_ = m.leaf.Thaw()
		case errors.Is(err, cgroup.ErrLeafClosed):
			// The call is ending (its leaf was emptied and removed): it
			// leaves the quiet in a moment.
			waitFor = append(waitFor, m.l)
		default:
			_ = m.leaf.Thaw()
			t.end()
			return nil, fmt.Errorf("spawn: not started: another call's programs could not be paused while this call's view is built: %w", err)
		}
	}
	for _, l := range waitFor {
		select {
		case <-l.gone:
		case <-ctx.Done():
			t.end()
			return nil, fmt.Errorf("spawn: not started: waiting for another call to end (its programs cannot be paused) before this call's view is built: %w", context.Cause(ctx))
		}
	}
	return t, nil
}

// join makes l one of the calls a turn pauses. The caller holds t, the
// turn; a turn that pauses nothing ends here, as l is known.
func (t *quietTurn) join(l *launched) {
	t.q.mu.Lock()
	t.q.live[l] = l.leaf
	t.q.mu.Unlock()
	if !t.pausing {
		t.end()
	}
}

// leave ends l's membership once its whole tree is gone, and closes
// l.gone.
func (q *quiet) leave(l *launched) {
	q.mu.Lock()
	_, in := q.live[l]
	delete(q.live, l)
	q.mu.Unlock()
	if in {
		close(l.gone)
	}
}

// end thaws what the turn froze and gives the turn back.
func (t *quietTurn) end() {
	if t == nil {
		return
	}
	t.once.Do(func() {
		for _, leaf := range t.frozen {
			// A leaf closed meanwhile thaws as nil; any other failure
			// leaves that call paused until its deadline kills it, which
			// its outcome then says.
			_ = leaf.Thaw()
		}
		<-t.q.turn
	})
}

// paused calls fn in a turn that pauses every call (Spec.After), or,
// when the others cannot be paused within freezeTimeout twice over (a
// call without a leaf that does not end), without one: what fn checks is
// then read while they run.
func (q *quiet) paused(fn func()) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*freezeTimeout)
	defer cancel()
	t, _ := q.begin(ctx, true)
	defer t.end()
	fn()
}
