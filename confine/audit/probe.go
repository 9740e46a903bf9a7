package audit

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"golang.org/x/sys/unix"
)

// Netlink audit constants (include/uapi/linux/audit.h, netlink.h).
const (
	netlinkAudit      = 9    // NETLINK_AUDIT
	groupReadLog      = 1    // AUDIT_NLGRP_READLOG
	auditGet          = 1000 // AUDIT_GET
	minLandlockABI    = 7    // LANDLOCK_RESTRICT_SELF_LOG_* and the audit records
	landlockVersionOp = 1    // LANDLOCK_CREATE_RULESET_VERSION
)

// Support says whether a run call's Landlock denials can be attributed on
// this host and, when not, why. A plain value; the zero value says
// nothing is attributable, for no stated reason.
type Support struct {
	Attributable bool
	// Why is the reason, in words, when Attributable is false.
	Why string
	// Conclusive is false when the answer came from an error that may
	// not last (Probe tries again next time).
	Conclusive bool
}

// String is the line doctor prints.
func (s Support) String() string {
	if s.Attributable {
		return "kernel denials: attributable (Landlock audit records are read from the audit netlink's read-only group, CAP_AUDIT_READ)"
	}
	return "kernel denials: not attributable here (" + s.Why + ")"
}

// Note is what each run call says when its denials are not attributable.
func (s Support) Note() string {
	if s.Attributable {
		return ""
	}
	return "kernel denials are not attributable here (" + s.Why + ")"
}

var (
	probeMu     sync.Mutex
	probeCached *Support
)

// Probe reports whether Landlock denials are attributable here: the
// kernel's Landlock ABI is 7 or later, this process may join the audit
// netlink's read-only group (CAP_AUDIT_READ, the initial user namespace),
// and the kernel's audit is enabled (AUDIT_GET, which needs
// CAP_AUDIT_CONTROL; Probe never sets anything). A conclusive answer is
// cached. Safe for concurrent use.
func Probe() Support {
	probeMu.Lock()
	defer probeMu.Unlock()
	if probeCached != nil {
		return *probeCached
	}
	s := probe(landlockABI, auditStatus)
	if s.Conclusive {
		probeCached = &s
	}
	return s
}

// probe is Probe with its two kernel questions passed in (tests give
// fakes): abi returns the Landlock ABI (0: none), status whether audit is
// enabled.
func probe(abi func() (int, error), status func() (bool, error)) Support {
	v, err := abi()
	if err != nil {
		return Support{Why: fmt.Sprintf("the Landlock ABI could not be read: %v", err)}
	}
	if v < minLandlockABI {
		return Support{Conclusive: true, Why: fmt.Sprintf("Landlock ABI %d logs no denials; audit records need ABI %d, Linux 6.15", v, minLandlockABI)}
	}
	on, err := status()
	switch {
	case errors.Is(err, unix.EPROTONOSUPPORT), errors.Is(err, unix.EAFNOSUPPORT):
		return Support{Conclusive: true, Why: "the kernel has no audit support (CONFIG_AUDIT)"}
	case errors.Is(err, unix.EPERM), errors.Is(err, unix.EACCES):
		return Support{Conclusive: true, Why: fmt.Sprintf("the harness may not read the kernel's audit records or status: it needs CAP_AUDIT_READ and CAP_AUDIT_CONTROL in the initial user namespace (%v)", err)}
	case err != nil:
		return Support{Why: fmt.Sprintf("the kernel's audit status could not be read: %v", err)}
	case !on:
		return Support{Conclusive: true, Why: "the kernel's audit is disabled (audit_enabled 0: no audit=1 on its command line and no audit daemon enabled it), so Landlock logs nothing; the harness never changes the host's audit configuration"}
	}
	return Support{Attributable: true, Conclusive: true}
}

func landlockABI() (int, error) {
	v, _, e := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, landlockVersionOp)
	switch e {
	case 0:
		return int(v), nil
	case unix.ENOSYS, unix.EOPNOTSUPP:
		return 0, nil
	}
	return 0, fmt.Errorf("landlock_create_ruleset VERSION: %w", e)
}

// auditStatus joins the read-only group (the permission a Reader needs)
// and asks the kernel for its audit status (AUDIT_GET): enabled is its
// audit_enabled field, not 0.
func auditStatus() (enabled bool, err error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, netlinkAudit)
	if err != nil {
		return false, fmt.Errorf("socket NETLINK_AUDIT: %w", err)
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: 1 << (groupReadLog - 1)}); err != nil {
		return false, fmt.Errorf("bind AUDIT_NLGRP_READLOG: %w", err)
	}
	tv := unix.Timeval{Sec: 2}
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return false, fmt.Errorf("setsockopt SO_RCVTIMEO: %w", err)
	}
	req := make([]byte, unix.NLMSG_HDRLEN)
	binary.NativeEndian.PutUint32(req[0:], uint32(len(req)))
	binary.NativeEndian.PutUint16(req[4:], auditGet)
	binary.NativeEndian.PutUint16(req[6:], unix.NLM_F_REQUEST|unix.NLM_F_ACK)
	binary.NativeEndian.PutUint32(req[8:], 1)
	if err := unix.Sendto(fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return false, fmt.Errorf("send AUDIT_GET: %w", err)
	}
	buf := make([]byte, 8192)
	for {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			return false, fmt.Errorf("receive AUDIT_GET: %w", err)
		}
		for b := buf[:n]; len(b) >= unix.NLMSG_HDRLEN; {
			l := int(binary.NativeEndian.Uint32(b[0:]))
			typ := binary.NativeEndian.Uint16(b[4:])
			if l < unix.NLMSG_HDRLEN || l > len(b) {
				return false, fmt.Errorf("AUDIT_GET: netlink message of %d bytes in %d", l, len(b))
			}
			p := b[unix.NLMSG_HDRLEN:l]
			switch typ {
			case unix.NLMSG_ERROR:
				if len(p) >= 4 {
					if e := int32(binary.NativeEndian.Uint32(p)); e != 0 {
						return false, fmt.Errorf("AUDIT_GET: %w", unix.Errno(-e))
					}
				}
			case auditGet:
				// struct audit_status: mask, then enabled.
				if len(p) < 8 {
					return false, fmt.Errorf("AUDIT_GET: status of %d bytes", len(p))
				}
				return binary.NativeEndian.Uint32(p[4:]) != 0, nil
			}
			b = b[min((l+3)&^3, len(b)):]
		}
	}
}
