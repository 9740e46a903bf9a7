package cgroup

// Controller names a cgroup v2 controller this package manages.
type Controller string

// The controllers this package manages, one per field group of Limits.
const (
	ControllerPids   Controller = "pids"
	ControllerMemory Controller = "memory"
	ControllerCPU    Controller = "cpu"
)

// limitKinds is the one table from a limit of Limits to the controller it
// needs, in the order Open enables the controllers and NewLeaf checks
// them. A limit is set when set reports true; keep copies it (and only it)
// from src into dst.
var limitKinds = []struct {
	field string // the Limits field, as UnavailableError.Limit names it
	ctl   Controller
	set   func(Limits) bool
	keep  func(dst *Limits, src Limits)
}{
	{"PidsMax", ControllerPids, func(l Limits) bool { return l.PidsMax > 0 }, func(d *Limits, s Limits) { d.PidsMax = s.PidsMax }},
	{"MemoryMax", ControllerMemory, func(l Limits) bool { return l.MemoryMax > 0 }, func(d *Limits, s Limits) { d.MemoryMax = s.MemoryMax }},
	{"CPUQuota", ControllerCPU, func(l Limits) bool { return l.CPUQuota > 0 }, func(d *Limits, s Limits) { d.CPUQuota, d.CPUPeriod = s.CPUQuota, s.CPUPeriod }},
}

// managed lists, in the order Open enables them, the controllers this
// package manages.
var managed = func() []string {
	out := make([]string, len(limitKinds))
	for i, k := range limitKinds {
		out[i] = string(k.ctl)
	}
	return out
}()

// Need is one limit that is set and the controller it needs.
type Need struct {
	Limit      string     // the Limits field, e.g. "PidsMax"
	Controller Controller // the controller it needs, e.g. ControllerPids
}

// Needs returns, for each limit set in l (non-zero), the controller it
// needs, in the order pids, memory, cpu. CPUPeriod needs no entry of its
// own: it goes with CPUQuota. The zero Limits needs nothing (nil).
func (l Limits) Needs() []Need {
	var out []Need
	for _, k := range limitKinds {
		if k.set(l) {
			out = append(out, Need{Limit: k.field, Controller: k.ctl})
		}
	}
	return out
}

// Only returns the limits of l whose controller is in ctls, the others
// zero; CPUPeriod stays with CPUQuota. A limit not set in l stays unset.
func (l Limits) Only(ctls []Controller) Limits {
	var out Limits
	for _, k := range limitKinds {
		if !k.set(l) {
			continue
		}
		for _, c := range ctls {
			if c == k.ctl {
				k.keep(&out, l)
				break
			}
		}
	}
	return out
}
