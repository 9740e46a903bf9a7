package spawn

import (
	"fmt"
	"sync"
)

// Capture is an io.Writer that keeps at most about max bytes of what is
// written to it: the first max/2 bytes and the last max/2 bytes, and counts
// the rest. Its memory is bounded by max whatever is written (plus the
// marker), so a child writing a gigabyte costs the harness max bytes.
//
// Write never fails and never blocks on the reader. Methods are safe for
// concurrent use. The zero value keeps nothing (max 0) and only counts;
// use NewCapture.
type Capture struct {
	mu    sync.Mutex
	max   int
	head  []byte // the first headMax bytes
	tail  []byte // ring buffer of the last tailMax bytes
	start int    // index of the oldest byte in tail once it is full
	total int64
}

// NewCapture returns a Capture keeping at most max bytes (head and tail
// halves). A negative max is treated as 0.
func NewCapture(max int) *Capture {
	if max < 0 {
		max = 0
	}
	return &Capture{max: max}
}

func (c *Capture) headMax() int { return c.max - c.max/2 }
func (c *Capture) tailMax() int { return c.max / 2 }

// Write keeps what fits in the head, then the newest bytes in the tail. It
// always reports len(p), nil.
func (c *Capture) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(p)
	c.total += int64(n)
	if room := c.headMax() - len(c.head); room > 0 {
		k := min(room, len(p))
		c.head = append(c.head, p[:k]...)
		p = p[k:]
	}
	tm := c.tailMax()
	if len(p) == 0 || tm == 0 {
		return n, nil
	}
	if len(p) >= tm {
		// Only the last tm bytes can survive.
		c.tail = append(c.tail[:0], p[len(p)-tm:]...)
		c.start = 0
		return n, nil
	}
	if len(c.tail) < tm {
		k := min(tm-len(c.tail), len(p))
		c.tail = append(c.tail, p[:k]...)
		p = p[k:]
	}
	// The ring is full: overwrite the oldest bytes.
	for len(p) > 0 {
		k := copy(c.tail[c.start:], p)
		p = p[k:]
		c.start = (c.start + k) % tm
	}
	return n, nil
}

// Total returns how many bytes were written, kept or not.
func (c *Capture) Total() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total
}

// Cut returns how many bytes were dropped between head and tail.
func (c *Capture) Cut() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total - int64(len(c.head)+len(c.tail))
}

// Bytes returns what was kept: everything when at most max bytes were
// written; otherwise the head, a line "[... N bytes cut ...]" and the
// tail. The slice is a fresh copy.
func (c *Capture) Bytes() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	cut := c.total - int64(len(c.head)+len(c.tail))
	out := make([]byte, 0, len(c.head)+len(c.tail)+48)
	out = append(out, c.head...)
	if cut > 0 {
		out = fmt.Appendf(out, "\n[... %d bytes cut ...]\n", cut)
	}
	out = append(out, c.tail[c.start:]...)
	out = append(out, c.tail[:c.start]...)
	return out
}
