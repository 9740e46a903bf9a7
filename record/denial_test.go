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
}
