package main

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// sampleV is real go test -v output (Go 1.26) of a package with a skipped
// test, subtests, parallel tests and a two-line skip message.
const sampleV = `=== RUN   TestA
    x_test.go:3: LAYERS: a b
    x_test.go:3: no thing: because
        second line
--- SKIP: TestA (0.00s)
=== RUN   TestB
=== RUN   TestB/sub
    x_test.go:4: sub skip
=== RUN   TestB/ok
--- PASS: TestB (0.00s)
    --- SKIP: TestB/sub (0.00s)
    --- PASS: TestB/ok (0.00s)
=== RUN   TestC
=== PAUSE TestC
=== RUN   TestD
=== PAUSE TestD
=== RUN   TestE
    x_test.go:9: broken
--- FAIL: TestE (0.00s)
=== CONT  TestC
    x_test.go:5: hi
--- PASS: TestC (0.00s)
=== CONT  TestD
    x_test.go:6: par skip
--- SKIP: TestD (0.00s)
=== RUN   TestReexec
    x_test.go:12: re-run child output:
        === RUN   TestInner
        --- FAIL: TestInner (0.00s)
            --- PASS: TestInner/x (0.00s)
        FAIL
--- PASS: TestReexec (0.10s)
FAIL`

func TestParseTestOutput(t *testing.T) {
	tests, layers := parseTestOutput(strings.Split(sampleV, "\n"))
	want := []testResult{
		{Name: "TestA", Status: "SKIP", Reason: "no thing: because second line"},
		{Name: "TestB", Status: "PASS"},
		{Name: "TestB/sub", Status: "SKIP", Reason: "sub skip"},
		{Name: "TestB/ok", Status: "PASS"},
		{Name: "TestE", Status: "FAIL"},
		{Name: "TestC", Status: "PASS"},
		{Name: "TestD", Status: "SKIP", Reason: "par skip"},
		{Name: "TestReexec", Status: "PASS"},
	}
	if !slices.Equal(tests, want) {
		t.Errorf("tests:\n got %+v\nwant %+v", tests, want)
	}
	if !slices.Equal(layers, []string{"LAYERS: a b"}) {
		t.Errorf("layers = %q", layers)
	}
	p := &pkgReport{Tests: tests}
	if p.count("PASS") != 4 || p.count("SKIP") != 3 || p.count("FAIL") != 1 {
		t.Errorf("counts PASS %d SKIP %d FAIL %d", p.count("PASS"), p.count("SKIP"), p.count("FAIL"))
	}
}

