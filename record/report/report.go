// Package report renders run records (package record) as one
// self-contained HTML page for a person to look at: for each run, the
// policy it was given (with the policy file's SHA-256), the host's layers
// and how it ended; a timeline of its calls, each expandable to its
// arguments, the gate's steps and the rule that decided, the denials and
// network attempts of its child and the change it asked for; and, for many
// records (the records of a fan-out or of a CI matrix), a table with one
// row per record, the totals and a link to each.
//
// The page needs nothing else: no network, no script, no font; its CSS is
// inline, and its Content-Security-Policy forbids every fetch and every
// script, so that text escaping missed would still run nothing.
//
// # What it does not protect against
//
// Every string of a record is the record's, and a record may be forged or
// hold what a model wrote: the page shows it as text (HTML-escaped by
// html/template; control and bidi characters written as visible escapes by
// internal/termsafe), never as markup. It does not check that a record is
// genuine (its lines are not signed), and it shows what a call asked to
// change (its arguments), not what the file held before: a record keeps no
// file's content, and keeps a string argument over record.BodyLimit only
// as its size and SHA-256.
package report

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/b10x/harness/internal/termsafe"
	"github.com/b10x/harness/record"
)

//go:embed report.html.tmpl
var pageText string

// page is parsed at the first report, not at init: every start of the
// binary (--version, exec) would pay for it (0.3 ms, 1,900 allocations,
// GODEBUG=inittrace=1).
var page = sync.OnceValue(func() *template.Template {
	return template.Must(template.New("report").Funcs(template.FuncMap{
		"line": termsafe.Line,
		"text": termsafe.Message,
	}).Parse(pageText))
})

// Write writes the page of logs to w: one section per record, in the
// order given, and the table of records first when there are several.
func Write(w io.Writer, logs []*record.Log) error {
	v := view{Records: make([]recordView, len(logs))}
	for i, l := range logs {
		v.Records[i] = newRecordView(i+1, l)
		v.Total.add(v.Records[i].Counts)
	}
	v.Many = len(logs) > 1
	if len(logs) == 1 {
		v.Title = "Run record " + logs[0].Name
	} else {
		v.Title = fmt.Sprintf("%d run records", len(logs))
	}
	return page().Execute(w, v)
}

type view struct {
	Title   string
	Many    bool
	Records []recordView
	Total   counts
}

// counts are a record's or a run's calls by outcome, and its child's
// denials and network attempts.
type counts struct {
	Calls, Executed, Refused, Failed, Unfinished int
	Denials, NetAllowed, NetDenied               int
}

func (c *counts) add(o counts) {
	c.Calls += o.Calls
	c.Executed += o.Executed
	c.Refused += o.Refused
	c.Failed += o.Failed
	c.Unfinished += o.Unfinished
	c.Denials += o.Denials
	c.NetAllowed += o.NetAllowed
	c.NetDenied += o.NetDenied
}

type recordView struct {
	Anchor  string
	Name    string
	Runs    []runView
	Counts  counts
	EndedBy string
	Torn    []record.TornLine
	Unknown []string
}

func newRecordView(n int, l *record.Log) recordView {
	rv := recordView{Anchor: fmt.Sprintf("r%d", n), Name: l.Name, Torn: l.Torn}
	var ends []string
	for i, run := range l.Runs {
		r := newRunView(fmt.Sprintf("r%d-%d", n, i+1), run)
		rv.Counts.add(r.Counts)
		rv.Runs = append(rv.Runs, r)
		ends = append(ends, r.EndedBy)
	}
	rv.EndedBy = strings.Join(ends, ", ")
	for ev, k := range l.Unknown {
		rv.Unknown = append(rv.Unknown, fmt.Sprintf("%s ×%d", ev, k))
	}
	sort.Strings(rv.Unknown)
	return rv
}

type runView struct {
	Anchor    string
	Start     record.RunStart
	Policy    []kv
	Enforced  []string
	Missing   []string
	EndedBy   string
	How       string
	Duration  string
	Counts    counts
	Calls     []callView
	Published []string
}

type kv struct{ Key, Value string }

