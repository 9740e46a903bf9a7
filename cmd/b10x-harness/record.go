package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/b10x/harness/internal/termsafe"
)

type recordCmd struct {
	Summary recordSummaryCmd `cmd:"" help:"Count calls by entry and outcome, list every refusal or failure with its reason, calls that started and have no outcome, and torn lines."`
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

// unfinished is a call whose intent line has no call line after it: the
// harness stopped (or the record could not be written) while it ran, so it
// may have acted and its outcome is unknown.
type unfinished struct {
	Seq   int64  `json:"seq"`
	Line  int    `json:"line"`
	Entry string `json:"entry"`
}

// tornLine is a line that is not a record line: the fragment a harness left
// when it was killed or its disk filled mid-write (the next run starts on a
// fresh line after it).
type tornLine struct {
	Line  int `json:"line"`
	Bytes int `json:"bytes"`
}

type summary struct {
	Runs       int                       `json:"runs"`
	Calls      int                       `json:"calls"`
	ByEntry    map[string]map[string]int `json:"by_entry"`
	NotOK      []refusal                 `json:"refusals_and_failures"`
	Unfinished []unfinished              `json:"unfinished,omitempty"`
	Torn       []tornLine                `json:"torn_lines,omitempty"`
	Unknown    map[string]int            `json:"unknown_events,omitempty"` // events of a later record version, skipped
	EndedBy    []string                  `json:"ended_by"`
	Complete   bool                      `json:"complete"` // every run_start has its run_end
}

// summarize reads a record. It is tolerant: a line that is not a JSON
// object (a torn line) is reported and skipped, as is an event it does not
// know; a call line without entry or status is an error naming the line.
func summarize(r io.Reader, name string) (*summary, error) {
	s := &summary{ByEntry: map[string]map[string]int{}}
	br := bufio.NewReader(r)
	n, open := 0, 0
	pending := map[int64]unfinished{} // intents of the current run without their call line
	flush := func() {
		for _, u := range pending {
			s.Unfinished = append(s.Unfinished, u)
		}
		clear(pending)
	}
	for {
		raw, err := br.ReadBytes('\n')
		if len(raw) == 0 && err != nil {
			if err != io.EOF {
				return nil, fmt.Errorf("%s line %d: %v", name, n+1, err)
			}
			break
		}
		n++
		line := bytes.TrimRight(raw, "\n")
		var l recordLine
		if len(bytes.TrimSpace(line)) == 0 || json.Unmarshal(line, &l) != nil || l.Event == "" {
			s.Torn = append(s.Torn, tornLine{Line: n, Bytes: len(line)})
			continue
		}
		switch l.Event {
		case "run_start":
			flush()
			s.Runs++
			open++
		case "run_end":
			flush()
			open--
			s.EndedBy = append(s.EndedBy, l.EndedBy)
		case "intent":
			pending[l.Seq] = unfinished{Seq: l.Seq, Line: n, Entry: l.Entry}
		case "call":
			if l.Entry == "" || l.Status == "" {
				return nil, fmt.Errorf("%s line %d: call line without entry or status", name, n)
			}
			delete(pending, l.Seq)
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
			if s.Unknown == nil {
				s.Unknown = map[string]int{}
			}
			s.Unknown[l.Event]++
		}
	}
	flush()
	sort.Slice(s.Unfinished, func(i, j int) bool { return s.Unfinished[i].Line < s.Unfinished[j].Line })
	if n == 0 {
		return nil, fmt.Errorf("%s: empty record", name)
	}
	if s.Runs == 0 && s.Calls == 0 && len(s.Unfinished) == 0 {
		return nil, fmt.Errorf("%s: no record line in %d line(s)", name, n)
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
	for _, u := range s.Unfinished {
		fmt.Fprintf(e.stdout, "unfinished: #%d %s (line %d) has an intent line and no outcome: it may have acted\n", u.Seq, termsafe.Line(u.Entry), u.Line)
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
			fmt.Fprintf(e.stdout, "  #%d %s%s: %s %s at %s — %s\n", r.Seq, termsafe.Line(r.Entry), via,
				termsafe.Line(r.Status), termsafe.Line(r.Reason), termsafe.Line(r.Step), termsafe.Line(r.Message))
		}
	}
	return nil
}
