package tools

import (
	"fmt"
	"strings"
	"time"

	"github.com/b10x/harness/confine/audit"
	"github.com/b10x/harness/confine/spawn"
	"github.com/b10x/harness/record"
)

// NoRouteOp is the operation of a denial line of the netns layer: a
// connection or datagram to an address with no route out of the call's
// network namespace.
const NoRouteOp = "net.no_route"

// MaskedOp is the operation of a denial line of the view layer: a masked
// file read (as empty), and MaskedRule what that line's rule says.
const (
	MaskedOp   = "fs.read_file"
	MaskedRule = "masked: reads as empty"
)

// DefaultMaxDenials is how many kernel denials a run call lists and
// records one by one when RunConfig.MaxDenials is 0.
const DefaultMaxDenials = 32

// CollectDenials gathers, once a call's program has ended, the denials the
// kernel made inside its child, each tied to this call alone:
//
//   - Landlock's: the program stage took a name (res.DomainName), a token
//     of its sandbox, just before it created the program's Landlock
//     domain, and r gives the denials of the domain created under that
//     name (decision 0080). With a nil r or no name there are none.
//   - seccomp's: the system calls the child's filter refused, which the
//     call's init was handed one by one (res.SeccompRefused, where
//     res.SeccompAttributed; decision 0090).
//   - the view's: the masked files the program's tree read, as empty
//     (res.MaskedOpened, where res.MaskedWatched; decision 0095), one line
//     each, however often it was read, with the rule MaskedRule.
//   - the network namespace's: the connections and datagrams that found
//     no route out of the call's own namespace (res.NoRoute, where
//     res.NoRouteCounted), one line each, with no object: the kernel
//     counts them and keeps no destination.
//
// It keeps at most max (0: DefaultMaxDenials) of them all, in that order,
// and returns them as record lines (Seq 0: the caller numbers its
// calls; the last carries how many were dropped beyond the cap), as the
// text a result lists after the output ("" for none; it begins with a
// newline), how many there were in all, and whether any layer's denials
// were attributable to this call at all (false: count means nothing).
func CollectDenials(r *audit.Reader, res spawn.Result, max int) (lines []record.Denial, text string, count int, attributed bool) {
	if max <= 0 {
		max = DefaultMaxDenials
	}
	now := time.Now()
	var shown []string
	dropped, summed := 0, 0
	if r != nil && res.DomainName != "" {
		attributed = true
		ds, more := r.WatchName(res.DomainName, max).Stop()
		for _, x := range ds {
			lines = append(lines, record.NewDenial(0, now, "landlock", strings.Join(x.Blockers, ","), x.Object))
			shown = append(shown, x.String())
		}
		dropped += more
	}
	if res.SeccompAttributed {
		attributed = true
		listed := 0
		for _, op := range res.SeccompRefused {
			if len(lines) >= max {
				break
			}
			lines = append(lines, record.NewDenial(0, now, "seccomp", op, ""))
			shown = append(shown, "seccomp: "+op)
			listed++
		}
		dropped += res.SeccompRefusedAll - listed
	}
	if res.MaskedWatched {
		attributed = true
		for i, p := range res.MaskedOpened {
			if len(lines) >= max {
				dropped += len(res.MaskedOpened) - i
				break
			}
			d := record.NewDenial(0, now, "view", MaskedOp, p)
			d.Rule = MaskedRule
			lines = append(lines, d)
			shown = append(shown, "view: "+MaskedOp+" "+p+" ("+MaskedRule+")")
		}
	}
	if res.NoRouteCounted {
		attributed = true
		n := res.NoRoute
		for listed := 0; listed < n; listed++ {
			if len(lines) >= max {
				// Dropped from the record, not from the text: its one
				// line counts them all.
				dropped += n - listed
				summed = n - listed
				break
			}
			lines = append(lines, record.NewDenial(0, now, "netns", NoRouteOp, ""))
		}
		if n > 0 {
			shown = append(shown, fmt.Sprintf("netns: %s ×%d (connections or datagrams to addresses outside the call's network namespace, which has only loopback: refused with ENETUNREACH; the kernel keeps no destination)", NoRouteOp, n))
		}
	}
	if len(lines) > 0 {
		lines[len(lines)-1].Dropped = dropped
	}
	count = len(lines) + dropped
	if count == 0 {
		return lines, "", 0, attributed
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\nkernel: %d request(s) of the program refused by the sandbox:", count)
	for _, s := range shown {
		b.WriteString("\n  " + s)
	}
	if dropped > summed {
		fmt.Fprintf(&b, "\n  ... and %d more, counted, not listed", dropped-summed)
	}
	return lines, b.String(), count, attributed
}
