package session

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/b10x/harness/confine"
	"github.com/b10x/harness/gate"
	"github.com/b10x/harness/internal/testenv"
	"github.com/b10x/harness/policy"
	"github.com/b10x/harness/record"
)

// attackReport is what the attack scenario saw.
type attackReport struct {
	Published  []string          `json:"published"`
	Outcomes   map[string]string `json:"outcomes"` // attack → status/reason
	RunOutput  string            `json:"run_output"`
	SelfRead   string            `json:"self_read"` // the harness's own read of the secret, after Open
	Confined   bool              `json:"confined"`  // the harness's own domain holds
	RecordPath string            `json:"record"`
}

func init() {
	children["attack"] = func() (any, error) {
		ws, secret, outside := os.Getenv("WS"), os.Getenv("SECRET"), os.Getenv("OUTSIDE")
		p := Defaults()
		p.Workspace = ws
		p.Record = filepath.Join(ws, "record.jsonl")
		p.Approve, p.ApproveUpTo = ApproveAll, policy.RiskHigh
		p.Programs = []string{"sh"}
		p.WriteScope = []string{"**/*.pem=denied"}
		var notes []string
		s, err := Open(context.Background(), p, Options{Command: "test", Version: "test", Logf: func(f string, a ...any) { notes = append(notes, f) }})
		if err != nil {
			return nil, err
		}
		defer s.End("completed")
		r := attackReport{Outcomes: map[string]string{}, RecordPath: p.Record}
		for _, e := range s.Gate().Published() {
			r.Published = append(r.Published, e.Name)
		}
		call := func(name, tool string, args any) gate.Outcome {
			b, _ := json.Marshal(args)
			out := s.Call(context.Background(), tool, b)
			r.Outcomes[name] = string(out.Status) + "/" + string(out.Reason)
			return out
		}
		call("read through a link out", "file_read", map[string]any{"path": "link-out"})
		call("read by absolute path out", "file_read", map[string]any{"path": secret})
		call("read dotdot", "file_read", map[string]any{"path": "../" + filepath.Base(filepath.Dir(secret)) + "/" + filepath.Base(secret)})
		call("write .git", "file_write", map[string]any{"path": ".git/config", "content": "[core]\n\thooksPath = /tmp\n"})
		call("write the record", "file_write", map[string]any{"path": "record.jsonl", "content": "{}\n"})
		call("write denied glob", "file_write", map[string]any{"path": "key.pem", "content": "x"})
		call("write through a link out", "file_write", map[string]any{"path": "link-dir/planted", "content": "x"})
		call("program not allowed", "run", map[string]any{"argv": []string{"cat", secret}})
		if _, ok := s.Gate().Tool("run"); ok {
			out := call("run escapes", "run", map[string]any{"argv": []string{"sh", "-c", "cat " + secret + "; echo planted > " + outside + "/planted; echo done"}})
			r.RunOutput = out.Result
		}
		_, err = os.ReadFile(secret)
		r.SelfRead = "ok"
		if err != nil {
			r.SelfRead = err.Error()
		}
		r.Confined = slices.Contains(s.conf.record.Enforced, confine.LayerLandlockSelf)
		return r, nil
	}
}

