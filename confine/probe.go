package confine

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/b10x/harness/cgroup"
	"github.com/b10x/harness/internal/probecache"
)

// Status is the outcome of one probe. The zero value, StatusUnknown, means
// the item was not probed; it counts as not available.
type Status string

// The three outcomes of a probe, and "not probed".
const (
	StatusUnknown Status = ""              // not probed
	Supported     Status = "supported"     // the feature was used for real and worked
	NotSupported  Status = "not-supported" // the kernel said no, conclusively
	Inconclusive  Status = "inconclusive"  // the probe itself failed; see Finding.Error
)

// Finding is the result of probing one item. Only Supported means the
// feature is available; NotSupported and Inconclusive both mean it may not
// be relied on. Inconclusive findings are never cached: the next Probe asks
// again. A Finding is a plain value, safe to copy.
type Finding struct {
	Status Status `json:"status"`
	Detail string `json:"detail,omitempty"` // what was found, in words
	Error  string `json:"error,omitempty"`  // the failure, for NotSupported and Inconclusive
}

// OK reports whether the finding is Supported.
func (f Finding) OK() bool { return f.Status == Supported }

// describe renders the finding for a table cell.
func (f Finding) describe() string {
	switch {
	case f.Status == Supported:
		return f.Detail
	case f.Status == StatusUnknown:
		return "not probed"
	case f.Error != "" && f.Detail != "":
		return fmt.Sprintf("%s: %s (%s)", f.Status, f.Detail, f.Error)
	case f.Error != "":
		return fmt.Sprintf("%s: %s", f.Status, f.Error)
	default:
		return fmt.Sprintf("%s: %s", f.Status, f.Detail)
	}
}

func supported(detail string) Finding { return Finding{Status: Supported, Detail: detail} }

func notSupported(detail string, err error) Finding {
	f := Finding{Status: NotSupported, Detail: detail}
	if err != nil {
		f.Error = err.Error()
	}
	return f
}

func inconclusive(detail string, err error) Finding {
	f := Finding{Status: Inconclusive, Detail: detail}
	if err != nil {
		f.Error = err.Error()
	}
	return f
}

// Report is what Probe found on this host. It has exported fields with
// stable JSON names (the doctor --json form) and is a plain value: safe to
// copy, to share between goroutines, and to build by hand (tests build
// synthetic Reports to check Plan without a kernel).
//
// The zero value describes a host where nothing was probed: every layer is
// unavailable, so Plan(Strict) refuses and Plan(Auto) enforces nothing.
type Report struct {
	Landlock   LandlockReport     `json:"landlock"`
	Privilege  Privilege          `json:"privilege"`
	Namespaces []NamespaceFinding `json:"namespaces"`
	Seccomp    SeccompReport      `json:"seccomp"`
	Cgroup     CgroupReport       `json:"cgroup"`

	// NotProbed, when set, says why only the harness's own layer was
	// probed (ProbeSelf): every other layer is reported "not probed",
	// neither available nor required, and the report plans no confined
	// execution and no strict mode.
	NotProbed string `json:"not_probed,omitempty"`
}

// LandlockReport is the Landlock part of a Report: the finding, the ABI and
// errata bitmask, the feature table evaluated at that ABI and the errata the
// kernel reports fixed. The zero value is "not probed" (ABI 0). A plain
// value.
type LandlockReport struct {
	Finding
	LandlockInfo
	Features []LandlockFeatureStatus `json:"features"`
	Errata   []LandlockErratum       `json:"fixed_errata,omitempty"`
}

// LandlockFeatureStatus is one row of the feature table with whether the
// probed ABI has it. A plain value.
type LandlockFeatureStatus struct {
	LandlockFeature
	Available bool `json:"available"`
}

// Privilege says whether the process is root in the sense that matters
// here: effective uid 0 holding CAP_SYS_ADMIN in its user namespace. Only
// then can namespaces be created without a user namespace. The zero value
// says uid 0 without the capability: not root. A plain value.
type Privilege struct {
	UID         int    `json:"uid"`
	CapSysAdmin bool   `json:"cap_sys_admin"`
	Root        bool   `json:"root"`            // UID == 0 && CapSysAdmin
	Error       string `json:"error,omitempty"` // capget failure; Root is then false
}

// NamespaceFinding is the probe of one namespace type. A plain value.
type NamespaceFinding struct {
	Name string `json:"name"` // user, pid, mount, net, ipc, uts, cgroup
	Finding
}

