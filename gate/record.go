package gate

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"time"
	"unicode/utf8"
)

// Recorder writes the run record: JSON Lines, one object per event
// (run_start, call, run_end). Each line is written with a single write(2) on
// an unbuffered writer before the outcome it records is returned, so a crash
// of the harness loses no decided call (it does not fsync: a power loss may).
//
// A nil *Recorder records nothing. Recorder is safe for concurrent use.
type Recorder struct {
	mu  sync.Mutex
	w   io.Writer
	err error
}

// NewRecorder returns a Recorder writing to w, which should be unbuffered
// (an *os.File). A nil w gives a Recorder that records nothing.
func NewRecorder(w io.Writer) *Recorder { return &Recorder{w: w} }

// Write marshals v as one line. After the first failed write every later
// write fails too: a record with a hole proves nothing.
func (r *Recorder) Write(v any) error {
	if r == nil || r.w == nil {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("run record: encode: %w", err)
	}
	b = append(b, '\n')
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return r.err
	}
	if _, err := r.w.Write(b); err != nil {
		r.err = fmt.Errorf("run record: write: %w", err)
		return r.err
	}
	return nil
}

// BodyLimit is the size above which a string argument is replaced in the
// record by its length and SHA-256.
const BodyLimit = 1024

// redact returns the JSON arguments with every string longer than BodyLimit
// replaced by {"bytes": n, "sha256": hex}. Invalid JSON is recorded as its
// length and hash as a whole.
func redact(raw json.RawMessage) any {
	if len(raw) == 0 {
		return nil
	}
	// No string inside can be longer than the whole text: short valid
	// arguments are recorded as they are (json.Marshal compacts them).
	if len(raw) <= BodyLimit && utf8.Valid(raw) && json.Valid(raw) {
		return raw
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return digest(string(raw))
	}
	return redactValue(v)
}

func redactValue(v any) any {
	switch x := v.(type) {
	case string:
		if len(x) > BodyLimit {
			return digest(x)
		}
		return x
	case []any:
		for i := range x {
			x[i] = redactValue(x[i])
		}
		return x
	case map[string]any:
		for k := range x {
			x[k] = redactValue(x[k])
		}
		return x
	}
	return v
}

func digest(s string) map[string]any {
	sum := sha256.Sum256([]byte(s))
	return map[string]any{"bytes": len(s), "sha256": hex.EncodeToString(sum[:])}
}

// StepVerdict is one gate step's verdict in a call record.
type StepVerdict struct {
	Step    string `json:"step"`    // published, budget, arguments, paths, scope, hooks, approval, hold, execute, held, result
	Verdict string `json:"verdict"` // pass, refuse, fail, skip
	Detail  string `json:"detail,omitempty"`
	Rule    *int   `json:"rule,omitempty"` // write-scope rule index, when one matched
}

// CallRecord is the record line of one call.
type CallRecord struct {
	Event      string         `json:"event"` // "call"
	Seq        int64          `json:"seq"`
	Time       time.Time      `json:"time"`
	Surface    string         `json:"surface"`
	Via        string         `json:"via,omitempty"`
	Entry      string         `json:"entry"`
	Operation  string         `json:"operation,omitempty"`
	Risk       string         `json:"risk,omitempty"`
	Args       any            `json:"args,omitempty"`
	Steps      []StepVerdict  `json:"steps"`
	Approver   string         `json:"approver,omitempty"`
	Approval   string         `json:"approval,omitempty"` // approved, approved-standing, rejected, not-needed
	Status     Status         `json:"status"`
	Reason     string         `json:"reason,omitempty"`
	Message    string         `json:"message,omitempty"`
	Cause      string         `json:"cause,omitempty"` // internal detail, never shown to the model
	Meta       map[string]any `json:"meta,omitempty"`
	ResultSize int            `json:"result_bytes"`
	DurationUS int64          `json:"duration_us"`

	acted bool // the intent line was written: the tool may have acted
}

// IntentRecord is the line written before a call executes: what is about to
// run and every verdict that admitted it. The call line with the same Seq
// follows once it has ended; an intent without one is a call whose end the
// record did not see (the harness was killed, or the record could not be
// written): it may have acted.
type IntentRecord struct {
	Event     string        `json:"event"` // "intent"
	Seq       int64         `json:"seq"`
	Time      time.Time     `json:"time"`
	Surface   string        `json:"surface"`
	Via       string        `json:"via,omitempty"`
	Entry     string        `json:"entry"`
	Operation string        `json:"operation,omitempty"`
	Risk      string        `json:"risk,omitempty"`
	Args      any           `json:"args,omitempty"`
	Steps     []StepVerdict `json:"steps"`
	Approver  string        `json:"approver,omitempty"`
	Approval  string        `json:"approval,omitempty"`
}

func (r *CallRecord) intent() IntentRecord {
	steps := make([]StepVerdict, len(r.Steps))
	for i, s := range r.Steps {
		s.Detail = capText(s.Detail, MaxMessage)
		steps[i] = s
	}
	return IntentRecord{Event: "intent", Seq: r.Seq, Time: r.Time, Surface: r.Surface, Via: r.Via, Entry: r.Entry,
		Operation: r.Operation, Risk: r.Risk, Args: r.Args, Steps: steps, Approver: r.Approver, Approval: r.Approval}
}
