package spawn

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/b10x/harness/confine"
	"github.com/b10x/harness/internal/testenv"
)

// TestRunLayers runs a program and shows which layers confined it; on each
// shape it checks the ones that shape must have.
func TestRunLayers(t *testing.T) {
	for name, r := range runners(t) {
		ws := workspace(t)
		res, out, err := run(t, r, shSpec(t, ws, "echo hello"))
		if err != nil {
			t.Fatalf("%s: %v\n%s", name, err, out)
		}
		t.Logf("LAYERS: %v", res.Layers)
		if res.ExitCode != 0 || res.Signal != "" || string(out.stdout.Bytes()) != "hello\n" {
			t.Fatalf("%s: %+v\n%s", name, res, out)
		}
		want := []string{confine.LayerPidNS, confine.LayerMountNS, confine.LayerNetNS, confine.LayerIPCNS, confine.LayerUTSNS, confine.LayerNoNewPrivs, confine.LayerSeccomp}
		if testenv.Shape() != testenv.ShapeNoLandlock {
			want = append(want, confine.LayerLandlockChild)
		}
		if testenv.Shape() != testenv.ShapeNoUserns {
			want = append(want, confine.LayerUserNS)
		}
		for _, l := range want {
			if !slices.Contains(res.Layers, l) {
				t.Errorf("%s: layer %s missing from %v", name, l, res.Layers)
			}
		}
		if res.MemoryPeak != -1 || res.PidsPeak != -1 {
			t.Errorf("%s: without a cgroup the figures must be unknown (-1), got %d %d", name, res.MemoryPeak, res.PidsPeak)
		}
	}
}

// TestArgvAndEnvExact: shell metacharacters are bytes, the environment is
// exactly Spec.Env, nothing of the harness's reaches the child.
func TestArgvAndEnvExact(t *testing.T) {
	t.Setenv("B10X_TEST_API_KEY", "sk-test-secret-0123456789")
	args := []string{
		"; rm -rf /", "&& echo pwned", "$(id)", "`id`", "> /tmp/x", "a b  c", `"quoted"`, `'single'`,
		"", "", "\\n", "\n", "ünïcode", string([]byte{0xff, 0xfe, 0x80}), "--", "-c", "*", "~",
	}
	env := []string{"A=1", "EMPTY=", "WEIRD=; $(id) `x`", "DUP=1", "DUP=2", "NOT_PATH=/x"}
	for name, r := range runners(t) {
		ws := workspace(t)
		s := probeSpec(t, ws, "argv")
		argv0 := s.Argv[0]
		s.Argv = append(s.Argv, args...)
		s.Env = env
		// The probe reads its own argv: rebuild the expectation with the
		// probe name itself in place.
		res, out, err := run(t, r, s)
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("%s: %v %+v\n%s", name, err, res, out)
		}
		lines := strings.Split(strings.TrimSpace(string(out.stdout.Bytes())), "\n")
		var got []string
		for _, f := range strings.Split(strings.TrimSuffix(strings.TrimPrefix(lines[0], "argv="), ","), ",") {
			b, err := hex.DecodeString(f)
			if err != nil {
				t.Fatalf("%s: bad probe output %q", name, lines[0])
			}
			got = append(got, string(b))
		}
		want := append([]string{argv0, "argv"}, args...)
		if !slices.Equal(got, want) {
			t.Fatalf("%s: argv differs\n got %q\nwant %q", name, got, want)
		}

		s.Argv = []string{argv0, "env"}
		res, out, err = run(t, r, s)
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("%s: %v %+v\n%s", name, err, res, out)
		}
		got = nil
		line := strings.TrimSpace(string(out.stdout.Bytes()))
		for _, f := range strings.Split(strings.TrimSuffix(strings.TrimPrefix(line, "env="), ","), ",") {
			b, _ := hex.DecodeString(f)
			got = append(got, string(b))
		}
		if !slices.Equal(got, env) {
			t.Fatalf("%s: environment differs\n got %q\nwant %q", name, got, env)
		}
		if bytes.Contains(out.stdout.Bytes(), []byte("sk-test-secret")) {
			t.Fatalf("%s: the harness's key reached the child", name)
		}
	}
}