// SeccompReport is the seccomp part of a Report. The zero value is "not
// probed": neither counts as available. A plain value.
type SeccompReport struct {
	Filter     Finding `json:"filter"`       // a filter was installed in a child, and the actions used exist
	NoNewPrivs Finding `json:"no_new_privs"` // PR_SET_NO_NEW_PRIVS took effect in a child
}

// CgroupReport mirrors cgroup.Info with stable JSON names, so the doctor
// JSON does not change when cgroup.Info grows. See cgroup.Info for the
// meaning of each field. The zero value is "no cgroup v2 found". A plain
// value.
type CgroupReport struct {
	Mount       string   `json:"mount"`
	Self        string   `json:"self"`
	V1          bool     `json:"v1"`
	CanCreate   bool     `json:"can_create"`
	Controllers []string `json:"leaf_controllers"` // among pids, memory, cpu: what leaves can limit ([] when none)
	Kill        bool     `json:"kill"`
	Problem     string   `json:"problem,omitempty"`
	Missing     []string `json:"missing,omitempty"`
}

func cgroupReport(i cgroup.Info) CgroupReport {
	return CgroupReport{
		Mount:       i.Mount,
		Self:        i.Self,
		V1:          i.V1,
		CanCreate:   i.CanCreate,
		Controllers: append([]string{}, i.Controllers...),
		Kill:        i.Kill,
		Problem:     i.Problem,
		Missing:     append([]string(nil), i.Missing...),
	}
}

// Namespace returns the finding for the named namespace type, and the zero
// Finding (StatusUnknown) when it was not probed.
func (r Report) Namespace(name string) Finding {
	for _, n := range r.Namespaces {
		if n.Name == name {
			return n.Finding
		}
	}
	return Finding{}
}

// Probe finds out what this host can enforce, by using each feature for
// real: the Landlock ABI through the raw syscall, each namespace type and
// no_new_privs and a seccomp filter in re-executed children of this binary
// (see internal/reexec), and the cgroup part through cgroup.ProbeHost.
//
// Conclusive outcomes (Supported, NotSupported) are cached for the life of
// the process; inconclusive ones are retried on the next call. The cgroup
// part is asked afresh every time.
//
// Probe starts up to eight short-lived child processes. The binary must call
// reexec.Init first thing in main (and in TestMain), or the children run
// main instead of the probe and every namespace comes back Inconclusive.
// Probe changes nothing in the calling process. It is safe for concurrent
// use.
//
// Call it before RestrictSelf: once the harness's own domain is in force,
// writing a child's uid_map (needed when not root) and creating the cgroup
// probe's child cgroup are denied, and those items come back Inconclusive
// or unavailable.
func Probe() Report {
	var r Report
	r.Privilege = probePrivilege()
	// The cgroup probe first, alone: it predicts whether this process can
	// enable controllers for leaves, which cgroup v2 allows only while no
	// other process shares its cgroup, and the probe children below would.
	r.Cgroup = cgroupReport(cgroup.ProbeHost())

	var wg sync.WaitGroup
	wg.Go(func() { r.Landlock = probeLandlockReport() })
	wg.Go(func() { r.Seccomp = probeSeccomp() })
	nsFindings, all := probeAllNamespaces(r.Privilege.Root)
	if !all {
		nsFindings = make([]Finding, len(namespaceKinds))
		for i, ns := range namespaceKinds {
			wg.Go(func() {
				nsFindings[i] = cached("ns:"+ns.name, func() Finding { return probeNamespace(ns, r.Privilege.Root) })
			})
		}
	}
	wg.Wait()

	for i, ns := range namespaceKinds {
		r.Namespaces = append(r.Namespaces, NamespaceFinding{Name: ns.name, Finding: nsFindings[i]})
	}
	return r
}

// ProbeSelf probes only what the harness needs to confine its own writes:
// its privilege and Landlock. It is for a session that will start no
// program (no run tool), where creating namespaces and seccomp filters in
// probe children would only cost time. why says so in every other layer's
// detail; see Report.NotProbed.
func ProbeSelf(why string) Report {
	if why == "" {
		why = "not needed"
	}
	return Report{Privilege: probePrivilege(), Landlock: probeLandlockReport(), NotProbed: why}
}

// probeCache holds the conclusive findings, keyed by item.
var probeCache probecache.Map[string, Finding]

// cached returns the cached conclusive finding for key, or runs fn and
// caches its result when conclusive.
func cached(key string, fn func() Finding) Finding {
	return probeCache.Get(key, func() (Finding, probecache.Outcome) {
		f := fn()
		return f, f.Status.outcome()
	})
}

