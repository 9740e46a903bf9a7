package main

import (
	"fmt"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/b10x/harness/egress"
	"github.com/b10x/harness/internal/termsafe"
	"github.com/b10x/harness/record"
)

type recordCmd struct {
	Summary recordSummaryCmd `cmd:"" help:"Count calls by entry and outcome, list every refusal or failure with its reason, calls that started and have no outcome, and torn lines."`
}

type recordSummaryCmd struct {
	File string `arg:"" help:"The run record (JSON Lines)."`
	JSON bool   `help:"Print the summary as JSON."`
}

func (c *recordSummaryCmd) Run(e *env) error {
	s, err := record.SummarizeFile(c.File)
	if err != nil {
		return usageError{err}
	}
	if c.JSON {
		return writeJSON(e.stdout, "  ", s)
	}
	fmt.Fprintf(e.stdout, "%d run(s), %d call(s)", s.Runs, s.Calls)
	if !s.Complete {
		fmt.Fprint(e.stdout, " — a run has no run_end (the harness stopped mid-run)")
	}
	fmt.Fprintln(e.stdout)
	w := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ENTRY\tEXECUTED\tREFUSED\tFAILED")
	entries := make([]string, 0, len(s.ByEntry))
	for k := range s.ByEntry {
		entries = append(entries, k)
	}
	sort.Strings(entries)
	for _, k := range entries {
		m := s.ByEntry[k]
		fmt.Fprintf(w, "%s\t%d\t%d\t%d\n", termsafe.Line(k), m["executed"], m["refused"], m["failed"])
	}
	w.Flush()
	// A call's number counts within its run: with several runs in one
	// record, each line says which run it belongs to.
	runOf := func(run int) string {
		if s.Runs > 1 {
			return fmt.Sprintf("run %d ", run)
		}
		return ""
	}
	for _, u := range s.Unfinished {
		fmt.Fprintf(e.stdout, "unfinished: %s#%d %s (line %d) has an intent line and no outcome: it may have acted\n", runOf(u.Run), u.Seq, termsafe.Line(u.Entry), u.Line)
	}
	if len(s.Connections) > 0 {
		fmt.Fprintf(e.stdout, "network: %d connection attempt(s) through the proxy, %d allowed, %d denied\n", s.Connections["allowed"]+s.Connections["denied"], s.Connections["allowed"], s.Connections["denied"])
	}
	for _, d := range s.Denied {
		seqs := make([]string, len(d.Seqs))
		for i, q := range d.Seqs {
			seqs[i] = fmt.Sprintf("#%d", q)
		}
		fmt.Fprintf(e.stdout, "denied: %s ×%d (%s), by call %s\n", termsafe.Line(egress.Destination(d.Host, d.Port)), d.Count, termsafe.Line(d.Rule), strings.Join(seqs, " "))
	}
	for _, t := range s.Torn {
		fmt.Fprintf(e.stdout, "torn: line %d (%d bytes) is not a record line (a write cut short), skipped\n", t.Line, t.Bytes)
	}
	if len(s.Unknown) > 0 {
		evs := make([]string, 0, len(s.Unknown))
		for k, v := range s.Unknown {
			evs = append(evs, fmt.Sprintf("%s ×%d", termsafe.Line(k), v))
		}
		sort.Strings(evs)
		fmt.Fprintf(e.stdout, "skipped events this version does not know: %s\n", strings.Join(evs, ", "))
	}
	if len(s.NotOK) > 0 {
		fmt.Fprintln(e.stdout, "\nRefused or failed:")
		for _, r := range s.NotOK {
			via := ""
			if r.Via != "" {
				via = " via " + termsafe.Line(r.Via)
			}
			// Every field is the record's: a forged or model-written
			// record must not drive the terminal.
			fmt.Fprintf(e.stdout, "  %s#%d %s%s: %s %s at %s — %s\n", runOf(r.Run), r.Seq, termsafe.Line(r.Entry), via,
				termsafe.Line(r.Status), termsafe.Line(r.Reason), termsafe.Line(r.Step), termsafe.Line(r.Message))
		}
	}
	return nil
}
