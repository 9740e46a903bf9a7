package spawn

import (
	"strings"
	"testing"

	"github.com/b10x/harness/confine/spawn/internal/seccomp"
	"github.com/b10x/harness/confine/spawn/internal/seccomp/seccomptest"
	"github.com/b10x/harness/internal/testenv"
)

// TestSeccompInKernel makes, in a real sandbox of every runner, each
// system call the filter refuses and each it lets through beside them
// (seccomptest.Cases: the listed denials, the mount family, the argument
// rules, clone3 and openat2, unknown numbers, truncate below Landlock ABI
// 3, ordinary calls): the kernel's own seccomp, not the userspace
// interpreter of package seccomp's tests, judges them, under the filter the
// runner chose for this host's Landlock ABI, beside the sandbox's other
// layers.
func TestSeccompInKernel(t *testing.T) {
	testenv.Require(t, seccomp.Supported, "a seccomp filter for this architecture")
	abi, err := testenv.LandlockABI()
	if err != nil {
		t.Fatal(err)
	}
	cases := seccomptest.Cases(t, abi, seccomp.MaxKnownSyscall)
	argv := append([]string{"b10x-reexec:" + seccomptest.Entry}, seccomptest.Args(cases)...)
	for name, r := range runners(t) {
		ws := workspace(t)
		s := Spec{Program: pin(t, selfExe(t)), Argv: argv, Env: []string{"PATH=/usr/bin:/bin"}, Dir: ws, Workspace: pin(t, ws)}
		res, out, err := run(t, r, s)
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("%s: the probe did not end normally (a call killed it?): %v %+v\n%s", name, err, res, out)
		}
		t.Logf("%s: LAYERS: %v", name, res.Layers)
		if name == "direct" {
			t.Logf("direct: %s", strings.Join(strings.Fields(string(out.stdout.Bytes())), " "))
		}
		seccomptest.Check(t, name, cases, out.stdout.Bytes())
	}
}
