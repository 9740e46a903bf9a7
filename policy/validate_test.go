package policy

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestValidate: every wrong value is an *Error naming its key and the
// value, worded as a command line shows it with the flag for the key.
func TestValidate(t *testing.T) {
	for _, c := range []struct {
		mod  func(*Policy)
		want string
	}{
		{func(p *Policy) { p.Approve = "maybe" }, `approve: "maybe": want auto, prompt, deny, all`},
		{func(p *Policy) { p.Confine = "" }, `confine: invalid confine mode "": want one of strict, auto, off`},
		{func(p *Policy) { p.ScopeAnnounce = "loud" }, `scope_announce: "loud": want stated, silent`},
		{func(p *Policy) { p.HookTimeout = 0 }, "hook_timeout 0s: must be positive"},
		{func(p *Policy) { p.MaxCalls = -1 }, "max_calls -1: must not be negative"},
		{func(p *Policy) { p.MaxParallel = 0 }, "max_parallel 0: must be at least 1 (run calls of the session at once; default: the number of CPUs, at least 4)"},
		{func(p *Policy) { p.MaxResult = 0 }, "max_result 0: must be a positive size"},
		{func(p *Policy) { p.Surface = "round" }, `surface: invalid surface "round": want flat or verbs`},
		{func(p *Policy) { p.Run.Timeout = -time.Second }, "timeout -1s: must not be negative"},
		{func(p *Policy) { p.Run.Grace = -time.Second }, "grace -1s: must not be negative (0 kills at once)"},
		{func(p *Policy) { p.Run.PidsMax = -1 }, "pids_max -1: must not be negative"},
		{func(p *Policy) { p.Run.CPUMax = 2000 }, "cpu_max 2000: want a number of CPUs between 0 and 1024"},
		{func(p *Policy) { p.Run.CPUMax = math.NaN() }, "cpu_max NaN: want a number of CPUs between 0 and 1024"},
		{func(p *Policy) { p.Run.TmpSize = 0 }, "tmp_size 0: must be a positive size, e.g. 64MiB"},
		{func(p *Policy) { p.Run.Net = "some" }, `net: "some": want none, host, proxy`},
		{func(p *Policy) { p.Run.LimitsFrom = "elsewhere" }, `limits_from: "elsewhere": want call, enclosing`},
		{func(p *Policy) { p.Run.NetMaxConns = -1 }, "net_max_conns -1: must not be negative"},
		{func(p *Policy) { p.Run.AllowCIDR = []string{"zz"} }, `allow_cidr "zz": want a CIDR such as 10.0.0.0/8 or an address`},
		{func(p *Policy) { p.Run.PassEnv = []string{"A=B"} }, `pass_env "A=B": not a variable name`},
		{func(p *Policy) { p.Agent.MaxTurns = -2 }, "max_turns -2: must not be negative"},
		{func(p *Policy) { p.Run.Net = NetHost; p.Run.AllowDomain = []string{"x.org"} }, "net host: contradicts allow_domain, deny_domain and allow_cidr, which need net proxy (the host's network admits everything)"},
		{func(p *Policy) {
			p.Run.AllowCIDR = []string{"10.0.0.0/8"}
			p.Sources = map[string]string{"net": "flag --net"}
		}, "net none: was given, and contradicts allow_domain, deny_domain and allow_cidr (which need net proxy): drop one of them"},
		{func(p *Policy) {
			p.Run.LimitsFrom = LimitsEnclosing
			p.Sources = map[string]string{"cpu_max": "p.toml:2:1"}
		}, "cpu_max: given with limits_from enclosing, which gives calls no memory or cpu limit of their own (the enclosing cgroup's apply): drop one of them"},
		{func(p *Policy) {
			p.Run.LimitsFrom = LimitsEnclosing
			p.Sources = map[string]string{"memory_max": "p.toml:2:1"}
		}, "memory_max: given with limits_from enclosing, which gives calls no memory or cpu limit of their own (the enclosing cgroup's apply): drop one of them"},
	} {
		p := Defaults()
		c.mod(&p)
		err := p.Validate(nil)
		var e *Error
		if !errors.As(err, &e) || !e.Usage || err.Error() != c.want {
			t.Errorf("got  %v\nwant %s", err, c.want)
		}
	}
	// The zero LimitsFrom is call; a default net beside the proxy's rules
	// means the proxy.
	p := Defaults()
	p.Run.LimitsFrom = ""
	p.Run.AllowDomain = []string{"x.org"}
	if err := p.Validate(nil); err != nil || p.Run.NetMode() != NetProxy || p.Run.LimitsFrom.String() != "call" {
		t.Errorf("%v, %s", err, p.Run.NetMode())
	}
	eff := map[string]KeyValue{}
	for _, kv := range p.Effective() {
		eff[kv.Key] = kv
	}
	if kv := eff["net"]; kv.Value != "proxy" || kv.Source != "allow_domain (implies proxy)" {
		t.Errorf("net shown as %+v", kv)
	}
}

