package main

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/b10x/harness/vmtest/internal/protocol"
)

// testResult is one test or subtest as go test -v reported it.
type testResult struct {
	Name   string // "TestX" or "TestX/sub"
	Status string // PASS, FAIL or SKIP
	Reason string // for SKIP: the last message the test logged (its Skip call)
}

// pkgReport is what one package's test binary did in one shape.
type pkgReport struct {
	Pkg      string
	Started  bool // a START line (or, for host, output) was seen
	Reported bool // an exit status was seen
	Exit     int
	Elapsed  time.Duration
	Tests    []testResult
	Layers   []string // lines the tests logged with "LAYERS:"
	Leaks    []string
	Output   []string // the package's raw output lines
}

func (p *pkgReport) count(status string) int {
	n := 0
	for _, t := range p.Tests {
		if t.Status == status {
			n++
		}
	}
	return n
}

// topLevel returns the results of top-level tests only.
func (p *pkgReport) topLevel() []testResult {
	var out []testResult
	for _, t := range p.Tests {
		if !strings.Contains(t.Name, "/") {
			out = append(out, t)
		}
	}
	return out
}

// allSkipped reports whether tests ran and every top-level one skipped: the
// whole suite proved nothing in this shape.
func (p *pkgReport) allSkipped() bool {
	top := p.topLevel()
	if len(top) == 0 {
		return false
	}
	for _, t := range top {
		if t.Status != "SKIP" {
			return false
		}
	}
	return true
}

// problems lists why the package fails its shape; empty when it passed.
// runFilter tells whether -run narrowed the tests, in which case a package
// with nothing to run is not a problem.
func (p *pkgReport) problems(runFilter bool) []string {
	var out []string
	switch {
	case !p.Started:
		out = append(out, "never started (the guest stopped before it)")
	case !p.Reported:
		out = append(out, "no exit status (the binary or the guest did not finish)")
	case p.Exit != 0:
		out = append(out, fmt.Sprintf("exit status %d", p.Exit))
	}
	if n := p.count("FAIL"); n > 0 && p.Exit == 0 {
		out = append(out, fmt.Sprintf("%d tests reported FAIL", n))
	}
	for _, l := range p.Leaks {
		out = append(out, "left behind "+l)
	}
	if p.allSkipped() {
		out = append(out, "every test skipped: the whole suite proved nothing in this shape")
	}
	if p.Reported && p.Exit == 0 && len(p.Tests) == 0 && !runFilter {
		out = append(out, "no test ran")
	}
	return out
}

var (
	reResult = regexp.MustCompile(`^\s*--- (PASS|FAIL|SKIP): (\S+) \(`)
	reSwitch = regexp.MustCompile(`^=== (?:RUN|CONT|NAME|PAUSE)\s+(\S+)`)
	reLog    = regexp.MustCompile(`^ {4,}\S+\.go:\d+: (.*)$`)
)

// parseTestOutput reads go test -v output. It attributes each logged message
// to the test named by the latest === RUN/CONT/NAME line (that is how -v
// output says whose log follows) and takes a skipped test's last message as
// its reason. Continuation lines of a multi-line message are joined.
func parseTestOutput(lines []string) (tests []testResult, layers []string) {
	cur := ""
	last := map[string]string{}
	lastIndent := 0
	var lastTest string
	for _, l := range lines {
		if m := reSwitch.FindStringSubmatch(l); m != nil {
			cur = m[1]
			lastTest = ""
			continue
		}
		// A result line is indented four spaces per subtest level; the same
		// text indented otherwise is output, e.g. a re-run child's output
		// that a test logged.
		if m := reResult.FindStringSubmatch(l); m != nil && indent(l) == 4*strings.Count(m[2], "/") {
			r := testResult{Name: m[2], Status: m[1]}
			if r.Status == "SKIP" {
				r.Reason = last[r.Name]
			}
			tests = append(tests, r)
			lastTest = ""
			continue
		}
		if m := reLog.FindStringSubmatch(l); m != nil {
			msg := m[1]
			if strings.HasPrefix(strings.TrimSpace(msg), "LAYERS:") {
				layers = append(layers, strings.TrimSpace(msg))
			}
			last[cur] = msg
			lastTest = cur
			lastIndent = indent(l)
			continue
		}
		// A continuation of the previous message is indented deeper.
		if lastTest != "" && strings.HasPrefix(l, strings.Repeat(" ", lastIndent+4)) {
			last[lastTest] += " " + strings.TrimSpace(l)
			continue
		}
		lastTest = ""
		if i := strings.Index(l, "LAYERS:"); i >= 0 {
			layers = append(layers, strings.TrimSpace(l[i:]))
		}
	}
	return tests, layers
}

// consoleParser follows one guest's console and builds the shape's report.
type consoleParser struct {
	pkgs    map[string]*pkgReport
	order   []string
	cur     *pkgReport
	Info    []string
	Setup   []string // SETUP FAIL reasons
	Done    bool
	Exit    int
	Bad     []string // malformed result lines
	expects []string
}

