package confine

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// LandlockInfo is what the kernel reports about Landlock.
// The zero value means Landlock is not available (ABI 0).
// It is a plain value, safe to copy and to share between goroutines.
type LandlockInfo struct {
	ABI    int `json:"abi"`    // 0 when Landlock is absent or disabled
	Errata int `json:"errata"` // errata bitmask; 0 when not reported
}

const (
	landlockCreateRulesetVersion = 1 << 0
	landlockCreateRulesetErrata  = 1 << 1
)

// ProbeLandlock asks the kernel, with a raw landlock_create_ruleset(NULL, 0,
// LANDLOCK_CREATE_RULESET_VERSION), which Landlock ABI it offers. It never
// relies on a library's best-effort mode, which reports success even where
// nothing is enforced.
//
// ENOSYS (not built) and EOPNOTSUPP (built but disabled at boot) give ABI 0
// and a nil error: a conclusive "not supported". Any other error is returned:
// the probe was inconclusive.
//
// It has no side effects and is safe to call from any goroutine.
func ProbeLandlock() (LandlockInfo, error) {
	v, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, landlockCreateRulesetVersion) // attr NULL
	if errno != 0 {
		if errors.Is(errno, unix.ENOSYS) || errors.Is(errno, unix.EOPNOTSUPP) {
			return LandlockInfo{}, nil
		}
		return LandlockInfo{}, fmt.Errorf("landlock_create_ruleset(NULL, 0, VERSION): %w", errno)
	}
	info := LandlockInfo{ABI: int(v)}
	// Kernels before the errata interface reject the flag with EINVAL: no
	// erratum reported, which is what Errata 0 says.
	if e, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, landlockCreateRulesetErrata); errno == 0 {
		info.Errata = int(e)
	}
	return info, nil
}

// LandlockFeature is one row of the Landlock feature table: a group of
// access rights (or another ability) and the first ABI that has it.
// It is a plain value, safe to copy.
type LandlockFeature struct {
	Name        string `json:"name"`             // stable identifier, e.g. "truncate"
	MinimumABI  int    `json:"minimum_abi"`      // first Landlock ABI that has it
	Kernel      string `json:"kernel,omitempty"` // first mainline kernel with that ABI; "" when not recorded here
	Description string `json:"description"`
}

// MinimumVersion renders where the feature first appeared, for
// UnsupportedFeatureError.
func (f LandlockFeature) MinimumVersion() string {
	if f.Kernel == "" {
		return fmt.Sprintf("Landlock ABI %d", f.MinimumABI)
	}
	return fmt.Sprintf("Linux %s (Landlock ABI %d)", f.Kernel, f.MinimumABI)
}

// Landlock feature names, the keys of the table LandlockFeatures returns.
const (
	FeatureFS          = "fs"           // ABI 1: execute, read, write, remove, make_* on files and directories
	FeatureRefer       = "refer"        // ABI 2: link and rename between directories
	FeatureTruncate    = "truncate"     // ABI 3: truncate(2), ftruncate(2), O_TRUNC
	FeatureTCP         = "tcp"          // ABI 4: TCP bind(2) and connect(2) by port
	FeatureIoctlDev    = "ioctl-dev"    // ABI 5: ioctl(2) on character and block devices
	FeatureScope       = "scope"        // ABI 6: signals and abstract unix sockets leaving the domain
	FeatureAudit       = "audit"        // ABI 7: audit logging flags of landlock_restrict_self
	FeatureTSync       = "tsync"        // ABI 8: enforcing on every thread in one call
	FeatureResolveUnix = "resolve-unix" // ABI 9: connect(2)/sendmsg(2) on pathname unix sockets
	FeatureUDP         = "udp"          // ABI 10: UDP bind and send by port
)

