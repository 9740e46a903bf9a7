package session

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pelletier/go-toml/v2"
	"github.com/pelletier/go-toml/v2/unstable"

	"github.com/b10x/harness/confine"
	"github.com/b10x/harness/egress"
	"github.com/b10x/harness/gate"
	"github.com/b10x/harness/surface"
)

// File is a policy file (TOML): every key is top-level and spelled as its
// command-line flag with "_" for "-" (--allow-program is allow_program).
// Sizes are strings ("2GiB"), durations Go durations ("10s"). A key that
// is absent leaves the value to a flag or the default; a flag given on the
// command line overrides the file's key (key by key: a list in the file is
// replaced, not extended, by the flag's values).
//
// The struct tags are the file's schema (Schema generates the JSON Schema
// editors read): toml is the key, enum the values allowed, format a size or
// a duration, min an integer's least value (0 without it), help the
// description, and run marks keys only `run` reads.
type File struct {
	Workspace      string   `toml:"workspace" help:"The workspace root: the only place tools read and write. Relative to the directory the harness starts in."`
	Record         string   `toml:"record" help:"Write the run record (JSON Lines) to this file."`
	Confine        string   `toml:"confine" enum:"strict,auto,off" help:"Kernel confinement: strict (every layer or refuse to start), auto (what the host offers), off (only the read tools)."`
	ApproveUpTo    string   `toml:"approve_up_to" enum:"low,medium,high" help:"Highest risk that runs unattended."`
	Approve        string   `toml:"approve" enum:"auto,prompt,deny,all" help:"Who decides calls above the ceiling: auto (ask when someone can be asked, else deny), prompt (require a way to ask), deny, all."`
	WriteScope     []string `toml:"write_scope" help:"Write rules GLOB=allowed|partial-only|denied; ordered, first match wins."`
	ScopeAnnounce  string   `toml:"scope_announce" enum:"stated,silent" help:"Tell the model the write-scope rules (stated) or keep them silent."`
	Hook           []string `toml:"hook" help:"Pre-call programs (argv, no shell), found at start from the working directory and PATH."`
	HookTimeout    string   `toml:"hook_timeout" format:"duration" help:"How long a hook may take before it blocks the call."`
	MaxCalls       int      `toml:"max_calls" help:"Calls allowed in the run; past it every call is budget_exhausted (0: unlimited)."`
	MaxParallel    int      `toml:"max_parallel" min:"1" help:"Run calls of the session that run at once (every MCP client of the session together); a call beyond it waits for a slot, first come first served, within its own timeout (default: the number of CPUs, at least 2)."`
	MaxResult      string   `toml:"max_result" format:"size" help:"Largest tool result returned to the model."`
	AllowProgram   []string `toml:"allow_program" help:"Programs the run tool may start as argv[0] (a name resolved through PATH at start, or an absolute path)."`
	Timeout        string   `toml:"timeout" format:"duration" help:"Wall-clock limit of each tool call (default 2m), and of exec's command (default 10m)."`
	Grace          string   `toml:"grace" format:"duration" help:"How long a program has to end after SIGTERM (a run call cancelled, a signal to exec, which forwards it) before its whole process tree is killed; 0: at once."`
	MemoryMax      string   `toml:"memory_max" format:"size" help:"memory.max of each run call's cgroup; given here, it must be enforceable or the harness refuses to start."`
	TmpSize        string   `toml:"tmp_size" format:"size" help:"Size cap of each of a run call's private /tmp and /dev/shm."`
	PidsMax        int64    `toml:"pids_max" help:"pids.max of each run call's cgroup; given here, it must be enforceable or the harness refuses to start."`
	CPUMax         float64  `toml:"cpu_max" help:"CPUs each run call may use (cpu.max), e.g. 1.5; 0: unlimited."`
	Net            string   `toml:"net" enum:"none,host,proxy" help:"Network for run calls: none (an empty network namespace), host, or proxy (an empty namespace whose only way out is the harness's proxy, which admits the allow_domain names). Any allow_domain implies proxy."`
	AllowDomain    []string `toml:"allow_domain" help:"Names run calls may reach through the proxy: exact (proxy.golang.org) or *.suffix (which does not match the bare suffix); case-insensitive, IDNs in ASCII form."`
	DenyDomain     []string `toml:"deny_domain" help:"Names the proxy refuses whatever allow_domain says (deny wins)."`
	AllowCIDR      []string `toml:"allow_cidr" help:"Addresses run calls may reach as IP literals, and non-global addresses a name may resolve to (loopback, private); e.g. 10.0.0.0/8."`
	LimitsFrom     string   `toml:"limits_from" enum:"call,enclosing" help:"Where run calls' pids, memory and cpu limits come from: call (a cgroup leaf of its own per call) or enclosing (the harness's own cgroup, a pod's or a container's, bounds every call together; strict then requires it to set pids.max, memory.max and cpu.max)."`
	NetMaxConns    int      `toml:"net_max_conns" help:"Proxy connections a run call may hold open at once (0: 64)."`
	NetIdleTimeout string   `toml:"net_idle_timeout" format:"duration" help:"A proxy connection on which nothing moved for this long is closed (0: 5m)."`
	NetMaxBytes    string   `toml:"net_max_bytes" format:"size" help:"Bytes a run call's proxy connections may move in all, both ways (0: no cap)."`
	AllowRead      []string `toml:"allow_read" help:"Extra paths run calls may read (outside the workspace, resolved once at start)."`
	AllowWrite     []string `toml:"allow_write" help:"Extra paths run calls may write (outside the workspace, resolved once at start)."`
	PassEnv        []string `toml:"pass_env" help:"Environment variables passed to run calls."`
	MaxOutput      string   `toml:"max_output" format:"size" help:"Cap on each of stdout and stderr of a run call (head and tail kept)."`
	Surface        string   `toml:"surface" enum:"flat,verbs" help:"The shape the model sees: flat (one tool per entry) or verbs (tool_search, tool_describe, tool_invoke)."`

	AgentsDir  []string `toml:"agents_dir" run:"" help:"Directories of named agent definitions (run)."`
	Plugin     []string `toml:"plugin" run:"" help:"Plugin directories whose agents/ holds named agent definitions (run)."`
	Agent      string   `toml:"agent" run:"" help:"The named agent to run: its instructions, and the tools narrowed to its declared ones (run)."`
	MaxTurns   int      `toml:"max_turns" run:"" help:"Model turns allowed in the run (0: unlimited) (run)."`
	RunTimeout string   `toml:"run_timeout" run:"" format:"duration" help:"Wall-clock limit of the whole run (0: none) (run)."`
}

