package main

import (
	"strings"
	"testing"
)

// selftestConsole is the console of a real self-test guest (trimmed of its
// INFO lines), as the judge must accept it.
const selftestConsole = `VMTEST INFO kernel 6.1.0-57-amd64
VMTEST START github.com/b10x/harness/vmtest/testdata/selftest/allskip
=== RUN   TestOne
    allskip_test.go:18: first skip
--- SKIP: TestOne (0.02s)
=== RUN   TestTwo
=== RUN   TestTwo/sub
    allskip_test.go:21: nested skip
=== NAME  TestTwo
    allskip_test.go:22: second skip
--- SKIP: TestTwo (0.00s)
    --- SKIP: TestTwo/sub (0.00s)
PASS
VMTEST PKG github.com/b10x/harness/vmtest/testdata/selftest/allskip EXIT 0 TIME 1.01s
VMTEST START github.com/b10x/harness/vmtest/testdata/selftest/fail
=== RUN   TestFails
    fail_test.go:18: selftest failure
--- FAIL: TestFails (0.01s)
FAIL
VMTEST PKG github.com/b10x/harness/vmtest/testdata/selftest/fail EXIT 1 TIME 1.64s
VMTEST START github.com/b10x/harness/vmtest/testdata/selftest/hang
VMTEST INFO signal pid 101 killed by signal 9 (killed)
VMTEST INFO timeout github.com/b10x/harness/vmtest/testdata/selftest/hang: killed 2s after its -test.timeout
VMTEST PKG github.com/b10x/harness/vmtest/testdata/selftest/hang EXIT -1 TIME 5.61s
VMTEST START github.com/b10x/harness/vmtest/testdata/selftest/leak
=== RUN   TestLeaksAProcess
--- PASS: TestLeaksAProcess (0.14s)
=== RUN   TestLeaksACgroup
--- PASS: TestLeaksACgroup (0.00s)
PASS
VMTEST LEAK github.com/b10x/harness/vmtest/testdata/selftest/leak process: pid 111 (sleep) ppid 1 state S: "sleep 1000"
VMTEST LEAK github.com/b10x/harness/vmtest/testdata/selftest/leak cgroup: /sys/fs/cgroup/vmtest.slice/03-leak.service/leaked
VMTEST PKG github.com/b10x/harness/vmtest/testdata/selftest/leak EXIT 0 TIME 4.09s
VMTEST START github.com/b10x/harness/vmtest/testdata/selftest/pass
=== RUN   TestShapeIsSet
    pass_test.go:31: LAYERS: selftest-layer
--- PASS: TestShapeIsSet (0.04s)
=== RUN   TestSkipsOne
    pass_test.go:38: selftest skip reason
--- SKIP: TestSkipsOne (0.03s)
=== RUN   TestSubtests
=== RUN   TestSubtests/a
=== RUN   TestSubtests/b
--- PASS: TestSubtests (0.00s)
    --- PASS: TestSubtests/a (0.00s)
    --- PASS: TestSubtests/b (0.00s)
=== RUN   TestBusyboxApplets
--- PASS: TestBusyboxApplets (0.56s)
=== RUN   TestTestdataInWorkingDirectory
--- PASS: TestTestdataInWorkingDirectory (0.01s)
=== RUN   TestModuleAround
--- PASS: TestModuleAround (0.00s)
=== RUN   TestReexecSelf
--- PASS: TestReexecSelf (0.20s)
=== RUN   TestLoopback
--- PASS: TestLoopback (0.22s)
=== RUN   TestWritableTempDir
--- PASS: TestWritableTempDir (0.10s)
=== RUN   TestPivotRoot
--- PASS: TestPivotRoot (0.09s)
=== RUN   TestRootIsShared
--- PASS: TestRootIsShared (0.00s)
PASS
VMTEST PKG github.com/b10x/harness/vmtest/testdata/selftest/pass EXIT 0 TIME 3.20s
VMTEST DONE EXIT 1
`

const sp = "github.com/b10x/harness/vmtest/testdata/selftest/"

func judgeSelftest(console string) []string {
	var expected []string
	for _, p := range []string{"allskip", "fail", "hang", "leak", "pass"} {
		expected = append(expected, sp+p)
	}
	_, r := feed(expected, strings.Split(console, "\n"))
	return checkSelftest(r)
}

func TestSelftestJudgeAcceptsCorrectRun(t *testing.T) {
	if bad := judgeSelftest(selftestConsole); len(bad) != 0 {
		t.Fatalf("the judge rejected a correct self-test run: %q", bad)
	}
}

// Each mutation is a way vmtest itself could break; the judge must notice.
func TestSelftestJudgeRejectsBrokenRuns(t *testing.T) {
	for _, tc := range []struct{ name, old, new, want string }{
		{"leak not reported", "VMTEST LEAK " + sp + "leak process:", "leak process:", "leak:"},
		{"cgroup leak not reported", "VMTEST LEAK " + sp + "leak cgroup:", "cgroup:", "leak:"},
		{"hang not killed", "VMTEST PKG " + sp + "hang EXIT -1", "VMTEST PKG " + sp + "hang EXIT 0", "hang:"},
		{"no timeout line", "VMTEST INFO timeout", "VMTEST INFO other", "hang:"},
		{"fail passes", "VMTEST PKG " + sp + "fail EXIT 1", "VMTEST PKG " + sp + "fail EXIT 0", "fail:"},
		{"skip reason lost", ": selftest skip reason\n", ": other words\n", "TestSkipsOne"},
		{"layers lost", "LAYERS: selftest-layer", "no layers", "LAYERS"},
		{"pass fails", "VMTEST PKG " + sp + "pass EXIT 0", "VMTEST PKG " + sp + "pass EXIT 1", "pass: judged failed"},
		{"guest says 0", "VMTEST DONE EXIT 1", "VMTEST DONE EXIT 0", "DONE line"},
		{"guest never done", "VMTEST DONE EXIT 1", "", "DONE line"},
		{"allskip ran a test", "--- SKIP: TestOne (", "--- PASS: TestOne (", "allskip:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(selftestConsole, tc.old) {
				t.Fatalf("mutation target %q not in the transcript", tc.old)
			}
			bad := judgeSelftest(strings.Replace(selftestConsole, tc.old, tc.new, 1))
			if !strings.Contains(strings.Join(bad, "\n"), tc.want) {
				t.Fatalf("broken run accepted or misjudged: complaints %q, want one about %q", bad, tc.want)
			}
		})
	}
}
