package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
)

func TestParseRefuses(t *testing.T) {
	for _, c := range []struct {
		name, content, want string
	}{
		{"typo", "confine = \"auto\"\nconfne = \"strict\"\n", "p.toml:2:1: confne: unknown key (did you mean confine?)"},
		{"unknown", "zzzzzzzz = 1\n", "p.toml:1:1: zzzzzzzz: unknown key (see `b10x-harness policy schema` for the keys)"},
		{"wrong type", "max_calls = \"ten\"\n", "p.toml:1:13: max_calls: want an integer, not a TOML string"},
		{"size as integer", "memory_max = 1024\n", `p.toml:1:14: memory_max: want a size as a string, e.g. "2GiB", not a TOML integer`},
		{"list as string", "allow_program = \"sh\"\n", "p.toml:1:17: allow_program: want an array of strings, not a TOML string"},
		{"bad enum", "\n\nconfine = \"stricter\"\n", `p.toml:3:1: confine: invalid confine mode "stricter": want one of strict, auto, off`},
		{"bad word", "approve = \"sometimes\"\n", `p.toml:1:1: approve: "sometimes": want auto, prompt, deny, all`},
		{"bad risk", "approve_up_to = \"HIGH\"\n", `p.toml:1:1: approve_up_to: invalid risk "HIGH": want low, medium or high`},
		{"bad surface", "surface = \"round\"\n", `p.toml:1:1: surface: invalid surface "round": want flat or verbs`},
		{"bad size", "max_result = \"lots\"\n", `p.toml:1:1: max_result: invalid size "lots": want a number of bytes, optionally with KiB, MiB or GiB`},
		{"zero size", "tmp_size = \"0\"\n", `p.toml:1:1: tmp_size: "0": must be a positive size, e.g. 64MiB`},
		{"zero result", "max_result = \"0KiB\"\n", `p.toml:1:1: max_result: "0KiB": must be a positive size`},
		{"bad duration", "hook_timeout = \"soon\"\n", `p.toml:1:1: hook_timeout: "soon": want a duration such as "10s" or "2m"`},
		{"negative duration", "grace = \"-1s\"\n", `p.toml:1:1: grace: "-1s": must not be negative`},
		{"zero hook timeout", "hook_timeout = \"0s\"\n", `p.toml:1:1: hook_timeout: "0s": must be positive`},
		{"negative", "max_calls = -3\n", "p.toml:1:1: max_calls: must not be negative"},
		{"cpus", "cpu_max = 2000\n", "p.toml:1:1: cpu_max: want a number of CPUs between 0 and 1024"},
		{"no parallel run", "max_parallel = 0\n", "p.toml:1:1: max_parallel: must be at least 1 (run calls of the session at once; default: the number of CPUs, at least 4)"},
		{"negative parallel", "\nmax_parallel = -1\n", "p.toml:2:1: max_parallel: must be at least 1"},
		{"bad env", "pass_env = [\"A=B\"]\n", `p.toml:1:1: pass_env: "A=B": not a variable name`},
		{"bad cidr", "allow_cidr = [\"10.0.0.0/8\", \"zz\"]\n", `p.toml:1:1: allow_cidr: "zz": want a CIDR such as 10.0.0.0/8 or an address`},
		{"run's key", "max_turns = -1\n", "p.toml:1:1: max_turns: must not be negative"},
		{"table", "confine = \"auto\"\n[run]\ntimeout = \"1s\"\n", "p.toml:2:2: [run]: a policy file has no tables: every key is top-level"},
		{"syntax", "confine = \"auto\n", "p.toml:1:16: basic strings cannot have new lines"},
		{"duplicate", "confine = \"auto\"\nconfine = \"off\"\n", "p.toml:2:1: key confine is already defined"},
	} {
		_, err := Parse("p.toml", []byte(c.content), nil)
		var e *Error
		if !errors.As(err, &e) || !e.Usage {
			t.Errorf("%s: got %v, want a usage *Error", c.name, err)
			continue
		}
		if err.Error() != c.want && !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%s:\n got %s\nwant %s", c.name, err, c.want)
		}
	}
}

// TestParseChecks: a syntax another package owns is checked by the check
// given, at the value's position, in its words.
func TestParseChecks(t *testing.T) {
	checks := Checks{ScopeRule: func(s string) error {
		if !strings.Contains(s, "=") {
			return errors.New("rule " + s + ": no =")
		}
		return nil
	}}
	_, err := Parse("p.toml", []byte("\nwrite_scope = [\"a=denied\", \"b\"]\n"), checks)
	if err == nil || err.Error() != "p.toml:2:1: write_scope: rule b: no =" {
		t.Errorf("got %v", err)
	}
	if _, err := Parse("p.toml", []byte("write_scope = [\"b\"]\n"), nil); err != nil {
		t.Errorf("without a check: %v", err)
	}
}

