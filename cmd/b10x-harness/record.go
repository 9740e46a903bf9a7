package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/b10x/harness/egress"
	"github.com/b10x/harness/internal/termsafe"
	"github.com/b10x/harness/record"
	"github.com/b10x/harness/record/report"
)

type recordCmd struct {
	Summary recordSummaryCmd `cmd:"" help:"Count calls by entry and outcome, list every refusal or failure with its reason, calls that started and have no outcome, and torn lines."`
	Report  recordReportCmd  `cmd:"" help:"Write one self-contained HTML page for one record or many: each run's policy, layers and outcome, a timeline of its calls (arguments, the gate's steps, denials, network attempts, the change each asked for), and for many records a table with one row per record and the totals."`
}

type recordSummaryCmd struct {
	Files []string `arg:"" name:"file" help:"Run records (JSON Lines); - reads standard input."`
	JSON  bool     `help:"Print the summary as JSON: one object, or with several records an array of {\"file\", \"summary\"}."`
}

type recordReportCmd struct {
	Files  []string `arg:"" name:"file" help:"Run records (JSON Lines); - reads standard input."`
	Output string   `short:"o" placeholder:"FILE" help:"Write the page to FILE instead of standard output."`
}

// openRecord opens a record named on the command line: - is standard
// input. A file that cannot be opened is a usage error naming it.
func openRecord(e *env, name string) (io.ReadCloser, error) {
	if name == "-" {
		return io.NopCloser(e.stdin), nil
	}
	f, err := record.OpenFile(name)
	if err != nil {
		return nil, usageError{err}
	}
	return f, nil
}

func (c *recordReportCmd) Run(e *env) error {
	var logs []*record.Log
	for _, name := range c.Files {
		f, err := openRecord(e, name)
		if err != nil {
			return err
		}
		l, err := record.Load(f, name)
		f.Close()
		if err != nil {
			return usageError{err}
		}
		logs = append(logs, l)
	}
	if c.Output == "" {
		return report.Write(e.stdout, logs)
	}
	var b bytes.Buffer
	if err := report.Write(&b, logs); err != nil {
		return err
	}
	if err := os.WriteFile(c.Output, b.Bytes(), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "wrote %s (%d record(s))\n", termsafe.Line(c.Output), len(logs))
	return nil
}

func (c *recordSummaryCmd) Run(e *env) error {
	type named struct {
		File    string          `json:"file"`
		Summary *record.Summary `json:"summary"`
	}
	var all []named
	for _, name := range c.Files {
		f, err := openRecord(e, name)
		if err != nil {
			return err
		}
		s, err := record.Summarize(f, name)
		f.Close()
		if err != nil {
			return usageError{err}
		}
		all = append(all, named{name, s})
	}
	if c.JSON {
		if len(all) == 1 {
			return writeJSON(e.stdout, "  ", all[0].Summary)
		}
		return writeJSON(e.stdout, "  ", all)
	}
	for i, n := range all {
		if len(all) > 1 {
			if i > 0 {
				fmt.Fprintln(e.stdout)
			}
			fmt.Fprintf(e.stdout, "== %s\n", termsafe.Line(n.File))
		}
		printSummary(e, n.Summary)
	}
	return nil
}

// printSummary prints one record's summary for a person.
func printSummary(e *env, s *record.Summary) {
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
	if len(s.Denials) > 0 {
		layers := make([]string, 0, len(s.Denials))
		for k, v := range s.Denials {
			layers = append(layers, fmt.Sprintf("%s ×%d", termsafe.Line(k), v))
		}
		sort.Strings(layers)
		fmt.Fprintf(e.stdout, "kernel denials inside run children: %s\n", strings.Join(layers, ", "))
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
}