func TestAllSkipped(t *testing.T) {
	for _, tc := range []struct {
		name  string
		tests []testResult
		want  bool
	}{
		{"none ran", nil, false},
		{"all top-level skipped", []testResult{{Name: "A", Status: "SKIP"}, {Name: "B", Status: "SKIP"}, {Name: "B/x", Status: "PASS"}}, true},
		{"one passes", []testResult{{Name: "A", Status: "SKIP"}, {Name: "B", Status: "PASS"}}, false},
		{"one fails", []testResult{{Name: "A", Status: "FAIL"}, {Name: "B", Status: "SKIP"}}, false},
		{"only subtests skipped", []testResult{{Name: "A", Status: "PASS"}, {Name: "A/x", Status: "SKIP"}}, false},
	} {
		p := &pkgReport{Tests: tc.tests}
		if got := p.allSkipped(); got != tc.want {
			t.Errorf("%s: allSkipped = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// console builds a guest console transcript with the serial port's CRLF
// line endings and some kernel noise.
func console(lines ...string) []string {
	out := []string{"[    0.000000] Linux version 6.1.0-57-amd64\r"}
	for _, l := range lines {
		out = append(out, l+"\r")
	}
	return append(out, "[    7.373166] reboot: Power down\r")
}

func feed(expected []string, lines []string) (*consoleParser, *shapeResult) {
	c := newConsoleParser(expected)
	for _, l := range lines {
		c.Line(l)
	}
	r := &shapeResult{Shape: "debian-6.1", Pkgs: c.Reports(), Info: c.Info, Problems: c.verdict()}
	return c, r
}

func TestConsolePassingShape(t *testing.T) {
	c, r := feed([]string{"m/a", "m/b"}, console(
		"VMTEST INFO kernel 6.1.0-57-amd64",
		"VMTEST START m/a",
		"=== RUN   TestX",
		"    x_test.go:1: LAYERS: landlock,pidns",
		"--- PASS: TestX (0.01s)",
		"=== RUN   TestY",
		"    y_test.go:2: no cgroup v1 here",
		"--- SKIP: TestY (0.00s)",
		"PASS",
		"VMTEST PKG m/a EXIT 0 TIME 1.50s",
		"VMTEST START m/b",
		"=== RUN   TestZ",
		"--- PASS: TestZ (0.00s)",
		"VMTEST PKG m/b EXIT 0 TIME 0.25s",
		"VMTEST DONE EXIT 0",
	))
	if reasons := r.reasons(false); len(reasons) != 0 {
		t.Fatalf("a passing shape failed: %q", reasons)
	}
	a := c.pkgs["m/a"]
	if a.Elapsed != 1500*time.Millisecond || a.count("PASS") != 1 || a.count("SKIP") != 1 || !slices.Equal(a.Layers, []string{"LAYERS: landlock,pidns"}) {
		t.Errorf("m/a report: %+v", a)
	}
	if a.Tests[1].Reason != "no cgroup v1 here" {
		t.Errorf("skip reason %q", a.Tests[1].Reason)
	}
	if !slices.Equal(r.Info, []string{"kernel 6.1.0-57-amd64"}) {
		t.Errorf("info %q", r.Info)
	}
	sum := formatSummary(r, false)
	for _, want := range []string{"=== shape debian-6.1: PASS", "SKIP TestY: no cgroup v1 here", "LAYERS: landlock,pidns", "kernel 6.1.0-57-amd64"} {
		if !strings.Contains(sum, want) {
			t.Errorf("summary lacks %q:\n%s", want, sum)
		}
	}
}

func TestConsoleFailures(t *testing.T) {
	for _, tc := range []struct {
		name  string
		lines []string
		want  string
	}{
		{"no DONE", console("VMTEST START m/a", "--- PASS: TestX (0.00s)", "VMTEST PKG m/a EXIT 0 TIME 1s"), "never printed its final DONE"},
		{"package never started", console("VMTEST DONE EXIT 0"), "m/a: never started"},
		{"package cut off", console("VMTEST START m/a", "=== RUN   TestX"), "m/a: no exit status"},
		{"package exit 1", console("VMTEST START m/a", "--- FAIL: TestX (0.00s)", "VMTEST PKG m/a EXIT 1 TIME 1s", "VMTEST DONE EXIT 1"), "m/a: exit status 1"},
		{"guest says 1", console("VMTEST START m/a", "--- PASS: TestX (0.00s)", "VMTEST PKG m/a EXIT 0 TIME 1s", "VMTEST DONE EXIT 1"), "the guest reported exit status 1"},
		{"all skipped", console("VMTEST START m/a", "--- SKIP: TestX (0.00s)", "--- SKIP: TestY (0.00s)", "VMTEST PKG m/a EXIT 0 TIME 1s", "VMTEST DONE EXIT 0"), "every test skipped"},
		{"leak", console("VMTEST START m/a", "--- PASS: TestX (0.00s)", "VMTEST LEAK m/a process: pid 9 (sleep)", "VMTEST PKG m/a EXIT 0 TIME 1s", "VMTEST DONE EXIT 0"), "left behind process: pid 9 (sleep)"},
		{"no tests", console("VMTEST START m/a", "testing: warning: no tests to run", "VMTEST PKG m/a EXIT 0 TIME 1s", "VMTEST DONE EXIT 0"), "no test ran"},
		{"setup failed", console("VMTEST SETUP FAIL shape debian-6.1: mount cgroup2: EBUSY", "VMTEST DONE EXIT 1"), "set-up failed in the guest: shape debian-6.1: mount cgroup2"},
		{"malformed", console("VMTEST PKG m/a EXIT x", "VMTEST DONE EXIT 0"), "malformed vmtest result line"},
		{"FAIL line but exit 0", console("VMTEST START m/a", "--- FAIL: TestX (0.00s)", "VMTEST PKG m/a EXIT 0 TIME 1s", "VMTEST DONE EXIT 0"), "1 tests reported FAIL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, r := feed([]string{"m/a"}, tc.lines)
			reasons := r.reasons(false)
			if !slices.ContainsFunc(reasons, func(s string) bool { return strings.Contains(s, tc.want) }) {
				t.Fatalf("reasons %q lack %q", reasons, tc.want)
			}
			if !strings.Contains(formatSummary(r, false), ": FAIL in ") {
				t.Fatalf("summary does not say FAIL:\n%s", formatSummary(r, false))
			}
		})
	}
}

// With -run, a package whose tests all fall outside the filter is fine.
func TestNoTestsWithRunFilter(t *testing.T) {
	_, r := feed([]string{"m/a"}, console("VMTEST START m/a", "testing: warning: no tests to run", "PASS", "VMTEST PKG m/a EXIT 0 TIME 1s", "VMTEST DONE EXIT 0"))
	if reasons := r.reasons(true); len(reasons) != 0 {
		t.Fatalf("reasons %q, want none under -run", reasons)
	}
}

// Test output that merely mentions the prefix in the middle of a line is
// output, not a result line.
func TestPrefixOnlyAtLineStart(t *testing.T) {
	c, _ := feed([]string{"m/a"}, console("VMTEST START m/a", "    x_test.go:1: saw VMTEST DONE EXIT 0 in a log", "--- PASS: TestX (0.00s)", "VMTEST PKG m/a EXIT 0 TIME 1s"))
	if c.Done {
		t.Fatal("a log line containing the DONE text ended the guest")
	}
}

func TestReadLines(t *testing.T) {
	in := "a\r\n" + strings.Repeat("x", 40) + "\nlast"
	var got []string
	readLines(strings.NewReader(in), 16, func(l string) { got = append(got, l) })
	want := []string{"a\r", strings.Repeat("x", 16), strings.Repeat("x", 16), strings.Repeat("x", 8), "last"}
	if !slices.Equal(got, want) {
		t.Errorf("readLines = %q, want %q", got, want)
	}
}
