package surface

import (
	"errors"
	"strings"
	"testing"

	"github.com/b10x/harness/gate"
)

// TestWriteText pins the listing's text: a definition's first line in the
// table with the catalogue entry's operation and risk (none for a name the
// catalogue does not hold), each further non-blank line beneath it, then the
// unpublished entries in catalogue order (a name the catalogue does not hold
// is not listed). Escape sequences and bidi controls in any field are
// written escaped.
func TestWriteText(t *testing.T) {
	defs := []Def{
		{Name: "file_read", Description: "Read a file."},
		{Name: "file_write", Description: "Write a file.\n\nWrite rules:\n   \n- a rule \u202eevil\u202c\n"},
		{Name: "x\x1b[31m", Description: "Not in the catalogue \x1b]0;title\x07."},
	}
	unpublished := map[string]string{
		"run":   "no program is allowed \x1b[2J",
		"find":  "not wanted",
		"shell": "never listed: not in the catalogue",
	}
	var b strings.Builder
	if err := writeText(&b, Flat, defs, unpublished); err != nil {
		t.Fatal(err)
	}
	want := `SURFACE flat — what the model sees:
  file_read   file.read, risk low      Read a file.
  file_write  file.write, risk medium  Write a file.
                                       Write rules:
                                       - a rule \u202eevil\u202c
  x\x1b[31m                            Not in the catalogue \x1b]0;title\x07.

Not published:
  find: not wanted
  run: no program is allowed \x1b[2J
`
	if got := b.String(); got != want {
		t.Errorf("text:\n%s\nwant:\n%s", got, want)
	}
	if i := strings.IndexAny(b.String(), "\x1b\x07\u202e\u202c"); i >= 0 {
		t.Errorf("a control reached the text at byte %d: %q", i, b.String())
	}

	// Everything published: no "Not published" at all.
	b.Reset()
	if err := writeText(&b, Verbs, verbDefs()[:1], nil); err != nil {
		t.Fatal(err)
	}
	want = "SURFACE verbs — what the model sees:\n  tool_search    " + verbDefs()[0].Description + "\n"
	if got := b.String(); got != want {
		t.Errorf("verbs:\n%q\nwant:\n%q", got, want)
	}
}

// TestSurfaceWriteText: a surface's listing is its own definitions and its
// gate's unpublished entries.
func TestSurfaceWriteText(t *testing.T) {
	g, _ := newGate(t, gate.Config{})
	for _, kind := range []Kind{Flat, Verbs} {
		s, _ := New(kind, g, Options{})
		var got, want strings.Builder
		if err := s.WriteText(&got); err != nil {
			t.Fatal(err)
		}
		if err := writeText(&want, kind, s.Definitions(), g.Unpublished()); err != nil {
			t.Fatal(err)
		}
		if got.String() != want.String() {
			t.Errorf("%s: %q, want %q", kind, got.String(), want.String())
		}
		if !strings.HasPrefix(got.String(), "SURFACE "+string(kind)+" — what the model sees:\n") {
			t.Errorf("%s: %q", kind, got.String())
		}
		if _, un, ok := strings.Cut(got.String(), "\nNot published:\n"); !ok || !strings.Contains(un, "  run: ") {
			t.Errorf("%s: run (no run tool given) is not listed as unpublished:\n%s", kind, got.String())
		}
	}
}

type failingWriter struct{ after int }

var errClosed = errors.New("closed")

func (f *failingWriter) Write(p []byte) (int, error) {
	f.after++
	return 0, errClosed
}

// TestWriteTextWriteError: the first write error is returned and nothing
// more is tried after it.
func TestWriteTextWriteError(t *testing.T) {
	f := &failingWriter{}
	err := writeText(f, Flat, []Def{{Name: "file_read", Description: "Read."}}, map[string]string{"run": "no program"})
	if !errors.Is(err, errClosed) {
		t.Fatalf("err %v, want %v", err, errClosed)
	}
	if f.after != 1 {
		t.Errorf("%d writes, want 1 (none after the failure)", f.after)
	}
}
