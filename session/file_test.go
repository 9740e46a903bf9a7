package session

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/b10x/harness/confine"
	"github.com/b10x/harness/gate"
)

func TestParseFileRefuses(t *testing.T) {
	for _, c := range []struct {
		name, content, want string
	}{
		{"typo", "confine = \"auto\"\nconfne = \"strict\"\n", "p.toml:2:1: confne: unknown key (did you mean confine?)"},
		{"unknown", "zzzzzzzz = 1\n", "p.toml:1:1: zzzzzzzz: unknown key"},
		{"wrong type", "max_calls = \"ten\"\n", "p.toml:1:13: max_calls: want an integer, not a TOML string"},
		{"size as integer", "memory_max = 1024\n", `p.toml:1:14: memory_max: want a size as a string, e.g. "2GiB"`},
		{"list as string", "allow_program = \"sh\"\n", "p.toml:1:17: allow_program: want an array of strings"},
		{"bad enum", "\n\nconfine = \"stricter\"\n", `p.toml:3:1: confine: invalid confine mode "stricter"`},
		{"bad size", "max_result = \"lots\"\n", `p.toml:1:1: max_result: invalid size "lots"`},
		{"zero size", "tmp_size = \"0\"\n", `p.toml:1:1: tmp_size: "0": must be a positive size`},
		{"bad duration", "hook_timeout = \"soon\"\n", `p.toml:1:1: hook_timeout: "soon": want a duration`},
		{"negative", "max_calls = -3\n", "p.toml:1:1: max_calls: must not be negative"},
		{"no parallel run", "max_parallel = 0\n", "p.toml:1:1: max_parallel: must be at least 1 (run calls of the session at once; default: the number of CPUs, at least 2)"},
		{"negative parallel", "\nmax_parallel = -1\n", "p.toml:2:1: max_parallel: must be at least 1"},
		{"bad rule", "write_scope = [\"a=b\"]\n", "p.toml:1:1: write_scope:"},
		{"bad env", "pass_env = [\"A=B\"]\n", `p.toml:1:1: pass_env: "A=B": not a variable name`},
		{"table", "confine = \"auto\"\n[run]\ntimeout = \"1s\"\n", "p.toml:2:2: [run]: a policy file has no tables"},
		{"syntax", "confine = \"auto\n", "p.toml:1:"},
		{"duplicate", "confine = \"auto\"\nconfine = \"off\"\n", "p.toml:2:"},
	} {
		_, err := ParseFile("p.toml", []byte(c.content))
		var e *Error
		if !errors.As(err, &e) || !e.Usage {
			t.Errorf("%s: got %v, want a usage *Error", c.name, err)
			continue
		}
		if !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%s:\n got %s\nwant %s...", c.name, err, c.want)
		}
	}
}

func TestParseFileApplies(t *testing.T) {
	content := "confine = \"strict\"\napprove_up_to = \"medium\"\nmemory_max = \"1GiB\"\nallow_program = [\"sh\", \"go\"]\ncpu_max = 1.5\nmax_turns = 3\n"
	lf, err := ParseFile("p.toml", []byte(content))
	if err != nil {
		t.Fatal(err)
	}
	if lf.Pos["memory_max"] != "p.toml:3:1" || len(lf.Pos) != 6 {
		t.Errorf("positions: %v", lf.Pos)
	}
	if sum := sha256.Sum256([]byte(content)); lf.Ref.SHA256 != hex.EncodeToString(sum[:]) {
		t.Errorf("sha256 %q", lf.Ref.SHA256)
	}
	p := Defaults()
	if err := lf.Apply(&p); err != nil {
		t.Fatal(err)
	}
	if p.Confine != confine.Strict || p.ApproveUpTo != gate.Medium || p.Run.MemoryMax != 1<<30 || p.Run.CPUMax != 1.5 ||
		strings.Join(p.Programs, ",") != "sh,go" || !p.Required["memory_max"] || !p.Required["cpu_max"] || p.Required["pids_max"] {
		t.Errorf("applied: %+v", p)
	}
	// What is not in the file keeps its default.
	if p.Run.PidsMax != 512 || p.Approve != ApproveAuto {
		t.Errorf("defaults changed: %+v", p)
	}
	if v, ok := lf.Value("allow_program"); !ok || strings.Join(v.([]string), ",") != "sh,go" {
		t.Errorf("Value(allow_program) = %v, %v", v, ok)
	}
	if v, ok := lf.Value("cpu_max"); !ok || v != "1.5" {
		t.Errorf("Value(cpu_max) = %v, %v", v, ok)
	}
	if _, ok := lf.Value("net"); ok {
		t.Error("Value(net) is set, but the file does not set it")
	}
}

// TestSchemaInSync: the shipped JSON Schema is the one the Go type
// generates, and names every key of a policy file.
func TestSchemaInSync(t *testing.T) {
	shipped, err := os.ReadFile(filepath.Join("..", "docs", "policy.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(shipped, Schema()) {
		t.Fatal("docs/policy.schema.json is stale: regenerate it with `b10x-harness policy schema > docs/policy.schema.json`")
	}
	for _, k := range FileKeys() {
		if !bytes.Contains(shipped, []byte(`"`+k+`": {`)) {
			t.Errorf("the schema lacks %s", k)
		}
	}
}

// TestExamplePolicies: the shipped examples parse, and every key of
// File round-trips through Effective (nothing is lost between the file and
// the record).
func TestExamplePolicies(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("..", "examples", "policies", "*.toml"))
	if len(files) < 2 {
		t.Fatalf("examples/policies holds %d files, want a CI step and an evaluation", len(files))
	}
	for _, f := range files {
		if _, err := LoadFile(f); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	eff := map[string]bool{}
	for _, kv := range Defaults().Effective() {
		eff[kv.Key] = true
	}
	for _, k := range FileKeys() {
		if !eff[k] && !RunOnlyKey(k) {
			t.Errorf("Effective leaves out %s", k)
		}
	}
}

func FuzzParseFile(f *testing.F) {
	f.Add([]byte("confine = \"auto\"\nallow_program = [\"sh\"]\n"))
	f.Add([]byte("[x]\ny=1"))
	f.Add([]byte("memory_max = \"2GiB\"\ncpu_max = 1.5\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		lf, err := ParseFile("f.toml", b)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("not an *Error: %v", err)
			}
			return
		}
		p := Defaults()
		if err := lf.Apply(&p); err != nil {
			t.Fatalf("parsed, then Apply failed: %v", err)
		}
	})
}
