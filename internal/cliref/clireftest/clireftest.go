// Package clireftest runs what cliref writes in the programs that read it:
// a completion script in a real bash, a manual page through groff (or
// man). The tests of cliref and of the binary that prints its scripts and
// page use it.
package clireftest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/b10x/harness/internal/testenv"
)

// RequireProgram finds a program the test needs. bash is on every host
// the suite runs on, so its absence fails there; no vmtest guest has it
// (busybox only). An optional program (zsh, fish) may be missing
// anywhere: the test is then skipped, saying so.
func RequireProgram(t *testing.T, name, why string, optional bool) string {
	t.Helper()
	p, err := exec.LookPath(name)
	lacking := testenv.InGuest()
	if optional {
		lacking = append(lacking, testenv.HostLacks(err != nil)...)
	}
	testenv.Require(t, err == nil, name+" on PATH ("+why+")", lacking...)
	return p
}

// WriteTemp writes content to a file name in a temporary directory of t
// and returns its path.
func WriteTemp(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// shq quotes s for bash as one word.
func shq(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// BashComplete sources script in a real bash and, for each line (the words
// of a command line, the last the one being completed), calls the
// completion function fn (_b10x_harness) with COMP_WORDS and COMP_CWORD
// set as bash sets them; it returns the candidates of each.
func BashComplete(t *testing.T, script, fn string, lines [][]string) [][]string {
	t.Helper()
	bash := RequireProgram(t, "bash", "to run the bash completion", false)
	var drv strings.Builder
	drv.WriteString("source " + shq(script) + " || exit 9\n")
	for _, l := range lines {
		q := make([]string, len(l))
		for i, w := range l {
			q[i] = shq(w)
		}
		drv.WriteString("COMP_WORDS=(" + strings.Join(q, " ") + ")\n")
		drv.WriteString("COMP_CWORD=$((${#COMP_WORDS[@]} - 1))\n")
		drv.WriteString("COMPREPLY=()\n" + fn + "\nprintf '%s\\n' \"${COMPREPLY[@]}\"\necho '<end>'\n")
	}
	cmd := exec.Command(bash, "--norc", "--noprofile", "-c", drv.String())
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil || stderr.Len() > 0 {
		t.Fatalf("bash: %v\nstderr:\n%s", err, stderr.String())
	}
	var got [][]string
	cur := []string{}
	for _, w := range strings.Split(string(out), "\n") {
		switch w {
		case "<end>":
			got = append(got, cur)
			cur = []string{}
		case "":
		default:
			cur = append(cur, w)
		}
	}
	if len(got) != len(lines) {
		t.Fatalf("bash answered %d lines of %d:\n%s", len(got), len(lines), out)
	}
	return got
}

// ManSections is page cut at its .SH and .SS lines, by their title (a
// subsection's as "SS " and its title).
func ManSections(page string) map[string]string {
	out := map[string]string{}
	title := ""
	for _, l := range strings.Split(page, "\n") {
		if t, ok := strings.CutPrefix(l, ".SH "); ok {
			title = strings.Trim(t, `"`)
		} else if t, ok := strings.CutPrefix(l, ".SS "); ok {
			title = "SS " + strings.Trim(t, `"`)
		}
		out[title] += l + "\n"
	}
	return out
}

// RenderMan renders page with groff (-ww: every warning), or man -l where
// groff is missing, and fails on any warning; it returns the text.
func RenderMan(t *testing.T, page string) string {
	t.Helper()
	var cmd *exec.Cmd
	if groff, err := exec.LookPath("groff"); err == nil {
		cmd = exec.Command(groff, "-man", "-Tutf8", "-ww", "-P-cbou")
	} else {
		man, err := exec.LookPath("man")
		testenv.Require(t, err == nil, "groff or man on PATH (to render the page)", append(testenv.InGuest(), testenv.HostLacks(err != nil)...)...)
		cmd = exec.Command(man, "--warnings=w", "-l", "-")
		cmd.Env = append(cmd.Environ(), "MANWIDTH=80", "MAN_KEEP_FORMATTING=0", "MANPAGER=cat", "PAGER=cat")
	}
	cmd.Stdin = strings.NewReader(page)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil || stderr.Len() > 0 {
		t.Fatalf("%s: %v\n%s", cmd.Args, err, stderr.String())
	}
	return string(out)
}