func newConsoleParser(expected []string) *consoleParser {
	c := &consoleParser{pkgs: map[string]*pkgReport{}, expects: expected}
	for _, p := range expected {
		c.pkgs[p] = &pkgReport{Pkg: p}
		c.order = append(c.order, p)
	}
	return c
}

func (c *consoleParser) pkg(name string) *pkgReport {
	p, ok := c.pkgs[name]
	if !ok {
		p = &pkgReport{Pkg: name}
		c.pkgs[name] = p
		c.order = append(c.order, name)
	}
	return p
}

// Line feeds one console line (line ending already removed).
func (c *consoleParser) Line(line string) {
	line = strings.TrimRight(line, "\r")
	ev, err := protocol.ParseLine(line)
	if err == protocol.ErrNotEvent {
		if c.cur != nil {
			c.cur.Output = append(c.cur.Output, line)
		}
		return
	}
	if err != nil {
		c.Bad = append(c.Bad, err.Error())
		return
	}
	switch ev.Kind {
	case "START":
		c.cur = c.pkg(ev.Pkg)
		c.cur.Started = true
	case "PKG":
		p := c.pkg(ev.Pkg)
		p.Reported, p.Exit, p.Elapsed = true, ev.Exit, ev.Elapsed
		p.Tests, p.Layers = parseTestOutput(p.Output)
		c.cur = nil
	case "LEAK":
		p := c.pkg(ev.Pkg)
		p.Leaks = append(p.Leaks, ev.Text)
	case "INFO":
		c.Info = append(c.Info, ev.Text)
	case "SETUP FAIL":
		c.Setup = append(c.Setup, ev.Text)
	case "DONE":
		c.Done, c.Exit = true, ev.Exit
	}
}

// Reports returns the packages in the order they were expected or seen.
func (c *consoleParser) Reports() []*pkgReport {
	out := make([]*pkgReport, 0, len(c.order))
	for _, n := range c.order {
		out = append(out, c.pkgs[n])
	}
	return out
}

// shapeResult is the verdict of one shape.
type shapeResult struct {
	Shape    string
	Elapsed  time.Duration
	Accel    string
	Pkgs     []*pkgReport
	Info     []string
	Problems []string // shape-level problems (boot, setup, deadline)
}

// failed tells whether the shape failed, and collects every reason.
func (r *shapeResult) reasons(runFilter bool) []string {
	out := slices.Clone(r.Problems)
	for _, p := range r.Pkgs {
		for _, pr := range p.problems(runFilter) {
			out = append(out, p.Pkg+": "+pr)
		}
	}
	return out
}

// verdict turns a parsed console into a shapeResult's problems: the guest
// must have reached DONE with status 0 after reporting every package.
func (c *consoleParser) verdict() []string {
	var out []string
	for _, s := range c.Setup {
		out = append(out, "shape set-up failed in the guest: "+s)
	}
	out = append(out, c.Bad...)
	switch {
	case !c.Done:
		out = append(out, "the guest never printed its final DONE line (crash, panic or deadline)")
	case c.Exit != 0 && len(c.Setup) == 0:
		out = append(out, fmt.Sprintf("the guest reported exit status %d", c.Exit))
	}
	return out
}

// formatSummary renders one shape's summary for the terminal.
func formatSummary(r *shapeResult, runFilter bool) string {
	var b strings.Builder
	reasons := r.reasons(runFilter)
	verdict := "PASS"
	if len(reasons) > 0 {
		verdict = "FAIL"
	}
	fmt.Fprintf(&b, "=== shape %s: %s in %.1fs", r.Shape, verdict, r.Elapsed.Seconds())
	if r.Accel != "" {
		fmt.Fprintf(&b, " (%s)", r.Accel)
	}
	fmt.Fprintf(&b, " — %s\n", shapeDoc[r.Shape])
	for _, i := range r.Info {
		if k, _, _ := strings.Cut(i, " "); slices.Contains([]string{"kernel", "lsm", "landlock-abi", "cgroup-mounts", "max-user-namespaces", "test-uid"}, k) {
			fmt.Fprintf(&b, "    %s\n", i)
		}
	}
	for _, p := range r.Pkgs {
		fmt.Fprintf(&b, "  %-45s PASS %3d  FAIL %3d  SKIP %3d  %6.1fs\n", p.Pkg, p.count("PASS"), p.count("FAIL"), p.count("SKIP"), p.Elapsed.Seconds())
		for _, t := range p.Tests {
			if t.Status == "SKIP" {
				fmt.Fprintf(&b, "      SKIP %s: %s\n", t.Name, t.Reason)
			}
		}
		for _, t := range p.Tests {
			if t.Status == "FAIL" {
				fmt.Fprintf(&b, "      FAIL %s\n", t.Name)
			}
		}
		for _, l := range uniq(p.Layers) {
			fmt.Fprintf(&b, "      %s\n", l)
		}
	}
	for _, why := range reasons {
		fmt.Fprintf(&b, "  FAILED: %s\n", why)
	}
	return b.String()
}

func uniq(s []string) []string {
	var out []string
	for _, v := range s {
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

func indent(l string) int { return len(l) - len(strings.TrimLeft(l, " ")) }
