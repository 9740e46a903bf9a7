package gate

import (
	"io"

	"github.com/b10x/harness/record"
)

// The run record's schema and writer live in package record; these names
// keep the gate's callers and tests unchanged.

// Recorder writes the run record (see record.Recorder). A nil *Recorder
// records nothing.
type Recorder = record.Recorder

// NewRecorder returns a Recorder writing to w (see record.NewRecorder).
func NewRecorder(w io.Writer) *Recorder { return record.NewRecorder(w) }

// StepVerdict is one gate step's verdict in a record line.
type StepVerdict = record.Step

// CallRecord is the call line of one call.
type CallRecord = record.Call

// IntentRecord is the line written before a call acts.
type IntentRecord = record.Intent

// BodyLimit is the size above which a string argument is replaced in the
// record by its length and SHA-256 (record.Args).
const BodyLimit = record.BodyLimit