// TestEffective: policy show lists every setting it takes, in the table's
// order, each as a file writes it, and none only run takes.
func TestEffective(t *testing.T) {
	p := Defaults()
	p.Sources = map[string]string{"max_calls": "flag --max-calls"}
	p.MaxCalls = 3
	eff := p.Effective()
	i := 0
	for _, s := range Settings() {
		if s.Commands&Show == 0 {
			continue
		}
		if i >= len(eff) || eff[i].Key != s.Key {
			t.Fatalf("line %d: %+v, want %s", i, eff[i:], s.Key)
		}
		i++
	}
	want := map[string]KeyValue{
		"max_calls":  {"max_calls", int64(3), "flag --max-calls"},
		"max_result": {"max_result", "256KiB", "default"},
		"grace":      {"grace", "10s", "default"},
		"hook":       {"hook", []string{}, "default"},
		"confine":    {"confine", "auto", "default"},
		"cpu_max":    {"cpu_max", float64(0), "default"},
	}
	for _, kv := range eff {
		if w, ok := want[kv.Key]; ok && (!equal(kv.Value, w.Value) || kv.Source != w.Source) {
			t.Errorf("%+v, want %+v", kv, w)
		}
	}
}

// TestSchemaInSync: the shipped JSON Schema is the one the table makes,
// and names every key.
func TestSchemaInSync(t *testing.T) {
	shipped, err := os.ReadFile(filepath.Join("..", "docs", "policy.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(shipped, Schema()) {
		t.Fatal("docs/policy.schema.json is stale: regenerate it with `b10x-harness policy schema > docs/policy.schema.json`")
	}
	for _, k := range Keys() {
		if !bytes.Contains(shipped, []byte(`"`+k+`": {`)) {
			t.Errorf("the schema lacks %s", k)
		}
	}
}

// TestSize: sizes read and write back.
func TestSize(t *testing.T) {
	for in, want := range map[string]int64{"0": 0, "1048576": 1 << 20, "64KiB": 64 << 10, "2 GiB": 2 << 30, "3k": 3 << 10, "5MB": 5 << 20, "7b": 7} {
		n, err := ParseSize(in)
		if err != nil || n != want {
			t.Errorf("ParseSize(%q) = %d, %v", in, n, err)
		}
	}
	for _, bad := range []string{"", "-1", "lots", "1.5GiB", "9999999999GiB"} {
		if _, err := ParseSize(bad); err == nil {
			t.Errorf("ParseSize(%q) took it", bad)
		}
	}
	for n, want := range map[int64]string{0: "0", 1000: "1000", 2 << 30: "2GiB", 512 << 20: "512MiB", 1536 << 10: "1536KiB"} {
		if got := FormatSize(n); got != want {
			t.Errorf("FormatSize(%d) = %s", n, got)
		}
	}
}
