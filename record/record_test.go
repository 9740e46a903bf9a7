package record

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"
	"unicode/utf8"
)

// TestArgs pins the record's view of arguments: short valid arguments
// are kept as sent but on one line, anything with a string above BodyLimit
// has it replaced by its length and hash, and text that is not valid JSON
// or not UTF-8 never reaches the record raw.
func TestArgs(t *testing.T) {
	long := strings.Repeat("x", BodyLimit+1)
	sum := func(s string) string {
		d := digest(s)
		b, _ := json.Marshal(d)
		return string(b)
	}
	cases := []struct{ name, in, want string }{
		{"short kept", `{"path":"a.txt","offset":2}`, `{"path":"a.txt","offset":2}`},
		{"whitespace compacted", "{\n  \"path\" : \"a\",\n  \"limit\": 1\n}", `{"path":"a","limit":1}`},
		{"long string digested", `{"content":"` + long + `"}`, `{"content":` + sum(long) + `}`},
		{"long nested", `{"argv":["ls","` + long + `"]}`, `{"argv":["ls",` + sum(long) + `]}`},
		{"exactly the limit kept", `{"c":"` + long[1:] + `"}`, `{"c":"` + long[1:] + `"}`},
		{"not JSON", `{"path":`, sum(`{"path":`)},
		{"not UTF-8", "{\"path\":\"a\xff\"}", `{"path":"a` + "\ufffd" + `"}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b, err := json.Marshal(Args(json.RawMessage(c.in)))
			if err != nil {
				t.Fatalf("marshal: %v", err)
			}
			if string(b) != c.want {
				t.Fatalf("Args(%.60q) = %.200s, want %.200s", c.in, b, c.want)
			}
			if bytes.ContainsAny(b, "\n\r") || !utf8.Valid(b) {
				t.Fatalf("record text is not one UTF-8 line: %q", b)
			}
		})
	}
}

// TestSummarizeIsTolerant: a torn line, an event of a later version and an
// intent without its call line are reported, and the rest is counted.
func TestSummarizeIsTolerant(t *testing.T) {
	in := `{"event":"run_start","record_version":2}
{"event":"intent","seq":1,"entry":"file_write"}
{"event":"call","seq":1,"entry":"file_write","status":"executed"}
{"event":"intent","seq":2,"entry":"run"}
{"event":"call","se
{"event":"run_start","record_version":2,"torn_line_bytes":19}
{"event":"proxy_connect","seq":1}
{"event":"call","seq":1,"entry":"file_read","status":"refused","reason":"denied_path","steps":[{"step":"paths","verdict":"refuse"}]}
{"event":"run_end","ended_by":"completed"}
`
	s, err := Summarize(strings.NewReader(in), "r")
	if err != nil {
		t.Fatal(err)
	}
	if s.Runs != 2 || s.Calls != 2 || s.Complete || len(s.NotOK) != 1 || s.NotOK[0].Step != "paths" || s.NotOK[0].Run == 0 {
		t.Fatalf("summary %+v", s)
	}
	if len(s.Torn) != 1 || s.Torn[0] != (TornLine{Line: 5, Bytes: 19}) {
		t.Fatalf("torn %+v", s.Torn)
	}
	if len(s.Unfinished) != 1 || s.Unfinished[0] != (Unfinished{Run: 1, Seq: 2, Line: 4, Entry: "run"}) {
		t.Fatalf("unfinished %+v", s.Unfinished)
	}
	if s.Unknown["proxy_connect"] != 1 {
		t.Fatalf("unknown %v", s.Unknown)
	}
	for _, bad := range []string{"", "hello\n", `{"event":"call","seq":1}` + "\n"} {
		if _, err := Summarize(strings.NewReader(bad), "r"); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// TestOpenRepairsATornTail: a file ending without a newline gets one, and
// its length is returned; a file ending in a newline is left as it is.
func TestOpenRepairsATornTail(t *testing.T) {
	for _, c := range []struct {
		in   string
		torn int64
		want string
	}{
		{"", 0, ""},
		{"{\"a\":1}\n", 0, "{\"a\":1}\n"},
		{"{\"a\":1}\n{\"b\"", 4, "{\"a\":1}\n{\"b\"\n"},
		{"no newline at all", 17, "no newline at all\n"},
	} {
		p := t.TempDir() + "/r.jsonl"
		if err := os.WriteFile(p, []byte(c.in), 0o600); err != nil {
			t.Fatal(err)
		}
		f, torn, err := Open(p)
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
		b, _ := os.ReadFile(p)
		if torn != c.torn || string(b) != c.want {
			t.Errorf("%q: torn %d, file %q; want %d, %q", c.in, torn, b, c.torn, c.want)
		}
	}
	var nr *NotRegularError
	if _, _, err := Open("/dev/null"); !errors.As(err, &nr) || nr.Kind != "a character device" {
		t.Errorf("/dev/null: %v", err)
	}
}

// TestOpenCreatesPrivate: a record Open creates is mode 0600 on disk (the
// record holds the arguments of every call), whatever the umask, a
// permissive one included. Not parallel: the umask is the process's.
func TestOpenCreatesPrivate(t *testing.T) {
	for _, umask := range []int{0o022, 0, 0o002, 0o077} {
		old := syscall.Umask(umask)
		p := t.TempDir() + "/r.jsonl"
		f, _, err := Open(p)
		syscall.Umask(old)
		if err != nil {
			t.Fatal(err)
		}
		var st syscall.Stat_t
		if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
			t.Fatal(err)
		}
		f.Close()
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != 0o600 || st.Mode&0o7777 != 0o600 {
			t.Errorf("umask %#o: the record was created %v (st_mode %#o), want -rw------- (0600)", umask, fi.Mode(), st.Mode&0o7777)
		}
	}
}

// TestSummarizeFile: a record file is summarized as Summarize reads it; one
// that cannot be opened is named as given, with why and no operation.
func TestSummarizeFile(t *testing.T) {
	dir := t.TempDir()
	path := dir + "/run.jsonl"
	if err := os.WriteFile(path, []byte(`{"event":"run_start"}`+"\n"+`{"event":"run_end"}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := SummarizeFile(path)
	if err != nil || s.Runs != 1 || !s.Complete {
		t.Errorf("SummarizeFile: %+v, %v", s, err)
	}
	missing := dir + "/nosuch"
	_, err = SummarizeFile(missing)
	if want := "record " + missing + ": no such file or directory"; err == nil || err.Error() != want || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("SummarizeFile of nothing: %v, want %s", err, want)
	}
}

// TestSummarizeRunsOn: run_start's runs_on (an object) must not collide
// with a key of another line that the reader decodes (net's "host" is a
// string): the line would read as torn and the run would not count.
func TestSummarizeRunsOn(t *testing.T) {
	var b bytes.Buffer
	r := NewRecorder(&b)
	if err := r.Write(RunStart{Event: "run_start", RecordVersion: Version, Command: "exec", RunsOn: &RunsOn{Host: "pod-0", Seccomp: "filter", UserNamespace: true, UIDMap: "0 65536 65536"}}); err != nil {
		t.Fatal(err)
	}
	b.WriteString(`{"event":"run_end","ended_by":"completed"}` + "\n")
	s, err := Summarize(&b, "r")
	if err != nil {
		t.Fatal(err)
	}
	if s.Runs != 1 || len(s.Torn) != 0 || !s.Complete {
		t.Errorf("summary %+v: want one complete run and no torn line", s)
	}
}
