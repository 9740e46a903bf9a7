// Package protocol is what the vmtest host program and the guest init agree
// on: the shape names, the configuration file the host packs into the
// initramfs, and the result lines the guest prints on the serial console.
//
// Both sides import it, so the formats cannot drift apart. It has no state;
// every function is safe for concurrent use.
package protocol

import (
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Shape names, the same strings as internal/testenv's. Host is not a VM shape.
const (
	ShapeHost     = "host"
	ShapeDebian61 = "debian-6.1"
	// ShapeDebian612 is debian-6.1's set-up on Debian's 6.12 kernel
	// (bookworm-backports): Landlock ABI 6, network rights included.
	ShapeDebian612 = "debian-6.12"
	// ShapeDebian618 is debian-6.1's set-up on Debian's 6.18 kernel
	// (trixie-backports) booted with audit=1: Landlock ABI 7, whose
	// denials the kernel logs as audit records (decision 0080).
	ShapeDebian618  = "debian-6.18"
	ShapeNoLandlock = "no-landlock"
	ShapeNoUserns   = "no-userns"
	ShapeCgroupV1   = "cgroup-v1"

	// ShapeOrdinary is an ordinary host in a VM: Debian 12's kernel, pure
	// cgroup v2 with every controller, Landlock on, tests as root. Its
	// test binaries are told they run on the host (B10X_SHAPE=host), so
	// the host suite's expectations, derived from what the machine is,
	// are checked on a second kind of host (decision 0048).
	ShapeOrdinary = "ordinary"

	// ShapeK8sNode is a Kubernetes node: debian-6.18's kernel (Landlock
	// ABI 7, idmapped mounts on tmpfs for user-namespaced pods), pure
	// cgroup v2 with every controller for the kubelet to manage, and the
	// veth and overlay modules loaded. make k8stest boots it with the
	// cluster's programs as a payload; it is not one of VMShapes, so
	// "all" leaves it out (decision 0088).
	ShapeK8sNode = "k8s-node"

	// ShapeProbe is not a test shape: the guest init prints ProbeLine and
	// powers off at once. The host boots it to find out whether KVM works.
	ShapeProbe = "probe"
)

// VMShapes lists the shapes that boot a VM, in the order they run.
var VMShapes = []string{ShapeDebian61, ShapeDebian612, ShapeDebian618, ShapeNoLandlock, ShapeNoUserns, ShapeCgroupV1, ShapeOrdinary}

// ExtraShapes boot a VM only when named: they need a payload (-payload)
// that the ordinary suite does not carry.
var ExtraShapes = []string{ShapeK8sNode}

// KnownVMShapes is VMShapes and ExtraShapes.
func KnownVMShapes() []string { return append(slices.Clone(VMShapes), ExtraShapes...) }

// ModulesDir is where the initramfs holds the kernel modules of a kernel
// release, for the shapes that load them.
const ModulesDir = "/usr/lib/modules"

// TestShape is the shape a guest's test binaries are told (B10X_SHAPE):
// the shape's own name, except that ShapeOrdinary runs them as the host.
func TestShape(shape string) string {
	if shape == ShapeOrdinary {
		return ShapeHost
	}
	return shape
}

// ConfigPath is where the host puts the guest configuration in the initramfs.
const ConfigPath = "/etc/vmtest.json"

// UnprivilegedUID and UnprivilegedGID are the ids the no-userns shape runs
// the test binaries as. The initramfs's /etc/passwd names them.
const (
	UnprivilegedUID  = 1000
	UnprivilegedGID  = 1000
	UnprivilegedName = "tester"
)

// Package is one test binary in the initramfs.
type Package struct {
	ImportPath string `json:"import_path"` // e.g. github.com/b10x/harness/confine
	Binary     string `json:"binary"`      // absolute path in the guest, e.g. /tests/confine.test
	// Dir is the package's directory relative to the module root
	// (slash-separated, "." for the root): the binary runs there, in a
	// fresh copy of the module's files, as go test runs it in the package
	// directory.
	Dir string `json:"dir"`
	// TimeoutSeconds overrides Config.TimeoutSeconds for this package when
	// positive.
	TimeoutSeconds int `json:"timeout_s,omitempty"`
	// Shapes, when not empty, are the only shapes the package runs in
	// (vmtest's -pkgs-in); every other shape leaves it out.
	Shapes []string `json:"shapes,omitempty"`
	// RunIn maps a shape to the -test.run the package gets there
	// (vmtest's -run-in), in place of Config.Run.
	RunIn map[string]string `json:"run_in,omitempty"`
}

// RunsIn reports whether p runs in shape.
func (p Package) RunsIn(shape string) bool {
	return len(p.Shapes) == 0 || slices.Contains(p.Shapes, shape)
}

// Config is the guest's whole configuration except the shape, which comes on
// the kernel command line so that one initramfs serves every shape. The zero
// value runs nothing.
type Config struct {
	Packages []Package `json:"packages"`
	// SrcRoot holds the module's files in the guest; each binary gets a
	// fresh copy of it. Required when Packages is not empty.
	SrcRoot string `json:"src_root,omitempty"`
	// Run is passed to each binary as -test.run when not empty.
	Run string `json:"run,omitempty"`
	// TimeoutSeconds is passed to each binary as -test.timeout; the guest
	// kills a binary that outlives it by the grace period. Zero means no
	// deadline.
	TimeoutSeconds int `json:"timeout_s,omitempty"`
	// GraceSeconds overrides DefaultGrace when positive.
	GraceSeconds int `json:"grace_s,omitempty"`
	// Env holds extra NAME=value pairs for every test binary.
	Env []string `json:"env,omitempty"`
}

// Timeout is the -test.timeout for p; zero means none.
func (c Config) Timeout(p Package) time.Duration {
	if p.TimeoutSeconds > 0 {
		return time.Duration(p.TimeoutSeconds) * time.Second
	}
	return time.Duration(c.TimeoutSeconds) * time.Second
}

// DefaultGrace is how long the guest waits past a binary's -test.timeout
// (which makes the binary panic with every goroutine's stack) before it
// kills the binary's whole process tree.
const DefaultGrace = 30 * time.Second

// Grace is the grace period c asks for.
func (c Config) Grace() time.Duration {
	if c.GraceSeconds > 0 {
		return time.Duration(c.GraceSeconds) * time.Second
	}
	return DefaultGrace
}

// Marshal encodes c for the initramfs.
func (c Config) Marshal() ([]byte, error) { return json.MarshalIndent(c, "", "  ") }

// ParseConfig decodes what Marshal wrote. Unknown fields are an error, so a
// guest built from other sources than the host fails loudly.
func ParseConfig(b []byte) (Config, error) {
	var c Config
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return Config{}, fmt.Errorf("vmtest config: %w", err)
	}
	if len(c.Packages) > 0 && !strings.HasPrefix(c.SrcRoot, "/") {
		return Config{}, fmt.Errorf("vmtest config: src_root %q: want an absolute path", c.SrcRoot)
	}
	for i, p := range c.Packages {
		if p.ImportPath == "" || !strings.HasPrefix(p.Binary, "/") {
			return Config{}, fmt.Errorf("vmtest config: package %d: import path and absolute binary are required", i)
		}
		if p.Dir == "" || path.IsAbs(p.Dir) || path.Clean(p.Dir) != p.Dir || p.Dir == ".." || strings.HasPrefix(p.Dir, "../") {
			return Config{}, fmt.Errorf("vmtest config: package %d: dir %q: want a clean path relative to the module root", i, p.Dir)
		}
	}
	for _, e := range c.Env {
		if k, _, ok := strings.Cut(e, "="); !ok || k == "" {
			return Config{}, fmt.Errorf("vmtest config: environment entry %q is not NAME=value", e)
		}
	}
	return c, nil
}

