package session

import (
	"errors"
	"strings"
	"testing"

	"github.com/b10x/harness/confine"
	"github.com/b10x/harness/internal/setting"
	"github.com/b10x/harness/policy"
	"github.com/b10x/harness/record"
	"github.com/b10x/harness/tools"
)

// TestDoctorWriteText: WriteText writes a report built by hand exactly:
// the layer table; the host and a workspace's run children, a reason
// that names the workspace escaped; remedies only for required layers
// that are missing and have one, in the container and on the host; a
// mode refused because run calls cannot start, one refused by the host,
// one that starts and withholds tools, one without run. The keys are
// worded by the namer (cmd's flags), or are the keys themselves.
func TestDoctorWriteText(t *testing.T) {
	const ws = "/w/\x1b[2Jx" // a workspace's name a terminal would act on
	const esc = `/w/\x1b[2Jx`
	tmp, _ := policy.Lookup("tmp_size")
	d := DoctorReport{
		Layers: []confine.Row{
			{Layer: "landlock-self", Available: true, Required: true, Detail: "ABI 7"},
			{Layer: "pidns", Required: true, Detail: "clone failed", Remedy: "boot with pid namespaces"},
			{Layer: "cgroup-leaf", Required: true, Detail: "no cgroup2", Remedy: "mount cgroup2"},
			{Layer: "memory-limit", Required: true, Detail: "no memory controller"},
			{Layer: "userns", Detail: "not required: root", Remedy: "sysctl user.max_user_namespaces=1"},
			{Layer: "seccomp", Required: true, Detail: "no filter"},
		},
		ContainerFixes: map[string]string{"cgroup-leaf": "docker run --cgroupns=private", "memory-limit": "give the container memory"},
		Container:      confine.Container{Runtime: "docker", Evidence: "/.dockerenv exists"},
		Helper:         "the helper image",
		RunAsError:     "spawn: pin " + ws + ": operation not permitted",
		Held:           "the held paths",
		WorkspaceCase:  &record.WorkspaceCase{Casing: "case-sensitive", FS: "ext4", Why: "no casefold on " + ws},
		SelfReads:      "what the harness reads",
		UnixSockets:    "sockets: confined",
		Masked:         "/etc/shadow; " + ws + "/.env",
		Network: []NetModeReport{
			{Mode: "none", Available: true, Enforces: "an empty namespace"},
			{Mode: "host", Enforces: "the host's network"},
		},
		Modes: []ModeReport{
			{Mode: "strict", Refusal: RunStartPrefix + ws + " cannot start: operation not permitted"},
			{Mode: "strict", Refusal: "this host lacks pidns"},
			{Mode: "auto", Starts: true, Publishes: []string{"file_read", "file_write"},
				Withholds: map[string]string{"run": RunStartPrefix + ws + " cannot start", "file_edit": "needs a confined workspace"},
				Plan:      confine.Plan{ConfinedExecution: true, WholeTreeKill: "cgroup.kill", ResourceLimits: true, Enforced: []string{"landlock-self", "seccomp"}}},
			{Mode: "auto", Starts: true, Publishes: []string{"file_read", "run (with allow_program)"},
				Plan: confine.Plan{ConfinedExecution: true, WholeTreeKill: "pid namespace", Enforced: []string{"pidns"}}},
			{Mode: "off", Starts: true, Publishes: []string{"file_read"}, Withholds: map[string]string{"run": "needs confined execution: confine off"}},
		},
	}
	want := `LAYER          AVAILABLE          DETAIL
landlock-self  yes                ABI 7
pidns          NO                 clone failed
cgroup-leaf    NO                 no cgroup2
memory-limit   NO                 no memory controller
userns         no (not required)  not required: root
seccomp        NO                 no filter

run helper: the helper image
container: docker (/.dockerenv exists)
run children of ` + esc + `: cannot run: spawn: pin ` + esc + `: operation not permitted
protected from run children: the held paths
workspace case: case-sensitive (ext4: no casefold on ` + esc + `)
read by the harness itself: what the harness reads
unix sockets of run children: sockets: confined
read as empty by run children: /etc/shadow; ` + esc + `/.env
kernel denials of run children: ` + tools.KernelDenials() + `
seccomp refusals of run children: ` + tools.SeccompDenials() + `
no-route refusals of run children: ` + tools.NoRouteDenials() + `
masked files read by run children: ` + tools.MaskedOpens() + `
writes of run children outside their write paths: ` + tools.ViewWrites() + `
network of run calls, --net none: yes: an empty namespace
network of run calls, --net host: NO: the host's network

How to get what is missing:
  pidns: boot with pid namespaces
  cgroup-leaf: in this docker container: docker run --cgroupns=private; on the host: mount cgroup2
  memory-limit: in this docker container: give the container memory

--confine strict: refuses to start: run calls of ` + esc + ` cannot start: operation not permitted

--confine strict: refuses to start on this host (the layers above marked NO are missing)

--confine auto: publishes [file_read file_write]
  not file_edit: needs a confined workspace
  not run: run calls of ` + esc + ` cannot start
  enforces: [landlock-self seccomp]
  whole-tree kill: cgroup.kill; resource limits: true
  a harness killed with SIGKILL leaves its cgroup directory (its processes die with it); the next harness that starts run calls here removes it, never one of a harness still running
  private /tmp and /dev/shm: tmpfs, each capped at --tmp-size (default ` + tmp.Default + `)

--confine auto: publishes [file_read run (with allow_program)]
  enforces: [pidns]
  whole-tree kill: pid namespace; resource limits: false
  private /tmp and /dev/shm: tmpfs, each capped at --tmp-size (default ` + tmp.Default + `)

--confine off: publishes [file_read]
  not run: needs confined execution: confine off
`
	var b strings.Builder
	if err := d.WriteText(&b, ws, setting.Flag); err != nil {
		t.Fatal(err)
	}
	if b.String() != want {
		t.Errorf("WriteText with flags:\n%s\nwant:\n%s", b.String(), want)
	}
	if strings.Contains(b.String(), "\x1b") {
		t.Error("an escape sequence reached the terminal")
	}

	// Without a namer, the keys.
	keys := strings.NewReplacer("--confine ", "confine ", "--net ", "net ", "--tmp-size", "tmp_size").Replace(want)
	b.Reset()
	if err := d.WriteText(&b, ws, nil); err != nil {
		t.Fatal(err)
	}
	if b.String() != keys {
		t.Errorf("WriteText with keys:\n%s\nwant:\n%s", b.String(), keys)
	}

	// Who run children are, every layer there: no remedies, no container.
	d = DoctorReport{
		Layers:  []confine.Row{{Layer: "seccomp", Available: true, Required: true, Detail: "filter installed"}},
		Helper:  "h",
		RunAs:   "host uid 1000 (\x1b]0;title\a)",
		Held:    "held",
		Network: []NetModeReport{{Mode: "none", Available: true, Enforces: "empty"}},
	}
	want = `LAYER    AVAILABLE  DETAIL
seccomp  yes        filter installed

run helper: h
run children of ws: host uid 1000 (\x1b]0;title\x07)
protected from run children: held
read by the harness itself: 
unix sockets of run children: 
read as empty by run children: 
kernel denials of run children: ` + tools.KernelDenials() + `
seccomp refusals of run children: ` + tools.SeccompDenials() + `
no-route refusals of run children: ` + tools.NoRouteDenials() + `
masked files read by run children: ` + tools.MaskedOpens() + `
writes of run children outside their write paths: ` + tools.ViewWrites() + `
network of run calls, --net none: yes: empty
`
	b.Reset()
	if err := d.WriteText(&b, "ws", setting.Flag); err != nil {
		t.Fatal(err)
	}
	if b.String() != want {
		t.Errorf("WriteText, run children:\n%s\nwant:\n%s", b.String(), want)
	}

	// The writer's first error is WriteText's, and nothing is written
	// after it.
	for _, n := range []int{0, 10, 200, 1000} {
		w := &failWriter{left: n}
		if err := d.WriteText(w, "ws", setting.Flag); !errors.Is(err, errFull) || w.after {
			t.Errorf("a writer full after %d bytes: %v (written after its error: %v)", n, err, w.after)
		}
	}
}

var errFull = errors.New("full")

// failWriter takes left bytes, then fails; after records a write after
// its failure.
type failWriter struct {
	left   int
	failed bool
	after  bool
}

func (f *failWriter) Write(p []byte) (int, error) {
	if f.failed {
		f.after = true
	}
	if len(p) > f.left {
		f.failed = true
		n := f.left
		f.left = 0
		return n, errFull
	}
	f.left -= len(p)
	return len(p), nil
}
