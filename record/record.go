// Package record owns the run record: its schema (the types of each line),
// the writer (Recorder), opening a record file (Open) and the reader
// (Summarize). The gate writes call and intent lines through it, the
// commands write run_start and run_end, and `record summary` reads it.
//
// # Format
//
// JSON Lines, one object per event, each written with a single write(2) on
// an unbuffered file:
//
//   - run_start (RunStart): the version, the policy, the enforced layers,
//     the published catalogue, and Version as record_version;
//   - intent (Intent): a call about to act, written before it acts;
//   - call (Call): a call's outcome, with every gate step's verdict;
//   - run_end (RunEnd): how the run ended.
//
// A call that acts has an intent line and then its call line, with the same
// seq; a call refused before it could act has its call line only. An intent
// without its call line is a call that may have acted and whose end the
// record did not see (the harness was killed, or the record could not be
// written). See docs/decisions/0054-crash-safe-record.md.
//
// # Readers
//
// Readers must be tolerant: a record may end in a torn line (a write cut
// short by a full disk) followed by a later run's lines, and a later version
// may add events. Summarize reports both and skips them.
package record

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/b10x/harness/egress"
)

// Version is run_start's record_version: 2 added the intent line and
// run_start's torn_line_bytes. Records without the field are version 1.
const Version = 2

// Status is how a call ended.
type Status string

// Statuses. Refused: a gate step said no before anything ran (the tool never
// acted). Failed: the tool ran, or was attempted, and did not succeed, or its
// result was unusable. Both are errors to the model; only Executed is success.
const (
	Executed Status = "executed"
	Refused  Status = "refused"
	Failed   Status = "failed"
)

// Recorder writes the run record. Each line is written with a single
// write(2) on an unbuffered writer before the outcome it records is
// returned, so a crash of the harness loses no decided call (it does not
// fsync: a power loss may).
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
// write fails too, with the same error: a record with a hole proves nothing.
// A failed write may have left part of its line (a torn line; Open finds it
// and a later run starts on a fresh line); the Recorder never truncates,
// since another process may be appending to the same file.
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

