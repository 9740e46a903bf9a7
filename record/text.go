package record

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/b10x/harness/egress"
	"github.com/b10x/harness/internal/termsafe"
)

// WriteText writes the summary for a person: the runs and calls, a table of
// calls by entry and outcome, then one line for each call with no outcome,
// the kernel's denials, the proxy's connections, each denied destination,
// each torn line and the events skipped, and last every refused or failed
// call with its reason, step and message.
//
// Every field the record holds (an entry, a reason, a message, a host, a
// layer, an event's name) is made safe for a terminal with termsafe.Line
// before it is written: a forged or model-written record must not drive the
// terminal it is read on. WriteText returns the first write error, and
// writes nothing after it.
func (s *Summary) WriteText(w io.Writer) error {
	ew := termsafe.NewWriter(w)
	fmt.Fprintf(ew, "%d run(s), %d call(s)", s.Runs, s.Calls)
	if !s.Complete {
		fmt.Fprint(ew, " — a run has no run_end (the harness stopped mid-run)")
	}
	fmt.Fprintln(ew)
	tw := tabwriter.NewWriter(ew, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ENTRY\tEXECUTED\tREFUSED\tFAILED")
	entries := make([]string, 0, len(s.ByEntry))
	for k := range s.ByEntry {
		entries = append(entries, k)
	}
	sort.Strings(entries)
	for _, k := range entries {
		m := s.ByEntry[k]
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\n", termsafe.Line(k), m["executed"], m["refused"], m["failed"])
	}
	tw.Flush()
	// A call's number counts within its run: with several runs in one
	// record, each line says which run it belongs to.
	runOf := func(run int) string {
		if s.Runs > 1 {
			return fmt.Sprintf("run %d ", run)
		}
		return ""
	}
	for _, u := range s.Unfinished {
		fmt.Fprintf(ew, "unfinished: %s#%d %s (line %d) has an intent line and no outcome: it may have acted\n", runOf(u.Run), u.Seq, termsafe.Line(u.Entry), u.Line)
	}
	if len(s.Denials) > 0 {
		fmt.Fprintf(ew, "kernel denials inside run children: %s\n", countsText(s.Denials))
	}
	if len(s.Connections) > 0 {
		fmt.Fprintf(ew, "network: %d connection attempt(s) through the proxy, %d allowed, %d denied\n", s.Connections["allowed"]+s.Connections["denied"], s.Connections["allowed"], s.Connections["denied"])
	}
	for _, d := range s.Denied {
		seqs := make([]string, len(d.Seqs))
		for i, q := range d.Seqs {
			seqs[i] = fmt.Sprintf("#%d", q)
		}
		fmt.Fprintf(ew, "denied: %s ×%d (%s), by call %s\n", termsafe.Line(egress.Destination(d.Host, d.Port)), d.Count, termsafe.Line(d.Rule), strings.Join(seqs, " "))
	}
	for _, t := range s.Torn {
		fmt.Fprintf(ew, "torn: line %d (%d bytes) is not a record line (a write cut short), skipped\n", t.Line, t.Bytes)
	}
	if len(s.Unknown) > 0 {
		fmt.Fprintf(ew, "skipped events this version does not know: %s\n", countsText(s.Unknown))
	}
	if len(s.NotOK) > 0 {
		fmt.Fprintln(ew, "\nRefused or failed:")
		for _, r := range s.NotOK {
			via := ""
			if r.Via != "" {
				via = " via " + termsafe.Line(r.Via)
			}
			fmt.Fprintf(ew, "  %s#%d %s%s: %s %s at %s — %s\n", runOf(r.Run), r.Seq, termsafe.Line(r.Entry), via,
				termsafe.Line(r.Status), termsafe.Line(r.Reason), termsafe.Line(r.Step), termsafe.Line(r.Message))
		}
	}
	return ew.Err()
}

// countsText is "name ×count" for each of m, names made safe for a
// terminal, sorted and joined by ", ".
func countsText(m map[string]int) string {
	parts := make([]string, 0, len(m))
	for k, v := range m {
		parts = append(parts, fmt.Sprintf("%s ×%d", termsafe.Line(k), v))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}
