package record

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

// fuzzLines are record lines as the harness writes them, one of each
// kind Summarize reads, marshalled from the record's own types.
func fuzzLines(tb testing.TB) []string {
	tb.Helper()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	rule := 0
	intent := Intent{Event: "intent", Seq: 1, Time: at, Surface: "mcp", Entry: "file_write", Args: json.RawMessage(`{"path":"a.txt","content":"x"}`),
		Steps: []Step{{Step: "paths", Verdict: "pass"}, {Step: "scope", Verdict: "pass", Rule: &rule}}}
	refused := Call{Intent: Intent{Event: "call", Seq: 2, Time: at, Surface: "mcp", Via: "agent", Entry: "file_read",
		Steps: []Step{{Step: "paths", Verdict: "refuse", Detail: "outside the workspace"}}}, Status: Refused, Reason: "denied_path", Message: "no"}
	executed := Call{Intent: intent, Status: Executed, ResultSize: 3, DurationUS: 40}
	executed.Event = "call"
	failed := Call{Intent: Intent{Event: "call", Seq: 3, Time: at, Entry: "run", Steps: []Step{{Step: "execute", Verdict: "fail"}}}, Status: Failed, Reason: "tool_error"}
	lines := []any{
		RunStart{Event: "run_start", RecordVersion: Version, Time: at, Version: "dev", Command: "mcp", Workspace: "/w", Policy: Policy{Approve: "all"}},
		intent,
		executed,
		Intent{Event: "intent", Seq: 3, Time: at, Entry: "run"},
		Net{Event: "net", Seq: 3, Time: at, Protocol: "connect", Host: "evil.test", Port: 443, Decision: "denied", Rule: "no allow_domain rule matches"},
		Net{Event: "net", Seq: 3, Time: at, Protocol: "socks5", Host: "good.test", Port: 443, Decision: "allowed", Rule: "allow_domain good.test", Addr: "93.184.216.34:443", BytesUp: 10, BytesDown: 20},
		failed,
		refused,
		RunEnd{Event: "run_end", Time: at, EndedBy: "completed"},
	}
	out := make([]string, len(lines))
	for i, l := range lines {
		b, err := json.Marshal(l)
		if err != nil {
			tb.Fatal(err)
		}
		out[i] = string(b)
	}
	return out
}

// FuzzSummarize attacks Summarize with any bytes. It never panics, and
// gives a summary or an error (one naming the record), never both or
// neither. A summary is consistent with itself and with the record's
// lines: the calls are those counted by entry and status, the refusals and
// failures are the calls not executed, denied destinations add up to the
// denied connections, every line number is one of the record's lines, and
// it is complete exactly when every run_start has its run_end. And, as its
// doc promises tolerance of a torn line: the same record with a torn line
// (a write cut short) put between two of its lines gives the same summary,
// with that one more torn line and the line numbers after it moved by one,
// or fails as it fails.
func FuzzSummarize(f *testing.F) {
	lines := fuzzLines(f)
	whole := strings.Join(lines, "\n") + "\n"
	f.Add([]byte(whole), uint16(0))
	f.Add([]byte(whole+lines[0]+"\n"+lines[1]+"\n"), uint16(77))
	f.Add([]byte(whole[:len(whole)-9]), uint16(3))
	f.Add([]byte(lines[0]+"\n"+lines[2][:20]+"\n"+lines[0]+"\n"+lines[8]+"\n"), uint16(1234))
	f.Add([]byte(`{"event":"run_start","record_version":2}
{"event":"intent","seq":1,"entry":"file_write"}
{"event":"call","seq":1,"entry":"file_write","status":"executed"}
{"event":"intent","seq":2,"entry":"run"}
{"event":"call","se
{"event":"run_start","record_version":2,"torn_line_bytes":19}
{"event":"proxy_connect","seq":1}
{"event":"call","seq":1,"entry":"file_read","status":"refused","reason":"denied_path","steps":[{"step":"paths","verdict":"refuse"}]}
{"event":"run_end","ended_by":"completed"}
`), uint16(9))
	f.Add([]byte(`{"event":"net","seq":1,"host":"a","port":1,"decision":"denied","rule":"r"}`+"\n"+`{"event":"net","seq":1,"host":"a","port":1,"decision":"denied","rule":"r"}`+"\n"+lines[1]), uint16(2))
	f.Add([]byte(`{"event":"call","seq":1}`+"\n"), uint16(5))
	f.Add([]byte("\n\n\r\n"), uint16(0))
	f.Add([]byte(""), uint16(0))
	f.Add([]byte(`{"event":"run_end"}`+"\n"+`{"event":"intent","seq":-1}`), uint16(8))
	f.Add([]byte(`{"event":"call","entry":"x","status":"executed","steps":null,"seq":1e3}`), uint16(1))
	f.Fuzz(func(t *testing.T, data []byte, cut uint16) {
		s, err := summarize(t, data)
		if err == nil {
			checkSummary(t, data, s)
		}

		// A torn line before line k+1 (or after the last line, when
		// data ends in a newline): a strict prefix of a compact record
		// line is never a JSON object.
		starts := []int{0}
		for i, c := range data {
			if c == '\n' {
				starts = append(starts, i+1)
			}
		}
		k := int(cut) % len(starts)
		at := starts[k]
		src := lines[int(cut)%len(lines)]
		frag := src[:int(cut>>4)%len(src)]
		torn := append(append(append(append([]byte(nil), data[:at]...), frag...), '\n'), data[at:]...)
		ts, terr := summarize(t, torn)
		if (err == nil) != (terr == nil) {
			t.Fatalf("%q: %v; with the torn line %q before line %d: %v", data, err, frag, k+1, terr)
		}
		if err != nil {
			return
		}
		want := shifted(s, k+1)
		want.Torn = append(want.Torn, TornLine{Line: k + 1, Bytes: len(frag)})
		sortTorn(want.Torn)
		if !reflect.DeepEqual(ts, want) {
			t.Fatalf("%q with the torn line %q before line %d:\n got %+v\nwant %+v", data, frag, k+1, ts, want)
		}
	})
}

