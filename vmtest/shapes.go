package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/b10x/harness/vmtest/internal/protocol"
)

// shapeDoc says in one line what each shape is, for -help and the summary.
var shapeDoc = map[string]string{
	protocol.ShapeHost:       "this machine, no VM: go test of the same packages",
	protocol.ShapeDebian61:   "Debian 12 kernel, pure cgroup v2 with every controller, Landlock on",
	protocol.ShapeDebian612:  "as debian-6.1 on the 6.12 kernel of bookworm-backports: Landlock ABI 6, with TCP rights and scoped abstract sockets and signals",
	protocol.ShapeDebian618:  "as debian-6.1 on the 6.18 kernel of trixie-backports, booted with audit=1: Landlock ABI 7, whose denials the kernel logs as audit records",
	protocol.ShapeNoLandlock: "same kernel booted with an lsm= list without landlock",
	protocol.ShapeNoUserns:   "same kernel, user.max_user_namespaces=0, tests run as uid 1000 in a delegated cgroup",
	protocol.ShapeCgroupV1:   "same kernel, cgroup v1 hierarchies only, no cgroup2 anywhere",
	protocol.ShapeK8sNode:    "a Kubernetes node: debian-6.18's kernel without audit, pure cgroup v2 for the kubelet, veth and overlay loaded; only when named, with make k8stest's payload",
	protocol.ShapeOrdinary:   "an ordinary host: as debian-6.1, but the tests are told they run on the host and derive their expectations from the machine",
}

// parseShapes turns the -shapes flag into a list. "all" means the VM
// shapes: make test runs the host suite itself just before make vmtest.
// "none" selects nothing (for -selftest alone).
func parseShapes(s string) ([]string, error) {
	known := append([]string{protocol.ShapeHost}, protocol.KnownVMShapes()...)
	var out []string
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		switch {
		case f == "" || f == "none":
			continue
		case f == "all":
			for _, v := range protocol.VMShapes {
				if !slices.Contains(out, v) {
					out = append(out, v)
				}
			}
		case slices.Contains(known, f):
			if !slices.Contains(out, f) {
				out = append(out, f)
			}
		default:
			return nil, fmt.Errorf("unknown shape %q (known: all, %s)", f, strings.Join(known, ", "))
		}
	}
	if len(out) == 0 && !strings.Contains(s, "none") {
		return nil, fmt.Errorf("no shape in %q (say none to boot only the -selftest guest)", s)
	}
	return out, nil
}

// baseCmdline is common to every boot. loglevel=1 keeps kernel messages
// (an OOM kill, say) from splitting the tests' lines on the console;
// panic=-1 with qemu's -no-reboot turns a kernel panic into a quick exit.
var baseCmdline = []string{"console=ttyS0", "loglevel=1", "panic=-1"}

// cmdline is the kernel command line that boots shape. defaultLSM is the
// kernel's CONFIG_LSM, from which no-landlock drops landlock.
func cmdline(shape, defaultLSM string) (string, error) {
	words := slices.Clone(baseCmdline)
	switch shape {
	case protocol.ShapeDebian61, protocol.ShapeDebian612, protocol.ShapeNoUserns, protocol.ShapeCgroupV1, protocol.ShapeOrdinary, protocol.ShapeProbe, protocol.ShapeK8sNode:
	case protocol.ShapeDebian618:
		// The kernel logs Landlock's denials only while its audit is
		// enabled; no audit daemon runs in the guest to enable it.
		words = append(words, "audit=1")
	case protocol.ShapeNoLandlock:
		lsms := strings.Split(defaultLSM, ",")
		if defaultLSM == "" || !slices.Contains(lsms, "landlock") {
			return "", fmt.Errorf("shape %s: the kernel's CONFIG_LSM %q does not list landlock, so dropping it proves nothing", shape, defaultLSM)
		}
		lsms = slices.DeleteFunc(lsms, func(l string) bool { return l == "landlock" })
		words = append(words, "lsm="+strings.Join(lsms, ","))
	default:
		return "", fmt.Errorf("shape %q has no VM", shape)
	}
	return strings.Join(append(words, "--", shape), " "), nil
}

// shapeSeries is the kernel series a shape boots: 6.12 for debian-6.12,
// 6.18 for debian-6.18, Debian 12's own 6.1 for every other.
func shapeSeries(shape string) kernelSeries {
	switch shape {
	case protocol.ShapeDebian612:
		return series612
	case protocol.ShapeDebian618, protocol.ShapeK8sNode:
		return series618
	}
	return series61
}

// shapeCPUs is the number of guest CPUs a shape boots with: cpus, except
// debian-6.12 under TCG, which gets one. With two vCPUs under TCG its
// kernel panicked in set_next_task_fair on code it was patching at that
// moment (an int3, then a stray byte, at the faulting RIP), in two of
// about six runs on this host: the kernel patches its text while other
// CPUs run it, which multi-threaded TCG does not make safe. With one vCPU
// nothing runs the text while it is patched. docs/decisions/0064.
//
// debian-6.18 gets one too: its kernel patches its text the same way.
func shapeCPUs(shape, accel string, cpus int) int {
	if (shape == protocol.ShapeDebian612 || shape == protocol.ShapeDebian618 || shape == protocol.ShapeK8sNode) && accel == "tcg" {
		return 1
	}
	return cpus
}

// nodeMemMiB is the least memory the k8s-node shape boots with: the
// cluster's programs (about 400 MiB) live in the initramfs, and etcd, the
// API server, the controllers, containerd, the kubelet and three pods
// run beside them.
const nodeMemMiB = 6144

// shapeMem is the guest memory a shape boots with: mem, or more for the
// k8s-node shape.
func shapeMem(shape string, mem int) int {
	if shape == protocol.ShapeK8sNode && mem < nodeMemMiB {
		return nodeMemMiB
	}
	return mem
}
