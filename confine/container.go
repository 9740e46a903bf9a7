package confine

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strings"
)

// Container is what DetectContainer found of a container runtime around
// the harness. The zero value means none was found, which does not prove
// there is none: a runtime that leaves no mark is not seen.
type Container struct {
	// Runtime is "kubernetes", "podman", "docker", "lxc",
	// "systemd-nspawn" or "container" (a container of unknown kind); ""
	// when none was found.
	Runtime string `json:"runtime,omitempty"`
	// Evidence is the file, variable or cgroup path that told.
	Evidence string `json:"evidence,omitempty"`
}

// DetectContainer looks for the marks container runtimes leave: the
// Kubernetes service account and variables, podman's /run/.containerenv,
// docker's /.dockerenv, the "container" variable that lxc, podman and
// systemd-nspawn set for PID 1 (read from /proc/1/environ when this
// process may), and runtime names in /proc/1/cgroup. It reads files and
// the environment only; it never fails.
func DetectContainer() Container { return detectContainer("/", os.Getenv) }

// detectContainer is DetectContainer beneath root, with getenv for the
// environment (tests give a fake tree).
func detectContainer(root string, getenv func(string) string) Container {
	at := func(p string) string { return filepath.Join(root, p) }
	exists := func(p string) bool { _, err := os.Lstat(at(p)); return err == nil }
	if getenv("KUBERNETES_SERVICE_HOST") != "" {
		return Container{"kubernetes", "KUBERNETES_SERVICE_HOST is set"}
	}
	if exists("/var/run/secrets/kubernetes.io") {
		return Container{"kubernetes", "/var/run/secrets/kubernetes.io exists"}
	}
	if b, err := os.ReadFile(at("/run/.containerenv")); err == nil {
		ev := "/run/.containerenv exists"
		if bytes.Contains(b, []byte("rootless=1")) {
			ev += " (rootless)"
		}
		return Container{"podman", ev}
	}
	if exists("/.dockerenv") {
		return Container{"docker", "/.dockerenv exists"}
	}
	kind := getenv("container")
	ev := "the container variable is set"
	if kind == "" {
		if b, err := os.ReadFile(at("/proc/1/environ")); err == nil {
			for _, kv := range bytes.Split(b, []byte{0}) {
				if v, ok := bytes.CutPrefix(kv, []byte("container=")); ok {
					kind, ev = string(v), "PID 1's container variable is set"
				}
			}
		}
	}
	switch kind {
	case "":
	case "podman", "docker", "lxc", "systemd-nspawn":
		return Container{kind, ev}
	default:
		return Container{"container", ev + " (" + kind + ")"}
	}
	if b, err := os.ReadFile(at("/proc/1/cgroup")); err == nil {
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			l := sc.Text()
			for _, m := range []struct{ word, runtime string }{
				{"kubepods", "kubernetes"}, {"libpod", "podman"}, {"docker", "docker"},
				{"containerd", "container"}, {"crio", "container"}, {"lxc", "lxc"},
			} {
				if strings.Contains(l, m.word) {
					return Container{m.runtime, "/proc/1/cgroup names " + m.word}
				}
			}
		}
	}
	return Container{}
}

// Fix says how to get layer inside c's kind of container, or "" when the
// host's remedy (Layer.Remedy) is the only one: the kernel's own features
// (Landlock, cgroup controllers) cannot be granted by a container.
func (c Container) Fix(layer string, landlockBlocked bool) string {
	profile := "deploy/seccomp/b10x-harness.json (the project's profile: the runtime's default and what the harness needs)"
	var runtimeFix, cgroupFix string
	switch c.Runtime {
	case "":
		return ""
	case "kubernetes":
		runtimeFix = "in the pod's securityContext, seccompProfile {type: Localhost, localhostProfile: b10x-harness.json} with " +
			profile + ", installed on each node under /var/lib/kubelet/seccomp/; where AppArmor confines pods, an AppArmor profile that allows mounts in user namespaces"
		cgroupFix = "an unprivileged pod gets no writable cgroup: the pod's own resources.limits bound every call together"
	case "podman", "docker":
		runtimeFix = c.Runtime + " run --security-opt seccomp=" + profile +
			"; where AppArmor confines containers, also --security-opt apparmor=unconfined"
		cgroupFix = "on a cgroup v2 host, " + c.Runtime + " run --cgroupns=private with /sys/fs/cgroup writable in the container; otherwise the container's own limits bound every call together"
	default:
		runtimeFix = "allow clone(CLONE_NEWUSER and the other namespace flags), mount in a user namespace, seccomp(2) and the landlock_* calls in the runtime's seccomp and AppArmor policies (see " + profile + ")"
		cgroupFix = "a cgroup namespace with a writable, delegated cgroup2 mount; otherwise the container's own limits bound every call together"
	}
	switch layer {
	case LayerUserNS, LayerPidNS, LayerMountNS, LayerNetNS, LayerIPCNS, LayerUTSNS, LayerNoNewPrivs, LayerSeccomp:
		return runtimeFix
	case LayerLandlockSelf, LayerLandlockChild:
		if landlockBlocked {
			return runtimeFix
		}
		return ""
	case LayerCgroupLeaf, LayerPidsLimit, LayerMemoryLimit, LayerCPULimit:
		return cgroupFix
	}
	return ""
}
