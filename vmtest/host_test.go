package main

import (
	"slices"
	"strings"
	"testing"
)

// hostJSON is go test -json output (Go 1.26, times removed) of the package
// whose -test.v output is sampleV, without TestE and TestReexec. On the host
// a skip's reason is the first line of its message.
const hostJSON = `{"Action":"start","Package":"x"}
{"Action":"run","Package":"x","Test":"TestA"}
{"Action":"output","Package":"x","Test":"TestA","Output":"=== RUN   TestA\n"}
{"Action":"output","Package":"x","Test":"TestA","Output":"    x_test.go:3: LAYERS: a b\n"}
{"Action":"output","Package":"x","Test":"TestA","Output":"    x_test.go:3: no thing: because\n"}
{"Action":"output","Package":"x","Test":"TestA","Output":"        second line\n"}
{"Action":"output","Package":"x","Test":"TestA","Output":"--- SKIP: TestA (0.00s)\n"}
{"Action":"skip","Package":"x","Test":"TestA","Elapsed":0.01}
{"Action":"run","Package":"x","Test":"TestB"}
{"Action":"output","Package":"x","Test":"TestB","Output":"=== RUN   TestB\n"}
{"Action":"run","Package":"x","Test":"TestB/sub"}
{"Action":"output","Package":"x","Test":"TestB/sub","Output":"=== RUN   TestB/sub\n"}
{"Action":"output","Package":"x","Test":"TestB/sub","Output":"    x_test.go:4: sub skip\n"}
{"Action":"output","Package":"x","Test":"TestB/sub","Output":"--- SKIP: TestB/sub (0.00s)\n"}
{"Action":"skip","Package":"x","Test":"TestB/sub","Elapsed":0.01}
{"Action":"run","Package":"x","Test":"TestB/ok"}
{"Action":"output","Package":"x","Test":"TestB/ok","Output":"=== RUN   TestB/ok\n"}
{"Action":"output","Package":"x","Test":"TestB/ok","Output":"--- PASS: TestB/ok (0.00s)\n"}
{"Action":"pass","Package":"x","Test":"TestB/ok","Elapsed":0.01}
{"Action":"output","Package":"x","Test":"TestB","Output":"--- PASS: TestB (0.00s)\n"}
{"Action":"pass","Package":"x","Test":"TestB","Elapsed":0.01}
{"Action":"run","Package":"x","Test":"TestC"}
{"Action":"output","Package":"x","Test":"TestC","Output":"=== RUN   TestC\n"}
{"Action":"output","Package":"x","Test":"TestC","Output":"=== PAUSE TestC\n"}
{"Action":"pause","Package":"x","Test":"TestC"}
{"Action":"run","Package":"x","Test":"TestD"}
{"Action":"output","Package":"x","Test":"TestD","Output":"=== RUN   TestD\n"}
{"Action":"output","Package":"x","Test":"TestD","Output":"=== PAUSE TestD\n"}
{"Action":"pause","Package":"x","Test":"TestD"}
{"Action":"cont","Package":"x","Test":"TestC"}
{"Action":"output","Package":"x","Test":"TestC","Output":"=== CONT  TestC\n"}
{"Action":"output","Package":"x","Test":"TestC","Output":"    x_test.go:5: hi\n"}
{"Action":"output","Package":"x","Test":"TestC","Output":"--- PASS: TestC (0.00s)\n"}
{"Action":"pass","Package":"x","Test":"TestC","Elapsed":0.01}
{"Action":"cont","Package":"x","Test":"TestD"}
{"Action":"output","Package":"x","Test":"TestD","Output":"=== CONT  TestD\n"}
{"Action":"output","Package":"x","Test":"TestD","Output":"    x_test.go:6: par skip\n"}
{"Action":"output","Package":"x","Test":"TestD","Output":"--- SKIP: TestD (0.00s)\n"}
{"Action":"skip","Package":"x","Test":"TestD","Elapsed":0.01}
{"Action":"output","Package":"x","Output":"PASS\n"}
{"Action":"output","Package":"x","Output":"ok  \tx\t0.102s\n"}
{"Action":"pass","Package":"x","Elapsed":0.01}`

func TestParseTestJSON(t *testing.T) {
	var echoed []string
	c := parseTestJSON(strings.NewReader(hostJSON+"\nnot json\n"), []string{"x"}, func(l string) { echoed = append(echoed, l) })
	p := c.pkgs["x"]
	if !p.Started || !p.Reported || p.Exit != 0 {
		t.Fatalf("package x: %+v", p)
	}
	want := []testResult{
		{Name: "TestA", Status: "SKIP", Reason: "no thing: because"},
		{Name: "TestB/sub", Status: "SKIP", Reason: "sub skip"},
		{Name: "TestB/ok", Status: "PASS"},
		{Name: "TestB", Status: "PASS"},
		{Name: "TestC", Status: "PASS"},
		{Name: "TestD", Status: "SKIP", Reason: "par skip"},
	}
	if !slices.Equal(p.Tests, want) {
		t.Errorf("tests:\n got %+v\nwant %+v", p.Tests, want)
	}
	if !slices.Equal(p.Layers, []string{"LAYERS: a b"}) {
		t.Errorf("layers %q", p.Layers)
	}
	if !slices.Contains(echoed, "--- PASS: TestB (0.00s)") || !slices.Contains(echoed, "not json") {
		t.Errorf("echo missed lines: %q", echoed)
	}
}
