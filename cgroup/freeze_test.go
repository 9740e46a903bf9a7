package cgroup

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

func init() {
	scenarios["freeze"] = scenarioFreeze
	scenarios["freezeclose"] = scenarioFreezeClose
}

type freezeResult struct {
	Running, Frozen, Thawed int // counter advances in each 200ms window
}

// A frozen leaf's processes make no progress (a counter a shell writes in
// a loop stands still) until Thaw; Kill ends a frozen tree; Freeze on a
// closed leaf fails and Thaw does nothing.
func TestFreezeThaw(t *testing.T) {
	var r freezeResult
	runChild(t, childOpts{lacking: noCgroup2, cgroup: childCgroup(t)}, &r, "freeze", t.TempDir())
	t.Logf("%+v", r)
	if r.Running == 0 || r.Thawed == 0 {
		t.Errorf("the counter did not advance while the leaf ran: %+v", r)
	}
	if r.Frozen != 0 {
		t.Errorf("the counter advanced by %d while the leaf was frozen", r.Frozen)
	}
}

func scenarioFreeze(args []string) (any, error) {
	if err := SetChildSubreaper(); err != nil {
		return nil, err
	}
	m, err := openOrMissing()
	if err != nil {
		return nil, err
	}
	defer m.Close()
	leaf, err := m.NewLeaf("freeze", Limits{})
	if err != nil {
		return nil, err
	}
	counter := filepath.Join(args[0], "n")
	cmd := exec.Command("/bin/sh", "-c", `i=0; while :; do i=$((i+1)); echo $i > "$1.tmp"; mv "$1.tmp" "$1"; done`, "sh", counter)
	if err := startIn(leaf, cmd); err != nil {
		return nil, err
	}
	read := func() int {
		b, _ := os.ReadFile(counter)
		var n int
		fmt.Sscan(string(bytes.TrimSpace(b)), &n)
		return n
	}
	window := func() int {
		a := read()
		time.Sleep(200 * time.Millisecond)
		return read() - a
	}
	var r freezeResult
	time.Sleep(50 * time.Millisecond)
	r.Running = window()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := leaf.Freeze(ctx); err != nil {
		return nil, fmt.Errorf("Freeze: %w", err)
	}
	if ok, err := frozenNow(leaf.Path()); err != nil || !ok {
		return nil, fmt.Errorf("after Freeze, cgroup.events says frozen %t (%v)", ok, err)
	}
	r.Frozen = window()
	if err := leaf.Thaw(); err != nil {
		return nil, fmt.Errorf("Thaw: %w", err)
	}
	r.Thawed = window()
	if err := leaf.Freeze(ctx); err != nil {
		return nil, fmt.Errorf("Freeze again: %w", err)
	}
	if err := leaf.Kill(); err != nil {
		return nil, fmt.Errorf("Kill of a frozen leaf: %w", err)
	}
	if err := leaf.WaitEmpty(ctx); err != nil {
		return nil, fmt.Errorf("a frozen leaf killed did not empty: %w", err)
	}
	cmd.Wait()
	if err := leaf.Close(); err != nil {
		return nil, err
	}
	if err := leaf.Freeze(ctx); err == nil || !errors.Is(err, ErrLeafClosed) {
		return nil, fmt.Errorf("Freeze of a closed leaf: %v, want it refused", err)
	}
	if err := leaf.Thaw(); err != nil {
		return nil, fmt.Errorf("Thaw of a closed leaf: %v, want nil", err)
	}
	if err := reapAll(5 * time.Second); err != nil {
		return nil, err
	}
	return r, m.Close()
}

// Freeze racing the leaf's Close (a call ending while another call's turn
// pauses it) returns nil or an error matching ErrLeafClosed, never
// another: the leaf's directory vanishing under the wait is its Close.
func TestFreezeWhileClosing(t *testing.T) {
	var r struct{ Closed, Frozen int }
	runChild(t, childOpts{lacking: noCgroup2, cgroup: childCgroup(t)}, &r, "freezeclose")
	t.Logf("%+v", r)
	if r.Closed == 0 {
		t.Errorf("no Freeze met the leaf closed: the race was not exercised (%+v)", r)
	}
}

func scenarioFreezeClose([]string) (any, error) {
	if err := SetChildSubreaper(); err != nil {
		return nil, err
	}
	m, err := openOrMissing()
	if err != nil {
		return nil, err
	}
	defer m.Close()
	var r struct{ Closed, Frozen int }
	for i := 0; i < 200 && (r.Closed == 0 || i < 50); i++ {
		leaf, err := m.NewLeaf(fmt.Sprintf("fc%d", i), Limits{})
		if err != nil {
			return nil, err
		}
		cmd := exec.Command("/bin/sleep", "1000")
		if err := startIn(leaf, cmd); err != nil {
			return nil, err
		}
		done := make(chan error, 1)
		go func() { done <- leaf.Close() }()
		for k := 0; k < 20; k++ {
			err := leaf.Freeze(context.Background())
			switch {
			case err == nil:
				r.Frozen++
			case errors.Is(err, ErrLeafClosed):
				r.Closed++
			default:
				return nil, fmt.Errorf("Freeze while the leaf closes: %w", err)
			}
		}
		if err := <-done; err != nil {
			return nil, err
		}
		cmd.Wait()
	}
	if err := reapAll(5 * time.Second); err != nil {
		return nil, err
	}
	return r, m.Close()
}
