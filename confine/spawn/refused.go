package spawn

import (
	"fmt"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/b10x/harness/confine/spawn/internal/helper"
	"github.com/b10x/harness/confine/spawn/internal/seccomp"
)

// SeccompSupport says whether the system calls a run child's seccomp
// filter refuses can be told, each tied to its call, on this host, and
// when not, why (decision 0090). A plain value.
type SeccompSupport struct {
	Attributable bool
	// Why is the reason, in words, when Attributable is false.
	Why string
}

// ProbeSeccompDenials reports whether the child's filter can hand its
// refusals to the call's init: the architecture has a filter and the
// kernel offers SECCOMP_RET_USER_NOTIF (Linux 5.0). Its answer is cached
// (the kernel's answer does not change while it runs). A call's own
// Result.SeccompAttributed can still be false where the harness's own
// filter stack holds a listener already (a stack takes one).
func ProbeSeccompDenials() SeccompSupport { return seccompProbe() }

var seccompProbe = sync.OnceValue(func() SeccompSupport {
	if !seccomp.Supported {
		return SeccompSupport{Why: "this architecture has no seccomp filter for run children"}
	}
	switch e := seccompActionAvail(unix.SECCOMP_RET_USER_NOTIF); e {
	case 0:
		return SeccompSupport{Attributable: true}
	case unix.EOPNOTSUPP:
		return SeccompSupport{Why: "the kernel has no seccomp user notification (SECCOMP_RET_USER_NOTIF, Linux 5.0)"}
	default:
		return SeccompSupport{Why: fmt.Sprintf("the kernel's seccomp actions could not be asked (SECCOMP_GET_ACTION_AVAIL: %v)", e)}
	}
})

// refusedOps names the calls the init reported (StatusRefused) as denial
// lines' operations.
func refusedOps(kept []helper.Refusal) []string {
	ops := make([]string, 0, len(kept))
	for _, k := range kept {
		ops = append(ops, seccomp.Refused{Nr: k.Nr, Args: k.Args}.String())
	}
	return ops
}