// TestChildCannotReadSecrets: /etc/shadow, a secret outside the view, the
// harness's environment through /proc.
func TestChildCannotReadSecrets(t *testing.T) {
	rs := runners(t)
	const key = "sk-test-secret-9876543210"
	t.Setenv("B10X_TEST_API_KEY", key)
	secretDir := t.TempDir()
	secret := filepath.Join(secretDir, "id_ed25519")
	if err := os.WriteFile(secret, []byte("PRIVATE KEY MATERIAL"), 0o644); err != nil {
		t.Fatal(err)
	}
	shadow := "/etc/shadow"
	shadowData, err := os.ReadFile(shadow)
	if errors.Is(err, os.ErrNotExist) && testenv.InVM() {
		// The guest's /etc has no shadow file: make one (the VM is ours).
		shadowData = []byte("root:$6$fakehash$abcdefabcdef:19000:0:99999:7:::\n")
		if err := os.WriteFile(shadow, shadowData, 0o640); err != nil {
			t.Fatal(err)
		}
	} else if err != nil {
		t.Fatalf("read %s: %v", shadow, err)
	}
	fi, err := os.Stat(shadow)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm()&0o004 != 0 {
		t.Fatalf("%s is world-readable here (%v): the test needs a root-only file", shadow, fi.Mode())
	}
	harness := strconv.Itoa(os.Getpid())
	for name, r := range rs {
		ws := workspace(t)
		// The shell tries everything; the probe says how each failed.
		script := `cat /etc/shadow; cat /etc/gshadow; cat ` + secret + `; cat /proc/` + harness + `/environ; ` +
			`for f in /proc/[0-9]*/environ; do cat "$f"; done; ls -a /root /home /run /var 2>&1; cat "$HOME/.ssh/id_ed25519"; exit 0`
		res, out, err := run(t, r, shSpec(t, ws, script))
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("%s: %v %+v\n%s", name, err, res, out)
		}
		all := append(out.stdout.Bytes(), out.stderr.Bytes()...)
		for _, l := range strings.Split(string(shadowData), "\n") {
			if l != "" && bytes.Contains(all, []byte(l)) {
				t.Fatalf("%s: a line of %s reached the child: %q", name, shadow, l)
			}
		}
		for _, leak := range []string{"PRIVATE KEY MATERIAL", key} {
			if bytes.Contains(all, []byte(leak)) {
				t.Fatalf("%s: %q reached the child\n%s", name, leak, out)
			}
		}
		p := probes(func() output {
			_, o, err := run(t, r, probeSpec(t, ws, "read:"+secret, "read:/proc/"+harness+"/environ", "read:/etc/shadow", "ls:/", "ls:/tmp", "ls:"+filepath.Dir(secretDir), "pid", "ppid"))
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			return o
		}())
		if p["read:"+secret] != "ENOENT" {
			t.Errorf("%s: secret outside the view: %s, want ENOENT", name, p["read:"+secret])
		}
		if r := p["read:/proc/"+harness+"/environ"]; strings.HasPrefix(r, "data:") {
			b, _ := hex.DecodeString(strings.TrimPrefix(r, "data:"))
			if bytes.Contains(b, []byte(key)) {
				t.Errorf("%s: read the harness's environment", name)
			}
		}
		if got := p["read:/etc/shadow"]; got != "data:" {
			t.Errorf("%s: /etc/shadow in the view: %q, want it masked (empty)", name, got)
		}
		if got, want := p["ls:/"], "list:bin,dev,etc,lib,lib64,opt,proc,sbin,tmp,usr"; !viewRootOK(got, ws, selfExe(t)) {
			t.Errorf("%s: the view's root holds %s, want only system directories and the view's own (like %s)", name, got, want)
		}
		// The child's /tmp is its own: an entry there is only the way to a
		// path of the view (the workspace, the test binary as helper).
		if p["ls:/tmp"] == "ENOENT" {
			t.Errorf("%s: the child has no /tmp", name)
		}
		for _, e := range strings.Split(strings.TrimPrefix(p["ls:/tmp"], "list:"), ",") {
			if e != "" && !strings.HasPrefix(ws, "/tmp/"+e+"/") && !strings.HasPrefix(selfExe(t), "/tmp/"+e+"/") {
				t.Errorf("%s: the child's /tmp shows %q (the host's /tmp must not be visible): %s", name, e, p["ls:/tmp"])
			}
		}
		if got := p["ls:"+filepath.Dir(secretDir)]; strings.Contains(","+strings.TrimPrefix(got, "list:")+",", ","+filepath.Base(secretDir)+",") {
			t.Errorf("%s: the directory that holds the secret is visible: %s", name, got)
		}
		if p["pid"] == "1" || p["ppid"] != "1" {
			t.Errorf("%s: the program is pid %s, its parent %s, in its namespace; want a minimal init as PID 1 and the program its child", name, p["pid"], p["ppid"])
		}
	}
}

