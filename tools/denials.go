package tools

import (
	"fmt"
	"strings"
	"time"

	"github.com/b10x/harness/confine/audit"
	"github.com/b10x/harness/record"
)

// DefaultMaxDenials is how many kernel denials a run call lists and
// records one by one when RunConfig.MaxDenials is 0.
const DefaultMaxDenials = 32

// CollectDenials gathers, once a call's program has ended, the denials the
// kernel made inside its child: the program stage took name
// (spawn.Result.DomainName), a token of its sandbox, just before it
// created the program's Landlock domain, and r gives the denials of the
// domain created under that name to this call alone (decision 0080). It
// keeps at most max (0: DefaultMaxDenials) and returns them as record
// lines (Seq 0: the caller numbers its calls; the last carries how many
// were dropped beyond the cap), as the text a result lists after the
// output ("" for none; it begins with a newline), and how many there were
// in all. With a nil r or no name there is nothing to collect.
func CollectDenials(r *audit.Reader, name string, max int) (lines []record.Denial, text string, count int) {
	if r == nil || name == "" {
		return nil, "", 0
	}
	if max <= 0 {
		max = DefaultMaxDenials
	}
	ds, dropped := r.WatchName(name, max).Stop()
	now := time.Now()
	for _, x := range ds {
		lines = append(lines, record.NewDenial(0, now, "landlock", strings.Join(x.Blockers, ","), x.Object))
	}
	if len(lines) > 0 {
		lines[len(lines)-1].Dropped = dropped
	}
	count = len(ds) + dropped
	if count == 0 {
		return lines, "", 0
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\nkernel: %d request(s) of the program refused by the sandbox:", count)
	for _, x := range ds {
		b.WriteString("\n  " + x.String())
	}
	if dropped > 0 {
		fmt.Fprintf(&b, "\n  ... and %d more, counted, not listed", dropped)
	}
	return lines, b.String(), count
}
