package record

import (
	"bytes"
	"testing"
	"time"
)

func TestDenialLine(t *testing.T) {
	var b bytes.Buffer
	r := NewRecorder(&b)
	at := time.Date(2026, 12, 2, 0, 30, 0, 0, time.FixedZone("x", 3600))
	if err := r.Write(NewDenial(7, at, "landlock", "fs.make_reg", "/usr/share/x")); err != nil {
		t.Fatal(err)
	}
	want := `{"event":"denial","seq":7,"time":"2026-12-01T23:30:00Z","layer":"landlock","operation":"fs.make_reg","object":"/usr/share/x"}` + "\n"
	if b.String() != want {
		t.Errorf("got  %s\nwant %s", b.String(), want)
	}
	// A masked file opened: the rule says what refused it.
	b.Reset()
	d := NewDenial(2, at, "view", "fs.read_file", "/etc/shadow")
	d.Rule = "masked: reads as empty"
	if err := r.Write(d); err != nil {
		t.Fatal(err)
	}
	want = `{"event":"denial","seq":2,"time":"2026-12-01T23:30:00Z","layer":"view","operation":"fs.read_file","object":"/etc/shadow","rule":"masked: reads as empty"}` + "\n"
	if b.String() != want {
		t.Errorf("got  %s\nwant %s", b.String(), want)
	}
}