// viewRootOK accepts a listing of the view's root made only of the system
// directories, the view's own /dev, /proc, /tmp, and the first component of
// the paths the call named (the workspace, the program).
func viewRootOK(list string, named ...string) bool {
	if !strings.HasPrefix(list, "list:") {
		return false
	}
	allowed := map[string]bool{"dev": true, "proc": true, "tmp": true}
	for _, p := range named {
		allowed[strings.Split(strings.TrimPrefix(p, "/"), "/")[0]] = true
	}
	for _, d := range systemDirs {
		allowed[strings.TrimPrefix(d, "/")] = true
	}
	for _, n := range strings.Split(strings.TrimPrefix(list, "list:"), ",") {
		if !allowed[n] {
			return false
		}
	}
	return true
}

// TestNetworkAndSockets: with Net false nothing outside the call is
// reachable: TCP, UDP, AF_VSOCK, io_uring, unix sockets of the host.
func TestNetworkAndSockets(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan struct{}, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- struct{}{}
			c.Close()
		}
	}()
	udp, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer udp.Close()
	gotUDP := make(chan struct{}, 16)
	go func() {
		buf := make([]byte, 64)
		for {
			if _, _, err := udp.ReadFrom(buf); err != nil {
				return
			}
			gotUDP <- struct{}{}
		}
	}()
	sockDir := t.TempDir()
	pathSock := filepath.Join(sockDir, "host.sock")
	ul, err := net.Listen("unix", pathSock)
	if err != nil {
		t.Fatal(err)
	}
	defer ul.Close()
	abstract := "b10x-test-" + strconv.Itoa(os.Getpid())
	al, err := net.Listen("unix", "@"+abstract)
	if err != nil {
		t.Fatal(err)
	}
	defer al.Close()

	tcpAddr := ln.Addr().String()
	udpAddr := udp.LocalAddr().String()
	for name, r := range runners(t) {
		ws := workspace(t)
		_, out, err := run(t, r, probeSpec(t, ws, "tcp:"+tcpAddr, "udp:"+udpAddr, "vsock", "vsock-high", "iouring", "unix:"+pathSock, "abstract:"+abstract, "tcp:1.1.1.1:53"))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		p := probes(out)
		t.Logf("%s: %v", name, p)
		for probe, want := range map[string]string{
			"tcp:" + tcpAddr:       "ECONNREFUSED", // the child's own loopback: nobody listens there
			"vsock":                "EPERM",
			"vsock-high":           "EPERM",
			"iouring":              "EPERM",
			"unix:" + pathSock:     "ENOENT",
			"abstract:" + abstract: "ECONNREFUSED", // another network namespace's abstract names
			"tcp:1.1.1.1:53":       "ENETUNREACH",
		} {
			if p[probe] != want {
				t.Errorf("%s: %s = %q, want %s", name, probe, p[probe], want)
			}
		}
		select {
		case <-accepted:
			t.Errorf("%s: the host's TCP listener accepted a connection from the child", name)
		case <-gotUDP:
			t.Errorf("%s: the host's UDP socket received a datagram from the child", name)
		case <-time.After(300 * time.Millisecond):
		}
	}

	// With Net true the host network is reachable (so the test above tells
	// something), and abstract sockets are still scoped where Landlock can.
	r := NewDirect(testOptions())
	ws := workspace(t)
	s := probeSpec(t, ws, "tcp:"+tcpAddr, "abstract:"+abstract)
	s.Net = true
	res, out, err := run(t, r, s)
	if err != nil {
		t.Fatal(err)
	}
	p := probes(out)
	if p["tcp:"+tcpAddr] != "ok" {
		t.Errorf("Net true: tcp to the host listener = %s, want ok", p["tcp:"+tcpAddr])
	}
	if hasLandlock(t) >= 6 && p["abstract:"+abstract] != "EPERM" {
		t.Errorf("Net true, Landlock ABI 6+: abstract unix connect = %s, want EPERM (scoped)", p["abstract:"+abstract])
	}
	if slices.Contains(res.Layers, confine.LayerNetNS) {
		t.Errorf("Net true: layers %v claim a network namespace", res.Layers)
	}
}

