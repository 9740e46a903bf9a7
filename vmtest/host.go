package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// testEvent is one line of go test -json (cmd/test2json's format).
type testEvent struct {
	Action  string
	Package string
	Test    string
	Output  string
	Elapsed float64
}

// runHost runs the packages' tests on this machine with go test, the host
// shape. B10X_SHAPE is removed from the environment so the tests see "host".
func runHost(ctx context.Context, modRoot string, pkgs []testPkg, run string, timeout time.Duration, out *prefixWriter) *shapeResult {
	start := time.Now()
	res := &shapeResult{Shape: "host"}
	args := []string{"test", "-json", "-count=1", "-timeout", timeout.String()}
	if run != "" {
		args = append(args, "-run", run)
	}
	var names []string
	for _, p := range pkgs {
		args = append(args, p.ImportPath)
		names = append(names, p.ImportPath)
	}
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = modRoot
	var env []string
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "B10X_SHAPE=") {
			env = append(env, e)
		}
	}
	cmd.Env = append(env, "CGO_ENABLED=0")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		res.Problems = append(res.Problems, fmt.Sprintf("go test: %v", err))
		return res
	}
	if err := cmd.Start(); err != nil {
		res.Problems = append(res.Problems, fmt.Sprintf("go test: %v", err))
		return res
	}
	c := newConsoleParser(names)
	readLines(stdout, 4<<20, func(text string) {
		var ev testEvent
		if err := json.Unmarshal([]byte(text), &ev); err != nil {
			out.Line("host", text)
			return
		}
		p := c.pkg(ev.Package)
		switch {
		case ev.Action == "start":
			p.Started = true
		case ev.Action == "output":
			line := strings.TrimRight(ev.Output, "\n")
			out.Line("host", line)
			p.Output = append(p.Output, line)
		case ev.Test == "" && (ev.Action == "pass" || ev.Action == "fail"):
			p.Started, p.Reported, p.Elapsed = true, true, time.Duration(ev.Elapsed*float64(time.Second))
			if ev.Action == "fail" {
				p.Exit = 1
			}
			p.Tests, p.Layers = parseTestOutput(p.Output)
		}
	})
	werr := cmd.Wait()
	res.Pkgs = c.Reports()
	res.Elapsed = time.Since(start)
	if werr != nil {
		if s := strings.TrimSpace(stderr.String()); s != "" {
			res.Problems = append(res.Problems, "go test: "+lastLines(s, 10))
		}
		failedPkg := false
		for _, p := range res.Pkgs {
			failedPkg = failedPkg || p.Exit != 0 || !p.Reported
		}
		if !failedPkg {
			res.Problems = append(res.Problems, fmt.Sprintf("go test: %v", werr))
		}
	}
	return res
}