// outcome maps a Status to a probe's outcome: StatusUnknown counts as
// inconclusive and is not cached.
func (s Status) outcome() probecache.Outcome {
	switch s {
	case Supported:
		return probecache.Supported
	case NotSupported:
		return probecache.NotSupported
	}
	return probecache.Inconclusive
}

// landlockProbe is one ProbeLandlock result.
type landlockProbe struct {
	info LandlockInfo
	err  error
}

// landlockCache holds the conclusive ABI probe.
var landlockCache probecache.Value[landlockProbe]

// probedLandlock is ProbeLandlock, cached once conclusive.
func probedLandlock() (LandlockInfo, error) {
	r := landlockCache.Get(func() (landlockProbe, probecache.Outcome) {
		info, err := ProbeLandlock()
		switch {
		case err != nil:
			return landlockProbe{err: err}, probecache.Inconclusive
		case info.ABI == 0:
			return landlockProbe{info: info}, probecache.NotSupported
		}
		return landlockProbe{info: info}, probecache.Supported
	})
	return r.info, r.err
}

func probeLandlockReport() LandlockReport {
	info, err := probedLandlock()
	rep := LandlockReport{LandlockInfo: info}
	for _, f := range landlockFeatures {
		rep.Features = append(rep.Features, LandlockFeatureStatus{LandlockFeature: f, Available: info.Has(f.Name)})
	}
	rep.Errata = info.FixedErrata()
	switch {
	case err != nil:
		rep.Finding = inconclusive("landlock_create_ruleset failed", err)
	case info.ABI == 0:
		rep.Finding = notSupported("Landlock is not built into this kernel or not enabled at boot (lsm=)", nil)
	default:
		rep.Finding = supported(fmt.Sprintf("Landlock ABI %d, errata %#x", info.ABI, info.Errata))
	}
	return rep
}

// probePrivilege reads the effective uid and capability set.
func probePrivilege() Privilege {
	p := Privilege{UID: os.Geteuid()}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		p.Error = fmt.Sprintf("capget(self): %v", err)
		return p
	}
	p.CapSysAdmin = data[unix.CAP_SYS_ADMIN/32].Effective&(1<<(unix.CAP_SYS_ADMIN%32)) != 0
	p.Root = p.UID == 0 && p.CapSysAdmin
	return p
}

// namespaceKind is one row of the namespace table.
type namespaceKind struct {
	name   string  // report name
	proc   string  // entry in /proc/self/ns
	flag   uintptr // clone flag
	config string  // kernel option that provides it
	sysctl string  // per-user limit that disables it at 0
}

// namespaceKinds is probed in this order; Report.Namespaces follows it.
var namespaceKinds = []namespaceKind{
	{"user", "user", unix.CLONE_NEWUSER, "CONFIG_USER_NS", "user.max_user_namespaces"},
	{"pid", "pid", unix.CLONE_NEWPID, "CONFIG_PID_NS", "user.max_pid_namespaces"},
	{"mount", "mnt", unix.CLONE_NEWNS, "", "user.max_mnt_namespaces"},
	{"net", "net", unix.CLONE_NEWNET, "CONFIG_NET_NS", "user.max_net_namespaces"},
	{"ipc", "ipc", unix.CLONE_NEWIPC, "CONFIG_IPC_NS", "user.max_ipc_namespaces"},
	{"uts", "uts", unix.CLONE_NEWUTS, "CONFIG_UTS_NS", "user.max_uts_namespaces"},
	{"cgroup", "cgroup", unix.CLONE_NEWCGROUP, "CONFIG_CGROUPS", "user.max_cgroup_namespaces"},
}

func namespaceKindByName(name string) (namespaceKind, bool) {
	for _, k := range namespaceKinds {
		if k.name == name {
			return k, true
		}
	}
	return namespaceKind{}, false
}

// cloneRefusal reports whether err from starting a child with clone flags is
// the kernel conclusively refusing the namespace: EPERM (no privilege, or a
// sysctl such as kernel.unprivileged_userns_clone=0), ENOSPC (a
// user.max_*_namespaces limit, 0 when disabled), EUSERS (nesting limit), or
// EINVAL (the namespace type is not built in).
func cloneRefusal(err error) bool {
	for _, e := range []error{unix.EPERM, unix.ENOSPC, unix.EUSERS, unix.EINVAL} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// firstLine trims s to its first non-empty line, for details.
func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}
