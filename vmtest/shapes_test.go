package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/b10x/harness/internal/testenv"
	"github.com/b10x/harness/vmtest/internal/protocol"
)

// debianLSM is CONFIG_LSM of Debian 12's 6.1 kernels (linux-image-6.1.0-57-amd64).
const debianLSM = "landlock,lockdown,yama,loadpin,safesetid,integrity,apparmor,selinux,smack,tomoyo,bpf"

func TestCmdlinePerShape(t *testing.T) {
	for shape, want := range map[string]string{
		protocol.ShapeDebian61:   "console=ttyS0 loglevel=1 panic=-1 -- debian-6.1",
		protocol.ShapeDebian612:  "console=ttyS0 loglevel=1 panic=-1 -- debian-6.12",
		protocol.ShapeDebian618:  "console=ttyS0 loglevel=1 panic=-1 audit=1 -- debian-6.18",
		protocol.ShapeNoUserns:   "console=ttyS0 loglevel=1 panic=-1 -- no-userns",
		protocol.ShapeCgroupV1:   "console=ttyS0 loglevel=1 panic=-1 -- cgroup-v1",
		protocol.ShapeOrdinary:   "console=ttyS0 loglevel=1 panic=-1 -- ordinary",
		protocol.ShapeNoLandlock: "console=ttyS0 loglevel=1 panic=-1 lsm=lockdown,yama,loadpin,safesetid,integrity,apparmor,selinux,smack,tomoyo,bpf -- no-landlock",
		protocol.ShapeProbe:      "console=ttyS0 loglevel=1 panic=-1 -- probe",
	} {
		got, err := cmdline(shape, debianLSM)
		if err != nil {
			t.Errorf("%s: %v", shape, err)
			continue
		}
		if got != want {
			t.Errorf("%s:\n got %q\nwant %q", shape, got, want)
		}
		// The shape is the only word after "--": it reaches init as its one argument.
		if _, after, _ := strings.Cut(got, " -- "); after != shape {
			t.Errorf("%s: words after -- are %q", shape, after)
		}
	}
}

func TestCmdlineRefusals(t *testing.T) {
	for _, tc := range []struct{ shape, lsm, want string }{
		{protocol.ShapeNoLandlock, "lockdown,yama,apparmor", "does not list landlock"},
		{protocol.ShapeNoLandlock, "", "does not list landlock"},
		{protocol.ShapeHost, debianLSM, "has no VM"},
		{"debian-6.2", debianLSM, "has no VM"},
	} {
		if _, err := cmdline(tc.shape, tc.lsm); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("cmdline(%q, %q) = %v, want an error containing %q", tc.shape, tc.lsm, err, tc.want)
		}
	}
}

func TestParseShapes(t *testing.T) {
	for in, want := range map[string][]string{
		"all":                     protocol.VMShapes,
		"host,all":                append([]string{"host"}, protocol.VMShapes...),
		"debian-6.1, no-landlock": {"debian-6.1", "no-landlock"},
		"cgroup-v1,cgroup-v1":     {"cgroup-v1"},
		"none":                    nil,
	} {
		got, err := parseShapes(in)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("parseShapes(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "debian", "all,bogus", ","} {
		if got, err := parseShapes(in); err == nil {
			t.Errorf("parseShapes(%q) = %q, want an error", in, got)
		}
	}
}

// The guest and the tests must agree on the shape names.
func TestShapeNamesMatchTestenv(t *testing.T) {
	pairs := [][2]string{
		{protocol.ShapeHost, testenv.ShapeHost},
		{protocol.ShapeDebian61, testenv.ShapeDebian61},
		{protocol.ShapeDebian612, testenv.ShapeDebian612},
		{protocol.ShapeNoLandlock, testenv.ShapeNoLandlock},
		{protocol.ShapeNoUserns, testenv.ShapeNoUserns},
		{protocol.ShapeCgroupV1, testenv.ShapeCgroupV1},
		{protocol.ShapeDebian618, testenv.ShapeDebian618},
	}
	if got := protocol.TestShape(protocol.ShapeOrdinary); got != testenv.ShapeHost {
		t.Errorf("the ordinary shape's tests are told %q, want %q", got, testenv.ShapeHost)
	}
	for _, p := range pairs {
		if p[0] != p[1] {
			t.Errorf("vmtest shape %q differs from testenv's %q", p[0], p[1])
		}
	}
	for _, s := range protocol.VMShapes {
		want := map[string]string{protocol.ShapeDebian612: "6.12", protocol.ShapeDebian618: "6.18"}[s]
		if want == "" {
			want = "6.1"
		}
		if shapeSeries(s).Name != want {
			t.Errorf("shape %s boots the %s kernel, want %s", s, shapeSeries(s).Name, want)
		}
		if shapeDoc[s] == "" {
			t.Errorf("shape %s has no description", s)
		}
	}
}

// TestShapeCPUs: debian-6.12 boots with one CPU under TCG (its kernel
// panicked patching its own text under two), every other shape, and
// debian-6.12 under KVM, with what was asked.
func TestShapeCPUs(t *testing.T) {
	for _, c := range []struct {
		shape, accel string
		want         int
	}{
		{protocol.ShapeDebian612, "tcg", 1},
		{protocol.ShapeDebian612, "kvm", 2},
		{protocol.ShapeDebian618, "tcg", 1},
		{protocol.ShapeK8sNode, "tcg", 1},
		{protocol.ShapeDebian61, "tcg", 2},
		{protocol.ShapeOrdinary, "tcg", 2},
	} {
		if got := shapeCPUs(c.shape, c.accel, 2); got != c.want {
			t.Errorf("%s under %s: %d CPUs, want %d", c.shape, c.accel, got, c.want)
		}
	}
}

// TestShapeMem: the k8s-node shape boots with at least nodeMemMiB, the
// others with what was asked; k8s-node is known but not in "all".
func TestShapeMem(t *testing.T) {
	if got := shapeMem(protocol.ShapeK8sNode, 2048); got != nodeMemMiB {
		t.Errorf("k8s-node with 2048 asked: %d MiB", got)
	}
	if got := shapeMem(protocol.ShapeK8sNode, 16384); got != 16384 {
		t.Errorf("k8s-node with 16384 asked: %d MiB", got)
	}
	if got := shapeMem(protocol.ShapeDebian61, 2048); got != 2048 {
		t.Errorf("debian-6.1 with 2048 asked: %d MiB", got)
	}
	all, err := parseShapes("all")
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(all, protocol.ShapeK8sNode) {
		t.Errorf("all holds %s: %v", protocol.ShapeK8sNode, all)
	}
	if got, err := parseShapes(protocol.ShapeK8sNode); err != nil || len(got) != 1 {
		t.Errorf("parseShapes(%s) = %v, %v", protocol.ShapeK8sNode, got, err)
	}
}