// Args returns the JSON arguments as the record keeps them: every string
// longer than BodyLimit replaced by {"bytes": n, "sha256": hex}. Invalid
// JSON is recorded as its length and hash as a whole.
func Args(raw json.RawMessage) any {
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

// Step is one gate step's verdict in an intent or call line.
type Step struct {
	Step    string `json:"step"`    // published, budget, arguments, paths, scope, hooks, approval, record, hold, execute, held, result, surface
	Verdict string `json:"verdict"` // pass, refuse, fail, skip
	Detail  string `json:"detail,omitempty"`
	Rule    *int   `json:"rule,omitempty"` // write-scope rule index, when one matched
}

// Call is the call line: one call's outcome. Its first fields are its
// intent line's (embedded, so the JSON keys and their order are the same),
// with Event "call".
type Call struct {
	Intent
	Status     Status         `json:"status"`
	Reason     string         `json:"reason,omitempty"`
	Message    string         `json:"message,omitempty"`
	Cause      string         `json:"cause,omitempty"` // internal detail, never shown to the model
	Meta       map[string]any `json:"meta,omitempty"`
	ResultSize int            `json:"result_bytes"`
	DurationUS int64          `json:"duration_us"`
}

// Intent is the line written before a call acts: what is about to run and
// every verdict that admitted it. The call line with the same Seq follows
// once it has ended.
type Intent struct {
	Event     string    `json:"event"` // "intent"
	Seq       int64     `json:"seq"`
	Time      time.Time `json:"time"`
	Surface   string    `json:"surface"`
	Via       string    `json:"via,omitempty"`
	Entry     string    `json:"entry"`
	Operation string    `json:"operation,omitempty"`
	Risk      string    `json:"risk,omitempty"`
	Args      any       `json:"args,omitempty"`
	Steps     []Step    `json:"steps"`
	Approver  string    `json:"approver,omitempty"`
	Approval  string    `json:"approval,omitempty"` // approved, approved-standing, rejected, not-needed, hook-allowed
}

// IntentLine returns c's intent line: its fields up to the decision to
// run, with Event "intent" and a copy of the steps so far.
func (c *Call) IntentLine() Intent {
	in := c.Intent
	in.Event = "intent"
	in.Steps = append([]Step(nil), c.Steps...)
	return in
}

// RunStart is a run's first line.
type RunStart struct {
	Event         string            `json:"event"` // "run_start"
	RecordVersion int               `json:"record_version"`
	Time          time.Time         `json:"time"`
	Version       string            `json:"version"` // the harness's
	Command       string            `json:"command"`
	Workspace     string            `json:"workspace"`
	Surface       string            `json:"surface,omitempty"`
	Confinement   any               `json:"confinement"`
	Published     []Published       `json:"published"`
	Unpublished   map[string]string `json:"unpublished"`
	Policy        Policy            `json:"policy"`
	// TornBytes is the length of the torn line the record ended in before
	// this run (Open appended a newline after it); 0: none.
	TornBytes int64 `json:"torn_line_bytes,omitempty"`
	// WorkspaceCase is what the harness found out at start about how the
	// workspace directory looks names up; nil when it did not look. An
	// optional field, absent from earlier records of the same version.
	WorkspaceCase *WorkspaceCase `json:"workspace_case,omitempty"`
	// RunsOn is where the harness ran: which machine or pod, and how it
	// was itself confined before it confined anything. An optional field,
	// absent from earlier records of the same version.
	RunsOn *RunsOn `json:"runs_on,omitempty"`
}

// RunsOn is run_start's account of the process the harness ran as: the
// host name (a Kubernetes pod's, a CI runner's) and the confinement it
// inherited, so that a fan-out's records show that each pod ran with the
// seccomp profile and the user namespace its manifest asked for.
type RunsOn struct {
	Host string `json:"host"`
	// Seccomp is the harness's own seccomp mode (/proc/self/status):
	// "disabled", "strict" or "filter" (a container runtime's profile).
	Seccomp string `json:"seccomp"`
	// UserNamespace: the harness runs in a user namespace that maps less
	// than the whole uid range (/proc/self/uid_map), as a pod with
	// hostUsers: false does.
	UserNamespace bool `json:"user_namespace"`
	// UIDMap is /proc/self/uid_map's first line, space-normalized.
	UIDMap string `json:"uid_map,omitempty"`
}

// WorkspaceCase is run_start's account of whether the workspace directory
// folds case (gate.DetectCase; docs/decisions/0073). A plain value.
type WorkspaceCase struct {
	Casing     string `json:"casing"` // "case-sensitive", "case-insensitive" or "unknown"
	FS         string `json:"fs"`     // the filesystem ("ext4", "vfat", ... or its magic number)
	Why        string `json:"why"`    // the evidence
	ShortNames bool   `json:"short_names,omitempty"`
}

// Published is one published catalogue entry in run_start.
type Published struct {
	Name      string `json:"name"`
	Operation string `json:"operation"`
	Risk      string `json:"risk"`
}

// Policy is the policy a run was given, in run_start.
type Policy struct {
	ApproveUpTo string `json:"approve_up_to"`
	// Approve is the user's choice (--approve; --yes is "all"); Approver
	// is who decides in this run: auto becomes the terminal's approver, or
	// deny where there is no terminal.
	Approve       string   `json:"approve"`
	Approver      string   `json:"approver"`
	WriteScope    []string `json:"write_scope,omitempty"`
	ScopeAnnounce string   `json:"scope_announce"`
	Hooks         []string `json:"hooks,omitempty"`
	MaxResult     int      `json:"max_result"`
	MaxCalls      int      `json:"max_calls,omitempty"`
	Programs      []string `json:"programs,omitempty"`
	// Effective is every key of the policy with its value and where the
	// value came from (a flag, a policy file's line, the default).
	Effective json.RawMessage `json:"effective,omitempty"`
	// File is the policy file the session read, with its SHA-256.
	File *PolicyFile `json:"file,omitempty"`
	// UserDefaults is the user defaults file the session read too
	// (docs/policy.md), with its SHA-256; absent when it read none. An
	// optional field, absent from earlier records of the same version.
	UserDefaults *PolicyFile `json:"user_defaults,omitempty"`
}

// PolicyFile names a policy file and its content's SHA-256.
type PolicyFile struct {
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
}

// Net is one connection attempt a run call's program made through the
// harness's proxy, tied to the call by Seq: its destination, the decision
// and the rule that made it, the address connected to, and what moved.
type Net struct {
	Event      string    `json:"event"` // "net"
	Seq        int64     `json:"seq"`
	Time       time.Time `json:"time"`
	Protocol   string    `json:"protocol"` // connect, http, socks5
	Host       string    `json:"host"`
	Port       int       `json:"port"`
	Decision   string    `json:"decision"` // allowed or denied
	Rule       string    `json:"rule"`
	Addr       string    `json:"addr,omitempty"`
	BytesUp    int64     `json:"bytes_up"`
	BytesDown  int64     `json:"bytes_down"`
	DurationMS int64     `json:"duration_ms"`
	Error      string    `json:"error,omitempty"`
}

// NetLine is the connection attempt e, made by call seq's program
// through the harness's proxy, as the record's net line.
func NetLine(seq int64, e egress.Event) Net {
	return Net{Event: "net", Seq: seq, Time: e.Time.UTC(), Protocol: e.Protocol, Host: e.Host, Port: e.Port, Decision: e.Decision,
		Rule: e.Rule, Addr: e.Addr, BytesUp: e.BytesUp, BytesDown: e.BytesDown, DurationMS: e.Duration.Milliseconds(), Error: e.Error}
}

// RunEnd is a run's last line. EndedBy is completed, cancelled or timeout
// for call; for run, the agent's end reason (model_stopped, cancelled, ...);
// for mcp, client_closed (stdio: the client ended the session with no call
// in flight), stopped (HTTP: the server was stopped with no call in
// flight), cancelled (calls in flight were cut short by the end) or error.
type RunEnd struct {
	Event   string    `json:"event"` // "run_end"
	Time    time.Time `json:"time"`
	EndedBy string    `json:"ended_by"`
	// How says what ended an mcp session: the signal (SIGTERM, SIGINT),
	// or "the client closed its input"; empty for the other commands.
	How string `json:"how,omitempty"`
	// CancelledCalls counts the calls in flight that the end of an mcp
	// session cut short (each has its own call line, reason cancelled).
	CancelledCalls int `json:"cancelled_calls,omitempty"`
}