func TestParseApplies(t *testing.T) {
	content := "confine = \"strict\"\napprove_up_to = \"medium\"\nmemory_max = \"1GiB\"\nallow_program = [\"sh\", \"go\"]\ncpu_max = 1.5\nmax_turns = 3\nnet_idle_timeout = \"90s\"\n"
	f, err := Parse("p.toml", []byte(content), nil)
	if err != nil {
		t.Fatal(err)
	}
	if f.Pos["memory_max"] != "p.toml:3:1" || len(f.Pos) != 7 {
		t.Errorf("positions: %v", f.Pos)
	}
	if sum := sha256.Sum256([]byte(content)); f.Ref.SHA256 != hex.EncodeToString(sum[:]) {
		t.Errorf("sha256 %q", f.Ref.SHA256)
	}
	p := Defaults()
	if err := f.Apply(&p); err != nil {
		t.Fatal(err)
	}
	if p.Confine != ConfineStrict || p.ApproveUpTo != RiskMedium || p.Run.MemoryMax != 1<<30 || p.Run.CPUMax != 1.5 || p.Agent.MaxTurns != 3 ||
		p.Run.NetIdleTimeout.Seconds() != 90 || strings.Join(p.Programs, ",") != "sh,go" {
		t.Errorf("applied: %+v", p)
	}
	// The file's limits are given, so required; a default one is not.
	if !p.Required("memory_max") || !p.Required("cpu_max") || p.Required("pids_max") || p.Sources["confine"] != "p.toml:1:1" {
		t.Errorf("sources %v", p.Sources)
	}
	// What is not in the file keeps its default.
	if p.Run.PidsMax != 512 || p.Approve != ApproveAuto {
		t.Errorf("defaults changed: %+v", p)
	}
	for key, want := range map[string]any{"allow_program": "sh,go", "cpu_max": "1.5", "max_turns": "3", "confine": "strict", "net_idle_timeout": "90s"} {
		v, ok := f.Value(key)
		if l, isList := v.([]string); isList {
			v = strings.Join(l, ",")
		}
		if !ok || v != want {
			t.Errorf("Value(%s) = %v, %v; want %v", key, v, ok, want)
		}
	}
	if _, ok := f.Value("net"); ok {
		t.Error("Value(net) is set, but the file does not set it")
	}
}

// TestFileFor: exec refuses a key it does not take, and a word its flag
// does not take, at the file's position; a session command ignores a key
// only another session command takes.
func TestFileFor(t *testing.T) {
	parse := func(content string) *File {
		f, err := Parse("p.toml", []byte(content), nil)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	f := parse("timeout = \"15m\"\nallow_program = [\"make\"]\nmax_turns = 3\n")
	if err := f.For(Exec); err == nil || err.Error() != "p.toml:2:1: allow_program: not a key of exec: only call, run, tools, mcp, policy show take it; remove it from a policy for exec" {
		t.Errorf("exec: %v", err)
	}
	for _, c := range []Command{Call, Run, Tools, MCP, Show} {
		if err := f.For(c); err != nil {
			t.Errorf("%s: %v", c, err)
		}
	}
	if err := parse("\nconfine = \"off\"\n").For(Exec); err == nil || err.Error() != `p.toml:2:1: confine: "off": exec takes only strict, auto` {
		t.Errorf("exec, confine off: %v", err)
	}
	if err := parse("confine = \"off\"\n").For(Call); err != nil {
		t.Errorf("call, confine off: %v", err)
	}
	if err := parse("workspace = \".\"\nconfine = \"strict\"\npids_max = 64\nnet = \"proxy\"\nallow_domain = [\"x.org\"]\ngrace = \"1s\"\n").For(Exec); err != nil {
		t.Errorf("exec's own keys: %v", err)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte("confine = \"auto\"\nallow_program = [\"sh\"]\n"))
	f.Add([]byte("[x]\ny=1"))
	f.Add([]byte("memory_max = \"2GiB\"\ncpu_max = 1.5\nmax_parallel = 3\n"))
	f.Add([]byte("grace = \"1m\"\nnet = \"proxy\"\nallow_cidr = [\"10.0.0.0/8\"]\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		file, err := Parse("f.toml", b, nil)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Pos == "" && e.Key != "policy" {
				t.Fatalf("not an *Error at a position: %v", err)
			}
			return
		}
		p := Defaults()
		if err := file.Apply(&p); err != nil {
			t.Fatalf("parsed, then Apply failed: %v", err)
		}
		for _, c := range []Command{Call, Exec} {
			_ = file.For(c)
		}
	})
}
