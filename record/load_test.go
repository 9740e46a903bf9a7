package record

import (
	"strings"
	"testing"
)

const loadRecord = `{"event":"run_start","record_version":2,"time":"2026-01-02T03:04:05Z","version":"dev","command":"mcp","workspace":"/w","confinement":{"enforced":["landlock-self"],"missing":[]},"published":[{"name":"run","operation":"shell","risk":"high"}],"unpublished":{},"policy":{"approve_up_to":"high","approve":"all","approver":"all","scope_announce":"","max_result":10}}
{"event":"intent","seq":1,"time":"2026-01-02T03:04:06Z","surface":"flat","entry":"run","args":{"argv":["sh"]},"steps":[{"step":"approval","verdict":"pass"}]}
{"event":"net","seq":1,"time":"2026-01-02T03:04:06Z","protocol":"connect","host":"a.test","port":443,"decision":"denied","rule":"no allow_domain matches","bytes_up":0,"bytes_down":0,"duration_ms":0}
{"event":"call","seq":1,"time":"2026-01-02T03:04:06Z","surface":"flat","entry":"run","args":{"argv":["sh"]},"steps":[{"step":"approval","verdict":"pass"},{"step":"execute","verdict":"pass"}],"status":"executed","result_bytes":3,"duration_us":900}
{"event":"denial","seq":1,"time":"2026-01-02T03:04:06Z","layer":"landlock","operation":"fs.write_file","object":"/usr/x","dropped":4}
{"event":"call","seq":2,"time":"2026-01-02T03:04:07Z","surface":"flat","entry":"file_read","args":{"path":".env"},"steps":[{"step":"paths","verdict":"refuse","detail":"read scope"}],"status":"refused","reason":"denied_path","result_bytes":0,"duration_us":9}
{"event":"intent","seq":3,"time":"2026-01-02T03:04:08Z","surface":"flat","entry":"file_write","args":{"path":"a","content":"x"},"steps":[]}
{"event":"futur
{"event":"later_event"}
{"event":"run_end","time":"2026-01-02T03:04:09Z","ended_by":"client_closed"}
`

func TestLoad(t *testing.T) {
	l, err := Load(strings.NewReader(loadRecord), "r.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Runs) != 1 || l.Name != "r.jsonl" {
		t.Fatalf("runs %d, name %q", len(l.Runs), l.Name)
	}
	run := l.Runs[0]
	if run.Line != 1 || run.Start.Command != "mcp" || run.End == nil || run.End.EndedBy != "client_closed" {
		t.Errorf("run: line %d, start %+v, end %+v", run.Line, run.Start, run.End)
	}
	if len(run.Calls) != 3 {
		t.Fatalf("%d calls, want 3", len(run.Calls))
	}
	c1, c2, c3 := run.Calls[0], run.Calls[1], run.Calls[2]
	if c1.Seq != 1 || c1.Line != 2 || c1.Intent == nil || c1.Call == nil || c1.Status() != "executed" || c1.Entry() != "run" {
		t.Errorf("call 1: %+v", c1)
	}
	if len(c1.Nets) != 1 || c1.Nets[0].Host != "a.test" || len(c1.Denials) != 1 || c1.Denials[0].Dropped != 4 || c1.Denials[0].Object != "/usr/x" {
		t.Errorf("call 1's child: nets %+v, denials %+v", c1.Nets, c1.Denials)
	}
	if c2.Intent != nil || c2.Status() != "refused" || c2.Call.Reason != "denied_path" || c2.Line != 6 {
		t.Errorf("call 2 (refused before it could act): %+v", c2)
	}
	if c3.Call != nil || c3.Status() != "unfinished" || c3.Entry() != "file_write" {
		t.Errorf("call 3 (intent, no outcome): %+v", c3)
	}
	if len(l.Torn) != 1 || l.Torn[0].Line != 8 || l.Unknown["later_event"] != 1 {
		t.Errorf("torn %+v, unknown %v", l.Torn, l.Unknown)
	}
}

func TestLoadRefuses(t *testing.T) {
	for _, c := range []struct{ name, in, want string }{
		{"no record line", "garbage\n\n", "no run_start line"},
		{"a call before any run", `{"event":"call","seq":1,"entry":"x","status":"executed"}` + "\n", "line 1: call line before any run_start"},
		{"a call without status", strings.SplitAfter(loadRecord, "\n")[0] + `{"event":"call","seq":1,"entry":"x"}` + "\n", "line 2: call line without entry or status"},
		{"a known event that does not decode", strings.SplitAfter(loadRecord, "\n")[0] + `{"event":"net","seq":"x"}` + "\n", "line 2: net:"},
		{"a run_start that does not decode", `{"event":"run_start","time":5}` + "\n", "line 1: run_start:"},
	} {
		_, err := Load(strings.NewReader(c.in), "r.jsonl")
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "r.jsonl") {
			t.Errorf("%s: %v, want an error naming r.jsonl and %q", c.name, err, c.want)
		}
	}
}

func TestSummaryCountsDenials(t *testing.T) {
	s, err := Summarize(strings.NewReader(loadRecord), "r")
	if err != nil {
		t.Fatal(err)
	}
	if s.Denials["landlock"] != 5 || s.Unknown["denial"] != 0 {
		t.Errorf("denials %v (one line with 4 dropped is 5), unknown %v", s.Denials, s.Unknown)
	}
}