// LoadedFile is a policy file read and checked: its values, which keys it
// sets and where.
type LoadedFile struct {
	Ref  FileRef
	File File
	// Pos is each key the file sets and its position ("ci.toml:3:1").
	Pos map[string]string
}

// maxFile bounds what a policy file may hold.
const maxFile = 1 << 20

// LoadFile reads the policy file at path strictly: an unknown key, a value
// of the wrong type or a bad value is an *Error whose key is the file's
// position and key ("ci.toml:4:1: confne: unknown key"). Nothing is
// started.
func LoadFile(path string) (*LoadedFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, &Error{Key: "policy", Err: err, Usage: true}
	}
	defer f.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(io.LimitReader(f, maxFile+1)); err != nil {
		return nil, &Error{Key: "policy", Value: path, Err: err, Usage: true}
	}
	if buf.Len() > maxFile {
		return nil, policyErr("policy", path, "more than %d bytes; a policy file is small", maxFile)
	}
	return ParseFile(path, buf.Bytes())
}

// ParseFile is LoadFile of content read from path.
func ParseFile(path string, content []byte) (*LoadedFile, error) {
	sum := sha256.Sum256(content)
	lf := &LoadedFile{Ref: FileRef{Path: path, SHA256: hex.EncodeToString(sum[:])}, Pos: map[string]string{}}
	at := func(line, col int) string { return fmt.Sprintf("%s:%d:%d", path, line, col) }

	// Positions first: a syntax error is reported here, with its place.
	p := unstable.Parser{}
	p.Reset(content)
	for p.NextExpression() {
		e := p.Expression()
		switch e.Kind {
		case unstable.Table, unstable.ArrayTable:
			it := e.Key()
			var parts []string
			line, col := 0, 0
			for it.Next() {
				if line == 0 {
					sh := p.Shape(it.Node().Raw)
					line, col = sh.Start.Line, sh.Start.Column
				}
				parts = append(parts, string(it.Node().Data))
			}
			return nil, policyErr(at(line, col), "", "[%s]: a policy file has no tables: every key is top-level", strings.Join(parts, "."))
		case unstable.KeyValue:
			it := e.Key()
			var parts []string
			var first *unstable.Node
			for it.Next() {
				if first == nil {
					first = it.Node()
				}
				parts = append(parts, string(it.Node().Data))
			}
			if first == nil {
				continue
			}
			sh := p.Shape(first.Raw)
			lf.Pos[strings.Join(parts, ".")] = at(sh.Start.Line, sh.Start.Column)
		}
	}
	if err := p.Error(); err != nil {
		var pe *unstable.ParserError
		if errors.As(err, &pe) {
			sh := p.Shape(p.Range(pe.Highlight))
			return nil, policyErr(at(sh.Start.Line, sh.Start.Column), "", "%s", pe.Message)
		}
		return nil, policyErr("policy", path, "%v", err)
	}

	dec := toml.NewDecoder(bytes.NewReader(content)).DisallowUnknownFields()
	if err := dec.Decode(&lf.File); err != nil {
		var sm *toml.StrictMissingError
		if errors.As(err, &sm) && len(sm.Errors) > 0 {
			de := sm.Errors[0]
			line, col := de.Position()
			return nil, policyErr(at(line, col), "", "%s: unknown key%s", strings.Join(de.Key(), "."), suggest(strings.Join(de.Key(), ".")))
		}
		var de *toml.DecodeError
		if errors.As(err, &de) {
			line, col := de.Position()
			key := strings.Join(de.Key(), ".")
			msg := strings.TrimPrefix(de.Error(), "toml: ")
			if key != "" && strings.Contains(msg, "cannot decode") {
				if w := wantType(key); w != "" {
					msg = "want " + w
					if m := tomlKind().FindStringSubmatch(de.Error()); m != nil {
						msg += ", not a TOML " + m[1]
					}
				}
				return nil, policyErr(at(line, col), "", "%s: %s", key, msg)
			}
			return nil, policyErr(at(line, col), "", "%s", msg)
		}
		return nil, policyErr("policy", path, "%v", err)
	}
	// Every value is checked now, by the parser the policy uses.
	pol := Defaults()
	if err := lf.Apply(&pol); err != nil {
		return nil, err
	}
	return lf, nil
}