// Result lines. Every line the guest init itself prints starts with Prefix;
// test output never does (the host checks only lines that start with it).
const Prefix = "VMTEST "

// ProbeLine is what the probe shape prints before it powers off.
const ProbeLine = Prefix + "PROBE OK"

// StartLine announces a package's test binary; its output follows.
func StartLine(pkg string) string { return fmt.Sprintf("%sSTART %s", Prefix, pkg) }

// PkgLine reports a package's exit status (-1 when it was killed by a
// signal or could not start) and its wall time.
func PkgLine(pkg string, exit int, d time.Duration) string {
	return fmt.Sprintf("%sPKG %s EXIT %d TIME %.2fs", Prefix, pkg, exit, d.Seconds())
}

// LeakLine reports something a package's tests left behind (a process or a
// cgroup). A leak fails the package.
func LeakLine(pkg, what string) string {
	return fmt.Sprintf("%sLEAK %s %s", Prefix, pkg, oneLine(what))
}

// InfoLine reports a fact about the guest (kernel, LSMs, cgroup layout).
func InfoLine(key, value string) string {
	return fmt.Sprintf("%sINFO %s %s", Prefix, key, oneLine(value))
}

// SetupFailLine reports that the shape could not be set up; no test runs.
func SetupFailLine(why string) string { return fmt.Sprintf("%sSETUP FAIL %s", Prefix, oneLine(why)) }

