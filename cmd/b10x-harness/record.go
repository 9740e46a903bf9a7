package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"text/tabwriter"

	"github.com/b10x/harness/internal/termsafe"
)

type recordCmd struct {
	Summary recordSummaryCmd `cmd:"" help:"Count calls by entry and outcome and list every refusal or failure with its reason."`
}

type recordSummaryCmd struct {
	File string `arg:"" help:"The run record (JSON Lines)." type:"existingfile"`
	JSON bool   `help:"Print the summary as JSON."`
}

// recordLine holds the fields of any record line that a summary needs.
type recordLine struct {
	Event   string `json:"event"`
	Seq     int64  `json:"seq"`
	Entry   string `json:"entry"`
	Via     string `json:"via"`
	Status  string `json:"status"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
	EndedBy string `json:"ended_by"`
	Steps   []struct {
		Step    string `json:"step"`
		Verdict string `json:"verdict"`
	} `json:"steps"`
}

type refusal struct {
	Seq     int64  `json:"seq"`
	Line    int    `json:"line"`
	Entry   string `json:"entry"`
	Via     string `json:"via,omitempty"`
	Status  string `json:"status"`
	Reason  string `json:"reason"`
	Step    string `json:"step"`
	Message string `json:"message"`
}

type summary struct {
	Runs     int                       `json:"runs"`
	Calls    int                       `json:"calls"`
	ByEntry  map[string]map[string]int `json:"by_entry"`
	NotOK    []refusal                 `json:"refusals_and_failures"`
	EndedBy  []string                  `json:"ended_by"`
	Complete bool                      `json:"complete"` // every run_start has its run_end
}

// summarize reads a record. Any line that is not a JSON object with a known
// event is an error naming the line.
func summarize(r io.Reader, name string) (*summary, error) {
	s := &summary{ByEntry: map[string]map[string]int{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	n, open := 0, 0
	for sc.Scan() {
		n++
		var l recordLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			return nil, fmt.Errorf("%s line %d: not a record line (truncated or corrupt?): %v", name, n, err)
		}
		switch l.Event {
		case "run_start":
			s.Runs++
			open++
		case "run_end":
			open--
			s.EndedBy = append(s.EndedBy, l.EndedBy)
		case "call":
			if l.Entry == "" || l.Status == "" {
				return nil, fmt.Errorf("%s line %d: call line without entry or status", name, n)
			}
			s.Calls++
			if s.ByEntry[l.Entry] == nil {
				s.ByEntry[l.Entry] = map[string]int{}
			}
			s.ByEntry[l.Entry][l.Status]++
			if l.Status != "executed" {
				step := ""
				for _, st := range l.Steps {
					if st.Verdict == "refuse" || st.Verdict == "fail" {
						step = st.Step
					}
				}
				s.NotOK = append(s.NotOK, refusal{Seq: l.Seq, Line: n, Entry: l.Entry, Via: l.Via, Status: l.Status, Reason: l.Reason, Step: step, Message: l.Message})
			}
		default:
			return nil, fmt.Errorf("%s line %d: unknown event %q", name, n, l.Event)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s line %d: %v", name, n+1, err)
	}
	if n == 0 {
		return nil, fmt.Errorf("%s: empty record", name)
	}
	s.Complete = open == 0
	return s, nil
}

func (c *recordSummaryCmd) Run(e *env) error {
	f, err := os.Open(c.File)
	if err != nil {
		return usageError{err}
	}
	defer f.Close()
	s, err := summarize(f, c.File)
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
	if len(s.NotOK) > 0 {
		fmt.Fprintln(e.stdout, "\nRefused or failed:")
		for _, r := range s.NotOK {
			via := ""
			if r.Via != "" {
				via = " via " + termsafe.Line(r.Via)
			}
			// Every field is the record's: a forged or model-written
			// record must not drive the terminal.
			fmt.Fprintf(e.stdout, "  #%d %s%s: %s %s at %s — %s\n", r.Seq, termsafe.Line(r.Entry), via,
				termsafe.Line(r.Status), termsafe.Line(r.Reason), termsafe.Line(r.Step), termsafe.Line(r.Message))
		}
	}
	return nil
}
