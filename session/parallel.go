package session

import (
	"container/list"
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/b10x/harness/tools"
	"github.com/b10x/harness/workspace"
)

// runSlots bounds how many run calls of one session execute at once
// (max_parallel). A call that finds every slot taken waits in a queue and
// is given the next slot freed, first come first served: a steady stream
// of newer calls cannot starve an older one. A waiting call whose context
// ends (its client cancelled it, its deadline passed) leaves the queue and
// never starts its sandbox.
//
// What it bounds is a call's Execute, from before its sandbox is taken or
// started to after its whole tree is gone; the wait is part of Execute,
// so it counts toward the call's deadline, and so is the reading of the
// paths its child is held to (the gate's hold, read in the runner's quiet
// turn: spawn.Spec.Hold), so a call waiting for a slot has read nothing
// yet. The gate's steps before it (arguments, paths, hooks, approval) and
// the file tools are not bounded, and neither are the sandboxes the
// broker keeps pre-started, which run no program until a call holding a
// slot takes one.
//
// Its zero value is not usable; newRunSlots makes one. It is safe for
// concurrent use.
type runSlots struct {
	max int

	mu      sync.Mutex
	running int       // slots held, at most max
	queue   list.List // of chan struct{}: the waiting calls, oldest first
}

func newRunSlots(n int) *runSlots { return &runSlots{max: n} }

// acquire takes a slot, waiting for one in turn when all are held. queued
// reports that the call had to wait. An error is ctx's own (Canceled,
// DeadlineExceeded): no slot is held then, and none must be released. A
// ctx that ends while the slot is being handed over gives the slot on to
// the next call in the queue.
func (s *runSlots) acquire(ctx context.Context) (queued bool, err error) {
	s.mu.Lock()
	if s.running < s.max && s.queue.Len() == 0 {
		s.running++
		s.mu.Unlock()
		return false, nil
	}
	turn := make(chan struct{})
	at := s.queue.PushBack(turn)
	s.mu.Unlock()

	select {
	case <-turn:
	case <-ctx.Done():
		s.mu.Lock()
		select {
		case <-turn:
			// Handed over as ctx ended: it is ours to pass on.
			s.releaseLocked()
		default:
			s.queue.Remove(at)
		}
		s.mu.Unlock()
		return true, ctx.Err()
	}
	if err := ctx.Err(); err != nil {
		// Given a slot, but the call ended meanwhile: it does not start.
		s.release()
		return true, err
	}
	return true, nil
}

// release frees a slot taken by acquire: the oldest waiting call gets it.
func (s *runSlots) release() {
	s.mu.Lock()
	s.releaseLocked()
	s.mu.Unlock()
}

func (s *runSlots) releaseLocked() {
	if front := s.queue.Front(); front != nil {
		// The slot passes straight to the oldest call: running is
		// unchanged, and no newer call can take it in between.
		close(s.queue.Remove(front).(chan struct{}))
		return
	}
	s.running--
}

// waiting is how many calls are in the queue (for tests).
func (s *runSlots) waiting() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.queue.Len()
}

// withSlots returns ts with the run tool's calls bounded by slots; the
// other tools are returned as they are.
func withSlots(ts []tools.Tool, slots *runSlots) []tools.Tool {
	out := make([]tools.Tool, len(ts))
	for i, t := range ts {
		if t.Name() == "run" {
			t = slottedTool{Tool: t, slots: slots}
		}
		out[i] = t
	}
	return out
}

// slottedTool is a tool whose calls execute within a slot of slots.
type slottedTool struct {
	tools.Tool
	slots *runSlots
}

func (t slottedTool) Prepare(ws *workspace.Workspace, raw json.RawMessage) (tools.Prepared, error) {
	p, err := t.Tool.Prepare(ws, raw)
	if err != nil {
		return nil, err
	}
	c := &slottedCall{Prepared: p, slots: t.slots}
	if h, ok := p.(tools.Holder); ok {
		// The gate holds paths from a Holder's child; a call that is not
		// one must not become one by being wrapped.
		return &slottedHeldCall{slottedCall: c, h: h}, nil
	}
	return c, nil
}

// slottedCall is a prepared call that executes within a slot. Its meta
// (the record's and the client's) says how long it waited for the slot,
// slot_wait_ms, and slot_queued when it found every slot taken.
type slottedCall struct {
	tools.Prepared
	slots *runSlots
}

func (c *slottedCall) Execute(ctx context.Context, rep tools.Report) (tools.Result, error) {
	start := time.Now()
	queued, err := c.slots.acquire(ctx)
	meta := map[string]any{"slot_wait_ms": time.Since(start).Milliseconds()}
	if queued {
		meta["slot_queued"] = true
	}
	if err != nil {
		return tools.Result{Meta: meta}, slotWaitErr(err, c.slots.max, time.Since(start))
	}
	defer c.slots.release()
	res, err := c.Prepared.Execute(ctx, rep)
	if res.Meta == nil {
		res.Meta = make(map[string]any, len(meta))
	}
	for k, v := range meta {
		res.Meta[k] = v
	}
	return res, err
}

// slotWaitErr is the failure of a call whose context ended while it
// waited for a slot.
func slotWaitErr(err error, n int, waited time.Duration) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return tools.Errorf(tools.ReasonTimeout, err, "the call's deadline passed while it waited %s for a run slot (max_parallel %d, every slot taken); the program never started", waited.Round(time.Millisecond), n)
	}
	return tools.Errorf(tools.ReasonCancelled, err, "the call was cancelled while it waited %s for a run slot (max_parallel %d, every slot taken); the program never started", waited.Round(time.Millisecond), n)
}

// Preview shows what the wrapped call previews (nothing, when it does not).
func (c *slottedCall) Preview() tools.Preview {
	if p, ok := c.Prepared.(tools.Previewer); ok {
		return p.Preview()
	}
	return tools.Preview{}
}

// Release releases what the wrapped call holds, if it holds anything.
func (c *slottedCall) Release() {
	if r, ok := c.Prepared.(tools.Releaser); ok {
		r.Release()
	}
}

// slottedHeldCall is a slottedCall whose call is a tools.Holder.
type slottedHeldCall struct {
	*slottedCall
	h tools.Holder
}

func (c *slottedHeldCall) Hold(read func() (tools.Hold, error), after func()) {
	c.h.Hold(read, after)
}
