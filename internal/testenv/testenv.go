// Package testenv tells a test which host shape it runs on and lets it skip
// only where the shape says a feature is legitimately absent.
//
// A shape is one of the named host configurations the vmtest suite boots
// (see vmtest/). Outside a VM the shape is "host". The guest init sets
// B10X_SHAPE for every test binary it runs.
//
// The rule the project follows: a test never skips because something is
// missing on the machine it is meant for. Require fails the test when the
// current shape is expected to have the feature, and skips (saying why) only
// when the shape is declared to lack it.
package testenv

import (
	"os"
	"slices"
	"testing"
)

// Shape names. Each is a named configuration of vmtest, except ShapeHost.
const (
	ShapeHost       = "host"        // this development machine, no VM
	ShapeDebian61   = "debian-6.1"  // Debian 12 kernel, pure cgroup v2, Landlock ABI 2
	ShapeDebian612  = "debian-6.12" // as debian-6.1 on Debian's 6.12 kernel, Landlock ABI 6
	ShapeDebian618  = "debian-6.18" // as debian-6.1 on Debian's 6.18 kernel with audit on, Landlock ABI 7
	ShapeNoLandlock = "no-landlock" // same kernel, lsm= without landlock
	ShapeNoUserns   = "no-userns"   // same kernel, namespace creation disabled
	ShapeCgroupV1   = "cgroup-v1"   // same kernel, cgroup v1 hierarchies only
)

// Shape reports the current shape: $B10X_SHAPE, or ShapeHost when unset.
func Shape() string {
	if s := os.Getenv("B10X_SHAPE"); s != "" {
		return s
	}
	return ShapeHost
}

// InVM reports whether the test runs inside a vmtest guest: a VM shape, or
// the host suite run in the ordinary-host VM ($B10X_VM names the guest's
// shape there while B10X_SHAPE says host). Loops sized for a fast machine
// scale down where it is true.
func InVM() bool { return Shape() != ShapeHost || os.Getenv("B10X_VM") != "" }

// InGuest is a lackingIn list for what no vmtest guest has, whatever its
// shape: the repository around the package's directory, a C compiler, a Go
// toolchain, programs beyond busybox. It is the current shape when the test
// runs in a guest (the ordinary shape included, whose tests are told they
// run on the host), and nothing on a real host.
func InGuest() []string {
	if InVM() {
		return []string{Shape()}
	}
	return nil
}

// Require checks that a feature is present. When present it returns. When
// absent, it skips with the reason only if the current shape is one of
// lackingIn (the shapes declared not to have the feature); on any other shape
// it fails the test, because the feature should have been there.
func Require(t testing.TB, present bool, feature string, lackingIn ...string) {
	t.Helper()
	if present {
		return
	}
	if slices.Contains(lackingIn, Shape()) {
		t.Skipf("%s: not available in shape %q (declared absent there)", feature, Shape())
	}
	t.Fatalf("%s: missing in shape %q, where it is expected", feature, Shape())
}

// KernelIndependent marks a costly test that exercises no kernel feature a
// VM shape varies (a tool's crash consistency, its field caps, its locks):
// it runs on the host and in debian-6.1, the shape with every package, and
// is declared absent in the other VM shapes, which would only repeat it
// under emulation. why says what it tests.
func KernelIndependent(t testing.TB, why string) {
	t.Helper()
	s := Shape()
	Require(t, s == ShapeHost || s == ShapeDebian61, "a shape that runs kernel-independent tests (the host, debian-6.1): "+why,
		ShapeDebian612, ShapeDebian618, ShapeNoLandlock, ShapeNoUserns, ShapeCgroupV1)
}
