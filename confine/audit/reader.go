package audit

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// maxPending is how many audit events with denials of a domain not yet
// known a Reader holds; the oldest goes first.
const maxPending = 256

// Settle is how long Watch.Stop waits for records of denials made before
// the call ended: the kernel hands them to its audit thread, which sends
// them a moment later.
const Settle = 20 * time.Millisecond

// Reader reads Landlock audit records from the audit netlink's read-only
// multicast group and hands each denial to the Watch of the domain's
// creator. Open starts it; Close stops it. Safe for concurrent use.
type Reader struct {
	// exe is SetExe's; "" attributes any creator's domains.
	exe string

	f *os.File

	mu       sync.Mutex
	byKey    map[string]*Watch // by creator: pidKey or nameKey
	byDomain map[string]*Watch
	pending  map[uint64][]Denial
	order    []uint64
	// unclaimed holds domains allocated by a creator nobody watches yet
	// (the Watch may start just after the program's first denial), with
	// the denials logged so far, the oldest dropped first; each claim is
	// under its creator's pid and name keys.
	unclaimed map[string]*claim
	uorder    []*claim
	lost      int
	err       error
	done      chan struct{}
}

// Open joins the read-only group (CAP_AUDIT_READ) and starts reading. It
// changes nothing in the kernel's audit configuration. Call Probe first:
// a Reader on a kernel whose audit is disabled receives nothing.
func Open() (*Reader, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, netlinkAudit)
	if err != nil {
		return nil, fmt.Errorf("audit: socket NETLINK_AUDIT: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: 1 << (groupReadLog - 1)}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("audit: bind AUDIT_NLGRP_READLOG: %w", err)
	}
	// Room for a burst; a full buffer loses records (ENOBUFS), counted.
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 1<<20)
	r := &Reader{
		f:        os.NewFile(uintptr(fd), "audit netlink"),
		byKey:    map[string]*Watch{},
		byDomain: map[string]*Watch{},
		pending:  map[uint64][]Denial{},
		done:     make(chan struct{}),
	}
	r.unclaimed = map[string]*claim{}
	go r.loop()
	return r, nil
}

// Close stops the reader; Watches already stopped keep their denials.
func (r *Reader) Close() error {
	err := r.f.Close()
	<-r.done
	return err
}

// SetExe makes the Reader attribute only domains whose creator
// executable is exe (the helper's path, as the kernel prints exe=): other
// programs' domains are neither attributed nor held for a Watch, which
// leaves a pid reused by another program nothing to claim. Without it any
// creator's domains are attributed.
func (r *Reader) SetExe(exe string) {
	r.mu.Lock()
	r.exe = exe
	r.mu.Unlock()
}

// Lost is how many times the kernel dropped records for this reader
// (its socket buffer was full).
func (r *Reader) Lost() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lost
}

func (r *Reader) loop() {
	defer close(r.done)
	buf := make([]byte, 1<<16)
	for {
		n, err := r.f.Read(buf)
		if errors.Is(err, unix.ENOBUFS) {
			r.mu.Lock()
			r.lost++
			r.mu.Unlock()
			continue
		}
		if err != nil {
			if !errors.Is(err, os.ErrClosed) {
				r.mu.Lock()
				r.err = err
				r.mu.Unlock()
			}
			return
		}
		for b := buf[:n]; len(b) >= unix.NLMSG_HDRLEN; {
			l := int(binary.NativeEndian.Uint32(b[0:]))
			if l < unix.NLMSG_HDRLEN || l > len(b) {
				break
			}
			typ := binary.NativeEndian.Uint16(b[4:])
			r.handle(typ, b[unix.NLMSG_HDRLEN:l])
			b = b[min((l+3)&^3, len(b)):]
		}
	}
}

// handle takes one record: a denial of a known domain goes to its Watch,
// one of an unknown domain waits for its event's allocation record.
func (r *Reader) handle(typ uint16, payload []byte) {
	for len(payload) > 0 && payload[len(payload)-1] == 0 {
		payload = payload[:len(payload)-1]
	}
	rec, err := Parse(typ, string(payload))
	if err != nil || rec == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	switch v := rec.(type) {
	case Denial:
		if w := r.byDomain[v.Domain]; w != nil {
			w.add(v)
			return
		}
		if c := r.unclaimedDomain(v.Domain); c != nil {
			c.add(v)
			return
		}
		if _, ok := r.pending[v.Serial]; !ok {
			r.order = append(r.order, v.Serial)
			if len(r.order) > maxPending {
				delete(r.pending, r.order[0])
				r.order = r.order[1:]
			}
		}
		r.pending[v.Serial] = append(r.pending[v.Serial], v)
	case Domain:
		if v.Status != "allocated" {
			if w := r.byDomain[v.ID]; w != nil && v.Status == "deallocated" {
				delete(r.byDomain, v.ID)
			}
			return
		}
		w := r.byKey[pidKey(v.PID)]
		if w == nil && v.Comm != "" {
			w = r.byKey[nameKey(v.Comm)]
		}
		held := r.pending[v.Serial]
		delete(r.pending, v.Serial)
		if r.exe != "" && v.Exe != r.exe {
			return // another program's domain
		}
		if w == nil {
			// Another program's domain, or a call's whose Watch has not
			// started yet.
			r.hold(v, held)
			return
		}
		r.byDomain[v.ID] = w
		w.domains = append(w.domains, v.ID)
		for _, d := range held {
			if d.Domain == v.ID {
				w.add(d)
			}
		}
	}
}