// TestSyscallFilter: what seccomp and Landlock deny inside, and that an
// x32 system call kills the program.
func TestSyscallFilter(t *testing.T) {
	host := exec.Command(lookPath(t, "sleep"), uniqueSleep())
	if err := host.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { host.Process.Kill(); host.Wait() }()
	hostPid := strconv.Itoa(host.Process.Pid)
	abi := hasLandlock(t)
	for name, r := range runners(t) {
		ws := workspace(t)
		victim := filepath.Join(ws, "victim")
		if err := os.WriteFile(victim, []byte("keep"), 0o644); err != nil {
			t.Fatal(err)
		}
		own(t, victim)
		res, out, err := run(t, r, probeSpec(t, ws, "ptrace:"+hostPid, "ptrace:1", "vmread:1", "kill:"+hostPid, "killall",
			"unshare-user", "clone-user", "clone3", "mount", "umount", "setns", "tiocsti", "tiocsti-high", "keyctl", "bpf",
			"hostname-write", "truncate:"+victim, "write:"+filepath.Join(ws, "ok")))
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("%s: %v %+v\n%s", name, err, res, out)
		}
		p := probes(out)
		want := map[string]string{
			"ptrace:" + hostPid: "EPERM", "ptrace:1": "EPERM", "vmread:1": "EPERM",
			"kill:" + hostPid: "ESRCH", // not even nameable from the PID namespace
			"killall":         "ESRCH", // nothing else in the namespace
			"unshare-user":    "EPERM", "clone-user": "EPERM", "clone3": "ENOSYS",
			"mount": "EPERM", "umount": "EPERM", "setns": "EPERM",
			"tiocsti": "EPERM", "tiocsti-high": "EPERM", "keyctl": "EPERM", "bpf": "EPERM",
			"write:" + filepath.Join(ws, "ok"): "ok",
		}
		if abi >= 1 {
			want["hostname-write"] = "EACCES" // Landlock: /proc is read-only for the child
		}
		if abi < 3 {
			want["truncate:"+victim] = "EPERM" // seccomp stands in for Landlock's truncate right
		} else {
			want["truncate:"+victim] = "ok"
		}
		for k, v := range want {
			if p[k] != v {
				t.Errorf("%s: %s = %q, want %s", name, k, p[k], v)
			}
		}
		if err := host.Process.Signal(syscall.Signal(0)); err != nil {
			t.Fatalf("%s: the host process outside the tree died: %v", name, err)
		}

		res, out, err = run(t, r, probeSpec(t, ws, "x32"))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if res.Signal != "SIGSYS" || strings.Contains(string(out.stdout.Bytes()), "x32=") {
			t.Errorf("%s: an x32 system call: %+v %s, want the program killed by SIGSYS", name, res, out)
		}
	}
}

