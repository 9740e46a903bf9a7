package termsafe

import "io"

// Writer lets a run of writes (fmt.Fprintf calls, a tabwriter's Flush) be
// checked once, at the end: it keeps the first error of the writer it
// wraps (a short write is io.ErrShortWrite) and writes nothing after it.
// It makes nothing safe by itself. It is not safe for concurrent use.
type Writer struct {
	w   io.Writer
	err error
}

// NewWriter returns a Writer writing to w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// Write writes p to the underlying writer unless an earlier write failed,
// in which case it returns that error and writes nothing.
func (e *Writer) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	if err == nil && n < len(p) {
		err = io.ErrShortWrite
	}
	e.err = err
	return n, err
}

// Err is the first error a write met, nil when none did.
func (e *Writer) Err() error { return e.err }