// Apply sets in p every key the file sets, checking each value; an error
// names the key at its position.
func (lf *LoadedFile) Apply(p *Policy) error {
	f := lf.File
	for _, key := range FileKeys() {
		pos, ok := lf.Pos[key]
		if !ok {
			continue
		}
		if err := applyKey(p, &f, key); err != nil {
			return policyErr(pos, "", "%s: %v", key, err)
		}
	}
	return nil
}

// applyKey sets one key of f in p.
func applyKey(p *Policy, f *File, key string) error {
	var err error
	switch key {
	case "workspace":
		p.Workspace = f.Workspace
	case "record":
		p.Record = f.Record
	case "confine":
		p.Confine, err = confine.ParseMode(f.Confine)
	case "approve_up_to":
		p.ApproveUpTo, err = gate.ParseRisk(f.ApproveUpTo)
	case "approve":
		p.Approve, err = oneOf(f.Approve, ApproveAuto, ApprovePrompt, ApproveDeny, ApproveAll)
	case "write_scope":
		for _, r := range f.WriteScope {
			if _, err = gate.ParseScopeRule(r); err != nil {
				return err
			}
		}
		p.WriteScope = slices.Clone(f.WriteScope)
	case "scope_announce":
		p.ScopeAnnounce, err = oneOf(f.ScopeAnnounce, "stated", "silent")
	case "hook":
		for _, h := range f.Hook {
			if _, err = gate.ParseHook(h); err != nil {
				return err
			}
		}
		p.Hooks = slices.Clone(f.Hook)
	case "hook_timeout":
		p.HookTimeout, err = parseDuration(f.HookTimeout)
	case "max_calls":
		p.MaxCalls = f.MaxCalls
		if f.MaxCalls < 0 {
			err = errors.New("must not be negative")
		}
	case "max_parallel":
		p.MaxParallel = f.MaxParallel
		if f.MaxParallel < 1 {
			err = errors.New(maxParallelWant)
		}
	case "max_result":
		p.MaxResult, err = parsePositiveSize(f.MaxResult)
	case "allow_program":
		p.Programs = slices.Clone(f.AllowProgram)
	case "timeout":
		p.Run.Timeout, err = parseDuration(f.Timeout)
	case "memory_max":
		p.Run.MemoryMax, err = ParseSize(f.MemoryMax)
		p.require(key)
	case "tmp_size":
		p.Run.TmpSize, err = parsePositiveSize(f.TmpSize)
	case "pids_max":
		p.Run.PidsMax = f.PidsMax
		if f.PidsMax < 0 {
			err = errors.New("must not be negative")
		}
		p.require(key)
	case "cpu_max":
		p.Run.CPUMax = f.CPUMax
		if math.IsNaN(f.CPUMax) || f.CPUMax < 0 || f.CPUMax > 1024 {
			err = errors.New("want a number of CPUs between 0 and 1024")
		}
		p.require(key)
	case "net":
		p.Run.Net, err = oneOf(f.Net, "none", "host", "proxy")
	case "allow_domain", "deny_domain":
		list := f.AllowDomain
		if key == "deny_domain" {
			list = f.DenyDomain
		}
		for _, d := range list {
			if _, err = egress.ParsePattern(d); err != nil {
				return err
			}
		}
		if key == "allow_domain" {
			p.Run.AllowDomain = slices.Clone(list)
		} else {
			p.Run.DenyDomain = slices.Clone(list)
		}
	case "allow_cidr":
		p.Run.AllowCIDR = slices.Clone(f.AllowCIDR)
		_, err = p.Run.Egress()
	case "limits_from":
		p.Run.LimitsFrom, err = oneOf(f.LimitsFrom, "call", "enclosing")
	case "net_max_conns":
		p.Run.NetMaxConns = f.NetMaxConns
		if f.NetMaxConns < 0 {
			err = errors.New("must not be negative")
		}
	case "grace":
		p.Run.Grace, err = parseDuration(f.Grace)
	case "net_idle_timeout":
		p.Run.NetIdleTimeout, err = parseDuration(f.NetIdleTimeout)
	case "net_max_bytes":
		p.Run.NetMaxBytes, err = ParseSize(f.NetMaxBytes)
	case "allow_read":
		p.Run.AllowRead = slices.Clone(f.AllowRead)
	case "allow_write":
		p.Run.AllowWrite = slices.Clone(f.AllowWrite)
	case "pass_env":
		for _, n := range f.PassEnv {
			if n == "" || strings.ContainsAny(n, "=\x00") {
				return fmt.Errorf("%q: not a variable name", n)
			}
		}
		p.Run.PassEnv = slices.Clone(f.PassEnv)
	case "max_output":
		p.Run.MaxOutput, err = parsePositiveSize(f.MaxOutput)
	case "surface":
		var k surface.Kind
		k, err = surface.ParseKind(f.Surface)
		p.Surface = k
	case "max_turns":
		if f.MaxTurns < 0 {
			err = errors.New("must not be negative")
		}
	case "run_timeout":
		_, err = parseDuration(f.RunTimeout)
	}
	return err
}