// TestSetupErrorTargetNeverRuns: a step that fails before execve is a
// SetupError and the program, which would leave a marker, never runs.
func TestSetupErrorTargetNeverRuns(t *testing.T) {
	for name, r := range runners(t) {
		ws := workspace(t)
		markDir := own(t, t.TempDir())
		marker := filepath.Join(markDir, "ran")
		script := "echo ran > " + marker
		noexec := filepath.Join(ws, "not-executable")
		if err := os.WriteFile(noexec, []byte("#!/bin/sh\necho ran > "+marker+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		cases := []struct {
			what string
			spec func() Spec
			opt  Options
			step string
		}{
			{"nonexistent workspace", func() Spec {
				s := shSpec(t, ws, script)
				s.Workspace = Pinned{Path: filepath.Join(ws, "missing"), Dev: s.Workspace.Dev, Ino: s.Workspace.Ino, Dir: true}
				s.WritePaths = []Pinned{pin(t, markDir)}
				return s
			}, testOptions(), "bind " + filepath.Join(ws, "missing")},
			{"missing working directory", func() Spec {
				s := shSpec(t, ws, script)
				s.Dir = filepath.Join(ws, "missing")
				s.WritePaths = []Pinned{pin(t, markDir)}
				return s
			}, testOptions(), "chdir " + filepath.Join(ws, "missing")},
			{"program not executable", func() Spec {
				s := shSpec(t, ws, script)
				s.Program = pin(t, noexec)
				s.WritePaths = []Pinned{pin(t, markDir)}
				return s
			}, testOptions(), "exec " + noexec},
			{"required layer the host lacks", func() Spec {
				s := shSpec(t, ws, script)
				s.WritePaths = []Pinned{pin(t, markDir)}
				s.Limits.PidsMax = 10
				return s
			}, Options{Require: Requirements{Layers: []string{confine.LayerPidsLimit}, AllowMissing: testOptions().Require.AllowMissing}}, "requirements"},
		}
		for _, c := range cases {
			rr := r
			if name == "direct" {
				rr = NewDirect(c.opt)
			} else if c.opt.Require.Layers != nil {
				b, err := StartBroker(BrokerOptions{Require: c.opt.Require})
				if err != nil {
					t.Fatal(err)
				}
				defer b.Close()
				rr = b
			}
			res, out, err := run(t, rr, c.spec())
			var se *SetupError
			if !errors.As(err, &se) {
				t.Errorf("%s: %s: got %v (%+v), want a *SetupError\n%s", name, c.what, err, res, out)
				continue
			}
			if se.Step != c.step {
				t.Errorf("%s: %s: step %q, want %q (%v)", name, c.what, se.Step, c.step, err)
			}
			if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("%s: %s: the program ran (marker %s exists)", name, c.what, marker)
			}
			t.Logf("%s: %s: %v", name, c.what, err)
		}
		// And the same Spec, fixed, does run (the marker proves the
		// check above could fail).
		s := shSpec(t, ws, script)
		s.WritePaths = []Pinned{pin(t, markDir)}
		if _, out, err := run(t, r, s); err != nil {
			t.Fatalf("%s: control run: %v\n%s", name, err, out)
		}
		if _, err := os.Stat(marker); err != nil {
			t.Fatalf("%s: control run left no marker: %v", name, err)
		}
	}
}

// TestBadInput: clear one-line errors, no panic, nothing started.
func TestBadInput(t *testing.T) {
	ws := workspace(t)
	r := NewDirect(testOptions())
	good := shSpec(t, ws, "true")
	cases := map[string]func(Spec) Spec{
		"relative program":   func(s Spec) Spec { s.Program.Path = "sh"; return s },
		"empty argv":         func(s Spec) Spec { s.Argv = nil; return s },
		"NUL in argv":        func(s Spec) Spec { s.Argv = []string{"sh", "a\x00b"}; return s },
		"NUL in env":         func(s Spec) Spec { s.Env = []string{"A=\x00"}; return s },
		"env without =":      func(s Spec) Spec { s.Env = []string{"A"}; return s },
		"relative dir":       func(s Spec) Spec { s.Dir = "x"; return s },
		"no workspace":       func(s Spec) Spec { s.Workspace = Pinned{}; return s },
		"unpinned workspace": func(s Spec) Spec { s.Workspace = Pinned{Path: ws, Dir: true}; return s },
		"file as workspace":  func(s Spec) Spec { s.Workspace.Dir = false; return s },
		"negative timeout":   func(s Spec) Spec { s.Timeout = -1; return s },
		"root as read path":  func(s Spec) Spec { s.ReadPaths = []Pinned{{Path: "/", Ino: 2, Dir: true}}; return s },
		"proc write path":    func(s Spec) Spec { s.WritePaths = []Pinned{{Path: "/proc/1", Ino: 2, Dir: true}}; return s },
		"relative read":      func(s Spec) Spec { s.ReadPaths = []Pinned{{Path: "etc", Ino: 2, Dir: true}}; return s },
		"unclean read":       func(s Spec) Spec { s.ReadPaths = []Pinned{{Path: "/etc/../etc", Ino: 2, Dir: true}}; return s },
		"unpinned write":     func(s Spec) Spec { s.WritePaths = []Pinned{{Path: "/tmp"}}; return s },
	}
	for what, mut := range cases {
		_, err := r.Run(context.Background(), mut(good), Stdio{})
		if err == nil {
			t.Errorf("%s: no error", what)
			continue
		}
		if strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: error spans lines: %q", what, err)
		}
		t.Logf("%s: %v", what, err)
	}
}

