package audit

import (
	"fmt"
	"testing"
)

func newTestReader() *Reader {
	return &Reader{byKey: map[string]*Watch{}, byDomain: map[string]*Watch{}, pending: map[uint64][]Denial{}, unclaimed: map[string]*claim{}, done: make(chan struct{})}
}

func feed(r *Reader, typ uint16, text string) { r.handle(typ, []byte(text+"\x00")) }

// A denial comes before its domain's allocation record, in the same event;
// it reaches the Watch of the domain's creator, and nobody else's.
func TestReaderAttributes(t *testing.T) {
	r := newTestReader()
	a, b := r.Watch(100, 0), r.Watch(200, 0)
	feed(r, TypeLandlockAccess, `audit(1.0:10): domain=aa blockers=fs.make_reg path="/usr/share" dev="vda" ino=2`)
	feed(r, TypeLandlockAccess, `audit(1.0:11): domain=bb blockers=fs.read_dir path="/" dev="tmpfs" ino=1`)
	feed(r, 1300, `audit(1.0:10): arch=c000003e syscall=257 success=no exit=-13 pid=101`)
	feed(r, TypeLandlockDomain, `audit(1.0:10): domain=aa status=allocated mode=enforcing pid=100 uid=0 exe="/proc/self/exe" comm="b10x"`)
	feed(r, TypeLandlockDomain, `audit(1.0:11): domain=bb status=allocated mode=enforcing pid=200 uid=0 exe="/proc/self/exe" comm="b10x"`)
	// Later denials of a known domain go straight to it.
	feed(r, TypeLandlockAccess, `audit(1.0:12): domain=aa blockers=fs.write_file path="/etc/passwd" dev="vda" ino=3`)
	// Another program's domain, whose creator nobody watches.
	feed(r, TypeLandlockAccess, `audit(1.0:13): domain=cc blockers=fs.write_file path="/x" dev="vda" ino=3`)
	feed(r, TypeLandlockDomain, `audit(1.0:13): domain=cc status=allocated mode=enforcing pid=300 uid=0 exe="/bin/x" comm="x"`)

	da, _ := a.Stop()
	db, _ := b.Stop()
	if got := fmt.Sprint(da); got != "[landlock: fs.make_reg /usr/share landlock: fs.write_file /etc/passwd]" {
		t.Errorf("call a: %s", got)
	}
	if got := fmt.Sprint(db); got != "[landlock: fs.read_dir /]" {
		t.Errorf("call b: %s", got)
	}
	if len(r.byKey) != 0 || len(r.byDomain) != 0 || len(r.pending) != 0 || len(r.uorder) != 1 || len(r.unclaimed) != 2 {
		t.Errorf("left behind: %d creators, %d domains, %d pending, %d held (%d keys)", len(r.byKey), len(r.byDomain), len(r.pending), len(r.uorder), len(r.unclaimed))
	}
}

// A Watch keeps at most its cap and counts the rest; unknown domains'
// events are held only up to maxPending.
func TestReaderBounded(t *testing.T) {
	r := newTestReader()
	w := r.Watch(100, 3)
	feed(r, TypeLandlockAccess, `audit(1.0:1): domain=aa blockers=fs.read_file path="/a" dev="vda" ino=2`)
	feed(r, TypeLandlockDomain, `audit(1.0:1): domain=aa status=allocated mode=enforcing pid=100 uid=0 exe="/x" comm="x"`)
	for i := 0; i < 1000; i++ {
		feed(r, TypeLandlockAccess, fmt.Sprintf(`audit(1.0:%d): domain=aa blockers=fs.read_file path="/a" dev="vda" ino=2`, i+2))
	}
	for i := 0; i < 10*maxPending; i++ {
		feed(r, TypeLandlockAccess, fmt.Sprintf(`audit(1.0:%d): domain=zz blockers=fs.read_file path="/a" dev="vda" ino=2`, 5000+i))
	}
	d, dropped := w.Stop()
	if len(d) != 3 || dropped != 998 {
		t.Errorf("kept %d, dropped %d; want 3 and 998", len(d), dropped)
	}
	if len(r.pending) > maxPending || len(r.order) > maxPending {
		t.Errorf("%d events pending, %d in order; at most %d", len(r.pending), len(r.order), maxPending)
	}
}

func TestProbeReasons(t *testing.T) {
	abi := func(v int) func() (int, error) { return func() (int, error) { return v, nil } }
	on := func(b bool, err error) func() (bool, error) { return func() (bool, error) { return b, err } }
	for _, c := range []struct {
		s    Support
		want string
	}{
		{probe(abi(6), on(true, nil)), "kernel denials are not attributable here (Landlock ABI 6 logs no denials; audit records need ABI 7, Linux 6.15)"},
		{probe(abi(7), on(false, nil)), "kernel denials are not attributable here (the kernel's audit is disabled (audit_enabled 0: no audit=1 on its command line and no audit daemon enabled it), so Landlock logs nothing; the harness never changes the host's audit configuration)"},
		{probe(abi(8), on(true, nil)), ""},
	} {
		if got := c.s.Note(); got != c.want {
			t.Errorf("got %q\nwant %q", got, c.want)
		}
		if !c.s.Conclusive {
			t.Errorf("%q: not conclusive", c.want)
		}
	}
	if s := probe(abi(7), on(false, errPermTest)); s.Attributable || !s.Conclusive {
		t.Errorf("EPERM: %+v", s)
	}
}

