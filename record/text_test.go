package record

import (
	"errors"
	"strings"
	"testing"
)

// TestSummaryWriteText pins the text of a summary of two runs, the second
// cut short, holding every kind of line: a call with no outcome in each run,
// kernel denials, allowed and denied connections, torn lines, an event of a
// later version and a refused call reached through a verb. Its fields carry
// escape sequences and bidi controls, as a forged or model-written record
// may: each is written escaped, never as the byte that would drive a
// terminal.
func TestSummaryWriteText(t *testing.T) {
	in := `{"event": "run_start", "record_version": 2}
{"event": "intent", "seq": 1, "entry": "file_write"}
{"event": "call", "seq": 2, "entry": "file_\u001b[31mread", "via": "tool_\u202einvoke", "status": "refused", "reason": "denied\u001b]0;x\u0007", "message": "bad \u2066path\u2069 \u001b[2J", "steps": [{"step": "pa\u001bths", "verdict": "refuse"}]}
{"event": "net", "seq": 2, "host": "evil.\u001b[1mexample", "port": 443, "decision": "denied", "rule": "no\u001b[0m rule"}
{"event": "net", "seq": 3, "host": "evil.\u001b[1mexample", "port": 443, "decision": "denied", "rule": "no\u001b[0m rule"}
{"event": "net", "seq": 3, "host": "ok.example", "port": 443, "decision": "allowed"}
{"event": "denial", "layer": "land\u001b[5mlock", "dropped": 2}
{"event": "fut\u001bure", "x": 1}
{"event": "run_end", "ended_by": "completed"}
{"event":"cal
{"event": "run_start", "record_version": 2}
{"event": "call", "seq": 1, "entry": "dir_list", "status": "executed"}
{"event": "intent", "seq": 2, "entry": "run"}
{"torn`
	s, err := Summarize(strings.NewReader(in), "forged.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := s.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	want := `2 run(s), 2 call(s) — a run has no run_end (the harness stopped mid-run)
ENTRY              EXECUTED  REFUSED  FAILED
dir_list           1         0        0
file_\x1b[31mread  0         1        0
unfinished: run 1 #1 file_write (line 2) has an intent line and no outcome: it may have acted
unfinished: run 2 #2 run (line 13) has an intent line and no outcome: it may have acted
kernel denials inside run children: land\x1b[5mlock ×3
network: 3 connection attempt(s) through the proxy, 1 allowed, 2 denied
denied: evil.\x1b[1mexample:443 ×2 (no\x1b[0m rule), by call #2 #3
torn: line 10 (13 bytes) is not a record line (a write cut short), skipped
torn: line 14 (6 bytes) is not a record line (a write cut short), skipped
skipped events this version does not know: fut\x1bure ×1

Refused or failed:
  run 1 #2 file_\x1b[31mread via tool_\u202einvoke: refused denied\x1b]0;x\x07 at pa\x1bths — bad \u2066path\u2069 \x1b[2J
`
	if got := b.String(); got != want {
		t.Errorf("text:\n%s\nwant:\n%s", got, want)
	}
	if i := strings.IndexAny(b.String(), "\x1b\x07\u202e\u2066\u2069"); i >= 0 {
		t.Errorf("a control reached the text at byte %d: %q", i, b.String())
	}
}

// TestSummaryWriteTextOneRun pins the text of one complete run: the table is
// sorted by entry, a call's number stands alone (there is no other run to
// tell it from), lists and counts with nothing in them write no line, and a
// refusal without a verb says no "via".
func TestSummaryWriteTextOneRun(t *testing.T) {
	s := &Summary{
		Runs: 1, Calls: 4, Complete: true,
		ByEntry: map[string]map[string]int{
			"search":    {"executed": 1, "failed": 1},
			"file_read": {"executed": 1, "refused": 1},
		},
		NotOK: []Refusal{
			{Run: 1, Seq: 2, Line: 3, Entry: "file_read", Status: "refused", Reason: "denied_path", Step: "paths", Message: `path "/etc/passwd" is outside the workspace`},
			{Run: 1, Seq: 4, Line: 5, Entry: "search", Status: "failed", Reason: "tool_error", Step: "execute", Message: "bad regexp\nsecond line"},
		},
		Unfinished: []Unfinished{}, Torn: []TornLine{}, Unknown: map[string]int{},
		Connections: map[string]int{}, Denied: []DeniedHost{}, Denials: map[string]int{},
	}
	var b strings.Builder
	if err := s.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	want := `1 run(s), 4 call(s)
ENTRY      EXECUTED  REFUSED  FAILED
file_read  1         1        0
search     1         0        1

Refused or failed:
  #2 file_read: refused denied_path at paths — path "/etc/passwd" is outside the workspace
  #4 search: failed tool_error at execute — bad regexp\nsecond line
`
	if got := b.String(); got != want {
		t.Errorf("text:\n%s\nwant:\n%s", got, want)
	}

	// A summary with no calls (the zero value, nil maps included) is its
	// header and the table's head.
	b.Reset()
	if err := (&Summary{Runs: 1, Complete: true}).WriteText(&b); err != nil {
		t.Fatal(err)
	}
	if got, want := b.String(), "1 run(s), 0 call(s)\nENTRY  EXECUTED  REFUSED  FAILED\n"; got != want {
		t.Errorf("empty summary: %q, want %q", got, want)
	}
}

// failAfter accepts n bytes, then fails every write, counting those that
// come after the first failure.
type failAfter struct {
	n      int
	got    strings.Builder
	failed bool
	after  int
}

var errFull = errors.New("no space left")

func (f *failAfter) Write(p []byte) (int, error) {
	if f.failed {
		f.after++
		return 0, errFull
	}
	if f.got.Len()+len(p) > f.n {
		k := f.n - f.got.Len()
		f.got.Write(p[:k])
		f.failed = true
		return k, errFull
	}
	return f.got.Write(p)
}

// TestSummaryWriteTextWriteError: the first write error is returned, from
// the header, the table or a later line alike, and once a write has failed
// nothing more is written.
func TestSummaryWriteTextWriteError(t *testing.T) {
	s := &Summary{Runs: 2, Calls: 1, ByEntry: map[string]map[string]int{"run": {"refused": 1}},
		Unfinished: []Unfinished{{Run: 2, Seq: 1, Line: 4, Entry: "run"}},
		NotOK:      []Refusal{{Run: 1, Seq: 1, Line: 2, Entry: "run", Status: "refused", Reason: "unpublished", Step: "published", Message: "no"}}}
	var full strings.Builder
	if err := s.WriteText(&full); err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{0, 5, len("2 run(s), 1 call(s)"), len(full.String()) / 2, len(full.String()) - 1} {
		f := &failAfter{n: n}
		if err := s.WriteText(f); !errors.Is(err, errFull) {
			t.Errorf("failing after %d bytes: err %v, want %v", n, err, errFull)
		}
		if !strings.HasPrefix(full.String(), f.got.String()) {
			t.Errorf("failing after %d bytes: wrote %q, not a prefix of the text", n, f.got.String())
		}
		if f.after != 0 {
			t.Errorf("failing after %d bytes: %d write(s) after the failure", n, f.after)
		}
	}
}