// summarize is Summarize over b, which gives a summary or an error that
// names the record, never both or neither.
func summarize(t *testing.T, b []byte) (*Summary, error) {
	t.Helper()
	s, err := Summarize(bytes.NewReader(b), "rec.jsonl")
	switch {
	case err != nil && s != nil:
		t.Fatalf("%q: a summary and an error: %v", b, err)
	case err == nil && s == nil:
		t.Fatalf("%q: neither a summary nor an error", b)
	case err != nil && !strings.HasPrefix(err.Error(), "rec.jsonl") && len(b) > 0:
		t.Fatalf("%q: the error does not name the record: %v", b, err)
	}
	return s, err
}

// checkSummary holds s, the summary of data, to its own consistency.
func checkSummary(t *testing.T, data []byte, s *Summary) {
	t.Helper()
	n := bytes.Count(data, []byte("\n"))
	if len(data) > 0 && data[len(data)-1] != '\n' {
		n++
	}
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("%q: summary %+v: "+format, append([]any{data, s}, args...)...)
	}
	if s.Runs < 0 || s.Calls < 0 {
		fail("negative counts")
	}
	if s.Runs == 0 && s.Calls == 0 && len(s.Unfinished) == 0 {
		fail("a summary of no record line")
	}
	byEntry, executed := 0, 0
	for entry, st := range s.ByEntry {
		for status, k := range st {
			if entry == "" || status == "" || k <= 0 {
				fail("by entry %q status %q: %d", entry, status, k)
			}
			byEntry += k
			if status == string(Executed) {
				executed += k
			}
		}
	}
	if byEntry != s.Calls {
		fail("%d calls, %d by entry", s.Calls, byEntry)
	}
	if len(s.NotOK) != s.Calls-executed {
		fail("%d refusals and failures of %d calls, %d executed", len(s.NotOK), s.Calls, executed)
	}
	inRecord := func(what string, line, run int) {
		t.Helper()
		if line < 1 || line > n || run < 0 || run > s.Runs {
			fail("%s at line %d of %d, run %d of %d", what, line, n, run, s.Runs)
		}
	}
	for i, r := range s.NotOK {
		inRecord("refusal", r.Line, r.Run)
		if r.Status == string(Executed) || r.Entry == "" || i > 0 && r.Line <= s.NotOK[i-1].Line {
			fail("refusal %+v", r)
		}
	}
	for i, u := range s.Unfinished {
		inRecord("unfinished call", u.Line, u.Run)
		if i > 0 && u.Line <= s.Unfinished[i-1].Line {
			fail("unfinished calls out of order")
		}
	}
	for i, tl := range s.Torn {
		inRecord("torn line", tl.Line, 0)
		if tl.Bytes < 0 || i > 0 && tl.Line <= s.Torn[i-1].Line {
			fail("torn line %+v", tl)
		}
	}
	conns, denied := 0, 0
	for d, k := range s.Connections {
		if k <= 0 {
			fail("%d connections %q", k, d)
		}
		conns += k
	}
	type dest struct {
		host string
		port int
		rule string
	}
	seen := map[dest]bool{}
	for _, d := range s.Denied {
		if d.Count < 1 || len(d.Seqs) < 1 || len(d.Seqs) > d.Count || seen[dest{d.Host, d.Port, d.Rule}] {
			fail("denied host %+v", d)
		}
		seen[dest{d.Host, d.Port, d.Rule}] = true
		denied += d.Count
	}
	if denied != s.Connections["denied"] {
		fail("%d denied destinations' attempts, %d denied connections", denied, s.Connections["denied"])
	}
	unknown := 0
	for ev, k := range s.Unknown {
		switch ev {
		case "", "run_start", "run_end", "intent", "call", "net":
			fail("unknown event %q", ev)
		}
		if k <= 0 {
			fail("%d unknown %q", k, ev)
		}
		unknown += k
	}
	if len(s.Torn)+s.Runs+len(s.EndedBy)+s.Calls+len(s.Unfinished)+conns+unknown > n {
		fail("more lines counted than the %d lines of the record", n)
	}
	if s.Complete != (s.Runs == len(s.EndedBy)) {
		fail("complete %v with %d run_start and %d run_end", s.Complete, s.Runs, len(s.EndedBy))
	}
}

// shifted is a copy of s with every line number from line on moved by one.
func shifted(s *Summary, line int) *Summary {
	c := *s
	move := func(l int) int {
		if l >= line {
			return l + 1
		}
		return l
	}
	c.NotOK = append([]Refusal{}, s.NotOK...)
	for i := range c.NotOK {
		c.NotOK[i].Line = move(c.NotOK[i].Line)
	}
	c.Unfinished = append([]Unfinished{}, s.Unfinished...)
	for i := range c.Unfinished {
		c.Unfinished[i].Line = move(c.Unfinished[i].Line)
	}
	c.Torn = append([]TornLine{}, s.Torn...)
	for i := range c.Torn {
		c.Torn[i].Line = move(c.Torn[i].Line)
	}
	return &c
}

func sortTorn(ts []TornLine) {
	for i := len(ts) - 1; i > 0 && ts[i].Line < ts[i-1].Line; i-- {
		ts[i], ts[i-1] = ts[i-1], ts[i]
	}
}
