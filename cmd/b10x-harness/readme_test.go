package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/b10x/harness/internal/testenv"
)

// readmeDefault finds what the README says a flag's default is: "`--grace`
// (default 10s" or "`--session-idle` (10m)", a value that starts with a
// digit, within the parenthesis after the flag; and "`--net none` (the
// default)".
var (
	readmeParen     = regexp.MustCompile("`--([a-z0-9-]+)`\\s*\\(([^)]*)\\)")
	readmeLeading   = regexp.MustCompile(`^([0-9][0-9A-Za-z.]*)`)
	readmeDefault   = regexp.MustCompile(`\bdefault\s+([0-9][0-9A-Za-z.]*)`)
	readmeThe       = regexp.MustCompile("`--([a-z0-9-]+) ([a-z0-9-]+)`\\s*\\(the default\\)")
	helpDefault     = regexp.MustCompile(`(?m)^\s+(?:-\w, )?--([a-z0-9-]+)=(\S+)`)
	helpPlaceholder = regexp.MustCompile(`^[A-Z][A-Z_=|-]*$`)
	helpProse       = regexp.MustCompile(`\bdefault:?\s+([0-9][0-9A-Za-z.]*)`)
)

// TestREADMEDefaults: every default the README states for a flag is one
// that flag has in some command's --help (which the policy table and the
// commands' tags write), so the README cannot drift from the binary.
func TestREADMEDefaults(t *testing.T) {
	root, err := filepath.Abs("../..")
	must(t, err)
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	testenv.Require(t, err == nil, "the repository", testenv.InGuest()...)
	text := strings.Join(strings.Fields(string(readme)), " ") // a claim may wrap

	defaults := map[string][]string{}
	for _, cmd := range [][]string{{"run"}, {"tools"}, {"call"}, {"doctor"}, {"exec"}, {"mcp"}, {"record", "summary"}, {"policy", "show"}} {
		r := harness(t, "", append(cmd, "--help")...)
		if r.code != 0 {
			t.Fatalf("%s --help: exit %d: %s", strings.Join(cmd, " "), r.code, r.stderr)
		}
		add := func(flag, v string) {
			if v = strings.Trim(v, `"`); !slices.Contains(defaults[flag], v) {
				defaults[flag] = append(defaults[flag], v)
			}
		}
		// Each flag's block: its line and the help beneath it, up to the
		// next flag. The default is kong's (--flag=VALUE), or the help's
		// own words for one kong does not show (the run tool's timeout).
		idx := helpDefault.FindAllStringSubmatchIndex(r.stdout, -1)
		for i, m := range idx {
			flag, v := r.stdout[m[2]:m[3]], r.stdout[m[4]:m[5]]
			if !helpPlaceholder.MatchString(v) { // FILE, DURATION
				add(flag, v)
			}
			end := len(r.stdout)
			if i+1 < len(idx) {
				end = idx[i+1][0]
			}
			block := strings.Join(strings.Fields(r.stdout[m[1]:end]), " ")
			for _, d := range helpProse.FindAllStringSubmatch(block, -1) {
				add(flag, d[1])
			}
		}
	}
	type claim struct{ flag, value string }
	var claims []claim
	for _, m := range readmeParen.FindAllStringSubmatch(text, -1) {
		in := strings.TrimSpace(m[2])
		if v := readmeLeading.FindStringSubmatch(in); v != nil {
			claims = append(claims, claim{m[1], v[1]})
		} else if v := readmeDefault.FindStringSubmatch(in); v != nil {
			claims = append(claims, claim{m[1], v[1]})
		}
	}
	for _, m := range readmeThe.FindAllStringSubmatch(text, -1) {
		claims = append(claims, claim{m[1], m[2]})
	}
	if len(claims) < 5 {
		t.Fatalf("found %d default claims in the README (%v): the patterns no longer match its wording", len(claims), claims)
	}
	var checked []string
	for _, c := range claims {
		have, ok := defaults[c.flag]
		if !ok {
			t.Errorf("README: --%s (default %s): no command's --help shows a default for --%s", c.flag, c.value, c.flag)
			continue
		}
		if !slices.Contains(have, c.value) {
			t.Errorf("README: --%s default %s; --help says %s", c.flag, c.value, strings.Join(have, " or "))
		}
		checked = append(checked, "--"+c.flag+"="+c.value)
	}
	sort.Strings(checked)
	t.Logf("README defaults checked against --help: %s", strings.Join(checked, " "))
}
