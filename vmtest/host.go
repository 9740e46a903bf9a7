package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
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
// shape, with o's run pattern, timeout, linker flags and environment.
// B10X_SHAPE is removed from the environment so the tests see "host".
func runHost(ctx context.Context, modRoot string, pkgs []testPkg, o options, out *prefixWriter) *shapeResult {
	start := time.Now()
	res := &shapeResult{Shape: "host"}
	quiet := o.quiet
	args := []string{"test", "-json", "-count=1", "-timeout", o.timeout.String()}
	if o.run != "" {
		args = append(args, "-run", o.run)
	}
	if o.ldflags != "" {
		args = append(args, "-ldflags="+o.ldflags)
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
		if !strings.HasPrefix(e, "B10X_SHAPE=") && !strings.HasPrefix(e, "B10X_VM=") {
			env = append(env, e)
		}
	}
	cmd.Env = append(append(env, o.env...), "CGO_ENABLED=0")
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
	c := parseTestJSON(stdout, names, func(line string) {
		if !quiet {
			out.Line("host", line)
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

// parseTestJSON reads go test -json output into per-package reports,
// passing each output line (and any line that is not JSON) to echo.
func parseTestJSON(r io.Reader, names []string, echo func(string)) *consoleParser {
	c := newConsoleParser(names)
	// go test -json reports each test's end as an action (test2json strips
	// the indentation of subtests' result lines, so the -test.v parser
	// cannot be used on its output); a skip's reason is the test's last
	// logged message, as in parseTestOutput.
	lastLog := map[string]string{}
	readLines(r, 4<<20, func(text string) {
		var ev testEvent
		if err := json.Unmarshal([]byte(text), &ev); err != nil {
			echo(text)
			return
		}
		p := c.pkg(ev.Package)
		key := ev.Package + "\x00" + ev.Test
		switch {
		case ev.Action == "start":
			p.Started = true
		case ev.Action == "output":
			line := strings.TrimRight(ev.Output, "\n")
			echo(line)
			p.Output = append(p.Output, line)
			if m := reLog.FindStringSubmatch(line); m != nil && ev.Test != "" {
				lastLog[key] = m[1]
			}
			if i := strings.Index(line, "LAYERS:"); i >= 0 {
				p.Layers = append(p.Layers, strings.TrimSpace(line[i:]))
			}
		case ev.Test != "" && (ev.Action == "pass" || ev.Action == "fail" || ev.Action == "skip"):
			r := testResult{Name: ev.Test, Status: strings.ToUpper(ev.Action)}
			if r.Status == "SKIP" {
				r.Reason = lastLog[key]
			}
			p.Tests = append(p.Tests, r)
		case ev.Test == "" && (ev.Action == "pass" || ev.Action == "fail"):
			p.Started, p.Reported, p.Elapsed = true, true, time.Duration(ev.Elapsed*float64(time.Second))
			if ev.Action == "fail" {
				p.Exit = 1
			}
		}
	})
	return c
}