// TestLargeEnvironment: a plan larger than a pipe holds (here 300 KiB of
// environment) still reaches the helper whole.
func TestLargeEnvironment(t *testing.T) {
	requireSpawn(t)
	ws := workspace(t)
	var env []string
	for i := 0; i < 300; i++ {
		env = append(env, "V"+strconv.Itoa(i)+"="+strings.Repeat(string(rune('a'+i%26)), 1024))
	}
	s := probeSpec(t, ws, "env")
	s.Env = env
	res, out, err := run(t, NewDirect(testOptions()), s)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("%v %+v", err, res)
	}
	line := strings.TrimSpace(string(out.stdout.Bytes()))
	fields := strings.Split(strings.TrimSuffix(strings.TrimPrefix(line, "env="), ","), ",")
	if len(fields) != len(env) {
		t.Fatalf("the child got %d variables, want %d", len(fields), len(env))
	}
	last, _ := hex.DecodeString(fields[len(fields)-1])
	if string(last) != env[len(env)-1] {
		t.Fatalf("last variable differs")
	}
}

// TestFailsClosedWithoutNamespaces: where no namespace can be made (the
// no-userns shape: unprivileged, user namespaces refused), a call fails at
// its clone step and the program, which would leave a marker, never runs;
// everywhere else the same call runs.
func TestFailsClosedWithoutNamespaces(t *testing.T) {
	ws := workspace(t)
	marker := filepath.Join(ws, "ran")
	_, out, err := run(t, NewDirect(testOptions()), shSpec(t, ws, "echo ran > "+marker))
	_, statErr := os.Stat(marker)
	if testenv.Shape() == testenv.ShapeNoUserns {
		var se *SetupError
		if !errors.As(err, &se) || se.Step != "clone" {
			t.Fatalf("no namespaces here: got %v, want a SetupError at clone\n%s", err, out)
		}
		if statErr == nil {
			t.Fatal("the program ran without its namespaces")
		}
		t.Logf("fails closed: %v", err)
		return
	}
	if err != nil || statErr != nil {
		t.Fatalf("the call should run here: %v, marker: %v\n%s", err, statErr, out)
	}
}