func newRunView(anchor string, run *record.RunLog) runView {
	s := run.Start
	r := runView{Anchor: anchor, Start: s, EndedBy: "no run_end: the harness stopped mid-run"}
	if run.End != nil {
		r.EndedBy, r.How = run.End.EndedBy, run.End.How
		r.Duration = run.End.Time.Sub(s.Time).Round(time.Millisecond).String()
	}
	r.Enforced, r.Missing = layers(s.Confinement)
	for _, p := range s.Published {
		r.Published = append(r.Published, p.Name+" ("+p.Risk+")")
	}
	r.Policy = policyRows(s.Policy)
	for _, c := range run.Calls {
		cv := newCallView(c, s.Time)
		r.Counts.add(cv.Counts)
		r.Calls = append(r.Calls, cv)
	}
	return r
}

// layers reads run_start's confinement: the layers in force and the
// required ones the host lacked.
func layers(conf any) (enforced, missing []string) {
	b, err := json.Marshal(conf)
	if err != nil {
		return nil, nil
	}
	var c struct {
		Enforced []string `json:"enforced"`
		Missing  []struct {
			Name string `json:"name"`
		} `json:"missing"`
	}
	if json.Unmarshal(b, &c) != nil {
		return nil, nil
	}
	for _, m := range c.Missing {
		missing = append(missing, m.Name)
	}
	return c.Enforced, missing
}

func policyRows(p record.Policy) []kv {
	rows := []kv{{"approve_up_to", p.ApproveUpTo}, {"approve", p.Approve}, {"approver", p.Approver}}
	if len(p.WriteScope) > 0 {
		rows = append(rows, kv{"write_scope", strings.Join(p.WriteScope, " ")})
	}
	if len(p.Hooks) > 0 {
		rows = append(rows, kv{"hooks", strings.Join(p.Hooks, " ")})
	}
	if len(p.Programs) > 0 {
		rows = append(rows, kv{"allow_program", strings.Join(p.Programs, " ")})
	}
	if p.MaxCalls > 0 {
		rows = append(rows, kv{"max_calls", fmt.Sprint(p.MaxCalls)})
	}
	rows = append(rows, kv{"max_result", fmt.Sprint(p.MaxResult)})
	if p.File != nil {
		rows = append(rows, kv{"policy file", p.File.Path + "  sha256 " + p.File.SHA256})
	}
	if p.UserDefaults != nil {
		rows = append(rows, kv{"user defaults", p.UserDefaults.Path + "  sha256 " + p.UserDefaults.SHA256})
	}
	return rows
}

type callView struct {
	Seq      int64
	Line     int
	At       string
	Entry    string
	Via      string
	Status   string
	Reason   string
	Message  string
	Decided  string // the step that refused or failed, and its detail
	Duration string
	Args     string
	Steps    []record.Step
	Denials  []record.Denial
	Nets     []record.Net
	Change   *change
	Counts   counts
}

func newCallView(c *record.CallLog, start time.Time) callView {
	cv := callView{Seq: c.Seq, Line: c.Line, Entry: c.Entry(), Status: c.Status(), Denials: c.Denials, Nets: c.Nets}
	cv.Counts.Calls = 1
	switch cv.Status {
	case "executed":
		cv.Counts.Executed = 1
	case "refused":
		cv.Counts.Refused = 1
	case "failed":
		cv.Counts.Failed = 1
	default:
		cv.Counts.Unfinished = 1
	}
	cv.Counts.Denials = len(c.Denials)
	for _, d := range c.Denials {
		cv.Counts.Denials += d.Dropped
	}
	for _, n := range c.Nets {
		if n.Decision == "allowed" {
			cv.Counts.NetAllowed++
		} else {
			cv.Counts.NetDenied++
		}
	}
	in := c.Intent
	if c.Call != nil {
		in = &c.Call.Intent
		cv.Reason, cv.Message = c.Call.Reason, c.Call.Message
		cv.Duration = (time.Duration(c.Call.DurationUS) * time.Microsecond).String()
	}
	if in == nil {
		return cv
	}
	cv.Via, cv.Steps = in.Via, in.Steps
	if !in.Time.IsZero() && !start.IsZero() {
		cv.At = "+" + in.Time.Sub(start).Round(time.Millisecond).String()
	}
	if b, err := json.MarshalIndent(in.Args, "", "  "); err == nil && in.Args != nil {
		cv.Args = string(b)
	}
	for _, st := range in.Steps {
		if st.Verdict == "refuse" || st.Verdict == "fail" {
			cv.Decided = st.Step + ": " + st.Detail
		}
	}
	cv.Change = changeOf(cv.Entry, in.Args)
	return cv
}
