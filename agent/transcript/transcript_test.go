package transcript

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/b10x/harness/internal/termsafe"
)

// Text from a model or a file cannot drive the terminal: the transcript
// renders it with termsafe.
func TestTranscriptEscapes(t *testing.T) {
	in := "ok\x1b[2J\x1b]0;title\x07 line\n\ttab \u202eevil\u2066 \u009b bad\xff end"
	want := "ok\\x1b[2J\\x1b]0;title\\x07 line\n\ttab \\u202eevil\\u2066 \\u009b bad\\xff end"
	if got := termsafe.Text(in); got != want {
		t.Errorf("termsafe.Text = %q, want %q", got, want)
	}
	if got := argsText(json.RawMessage("{\"path\":\"\\u001b[31mred\\u009b\u202e\"}"), 200); strings.ContainsRune(got, 0x1b) || strings.ContainsRune(got, 0x9b) || strings.ContainsRune(got, 0x202e) {
		t.Errorf("argsText let an escape through: %q", got)
	}
	if got := argsText(json.RawMessage("not json \x1b[2J"), 200); got != `(not JSON) not json \x1b[2J` {
		t.Errorf("argsText of non-JSON = %q", got)
	}
}

// A run call that takes a while shows a live line on a terminal, erased
// when the call ends.
func TestProgressLine(t *testing.T) {
	var errw bytes.Buffer
	o := &Writer{w: &bytes.Buffer{}, errw: &errw, progress: progressLive}
	o.startTicker()
	time.Sleep(2500 * time.Millisecond)
	o.stopTicker()
	s := errw.String()
	if !strings.Contains(s, "\r     run: still executing, 2s") || !strings.HasSuffix(s, "\r\033[K") {
		t.Errorf("progress output %q", s)
	}
	errw.Reset()
	o.startTicker()
	o.stopTicker()
	if errw.Len() != 0 {
		t.Errorf("a quick call drew %q", errw.String())
	}
}

// Off a terminal a long run call gets a line every 15 s; JSON and quiet
// output get none, so that stderr carries nothing a CI job has to filter.
func TestNewProgressMode(t *testing.T) {
	for _, c := range []struct {
		opts Options
		want progressMode
	}{
		{Options{}, progressLines},
		{Options{MayPrompt: true}, progressLines}, // MayPrompt matters only on a terminal
		{Options{JSON: true}, progressOff},
		{Options{Quiet: true}, progressOff},
	} {
		if got := New(&bytes.Buffer{}, &bytes.Buffer{}, c.opts).progress; got != c.want {
			t.Errorf("New(%+v).progress = %d, want %d", c.opts, got, c.want)
		}
	}
}