func (p *Policy) require(key string) {
	if p.Required == nil {
		p.Required = map[string]bool{}
	}
	p.Required[key] = true
}

func oneOf(v string, allowed ...string) (string, error) {
	if slices.Contains(allowed, v) {
		return v, nil
	}
	return "", fmt.Errorf("%q: want %s", v, strings.Join(allowed, ", "))
}

func parseDuration(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q: want a duration such as \"10s\" or \"2m\"", s)
	}
	if d < 0 {
		return 0, fmt.Errorf("%q: must not be negative", s)
	}
	return d, nil
}

func parsePositiveSize(s string) (int64, error) {
	n, err := ParseSize(s)
	if err == nil && n <= 0 {
		err = fmt.Errorf("%q: must be a positive size", s)
	}
	return n, err
}

// tomlKind finds the kind of value a type error names. It is compiled at
// the first policy file with a type error, not by every start (decision 0066).
var tomlKind = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`TOML (\w+)`) })

// FileKeys lists the keys of a policy file, in the order of File.
func FileKeys() []string {
	t := reflect.TypeFor[File]()
	keys := make([]string, 0, t.NumField())
	for i := range t.NumField() {
		keys = append(keys, t.Field(i).Tag.Get("toml"))
	}
	return keys
}

// RunOnlyKey reports whether key is read by `run` only.
func RunOnlyKey(key string) bool {
	f, ok := fileField(key)
	_, run := f.Tag.Lookup("run")
	return ok && run
}

func fileField(key string) (reflect.StructField, bool) {
	t := reflect.TypeFor[File]()
	for i := range t.NumField() {
		if t.Field(i).Tag.Get("toml") == key {
			return t.Field(i), true
		}
	}
	return reflect.StructField{}, false
}