// Watch collects the denials of the domains one process creates: a run
// call's program stage. Stop ends it.
type Watch struct {
	r       *Reader
	key     string
	max     int
	denials []Denial
	dropped int
	domains []string
	stopped bool
}

// pidKey and nameKey are the keys a creator is known by.
func pidKey(pid int) string      { return "pid " + strconv.Itoa(pid) }
func nameKey(name string) string { return "name " + name }

// Watch starts collecting the denials of domains created by pid (in the
// initial PID namespace), keeping at most max (0: 64) and counting the
// rest. The pid must be one that cannot be reused while the Watch lasts
// (a process whose parent has not reaped it), and the Watch must start
// soon after the pid's domain is created: a Reader holds the domains
// (and first denials) of the last 64 creators nobody watched, for a Watch
// that starts just after the program's first denial.
func (r *Reader) Watch(pid, max int) *Watch { return r.watch(pidKey(pid), max) }

// WatchName is Watch for the creator whose name (comm) was name when it
// created its domain: a run call's program stage names itself with a
// token of its call just before it restricts itself (and the program it
// executes gets its own name), so the token ties the domain to the call
// with no pid to learn and none that could be reused. name must be one no
// other creator takes (random, as long as the kernel keeps: 15 bytes).
func (r *Reader) WatchName(name string, max int) *Watch { return r.watch(nameKey(name), max) }

func (r *Reader) watch(key string, max int) *Watch {
	if max <= 0 {
		max = 64
	}
	w := &Watch{r: r, key: key, max: max}
	r.mu.Lock()
	r.byKey[key] = w
	if c := r.unclaimed[key]; c != nil {
		r.unhold(c)
		for _, id := range c.domains {
			r.byDomain[id] = w
			w.domains = append(w.domains, id)
		}
		for _, d := range c.denials {
			w.add(d)
		}
		w.dropped += c.dropped
	}
	r.mu.Unlock()
	return w
}

// maxUnclaimed is how many creators' domains a Reader holds for a Watch
// still to come; maxClaimDenials how many denials it keeps for each.
const (
	maxUnclaimed    = 64
	maxClaimDenials = 64
)

// claim is what a Reader holds of one creator nobody watches yet.
type claim struct {
	keys    []string
	domains []string
	denials []Denial
	dropped int
}

func (c *claim) add(d Denial) {
	if len(c.denials) >= maxClaimDenials {
		c.dropped++
		return
	}
	c.denials = append(c.denials, d)
}

// hold keeps a domain allocated by a creator nobody watches, and its
// first denials, for a Watch of its pid or name that starts later.
func (r *Reader) hold(v Domain, held []Denial) {
	keys := []string{pidKey(v.PID)}
	if v.Comm != "" {
		keys = append(keys, nameKey(v.Comm))
	}
	c := r.unclaimed[keys[0]]
	if c == nil {
		c = &claim{keys: keys}
		for _, k := range keys {
			if old := r.unclaimed[k]; old != nil {
				r.unhold(old) // a creator's key taken again: the older goes
			}
			r.unclaimed[k] = c
		}
		r.uorder = append(r.uorder, c)
		if len(r.uorder) > maxUnclaimed {
			r.unhold(r.uorder[0])
		}
	}
	c.domains = append(c.domains, v.ID)
	for _, d := range held {
		if d.Domain == v.ID {
			c.add(d)
		}
	}
}

// unhold forgets a held creator under every key it is held by.
func (r *Reader) unhold(c *claim) {
	for _, k := range c.keys {
		if r.unclaimed[k] == c {
			delete(r.unclaimed, k)
		}
	}
	r.uorder = slices.DeleteFunc(r.uorder, func(o *claim) bool { return o == c })
}

func (r *Reader) unclaimedDomain(id string) *claim {
	for _, c := range r.uorder {
		for _, d := range c.domains {
			if d == id {
				return c
			}
		}
	}
	return nil
}

func (w *Watch) add(d Denial) {
	if w.stopped {
		return
	}
	if len(w.denials) >= w.max {
		w.dropped++
		return
	}
	w.denials = append(w.denials, d)
}

// Stop waits Settle for records still in flight, ends the Watch and
// returns its denials in the order the kernel logged them and how many
// more it dropped beyond its cap. Later calls return the same.
func (w *Watch) Stop() (denials []Denial, dropped int) {
	w.r.mu.Lock()
	stopped := w.stopped
	w.r.mu.Unlock()
	if !stopped {
		time.Sleep(Settle)
	}
	w.r.mu.Lock()
	defer w.r.mu.Unlock()
	if !w.stopped {
		w.stopped = true
		if w.r.byKey[w.key] == w {
			delete(w.r.byKey, w.key)
		}
		for _, id := range w.domains {
			if w.r.byDomain[id] == w {
				delete(w.r.byDomain, id)
			}
		}
	}
	return append([]Denial(nil), w.denials...), w.dropped
}
