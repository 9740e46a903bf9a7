//go:build k8stest

package k8stest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/b10x/harness/internal/mountinfo"
)

// Where make k8stest's payload puts things in the guest
// (scripts/k8stest.sh), and where the node keeps its state.
const (
	binDir    = "/opt/k8s/bin"    // every program of the cluster
	rootfsDir = "/opt/k8s/rootfs" // the harness image's tree (deploy/build-image.sh)
	deployDir = "/opt/k8s/deploy" // deploy/k8s and deploy/seccomp
	// ciRootfsDir is the image's tree with make and its C library, for
	// the CI step's image (ciImage).
	ciRootfsDir = "/opt/k8s/ci-rootfs"
	ciImage     = "localhost/b10x-harness-ci:dev"
	stateDir    = "/var/lib" // a fresh tmpfs: etcd, containerd, the kubelet
	workDir     = "/var/lib/k8stest"
	nodeName    = "node"
)

var (
	// nodeIP is the node's address: on lo, since the guest has no network
	// device (the kubelet refuses a loopback address as the node's). Pods
	// reach the API server on it through their ptp link.
	nodeIP    = net.ParseIP("10.200.0.1")
	serviceIP = net.ParseIP("10.96.0.1")
)

const (
	adminToken = "k8stest-admin-token"
	nodeToken  = "k8stest-node-token"
)

// node is the running single-node cluster.
type node struct {
	t      *testing.T
	pki    pki
	procs  []*proc
	mounts map[string]bool // the guest's mounts before the node's
}

// proc is one of the cluster's programs, its output in a log file.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error
}

