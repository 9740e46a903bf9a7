package record

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"sort"
)

// line holds the fields of any record line that Summarize reads.
type line struct {
	Event   string `json:"event"`
	Seq     int64  `json:"seq"`
	Entry   string `json:"entry"`
	Via     string `json:"via"`
	Status  string `json:"status"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
	EndedBy string `json:"ended_by"`
	// net lines
	Host     string `json:"host"`
	Port     int    `json:"port"`
	Decision string `json:"decision"`
	Rule     string `json:"rule"`
	// denial lines
	Layer   string `json:"layer"`
	Dropped int    `json:"dropped"`
	Steps   []struct {
		Step    string `json:"step"`
		Verdict string `json:"verdict"`
	} `json:"steps"`
}

// Refusal is a call that was refused or failed.
type Refusal struct {
	Run     int    `json:"run"` // which run of the record, from 1 (its run_start's place)
	Seq     int64  `json:"seq"`
	Line    int    `json:"line"`
	Entry   string `json:"entry"`
	Via     string `json:"via,omitempty"`
	Status  string `json:"status"`
	Reason  string `json:"reason"`
	Step    string `json:"step"` // the last step that refused or failed
	Message string `json:"message"`
}

// Unfinished is a call whose intent line has no call line after it in the
// same run: it may have acted, and its outcome is unknown.
type Unfinished struct {
	Run   int    `json:"run"` // which run of the record, from 1
	Seq   int64  `json:"seq"`
	Line  int    `json:"line"`
	Entry string `json:"entry"`
}

// TornLine is a line that is not a record line: the fragment a harness left
// when a write was cut short.
type TornLine struct {
	Line  int `json:"line"`
	Bytes int `json:"bytes"`
}

// DeniedHost is a destination the proxy refused, and how often.
type DeniedHost struct {
	Host  string  `json:"host"`
	Port  int     `json:"port"`
	Rule  string  `json:"rule"`
	Count int     `json:"count"`
	Seqs  []int64 `json:"seqs"` // the calls that tried it (their run's numbering)
}

// Summary is what Summarize found in a record.
type Summary struct {
	Runs       int                       `json:"runs"`
	Calls      int                       `json:"calls"`
	ByEntry    map[string]map[string]int `json:"by_entry"` // entry → status → count
	NotOK      []Refusal                 `json:"refusals_and_failures"`
	Unfinished []Unfinished              `json:"unfinished"`
	Torn       []TornLine                `json:"torn_lines"`
	Unknown    map[string]int            `json:"unknown_events"` // events of a later version, skipped
	// Connections counts the proxy's attempts by decision; Denied lists
	// each denied destination once, with how often and the rule.
	Connections map[string]int `json:"connections"`
	Denied      []DeniedHost   `json:"denied_hosts"`
	// Denials counts what the kernel refused inside run children, by
	// layer (landlock), those beyond a call's cap included.
	Denials  map[string]int `json:"kernel_denials"`
	EndedBy  []string       `json:"ended_by"`
	Complete bool           `json:"complete"` // every run_start has its run_end
}

// SummarizeFile is Summarize of the record file at path, opened by
// OpenFile.
func SummarizeFile(path string) (*Summary, error) {
	f, err := OpenFile(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Summarize(f, path)
}

// OpenFile opens a record file to read. A file that cannot be opened is
// an error naming it as given and why, without the operation: "record
// run.jsonl: no such file or directory".
func OpenFile(path string) (*os.File, error) {
	f, err := os.Open(path)
	if err != nil {
		if pe := (*fs.PathError)(nil); errors.As(err, &pe) {
			err = fmt.Errorf("record %s: %w", path, pe.Err)
		}
		return nil, err
	}
	return f, nil
}

// Summarize reads a record from r (name is used in errors). It is
// tolerant: a line that is not a JSON object with an event (a torn line) is
// reported in Torn and skipped, as is an event it does not know (counted in
// Unknown). It returns an error naming the line for a call line without
// entry or status, and for input holding no record line at all.
func Summarize(r io.Reader, name string) (*Summary, error) {
	// Every list and map is empty, not null, in JSON when there is nothing.
	s := &Summary{ByEntry: map[string]map[string]int{}, NotOK: []Refusal{}, Unfinished: []Unfinished{}, Torn: []TornLine{},
		Unknown: map[string]int{}, Connections: map[string]int{}, Denied: []DeniedHost{}, Denials: map[string]int{}, EndedBy: []string{}}
	br := bufio.NewReader(r)
	n, open := 0, 0
	pending := map[int64]Unfinished{} // intents of the current run without their call line
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
		text := bytes.TrimRight(raw, "\n")
		var l line
		if len(bytes.TrimSpace(text)) == 0 || json.Unmarshal(text, &l) != nil || l.Event == "" {
			s.Torn = append(s.Torn, TornLine{Line: n, Bytes: len(text)})
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
			pending[l.Seq] = Unfinished{Run: s.Runs, Seq: l.Seq, Line: n, Entry: l.Entry}
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
			if l.Status != string(Executed) {
				step := ""
				for _, st := range l.Steps {
					if st.Verdict == "refuse" || st.Verdict == "fail" {
						step = st.Step
					}
				}
				s.NotOK = append(s.NotOK, Refusal{Run: s.Runs, Seq: l.Seq, Line: n, Entry: l.Entry, Via: l.Via, Status: l.Status, Reason: l.Reason, Step: step, Message: l.Message})
			}
		case "denial":
			s.Denials[l.Layer] += 1 + l.Dropped
		case "net":
			s.Connections[l.Decision]++
			if l.Decision == "denied" {
				i := slices.IndexFunc(s.Denied, func(d DeniedHost) bool { return d.Host == l.Host && d.Port == l.Port && d.Rule == l.Rule })
				if i < 0 {
					s.Denied = append(s.Denied, DeniedHost{Host: l.Host, Port: l.Port, Rule: l.Rule})
					i = len(s.Denied) - 1
				}
				s.Denied[i].Count++
				if !slices.Contains(s.Denied[i].Seqs, l.Seq) {
					s.Denied[i].Seqs = append(s.Denied[i].Seqs, l.Seq)
				}
			}
		default:
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