var errPermTest = fmt.Errorf("bind AUDIT_NLGRP_READLOG: %w", eperm)

// A Watch that starts after its program's first denials still gets them,
// and the ones after.
func TestReaderLateWatch(t *testing.T) {
	r := newTestReader()
	feed(r, TypeLandlockAccess, `audit(1.0:1): domain=aa blockers=fs.read_file path="/a" dev="vda" ino=2`)
	feed(r, TypeLandlockDomain, `audit(1.0:1): domain=aa status=allocated mode=enforcing pid=100 uid=0 exe="/x" comm="x"`)
	feed(r, TypeLandlockAccess, `audit(1.0:2): domain=aa blockers=fs.write_file path="/b" dev="vda" ino=3`)
	w := r.Watch(100, 0)
	feed(r, TypeLandlockAccess, `audit(1.0:3): domain=aa blockers=fs.make_reg path="/c" dev="vda" ino=4`)
	other := r.Watch(200, 0)
	d, _ := w.Stop()
	if got := fmt.Sprint(d); got != "[landlock: fs.read_file /a landlock: fs.write_file /b landlock: fs.make_reg /c]" {
		t.Errorf("late watch: %s", got)
	}
	if d, _ := other.Stop(); len(d) != 0 {
		t.Errorf("another pid got %v", d)
	}
	for i := 0; i < 10*maxUnclaimed; i++ {
		feed(r, TypeLandlockDomain, fmt.Sprintf(`audit(1.0:%d): domain=d%d status=allocated mode=enforcing pid=%d uid=0 exe="/x" comm="x"`, 10+i, i, 1000+i))
	}
	if len(r.unclaimed) > 2*maxUnclaimed || len(r.uorder) > maxUnclaimed {
		t.Errorf("%d unclaimed creators held; at most %d", len(r.unclaimed), maxUnclaimed)
	}
}

// With Exe set, a domain another program created is not attributed, even
// to a watched pid.
func TestReaderExe(t *testing.T) {
	r := newTestReader()
	r.SetExe("/usr/libexec/b10x-helper")
	w := r.Watch(100, 0)
	feed(r, TypeLandlockAccess, `audit(1.0:1): domain=aa blockers=fs.read_file path="/a" dev="vda" ino=2`)
	feed(r, TypeLandlockDomain, `audit(1.0:1): domain=aa status=allocated mode=enforcing pid=100 uid=0 exe="/usr/bin/other" comm="x"`)
	feed(r, TypeLandlockAccess, `audit(1.0:2): domain=bb blockers=fs.write_file path="/b" dev="vda" ino=3`)
	feed(r, TypeLandlockDomain, `audit(1.0:2): domain=bb status=allocated mode=enforcing pid=100 uid=0 exe="/usr/libexec/b10x-helper" comm="x"`)
	d, _ := w.Stop()
	if got := fmt.Sprint(d); got != "[landlock: fs.write_file /b]" {
		t.Errorf("got %s", got)
	}
	if len(r.unclaimed) != 0 {
		t.Errorf("another program's domain held: %v", r.unclaimed)
	}
}

// A Watch by name gets the denials of the domain its creator made while
// named so, whichever pid that was, also when it starts after them; a
// creator of another name, or the same pid under another name later, is
// not its.
func TestReaderWatchName(t *testing.T) {
	r := newTestReader()
	early := r.WatchName("b10x-aaaa", 0)
	feed(r, TypeLandlockAccess, `audit(1.0:20): domain=d1 blockers=fs.make_char path="/w" dev="vda" ino=9`)
	feed(r, TypeLandlockDomain, `audit(1.0:20): domain=d1 status=allocated mode=enforcing pid=700 uid=0 exe="/h" comm="b10x-aaaa"`)
	// Before its Watch: held under the name.
	feed(r, TypeLandlockAccess, `audit(1.0:21): domain=d2 blockers=fs.write_file path="/usr/x" dev="vda" ino=4`)
	feed(r, TypeLandlockDomain, `audit(1.0:21): domain=d2 status=allocated mode=enforcing pid=701 uid=0 exe="/h" comm="b10x-bbbb"`)
	// Another name, and the program's own nested domain under its own name.
	feed(r, TypeLandlockAccess, `audit(1.0:22): domain=d3 blockers=fs.read_file path="/etc/x" dev="vda" ino=5`)
	feed(r, TypeLandlockDomain, `audit(1.0:22): domain=d3 status=allocated mode=enforcing pid=702 uid=0 exe="/h" comm="sh"`)
	late := r.WatchName("b10x-bbbb", 0)
	feed(r, TypeLandlockAccess, `audit(1.0:23): domain=d2 blockers=fs.make_reg path="/usr/y" dev="vda" ino=6`)
	de, _ := early.Stop()
	dl, _ := late.Stop()
	if got := fmt.Sprint(de); got != "[landlock: fs.make_char /w]" {
		t.Errorf("watched first: %s", got)
	}
	if got := fmt.Sprint(dl); got != "[landlock: fs.write_file /usr/x landlock: fs.make_reg /usr/y]" {
		t.Errorf("watched after its first denial: %s", got)
	}
	// The pid of a held name is the same claim: taken by name, it is
	// gone under its pid too.
	if _, ok := r.unclaimed[pidKey(701)]; ok {
		t.Error("a claim taken by name is still held under its pid")
	}
	if len(r.uorder) != 1 || r.unclaimed[nameKey("sh")] == nil {
		t.Errorf("held: %d claims; the unwatched sh domain should be the one left", len(r.uorder))
	}
}
