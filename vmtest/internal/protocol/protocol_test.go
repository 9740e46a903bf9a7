package protocol

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestLinesRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		line string
		want Event
	}{
		{StartLine("github.com/b10x/harness/confine"), Event{Kind: "START", Pkg: "github.com/b10x/harness/confine"}},
		{PkgLine("m/a", 0, 1500*time.Millisecond), Event{Kind: "PKG", Pkg: "m/a", Exit: 0, Elapsed: 1500 * time.Millisecond}},
		{PkgLine("m/a", -1, 0), Event{Kind: "PKG", Pkg: "m/a", Exit: -1}},
		{PkgLine("m/a", 2, 61*time.Second), Event{Kind: "PKG", Pkg: "m/a", Exit: 2, Elapsed: 61 * time.Second}},
		{LeakLine("m/a", "process: pid 7\n(sleep)"), Event{Kind: "LEAK", Pkg: "m/a", Text: "process: pid 7 (sleep)"}},
		{InfoLine("lsm", "lockdown,yama\n"), Event{Kind: "INFO", Text: "lsm lockdown,yama"}},
		{SetupFailLine("mount cgroup2:\n EBUSY"), Event{Kind: "SETUP FAIL", Text: "mount cgroup2: EBUSY"}},
		{DoneLine(0), Event{Kind: "DONE"}},
		{DoneLine(1), Event{Kind: "DONE", Exit: 1}},
		{ProbeLine, Event{Kind: "PROBE"}},
	} {
		if strings.Contains(tc.line, "\n") {
			t.Errorf("%q: a result line must be one line", tc.line)
		}
		got, err := ParseLine(tc.line)
		if err != nil || got != tc.want {
			t.Errorf("ParseLine(%q) = %+v, %v; want %+v", tc.line, got, err, tc.want)
		}
	}
}

func TestParseLineRejects(t *testing.T) {
	for _, l := range []string{"VMTEST PKG m/a EXIT x TIME 1s", "VMTEST DONE", "VMTEST DONE EXIT", "VMTEST START", "VMTEST BOGUS", "VMTEST PKG m/a EXIT 0"} {
		if _, err := ParseLine(l); err == nil || errors.Is(err, ErrNotEvent) {
			t.Errorf("ParseLine(%q) = %v, want a malformed-line error", l, err)
		}
	}
	for _, l := range []string{"", "=== RUN TestX", " VMTEST DONE EXIT 0", "vmtest DONE EXIT 0", "[ 1.0] VMTEST DONE EXIT 0"} {
		if _, err := ParseLine(l); !errors.Is(err, ErrNotEvent) {
			t.Errorf("ParseLine(%q) = %v, want ErrNotEvent", l, err)
		}
	}
}

func TestConfigRoundTrip(t *testing.T) {
	c := Config{Packages: []Package{{ImportPath: "m/a", Binary: "/tests/a.test", Dir: "a/b", TimeoutSeconds: 3, Shapes: []string{"no-userns"}}}, SrcRoot: "/src", Run: "TestX|TestY", TimeoutSeconds: 600, GraceSeconds: 2, Env: []string{"A=b=c"}}
	b, err := c.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseConfig(b)
	if err != nil {
		t.Fatal(err)
	}
	if back.Run != c.Run || back.TimeoutSeconds != 600 || back.Grace() != 2*time.Second || len(back.Packages) != 1 || !reflect.DeepEqual(back.Packages[0], c.Packages[0]) || back.Env[0] != "A=b=c" {
		t.Errorf("read back %+v, want %+v", back, c)
	}
	if p := back.Packages[0]; !p.RunsIn("no-userns") || p.RunsIn("debian-6.1") || !(Package{}).RunsIn("debian-6.1") {
		t.Errorf("package shapes %v: RunsIn wrong", p.Shapes)
	}
	if got := back.Timeout(back.Packages[0]); got != 3*time.Second {
		t.Errorf("package timeout override: %v", got)
	}
	if got := back.Timeout(Package{}); got != 600*time.Second {
		t.Errorf("default timeout: %v", got)
	}
	if got := (Config{}).Grace(); got != DefaultGrace {
		t.Errorf("zero Config grace = %v, want %v", got, DefaultGrace)
	}
}

func TestParseConfigRejects(t *testing.T) {
	for _, s := range []string{
		`{"packages":[],"surprise":1}`,
		`{"src_root":"/src","packages":[{"import_path":"m/a","binary":"tests/a.test","dir":"a"}]}`,
		`{"src_root":"/src","packages":[{"binary":"/tests/a.test","dir":"a"}]}`,
		`{"packages":[{"import_path":"m/a","binary":"/tests/a.test","dir":"a"}]}`,
		`{"src_root":"/src","packages":[{"import_path":"m/a","binary":"/tests/a.test","dir":"../a"}]}`,
		`{"src_root":"/src","packages":[{"import_path":"m/a","binary":"/tests/a.test","dir":"/a"}]}`,
		`{"src_root":"/src","packages":[{"import_path":"m/a","binary":"/tests/a.test","dir":""}]}`,
		`{"src_root":"/src","packages":[{"import_path":"m/a","binary":"/tests/a.test","dir":"a//b"}]}`,
		`{"env":["NOVALUE"]}`,
		`{"env":["=x"]}`,
		`not json`,
	} {
		if _, err := ParseConfig([]byte(s)); err == nil {
			t.Errorf("ParseConfig(%s) accepted", s)
		}
	}
}
