package record

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
)

// Log is a record read whole, for a person to look at (package
// record/report): each run with its calls in order, and what could not be
// read. Load fills it.
type Log struct {
	Name    string         // as given to Load: the file's name, "-" for stdin
	Runs    []*RunLog      // in the record's order
	Torn    []TornLine     // lines that are not record lines
	Unknown map[string]int // events of a later version, skipped
}

// RunLog is one run of a record: its run_start, its calls by their first
// line, and its run_end (nil when the harness stopped mid-run).
type RunLog struct {
	Line  int // run_start's line
	Start RunStart
	Calls []*CallLog
	End   *RunEnd
	bySeq map[int64]*CallLog
}

// CallLog is one call of a run: its intent line (nil when none was written:
// a call refused before it could act), its call line (nil: the call started
// and has no outcome, so it may have acted), and the denials and network
// attempts its child made.
type CallLog struct {
	Seq     int64
	Line    int // the call's first line
	Intent  *Intent
	Call    *Call
	Denials []Denial
	Nets    []Net
}

// Entry is the catalogue entry the call named, from whichever of its lines
// was read.
func (c *CallLog) Entry() string {
	switch {
	case c.Call != nil:
		return c.Call.Entry
	case c.Intent != nil:
		return c.Intent.Entry
	}
	return ""
}

// Status is the call's outcome: executed, refused or failed, or
// "unfinished" when it has no call line.
func (c *CallLog) Status() string {
	if c.Call == nil {
		return "unfinished"
	}
	return string(c.Call.Status)
}

// Load reads a whole record from r; name is the record's name in errors
// and in the Log. Like Summarize, it skips a torn line (listed in Torn) and
// an event it does not know (counted in Unknown); a line of a known event
// that does not decode as one, a call, denial or net line before any
// run_start, and input with no record line at all are errors naming the
// line.
func Load(r io.Reader, name string) (*Log, error) {
	l := &Log{Name: name, Unknown: map[string]int{}}
	br := bufio.NewReader(r)
	var run *RunLog
	for n := 1; ; n++ {
		raw, err := br.ReadBytes('\n')
		if len(raw) == 0 && err != nil {
			if err != io.EOF {
				return nil, fmt.Errorf("%s line %d: %v", name, n, err)
			}
			break
		}
		text := bytes.TrimRight(raw, "\n")
		var head struct {
			Event string `json:"event"`
		}
		if len(bytes.TrimSpace(text)) == 0 || json.Unmarshal(text, &head) != nil || head.Event == "" {
			l.Torn = append(l.Torn, TornLine{Line: n, Bytes: len(text)})
			continue
		}
		if head.Event == "run_start" {
			run = &RunLog{Line: n, bySeq: map[int64]*CallLog{}}
			if err := json.Unmarshal(text, &run.Start); err != nil {
				return nil, fmt.Errorf("%s line %d: run_start: %v", name, n, err)
			}
			l.Runs = append(l.Runs, run)
			continue
		}
		if err := run.add(head.Event, text, n, l.Unknown); err != nil {
			return nil, fmt.Errorf("%s line %d: %v", name, n, err)
		}
	}
	if len(l.Runs) == 0 {
		return nil, fmt.Errorf("%s: no run_start line: not a run record", name)
	}
	return l, nil
}

// add files one line of event ev (not run_start) into the run.
func (run *RunLog) add(ev string, text []byte, n int, unknown map[string]int) error {
	known := ev == "run_end" || ev == "intent" || ev == "call" || ev == "denial" || ev == "net"
	if !known {
		unknown[ev]++
		return nil
	}
	if run == nil {
		return fmt.Errorf("%s line before any run_start", ev)
	}
	var err error
	switch ev {
	case "run_end":
		run.End = &RunEnd{}
		err = json.Unmarshal(text, run.End)
	case "intent":
		var in Intent
		if err = json.Unmarshal(text, &in); err == nil {
			run.call(in.Seq, n).Intent = &in
		}
	case "call":
		var c Call
		if err = json.Unmarshal(text, &c); err == nil {
			if c.Entry == "" || c.Status == "" {
				return fmt.Errorf("call line without entry or status")
			}
			run.call(c.Seq, n).Call = &c
		}
	case "denial":
		var d Denial
		if err = json.Unmarshal(text, &d); err == nil {
			cl := run.call(d.Seq, n)
			cl.Denials = append(cl.Denials, d)
		}
	case "net":
		var nl Net
		if err = json.Unmarshal(text, &nl); err == nil {
			cl := run.call(nl.Seq, n)
			cl.Nets = append(cl.Nets, nl)
		}
	}
	if err != nil {
		return fmt.Errorf("%s: %v", ev, err)
	}
	return nil
}

// call returns the run's call seq, adding it (first seen at line n) when
// it is new.
func (run *RunLog) call(seq int64, n int) *CallLog {
	if c := run.bySeq[seq]; c != nil {
		return c
	}
	c := &CallLog{Seq: seq, Line: n}
	run.bySeq[seq] = c
	run.Calls = append(run.Calls, c)
	return c
}
