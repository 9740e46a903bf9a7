package main

import (
	"bytes"
	"fmt"
	"io"
	"os"

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
		if err := n.Summary.WriteText(e.stdout); err != nil {
			return err
		}
	}
	return nil
}