// TestTmpSize: the child's /tmp and /dev/shm are each capped by
// Spec.TmpSize (a write below the cap succeeds, one past it gets ENOSPC),
// and the zero value gives DefaultTmpSize.
func TestTmpSize(t *testing.T) {
	const mib = 1 << 20
	script := `for d in /tmp /dev/shm; do
  dd if=/dev/zero of=$d/below bs=1048576 count=3 2>/dev/null; echo "$d below=$?"
  rm -f $d/below
  dd if=/dev/zero of=$d/past bs=1048576 count=6 2>&1 | grep -c 'No space left' | sed "s|^|$d enospc=|"
  rm -f $d/past
  i=0; while [ $i -lt 1100 ]; do echo -n 2>/dev/null >$d/f$i || break; i=$((i+1)); done; echo "$d files=$i"
  rm -f $d/f*
done
grep -E ' /(tmp|dev/shm) tmpfs ' /proc/mounts`
	for name, r := range runners(t) {
		ws := workspace(t)
		s := shSpec(t, ws, script)
		s.TmpSize = 4 * mib
		res, out, err := run(t, r, s)
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("%s: %v %+v\n%s", name, err, res, out)
		}
		got := string(out.stdout.Bytes())
		// 4 MiB gives 1024 inodes (one per 4 KiB, the floor): a little
		// fewer files can be made, never 1100.
		for _, d := range []string{"/tmp", "/dev/shm"} {
			_, rest, _ := strings.Cut(got, d+" files=")
			n, _ := strconv.Atoi(strings.SplitN(rest, "\n", 2)[0])
			if n < 1000 || n > 1024 {
				t.Errorf("%s: %s took %d empty files, want the 1024-inode cap to stop it", name, d, n)
			}
		}
		for _, want := range []string{"/tmp below=0\n", "/tmp enospc=1\n", "/dev/shm below=0\n", "/dev/shm enospc=1\n", " /tmp tmpfs ", "size=4096k", " /dev/shm tmpfs ", "nr_inodes=1024"} {
			if !strings.Contains(got, want) {
				t.Errorf("%s: with TmpSize 4 MiB, want %q in the child's output\n%s", name, want, out)
			}
		}
		if n := strings.Count(got, "size=4096k"); n != 2 {
			t.Errorf("%s: want both /tmp and /dev/shm capped at 4096k, %d are\n%s", name, n, out)
		}

		s = shSpec(t, ws, `grep -E ' /(tmp|dev/shm) tmpfs ' /proc/mounts`)
		res, out, err = run(t, r, s)
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("%s: %v %+v\n%s", name, err, res, out)
		}
		want := "size=" + strconv.FormatInt(DefaultTmpSize>>10, 10) + "k"
		if n := strings.Count(string(out.stdout.Bytes()), want); n != 2 {
			t.Errorf("%s: with TmpSize 0, want /tmp and /dev/shm capped at DefaultTmpSize (%s), %d are\n%s", name, want, n, out)
		}
	}
	if _, err := NewDirect(testOptions()).Run(context.Background(), Spec{Program: pin(t, "/bin/true"), Argv: []string{"true"}, Dir: "/", Workspace: pin(t, workspace(t)), TmpSize: -1}, Stdio{}); err == nil || !strings.Contains(err.Error(), "TmpSize") {
		t.Errorf("a negative TmpSize: want an error naming it, got %v", err)
	}
}