// wantType says what a key's value must be, for a type error.
func wantType(key string) string {
	f, ok := fileField(key)
	if !ok {
		return ""
	}
	switch f.Tag.Get("format") {
	case "size":
		return `a size as a string, e.g. "2GiB"`
	case "duration":
		return `a duration as a string, e.g. "10s"`
	}
	switch f.Type.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Slice:
		return "an array of strings"
	case reflect.Int, reflect.Int64:
		return "an integer"
	case reflect.Float64:
		return "a number"
	}
	return ""
}

// suggest names the known key nearest an unknown one.
func suggest(key string) string {
	best, bestD := "", 3
	for _, k := range FileKeys() {
		if d := editDistance(strings.ToLower(key), k); d < bestD {
			best, bestD = k, d
		}
	}
	if best == "" {
		return " (see `b10x-harness policy schema` for the keys)"
	}
	return " (did you mean " + best + "?)"
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			c := 1
			if a[i-1] == b[j-1] {
				c = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+c)
		}
		prev = cur
	}
	return prev[len(b)]
}

// Value is the file's value of key in the form a command line gives it:
// a string, or a []string for a list; ok false when the file does not set
// it.
func (lf *LoadedFile) Value(key string) (v any, ok bool) {
	if _, ok := lf.Pos[key]; !ok {
		return nil, false
	}
	t := reflect.ValueOf(lf.File)
	for i := range t.NumField() {
		if t.Type().Field(i).Tag.Get("toml") != key {
			continue
		}
		fv := t.Field(i)
		switch fv.Kind() {
		case reflect.Slice:
			return slices.Clone(fv.Interface().([]string)), true
		case reflect.Int, reflect.Int64:
			return strconv.FormatInt(fv.Int(), 10), true
		case reflect.Float64:
			return strconv.FormatFloat(fv.Float(), 'g', -1, 64), true
		}
		return fv.String(), true
	}
	return nil, false
}

// Effective is p as a policy file would spell it: every key with its
// value (sizes in bytes, durations as Go writes them), in the order of
// File. Keys only `run` reads are left out.
func (p Policy) Effective() []KeyValue {
	vals := map[string]any{
		"workspace": p.Workspace, "record": p.Record, "confine": p.Confine.String(), "approve_up_to": p.ApproveUpTo.String(),
		"approve": p.Approve, "write_scope": nonNil(p.WriteScope), "scope_announce": p.ScopeAnnounce, "hook": nonNil(p.Hooks),
		"hook_timeout": p.HookTimeout.String(), "max_calls": p.MaxCalls, "max_parallel": p.MaxParallel, "max_result": sizeString(p.MaxResult), "allow_program": nonNil(p.Programs),
		"timeout": p.Run.Timeout.String(), "grace": p.Run.Grace.String(), "memory_max": sizeString(p.Run.MemoryMax), "tmp_size": sizeString(p.Run.TmpSize), "pids_max": p.Run.PidsMax,
		"cpu_max": p.Run.CPUMax, "net": p.Run.NetMode(), "allow_domain": nonNil(p.Run.AllowDomain), "deny_domain": nonNil(p.Run.DenyDomain),
		"allow_cidr": nonNil(p.Run.AllowCIDR), "net_max_conns": p.Run.NetMaxConns, "limits_from": p.Run.LimitsFrom, "net_idle_timeout": p.Run.NetIdleTimeout.String(),
		"net_max_bytes": sizeString(p.Run.NetMaxBytes), "allow_read": nonNil(p.Run.AllowRead), "allow_write": nonNil(p.Run.AllowWrite),
		"pass_env": nonNil(p.Run.PassEnv), "max_output": sizeString(p.Run.MaxOutput), "surface": string(p.Surface),
	}
	var out []KeyValue
	for _, k := range FileKeys() {
		v, ok := vals[k]
		if !ok {
			continue
		}
		src := p.Sources[k]
		if src == "" {
			src = "default"
		}
		if k == "net" && p.Run.NetMode() != p.Run.Net {
			src = "allow_domain (implies proxy)"
		}
		out = append(out, KeyValue{Key: k, Value: v, Source: src})
	}
	return out
}

// KeyValue is one key of an effective policy and where its value came
// from ("default", "flag --confine", "ci.toml:3:1").
type KeyValue struct {
	Key    string `json:"key"`
	Value  any    `json:"value"`
	Source string `json:"source"`
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// sizeString writes n bytes as a policy file does: in the largest binary
// unit that divides it.
func sizeString(n int64) string {
	for _, u := range []struct {
		s string
		m int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.m && n%u.m == 0 {
			return strconv.FormatInt(n/u.m, 10) + u.s
		}
	}
	return strconv.FormatInt(n, 10)
}
