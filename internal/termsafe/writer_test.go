package termsafe

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"testing"
)

// failAfter accepts n writes, then fails every one; short makes its
// last accepted write short.
type failAfter struct {
	n     int
	short bool
	got   bytes.Buffer
}

var errFull = errors.New("disk full")

func (f *failAfter) Write(p []byte) (int, error) {
	if f.n == 0 {
		return 0, errFull
	}
	f.n--
	if f.short && f.n == 0 {
		f.got.Write(p[:1])
		return 1, nil
	}
	return f.got.Write(p)
}

// TestWriter: the first error is kept and nothing is written after it,
// even when the writer beneath would take more; a short write is one.
func TestWriter(t *testing.T) {
	f := &failAfter{n: 1}
	w := NewWriter(f)
	fmt.Fprint(w, "one ")
	fmt.Fprint(w, "two ")
	f.n = 5 // it would take writes again
	fmt.Fprint(w, "three")
	if !errors.Is(w.Err(), errFull) || f.got.String() != "one " {
		t.Errorf("Err %v, written %q; want %v and only the first write", w.Err(), f.got.String(), errFull)
	}
	s := &failAfter{n: 1, short: true}
	w = NewWriter(s)
	fmt.Fprint(w, "abc")
	fmt.Fprint(w, "def")
	if !errors.Is(w.Err(), io.ErrShortWrite) || s.got.String() != "a" {
		t.Errorf("short: Err %v, written %q; want io.ErrShortWrite after %q", w.Err(), s.got.String(), "a")
	}
	var b bytes.Buffer
	w = NewWriter(&b)
	fmt.Fprint(w, "ok")
	if w.Err() != nil || b.String() != "ok" {
		t.Errorf("Err %v, written %q", w.Err(), b.String())
	}
}