// TestOpenAttack opens a session from a Policy, without the command line,
// and attacks through it: links and paths out of the workspace, the
// protected and denied paths, a program not declared, and a run child
// that reads and writes outside. Each must be refused or fail, and nothing
// may land outside.
func TestOpenAttack(t *testing.T) {
	base := t.TempDir()
	ws := filepath.Join(base, "ws")
	outside := filepath.Join(base, "outside")
	for _, d := range []string{ws, outside, filepath.Join(ws, ".git")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	secret := filepath.Join(outside, "secret")
	if err := os.WriteFile(secret, []byte("TOP-SECRET-VALUE\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, filepath.Join(ws, "link-out")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(ws, "link-dir")); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		// A root harness gives the child the workspace owner's identity;
		// give the tree to an ordinary user where the filesystem cannot
		// idmap a root-owned one (as the refusal tells a user to).
		_ = filepath.Walk(ws, func(p string, _ os.FileInfo, _ error) error { return os.Lchown(p, 1000, 1000) })
	}
	var r attackReport
	inChild(t, "attack", []string{"WS=" + ws, "SECRET=" + secret, "OUTSIDE=" + outside}, &r)

	want := map[string]string{
		"read through a link out":   "refused/denied_path",
		"read by absolute path out": "refused/denied_path",
		"read dotdot":               "refused/denied_path",
		"write .git":                "refused/denied_path",
		"write the record":          "refused/denied_path",
		"write denied glob":         "refused/denied_path",
		"write through a link out":  "refused/denied_path",
	}
	if slices.Contains(r.Published, "file_write") != r.Confined {
		t.Errorf("file_write published %v, but the harness's own domain holds: %v", slices.Contains(r.Published, "file_write"), r.Confined)
	}
	for name, w := range want {
		got := r.Outcomes[name]
		if !r.Confined && strings.HasPrefix(name, "write") {
			w = "refused/unpublished"
		}
		if got != w {
			t.Errorf("%s: got %s, want %s", name, got, w)
		}
	}
	if slices.Contains(r.Published, "run") {
		if got := r.Outcomes["program not allowed"]; got != "refused/program_not_allowed" {
			t.Errorf("program not allowed: got %s", got)
		}
		if strings.Contains(r.RunOutput, "TOP-SECRET") {
			t.Errorf("a run child read the secret outside the workspace: %q", r.RunOutput)
		}
		if !strings.Contains(r.RunOutput, "done") {
			t.Errorf("the run child did not run to its end: %q (%s)", r.RunOutput, r.Outcomes["run escapes"])
		}
	} else if testenv.Shape() == testenv.ShapeHost && !testenv.InVM() {
		t.Errorf("run is not published on this host (published: %v)", r.Published)
	}
	for _, p := range []string{filepath.Join(outside, "planted")} {
		if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s exists after the attack: %v", p, err)
		}
	}
	if r.Confined && !strings.Contains(r.SelfRead, "permission denied") {
		t.Errorf("after Open the harness itself read the secret outside the workspace: %s", r.SelfRead)
	}

	// The record proves it: run_start carries the effective policy, and
	// every attack is a refused or failed call.
	b, err := os.ReadFile(r.RecordPath)
	if err != nil {
		t.Fatal(err)
	}
	sum, err := record.Summarize(bytes.NewReader(b), r.RecordPath)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Calls != len(r.Outcomes) {
		t.Errorf("record holds %d calls, the scenario made %d", sum.Calls, len(r.Outcomes))
	}
	first, _, _ := bytes.Cut(b, []byte("\n"))
	var start struct {
		Policy struct {
			Effective []KeyValue `json:"effective"`
		} `json:"policy"`
	}
	if err := json.Unmarshal(first, &start); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, kv := range start.Policy.Effective {
		if kv.Key == "write_scope" {
			found = strings.Contains(string(must(json.Marshal(kv.Value))), "**/*.pem=denied")
		}
	}
	if !found {
		t.Errorf("run_start's effective policy lacks the write scope: %s", first)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestValidate: every wrong value is an *Error naming its key, and nothing
// starts.
func TestValidate(t *testing.T) {
	for _, c := range []struct {
		key string
		mod func(*Policy)
	}{
		{"approve", func(p *Policy) { p.Approve = "maybe" }},
		{"write_scope", func(p *Policy) { p.WriteScope = []string{"x=perhaps"} }},
		{"scope_announce", func(p *Policy) { p.ScopeAnnounce = "loud" }},
		{"hook_timeout", func(p *Policy) { p.HookTimeout = 0 }},
		{"max_calls", func(p *Policy) { p.MaxCalls = -1 }},
		{"max_parallel", func(p *Policy) { p.MaxParallel = 0 }},
		{"max_parallel", func(p *Policy) { p.MaxParallel = -2 }},
		{"max_result", func(p *Policy) { p.MaxResult = 0 }},
		{"surface", func(p *Policy) { p.Surface = "round" }},
		{"timeout", func(p *Policy) { p.Run.Timeout = -1 }},
		{"pids_max", func(p *Policy) { p.Run.PidsMax = -1 }},
		{"cpu_max", func(p *Policy) { p.Run.CPUMax = 2000 }},
		{"tmp_size", func(p *Policy) { p.Run.TmpSize = 0 }},
		{"net", func(p *Policy) { p.Run.Net = "some" }},
		{"pass_env", func(p *Policy) { p.Run.PassEnv = []string{"A=B"} }},
	} {
		p := Defaults()
		c.mod(&p)
		err := p.Validate()
		var e *Error
		if !errors.As(err, &e) || e.Key != c.key || !e.Usage {
			t.Errorf("%s: got %v (%#v), want a usage *Error of %s", c.key, err, e, c.key)
		}
		if _, err := Open(context.Background(), p, Options{}); !IsUsage(err) {
			t.Errorf("%s: Open gave %v, want the same usage error", c.key, err)
		}
	}
	p := Defaults()
	if err := p.Validate(); err != nil {
		t.Errorf("Defaults: %v", err)
	}
}

func TestSeccompMode(t *testing.T) {
	for status, want := range map[string]string{
		"Name:\tx\nSeccomp:\t2\nSeccomp_filters:\t1\n": "filter",
		"Seccomp:\t0\n": "disabled",
		"Seccomp:\t1":   "strict",
		"Name:\tx\n":    "unknown",
		"Seccomp:\t7\n": "unknown",
	} {
		if got := seccompMode(status); got != want {
			t.Errorf("seccompMode(%q) = %q, want %q", status, got, want)
		}
	}
	h := hostFacts()
	if name, _ := os.Hostname(); h.Host != name {
		t.Errorf("host name %q, want %q", h.Host, name)
	}
	if h.Seccomp == "unknown" || h.UIDMap == "" {
		t.Errorf("hostFacts on Linux read nothing: %+v", h)
	}
}