// landlockFeatures is the table, in ABI order. Kernel versions are those of
// the mainline release that introduced each ABI; later ABIs are listed by
// number only (go-landlock v0.11.2 knows them; no kernel here has them).
var landlockFeatures = []LandlockFeature{
	{FeatureFS, 1, "5.13", "restrict execute, read, write, remove and create (make_*) on files and directories"},
	{FeatureRefer, 2, "5.19", "allow linking and renaming between directories (always denied under ABI 1)"},
	{FeatureTruncate, 3, "6.2", "restrict truncate(2), ftruncate(2) and open(O_TRUNC)"},
	{FeatureTCP, 4, "6.7", "restrict TCP bind(2) and connect(2) by port (not MPTCP)"},
	{FeatureIoctlDev, 5, "6.10", "restrict ioctl(2) on character and block devices"},
	{FeatureScope, 6, "6.12", "scope signals and abstract unix socket connections to the domain"},
	{FeatureAudit, 7, "6.15", "audit logging of denials, with per-domain logging flags"},
	{FeatureTSync, 8, "", "enforce a ruleset on every thread of the process in one call"},
	{FeatureResolveUnix, 9, "", "restrict connect(2) and sendmsg(2) on pathname unix sockets"},
	{FeatureUDP, 10, "", "restrict UDP bind and send by port"},
}

// LandlockFeatures returns the Landlock feature table: each feature with the
// minimum ABI that has it. The slice is a fresh copy on every call.
func LandlockFeatures() []LandlockFeature {
	return append([]LandlockFeature(nil), landlockFeatures...)
}

// landlockFeature looks a feature up by name.
func landlockFeature(name string) (LandlockFeature, bool) {
	for _, f := range landlockFeatures {
		if f.Name == name {
			return f, true
		}
	}
	return LandlockFeature{}, false
}

// Has reports whether the probed ABI includes the named feature. An unknown
// name is never present.
func (l LandlockInfo) Has(feature string) bool {
	f, ok := landlockFeature(feature)
	return ok && l.ABI >= f.MinimumABI
}

// Require returns nil when the probed ABI includes the named feature, and
// otherwise an *UnsupportedFeatureError (matching ErrNotSupported) naming
// the version that has it. An unknown feature name is a programming error,
// reported as a plain error that does not match ErrNotSupported.
func (l LandlockInfo) Require(feature string) error {
	f, ok := landlockFeature(feature)
	if !ok {
		return fmt.Errorf("confine: bug: unknown Landlock feature %q", feature)
	}
	if l.ABI < f.MinimumABI {
		return &UnsupportedFeatureError{Name: "Landlock " + f.Name, MinimumVersion: f.MinimumVersion()}
	}
	return nil
}

// LandlockErratum is one fix the kernel can report through the errata
// bitmask: bit N-1 set means erratum N is fixed in the running kernel.
// Description is empty for errata not recorded here. A plain value.
type LandlockErratum struct {
	ID          int    `json:"id"`
	ABI         int    `json:"abi"` // the ABI whose feature it concerns
	Description string `json:"description"`
}

// landlockErrata lists the errata whose meaning is recorded here (the
// kernel's Documentation/userspace-api/landlock.rst, "Landlock errata");
// others are reported by number only, with ABI 0 and no description.
var landlockErrata = []LandlockErratum{
	{1, 4, "TCP rights no longer applied to non-TCP stream sockets (SMC, MPTCP, SCTP)"},
	{2, 6, "signal scoping no longer blocks signals between threads of one process"},
	{3, 1, "rename and link on disconnected directories under bind mounts can no longer widen access rights (refer)"},
}

// FixedErrata lists the errata the kernel reports as fixed, in bit order,
// with a description where one is recorded here.
func (l LandlockInfo) FixedErrata() []LandlockErratum {
	var out []LandlockErratum
	for bit := 0; bit < 31; bit++ {
		if l.Errata&(1<<bit) == 0 {
			continue
		}
		e := LandlockErratum{ID: bit + 1}
		for _, known := range landlockErrata {
			if known.ID == e.ID {
				e = known
			}
		}
		out = append(out, e)
	}
	return out
}