func (n *node) start(name string, args ...string) *proc {
	n.t.Helper()
	log := filepath.Join(workDir, "logs", name+".log")
	f, err := os.Create(log)
	if err != nil {
		n.t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(binDir, name), args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = append(os.Environ(), "PATH="+binDir+":/usr/bin:/usr/sbin:/bin:/sbin")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		n.t.Fatalf("start %s: %v", name, err)
	}
	p := &proc{name: name, cmd: cmd, log: log, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	n.procs = append(n.procs, p)
	return p
}

// stop ends every program, the last started first, then what they left:
// the pods' processes (containerd's shims outlive containerd), the
// kubelet's cgroups, the mounts of the node's state and its address. The
// guest init checks that nothing is left.
func (n *node) stop() {
	n.stopProcs()
	killOthers()
	removeCgroups("/sys/fs/cgroup/kubepods")
	if ms, err := mountTargets(); err == nil {
		for i := len(ms) - 1; i >= 0; i-- {
			if !n.mounts[ms[i]] {
				if err := syscall.Unmount(ms[i], syscall.MNT_DETACH); err != nil {
					n.t.Errorf("unmount %s: %v", ms[i], err)
				}
			}
		}
	}
	_, _ = run("ip", "addr", "del", nodeIP.String()+"/32", "dev", "lo")
}

// killOthers kills every process but this one, init and the kernel's
// threads, and waits for them to go.
func killOthers() {
	for range 50 {
		left := 0
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil || pid == 1 || pid == os.Getpid() {
				continue
			}
			if b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline"); err != nil || len(b) == 0 {
				continue // a kernel thread, or gone
			}
			if b, _ := os.ReadFile("/proc/" + e.Name() + "/stat"); strings.Contains(string(b), ") Z ") {
				continue // a zombie: its parent reaps it
			}
			left++
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		if left == 0 {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// removeCgroups kills what is in the cgroup tree at dir and removes it,
// the deepest first.
func removeCgroups(dir string) {
	var dirs []string
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	for i := len(dirs) - 1; i >= 0; i-- {
		_ = os.WriteFile(filepath.Join(dirs[i], "cgroup.kill"), []byte("1"), 0)
		for range 50 {
			if err := os.Remove(dirs[i]); err == nil || errors.Is(err, os.ErrNotExist) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// mountTargets lists the mount points in /proc/self/mountinfo's order
// (a mount after the one it is mounted on).
func mountTargets() ([]string, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if f := strings.Fields(line); len(f) > 4 {
			out = append(out, mountinfo.Unescape(f[4]))
		}
	}
	return out, nil
}

func (n *node) stopProcs() {
	for i := len(n.procs) - 1; i >= 0; i-- {
		p := n.procs[i]
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(20 * time.Second):
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
			<-p.done
		}
	}
}

// tail is the end of a program's log, for a failure's message.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// waitFor polls ok until it returns nil, a program of the node exits, or
// the deadline passes; the failure names what was awaited and shows the
// logs of the programs.
func (n *node) waitFor(what string, d time.Duration, ok func() error) {
	n.t.Helper()
	deadline := time.Now().Add(d)
	start := time.Now()
	var last error
	for time.Now().Before(deadline) {
		if last = ok(); last == nil {
			n.t.Logf("%s after %.1fs", what, time.Since(start).Seconds())
			return
		}
		for _, p := range n.procs {
			select {
			case <-p.done:
				n.t.Fatalf("waiting for %s: %s exited (%v):\n%s", what, p.name, p.err, tail(p.log, 40))
			default:
			}
		}
		time.Sleep(time.Second)
	}
	var logs strings.Builder
	for _, p := range n.procs {
		fmt.Fprintf(&logs, "--- %s\n%s\n", p.name, tail(p.log, 25))
	}
	n.t.Fatalf("%s: not within %s: %v\n%s", what, d, last, logs.String())
}

func run(name string, args ...string) (string, error) {
	return runIn("", name, args...)
}

// runIn runs a program with stdin and returns its output.
func runIn(stdin, name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

func mustRun(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := run(name, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// kubeconfig writes a kubeconfig for token at path.
func (n *node) kubeconfig(t *testing.T, path, user, token string) {
	writeFile(t, path, fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: k8stest
  cluster:
    server: https://127.0.0.1:6443
    certificate-authority: %s
users:
- name: %s
  user:
    token: %s
contexts:
- name: k8stest
  context: {cluster: k8stest, user: %s}
current-context: k8stest
`, n.pki.path("ca.crt"), user, token, user))
}

// kubectl runs kubectl as the cluster's administrator.
func kubectl(args ...string) (string, error) {
	return run(filepath.Join(binDir, "kubectl"), append([]string{"--kubeconfig", filepath.Join(workDir, "admin.kubeconfig")}, args...)...)
}

func mustKubectl(t *testing.T, args ...string) string {
	t.Helper()
	out, err := kubectl(args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// prepareHost makes the node's file systems and address.
func prepareHost(t *testing.T) {
	if err := os.MkdirAll(stateDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", stateDir, "tmpfs", 0, "mode=0755"); err != nil {
		t.Fatalf("mount a tmpfs on %s: %v", stateDir, err)
	}
	for _, d := range []string{workDir + "/logs", "/etc/cni/net.d", "/var/lib/kubelet/seccomp", "/run/containerd"} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	mustRun(t, "ip", "addr", "add", nodeIP.String()+"/32", "dev", "lo")
	// What the kubelet and CNI expect of a node: a resolv.conf (pods get
	// a copy), forwarding for the pods' links.
	writeFile(t, "/etc/resolv.conf", "nameserver 127.0.0.1\n")
	for k, v := range map[string]string{"net/ipv4/ip_forward": "1", "vm/overcommit_memory": "1", "kernel/panic": "10", "kernel/panic_on_oops": "1"} {
		if err := os.WriteFile("/proc/sys/"+k, []byte(v), 0); err != nil {
			t.Fatalf("sysctl %s: %v", k, err)
		}
	}
}

// startNode brings the cluster up and waits until the node is Ready.
func startNode(t *testing.T) *node {
	n := &node{t: t, mounts: map[string]bool{}}
	ms, err := mountTargets()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		n.mounts[m] = true
	}
	t.Cleanup(n.stop)
	prepareHost(t)
	n.pki = newPKI(t, filepath.Join(workDir, "pki"), nodeIP, serviceIP)
	writeFile(t, filepath.Join(workDir, "tokens.csv"),
		adminToken+",admin,admin,system:masters\n"+
			nodeToken+",system:node:"+nodeName+",node,system:nodes\n")
	n.kubeconfig(t, filepath.Join(workDir, "admin.kubeconfig"), "admin", adminToken)
	n.kubeconfig(t, filepath.Join(workDir, "kubelet.kubeconfig"), "system:node:"+nodeName, nodeToken)

	n.start("etcd", "--name", "default", "--data-dir", stateDir+"/etcd",
		"--listen-client-urls", "http://127.0.0.1:2379", "--advertise-client-urls", "http://127.0.0.1:2379",
		"--listen-peer-urls", "http://127.0.0.1:2380", "--initial-advertise-peer-urls", "http://127.0.0.1:2380",
		"--initial-cluster", "default=http://127.0.0.1:2380", "--log-level", "warn")
	n.waitFor("etcd healthy", 2*time.Minute, func() error { return httpOK("http://127.0.0.1:2379/health", "") })
	n.startAPIServer()
	n.waitFor("kube-apiserver ready", 5*time.Minute, func() error { return httpOK("https://127.0.0.1:6443/readyz", adminToken) })
	admin := filepath.Join(workDir, "admin.kubeconfig")
	n.start("kube-controller-manager", "--kubeconfig", admin, "--leader-elect=false",
		"--service-account-private-key-file", n.pki.path("sa.key"), "--root-ca-file", n.pki.path("ca.crt"),
		"--use-service-account-credentials=false", "--controllers=*,-nodeipam,-csrsigning,-csrapproving,-bootstrapsigner,-tokencleaner")
	n.start("kube-scheduler", "--kubeconfig", admin, "--leader-elect=false")
	n.startContainerd()
	n.waitFor("containerd serving", 2*time.Minute, func() error {
		_, err := run(filepath.Join(binDir, "ctr"), "--address", "/run/containerd/containerd.sock", "version")
		return err
	})
	n.importImages()
	n.startKubelet()
	n.waitFor("node Ready", 5*time.Minute, func() error {
		out, err := kubectl("get", "node", nodeName, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
		if err != nil {
			return err
		}
		if strings.TrimSpace(out) != "True" {
			return fmt.Errorf("Ready is %q", out)
		}
		return nil
	})
	n.waitFor("the default service account", 2*time.Minute, func() error {
		_, err := kubectl("get", "serviceaccount", "default", "-n", "default")
		return err
	})
	return n
}

// httpOK GETs url (with a bearer token, trusting the cluster's CA) and
// wants 200.
func httpOK(url, token string) error {
	client := &http.Client{Timeout: 5 * time.Second}
	if strings.HasPrefix(url, "https:") {
		pool := x509.NewCertPool()
		ca, err := os.ReadFile(filepath.Join(workDir, "pki", "ca.crt"))
		if err != nil {
			return err
		}
		pool.AppendCertsFromPEM(ca)
		client.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}
	}
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return errors.New(resp.Status)
	}
	return nil
}

func (n *node) startAPIServer() {
	p := n.pki
	n.start("kube-apiserver",
		"--etcd-servers", "http://127.0.0.1:2379",
		"--bind-address", "0.0.0.0", "--advertise-address", nodeIP.String(), "--secure-port", "6443",
		"--tls-cert-file", p.path("apiserver.crt"), "--tls-private-key-file", p.path("apiserver.key"),
		"--client-ca-file", p.path("ca.crt"),
		"--token-auth-file", filepath.Join(workDir, "tokens.csv"),
		"--authorization-mode", "Node,RBAC",
		"--service-account-issuer", "https://kubernetes.default.svc",
		"--service-account-key-file", p.path("sa.pub"), "--service-account-signing-key-file", p.path("sa.key"),
		"--service-cluster-ip-range", "10.96.0.0/24",
		"--kubelet-client-certificate", p.path("kubelet-client.crt"), "--kubelet-client-key", p.path("kubelet-client.key"),
		"--kubelet-preferred-address-types", "InternalIP",
		"--profiling=false")
}

func (n *node) startContainerd() {
	writeFile(n.t, filepath.Join(workDir, "containerd.toml"), fmt.Sprintf(`version = 3
root = "%[1]s/containerd"
state = "/run/containerd"
[grpc]
  address = "/run/containerd/containerd.sock"
[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
[plugins.'io.containerd.cri.v1.images'.pinned_images]
  sandbox = "localhost/pause:k8stest"
[plugins.'io.containerd.cri.v1.runtime']
  enable_unprivileged_ports = false
  enable_unprivileged_icmp = false
[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
  BinaryName = "%[2]s/runc"
  SystemdCgroup = false
[plugins.'io.containerd.cri.v1.runtime'.cni]
  bin_dirs = ["%[2]s"]
  conf_dir = "/etc/cni/net.d"
`, stateDir, binDir))
	writeFile(n.t, "/etc/cni/net.d/10-k8stest.conflist", `{
  "cniVersion": "1.0.0",
  "name": "k8stest",
  "plugins": [{
    "type": "ptp",
    "ipMasq": false,
    "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.88.0.0/16"}]], "routes": [{"dst": "0.0.0.0/0"}], "dataDir": "/var/lib/cni/networks"}
  }]
}
`)
	n.start("containerd", "--config", filepath.Join(workDir, "containerd.toml"))
}

// importImages writes the pause image and the harness's image and imports
// them into containerd's k8s.io namespace.
func (n *node) importImages() {
	t := n.t
	pause := filepath.Join(workDir, "pause-root")
	if err := os.MkdirAll(pause, 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(binDir, "pause"))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(pause, "pause"), string(b))
	if err := os.Chmod(filepath.Join(pause, "pause"), 0o755); err != nil {
		t.Fatal(err)
	}
	images := []ociImage{
		{Name: ciImage, Root: ciRootfsDir, Entrypoint: []string{"/usr/local/bin/b10x-harness"},
			Env: []string{"PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"}, WorkingDir: "/workspace"},
		{Name: "localhost/pause:k8stest", Root: pause, Entrypoint: []string{"/pause"}},
		{Name: "localhost/b10x-harness:dev", Root: rootfsDir, Entrypoint: []string{"/usr/local/bin/b10x-harness"}, Cmd: []string{"doctor"},
			Env: []string{"PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"}, WorkingDir: "/workspace"},
	}
	for _, img := range images {
		out := filepath.Join(workDir, strings.NewReplacer("/", "_", ":", "_").Replace(img.Name)+".tar")
		if err := writeOCIArchive(out, img); err != nil {
			t.Fatal(err)
		}
		mustRun(t, filepath.Join(binDir, "ctr"), "--address", "/run/containerd/containerd.sock", "-n", "k8s.io", "images", "import", out)
	}
}

func (n *node) startKubelet() {
	t := n.t
	seccomp, err := os.ReadFile(filepath.Join(deployDir, "seccomp", "b10x-harness.json"))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, "/var/lib/kubelet/seccomp/b10x-harness.json", string(seccomp))
	writeFile(t, filepath.Join(workDir, "kubelet.yaml"), fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: %s}
authorization: {mode: AlwaysAllow}
cgroupDriver: cgroupfs
containerRuntimeEndpoint: unix:///run/containerd/containerd.sock
# pids.max of each pod's cgroup: the harness's limits_from = "enclosing"
# reads it, and strict mode wants it set.
podPidsLimit: %d
failSwapOn: false
resolvConf: /etc/resolv.conf
readOnlyPort: 0
rotateCertificates: false
serializeImagePulls: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "50Mi", nodefs.available: "1%%", imagefs.available: "1%%", nodefs.inodesFree: "1%%"}
`, n.pki.path("ca.crt"), podPidsLimit))
	n.start("kubelet", "--config", filepath.Join(workDir, "kubelet.yaml"),
		"--kubeconfig", filepath.Join(workDir, "kubelet.kubeconfig"),
		"--hostname-override", nodeName, "--node-ip", nodeIP.String())
}

// podPidsLimit is the kubelet's pids.max for every pod.
const podPidsLimit = 512
