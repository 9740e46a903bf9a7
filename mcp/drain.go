package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
)

// The SDK's connection ends at the end of its input: requests still being
// served are cancelled and their answers are never written. A client that
// writes its requests and closes its end (printf '...' | b10x-harness mcp)
// would get nothing. ServeStdio therefore watches the lines going both
// ways: the reader holds back the end of input until every request it read
// has been answered, and tells the server that the requests it sent the
// client (elicitations) will never be answered.

// pending tracks the requests read that are not yet answered, and the
// requests written to the client that it has not yet answered.
type pending struct {
	mu       sync.Mutex
	changed  chan struct{} // closed and replaced on every change
	incoming map[string]bool
	outgoing map[string]json.RawMessage // key → the id as written
	closed   bool
}

func newPending() *pending {
	return &pending{changed: make(chan struct{}), incoming: map[string]bool{}, outgoing: map[string]json.RawMessage{}}
}

// update runs f under the lock and wakes the waiters.
func (p *pending) update(f func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f()
	close(p.changed)
	p.changed = make(chan struct{})
}

// message is what the watchers need of a JSON-RPC message.
type message struct {
	ID     json.RawMessage `json:"id"`
	Method *string         `json:"method"`
	Params struct {
		RequestID json.RawMessage `json:"requestId"`
	} `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
}

// idKey canonicalizes a JSON-RPC id: "" for none (absent, null, neither a
// string nor an integer), which is never tracked.
func idKey(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return ""
	}
	switch raw[0] {
	case '"':
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return ""
		}
		return "s" + s
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		n, err := strconv.ParseInt(string(raw), 10, 64)
		if err != nil {
			var f float64
			if json.Unmarshal(raw, &f) != nil || f != float64(int64(f)) {
				return ""
			}
			n = int64(f)
		}
		return "n" + strconv.FormatInt(n, 10)
	}
	return ""
}

// messages decodes one line: a message or a batch of them. A line that is
// neither yields nothing (the SDK refuses it).
func messages(line []byte) []message {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return nil
	}
	if line[0] == '[' {
		var raws []json.RawMessage
		if json.Unmarshal(line, &raws) != nil {
			return nil
		}
		var ms []message
		for _, r := range raws {
			var m message
			if json.Unmarshal(r, &m) == nil {
				ms = append(ms, m)
			}
		}
		return ms
	}
	var m message
	if json.Unmarshal(line, &m) != nil {
		return nil
	}
	return []message{m}
}

func (m *message) isResponse() bool {
	return m.Method == nil && (m.Result != nil || m.Error != nil)
}

// drainReader is the server's input. It passes the lines of r on, each
// checked by frame first (frame.go), notes each request line (a message
// with a method and an id) and each answer to a request the server sent,
// and at the end of input, or once stop is closed, waits, before it
// reports io.EOF, until every request passed on has been answered, ctx is
// done or the connection is closed. Requests the server sent that are
// still unanswered then are answered with an error, since nothing more
// will come from the client.
//
// r is read by a goroutine of its own (started at the first Read), so
// that stop ends the reading even while r blocks (stdin does); lines read
// from r and not yet passed on when stop closes are dropped.
type drainReader struct {
	ctx   context.Context
	r     io.Reader
	p     *pending
	max   int             // a line longer than this is skipped, never held whole
	stop  <-chan struct{} // closed: pass nothing more on, drain (nil: never)
	onEnd func()          // called once when r ends (nil: nothing)
	frame *framer         // checks each line (nil: lines pass as they are)

	line    []byte   // the current line so far
	skipped int      // bytes of the current line dropped: it is over max
	queue   [][]byte // checked lines, each with its newline, not yet begun
	cur     []byte   // the rest of the line being passed on
	tail    []byte   // synthesized answers still to be read
	drained bool

	pump    chan chunk // from the goroutine reading r
	ended   bool       // r ended (endErr), or stop or Close came
	endErr  error
	closeMu sync.Mutex
	closed  chan struct{} // closed by Close
}

// chunk is one read of r.
type chunk struct {
	b   []byte
	err error
}

func (d *drainReader) closedChan() chan struct{} {
	d.closeMu.Lock()
	defer d.closeMu.Unlock()
	if d.closed == nil {
		d.closed = make(chan struct{})
	}
	return d.closed
}

func (d *drainReader) Read(b []byte) (int, error) {
	if len(d.tail) > 0 {
		n := copy(b, d.tail)
		d.tail = d.tail[n:]
		return n, nil
	}
	if d.drained {
		return 0, io.EOF
	}
	for {
		select {
		case <-d.stop:
			// The server stops: nothing read after it is served. The
			// line begun goes on to its end, so that the SDK does not
			// see half a message.
			d.queue, d.ended = nil, true
		default:
		}
		if len(d.cur) > 0 {
			n := copy(b, d.cur)
			d.cur = d.cur[n:]
			return n, nil
		}
		if len(d.queue) > 0 {
			d.cur, d.queue = d.queue[0], d.queue[1:]
			d.note(d.cur)
			continue
		}
		if d.ended {
			if d.endErr != nil && d.endErr != io.EOF {
				d.drained = true
				return 0, d.endErr
			}
			return d.drain(b)
		}
		if d.pump == nil {
			d.pump = make(chan chunk)
			go func() {
				for {
					buf := make([]byte, 64<<10)
					n, err := d.r.Read(buf)
					d.pump <- chunk{buf[:n], err}
					if err != nil {
						return
					}
				}
			}()
		}
		select {
		case c := <-d.pump:
			d.feed(c.b)
			if c.err != nil {
				d.endLine()
				d.ended, d.endErr = true, c.err
				if d.onEnd != nil {
					d.onEnd()
				}
			}
		case <-d.stop:
		case <-d.closedChan():
			d.ended = true
		}
	}
}

// feed takes the bytes b read from r: each line it completes is checked
// and queued.
func (d *drainReader) feed(b []byte) {
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		part := b
		if i >= 0 {
			part = b[:i]
		}
		if d.skipped > 0 || len(d.line)+len(part) > d.max {
			d.skipped += len(d.line) + len(part)
			d.line = nil
		} else {
			d.line = append(d.line, part...)
		}
		if i < 0 {
			return
		}
		d.endLine()
		b = b[i+1:]
	}
}

// endLine checks the current line and queues what the SDK is to read of
// it.
func (d *drainReader) endLine() {
	line, skipped := d.line, d.skipped
	d.line, d.skipped = nil, 0
	switch {
	case skipped > 0:
		if d.frame != nil {
			d.frame.oversized(skipped, d.max)
		}
		return
	case len(bytes.TrimSpace(line)) == 0:
		return
	case d.frame != nil:
		if line = d.frame.check(line); line == nil {
			return
		}
	}
	d.queue = append(d.queue, append(line, '\n'))
}

// note records the requests and answers of one line passed on.
func (d *drainReader) note(line []byte) {
	ms := messages(line)
	if len(ms) == 0 {
		return
	}
	d.p.update(func() {
		for _, m := range ms {
			switch {
			case m.Method != nil && idKey(m.ID) != "":
				d.p.incoming[idKey(m.ID)] = true
			case m.Method != nil && *m.Method == "notifications/cancelled":
				// A cancelled request may go unanswered.
				delete(d.p.incoming, idKey(m.Params.RequestID))
			case m.isResponse():
				delete(d.p.outgoing, idKey(m.ID))
			}
		}
	})
}

// drain waits until every request read has been answered, answering the
// server's own unanswered requests with an error as it goes.
func (d *drainReader) drain(b []byte) (int, error) {
	for {
		d.p.mu.Lock()
		done := len(d.p.incoming) == 0 || d.p.closed
		changed := d.p.changed
		var tail []byte
		for k, id := range d.p.outgoing {
			tail = append(tail, `{"jsonrpc":"2.0","id":`...)
			tail = append(tail, id...)
			tail = append(tail, `,"error":{"code":-32000,"message":"the client closed its input"}}`+"\n"...)
			delete(d.p.outgoing, k)
		}
		d.p.mu.Unlock()
		if len(tail) > 0 {
			n := copy(b, tail)
			d.tail = tail[n:]
			return n, nil
		}
		if done {
			d.drained = true
			return 0, io.EOF
		}
		select {
		case <-changed:
		case <-d.ctx.Done():
			d.drained = true
			return 0, io.EOF
		}
	}
}

// Close ends the wait for answers: the connection is gone.
func (d *drainReader) Close() error {
	d.p.update(func() { d.p.closed = true })
	c := d.closedChan()
	d.closeMu.Lock()
	defer d.closeMu.Unlock()
	select {
	case <-c:
	default:
		close(c)
	}
	return nil
}

// drainWriter is the server's output: it notes each answer it writes, and
// each request it sends the client, and puts the client's own id back into
// each answer (frame.restore). The SDK writes one whole message (or batch)
// per Write; the framer's own answers go out through answer, one message
// at a time too.
type drainWriter struct {
	w      io.Writer
	p      *pending
	frame  *framer     // nil: ids pass as they are
	onFail func()      // called on a failed write: the client's end is gone (nil: nothing)
	failed atomic.Bool // a write failed
	mu     sync.Mutex  // one message at a time
}

func (d *drainWriter) Write(b []byte) (int, error) {
	ms, ok := head(b)
	if !ok {
		ms = messages(b)
	}
	// Requests to the client are noted before they can be answered, and
	// answers after they are out.
	var outgoing []message
	for _, m := range ms {
		if m.Method != nil && idKey(m.ID) != "" {
			outgoing = append(outgoing, m)
		}
	}
	if len(outgoing) > 0 {
		d.p.update(func() {
			for _, m := range outgoing {
				d.p.outgoing[idKey(m.ID)] = append(json.RawMessage(nil), bytes.TrimSpace(m.ID)...)
			}
		})
	}
	out := b
	if d.frame != nil {
		out, _ = d.frame.restore(b)
	}
	err := d.write(out)
	var answered []string
	for _, m := range ms {
		if m.isResponse() && idKey(m.ID) != "" {
			answered = append(answered, idKey(m.ID))
		}
	}
	if len(answered) > 0 {
		d.p.update(func() {
			for _, k := range answered {
				delete(d.p.incoming, k)
			}
		})
	}
	if err != nil {
		return 0, err
	}
	return len(b), nil
}

// answer writes one of the framer's answers; a failure is the client's
// end gone, as for the SDK's own writes.
func (d *drainWriter) answer(b []byte) { _ = d.write(b) }

func (d *drainWriter) write(b []byte) error {
	d.mu.Lock()
	_, err := d.w.Write(b)
	d.mu.Unlock()
	if err != nil {
		// Nothing more can reach the client: stop waiting for answers.
		d.failed.Store(true)
		d.p.update(func() { d.p.closed = true })
		if d.onFail != nil {
			d.onFail()
		}
	}
	return err
}

func (d *drainWriter) Close() error { return nil }

// head reads what the watchers need from the start of one message as the
// SDK encodes it (jsonrpc, id, method, params, result, error, in that
// order), without decoding the rest: a result carries the tool's output,
// which may be large. ok is false for anything else (a batch, another
// order), which messages then decodes whole.
func head(b []byte) (ms []message, ok bool) {
	const prefix = `{"jsonrpc":"2.0",`
	if !bytes.HasPrefix(b, []byte(prefix)) {
		return nil, false
	}
	rest := b[len(prefix):]
	if bytes.HasPrefix(rest, []byte(`"method":`)) {
		return nil, true // a notification: nothing to note
	}
	if !bytes.HasPrefix(rest, []byte(`"id":`)) {
		return nil, false
	}
	rest = rest[len(`"id":`):]
	n := 0
	switch {
	case len(rest) > 0 && rest[0] == '"':
		for n = 1; n < len(rest) && rest[n] != '"'; n++ {
			if rest[n] == '\\' {
				n++
			}
		}
		n++
	default:
		for n < len(rest) && (rest[n] == '-' || rest[n] >= '0' && rest[n] <= '9') {
			n++
		}
	}
	if n == 0 || n >= len(rest) || rest[n] != ',' {
		return nil, false
	}
	m := message{ID: json.RawMessage(rest[:n])}
	after := rest[n+1:]
	switch {
	case bytes.HasPrefix(after, []byte(`"method":`)):
		method := ""
		m.Method = &method
	case bytes.HasPrefix(after, []byte(`"result":`)):
		m.Result = json.RawMessage("{}")
	case bytes.HasPrefix(after, []byte(`"error":`)):
		m.Error = json.RawMessage("{}")
	default:
		return nil, false
	}
	return []message{m}, true
}