// DoneLine is the guest's last line: 0 when every package passed.
func DoneLine(exit int) string { return fmt.Sprintf("%sDONE EXIT %d", Prefix, exit) }

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// Event is one parsed result line.
type Event struct {
	Kind    string        // "START", "PKG", "LEAK", "INFO", "SETUP FAIL", "DONE", "PROBE"
	Pkg     string        // START, PKG, LEAK
	Exit    int           // PKG, DONE
	Elapsed time.Duration // PKG
	Text    string        // LEAK: what leaked; INFO: "key value"; SETUP FAIL: why
}

var (
	reStart = regexp.MustCompile(`^START (\S+)$`)
	rePkg   = regexp.MustCompile(`^PKG (\S+) EXIT (-?\d+) TIME (\d+(?:\.\d+)?)s$`)
	reLeak  = regexp.MustCompile(`^LEAK (\S+) (.+)$`)
	reDone  = regexp.MustCompile(`^DONE EXIT (-?\d+)$`)
)

// ErrNotEvent is returned by ParseLine for a line that is not a result line.
var ErrNotEvent = errors.New("not a vmtest result line")

// ParseLine parses one console line (without its line ending). It returns
// ErrNotEvent for ordinary output and a descriptive error for a line that
// starts with Prefix but is malformed.
func ParseLine(line string) (Event, error) {
	rest, ok := strings.CutPrefix(line, Prefix)
	if !ok {
		return Event{}, ErrNotEvent
	}
	switch {
	case rest == "PROBE OK":
		return Event{Kind: "PROBE"}, nil
	case strings.HasPrefix(rest, "INFO "):
		return Event{Kind: "INFO", Text: strings.TrimPrefix(rest, "INFO ")}, nil
	case strings.HasPrefix(rest, "SETUP FAIL "):
		return Event{Kind: "SETUP FAIL", Text: strings.TrimPrefix(rest, "SETUP FAIL ")}, nil
	}
	if m := reStart.FindStringSubmatch(rest); m != nil {
		return Event{Kind: "START", Pkg: m[1]}, nil
	}
	if m := rePkg.FindStringSubmatch(rest); m != nil {
		exit, err := strconv.Atoi(m[2])
		if err != nil {
			return Event{}, fmt.Errorf("result line %q: exit status: %w", line, err)
		}
		secs, err := strconv.ParseFloat(m[3], 64)
		if err != nil {
			return Event{}, fmt.Errorf("result line %q: time: %w", line, err)
		}
		return Event{Kind: "PKG", Pkg: m[1], Exit: exit, Elapsed: time.Duration(secs * float64(time.Second))}, nil
	}
	if m := reLeak.FindStringSubmatch(rest); m != nil {
		return Event{Kind: "LEAK", Pkg: m[1], Text: m[2]}, nil
	}
	if m := reDone.FindStringSubmatch(rest); m != nil {
		exit, err := strconv.Atoi(m[1])
		if err != nil {
			return Event{}, fmt.Errorf("result line %q: exit status: %w", line, err)
		}
		return Event{Kind: "DONE", Exit: exit}, nil
	}
	return Event{}, fmt.Errorf("malformed vmtest result line %q", line)
}
