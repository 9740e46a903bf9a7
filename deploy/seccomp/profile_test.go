package seccomp

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The module root, from this package's directory.
const root = "../.."

func read(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// table returns the rows (cells without backquotes) between
// <!-- NAME:begin --> and <!-- NAME:end --> in README.md, header and rule
// lines left out.
func table(t *testing.T, name string) [][]string {
	t.Helper()
	readme := string(read(t, "README.md"))
	begin, end := "<!-- "+name+":begin -->", "<!-- "+name+":end -->"
	i, j := strings.Index(readme, begin), strings.Index(readme, end)
	if i < 0 || j < i {
		t.Fatalf("README.md has no %s table", name)
	}
	var rows [][]string
	for n, line := range strings.Split(strings.TrimSpace(readme[i+len(begin):j]), "\n") {
		if n < 2 { // header and | --- |
			continue
		}
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "|") || !strings.HasSuffix(line, "|") {
			t.Fatalf("README.md %s table: not a row: %q", name, line)
		}
		var cells []string
		for _, c := range strings.Split(strings.Trim(line, "|"), "|") {
			cells = append(cells, strings.Trim(strings.TrimSpace(c), "`"))
		}
		rows = append(rows, cells)
	}
	if len(rows) == 0 {
		t.Fatalf("README.md %s table is empty", name)
	}
	return rows
}

type rule struct {
	raw json.RawMessage
	r   Rule
}

func rules(t *testing.T, b []byte) (Profile, []rule) {
	t.Helper()
	p, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	var out []rule
	for _, raw := range p.Syscalls {
		r, err := DecodeRule(raw)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, rule{raw, r})
	}
	return p, out
}

func same(t *testing.T, a, b []byte) bool {
	t.Helper()
	ok, err := SameJSON(a, b)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

func TestUpstreamIsThePinnedFile(t *testing.T) {
	sum := sha256.Sum256(read(t, "upstream-default.json"))
	got := hex.EncodeToString(sum[:])
	m := regexp.MustCompile("sha256 `([0-9a-f]{64})`").FindStringSubmatch(string(read(t, "README.md")))
	if m == nil {
		t.Fatal("README.md names no sha256 for upstream-default.json")
	}
	if got != m[1] {
		t.Fatalf("upstream-default.json has sha256 %s, README.md pins %s: a changed upstream needs its source recorded", got, m[1])
	}
}

func TestShippedIsGenerated(t *testing.T) {
	want, err := Generate(read(t, "upstream-default.json"), read(t, "additions.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(read(t, "b10x-harness.json"), want) {
		t.Fatal("b10x-harness.json is not what the generator writes: run go run ./deploy/seccomp/gen")
	}
}

// TestShippedIsUpstreamPlusAdditions compares the two files rule by rule,
// without the generator: upstream's rules in order minus the removals,
// then the additions, and the other fields unchanged.
func TestShippedIsUpstreamPlusAdditions(t *testing.T) {
	up, upRules := rules(t, read(t, "upstream-default.json"))
	sh, shRules := rules(t, read(t, "b10x-harness.json"))
	adds, err := DecodeAdditions(read(t, "additions.json"))
	if err != nil {
		t.Fatal(err)
	}
	if up.DefaultAction != sh.DefaultAction || up.DefaultAction != "SCMP_ACT_ERRNO" {
		t.Fatalf("defaultAction: upstream %q, shipped %q (want SCMP_ACT_ERRNO for both)", up.DefaultAction, sh.DefaultAction)
	}
	if !same(t, up.ArchMap, sh.ArchMap) {
		t.Fatal("archMap differs from upstream")
	}
	var kept []rule
	removed := 0
	for _, u := range upRules {
		gone := false
		for _, rm := range adds.Remove {
			if same(t, u.raw, rm) {
				gone = true
			}
		}
		if gone {
			removed++
			continue
		}
		kept = append(kept, u)
	}
	if removed != len(adds.Remove) {
		t.Fatalf("%d upstream rules match the %d removals", removed, len(adds.Remove))
	}
	if len(shRules) != len(kept)+len(adds.Add) {
		t.Fatalf("shipped has %d rules, want %d kept upstream + %d added", len(shRules), len(kept), len(adds.Add))
	}
	for i, k := range kept {
		if !bytes.Equal(shRules[i].raw, k.raw) && !same(t, shRules[i].raw, k.raw) {
			t.Fatalf("shipped rule %d is not upstream's (%v)", i, k.r.Names)
		}
	}
	for i, a := range adds.Add {
		if !same(t, shRules[len(kept)+i].raw, a) {
			t.Fatalf("shipped rule %d is not addition %d", len(kept)+i, i)
		}
	}
	// Every added rule is a plain allow: no argument conditions that
	// could be misread, no capability or architecture gates.
	for _, a := range adds.Add {
		r, _ := DecodeRule(a)
		if r.Action != "SCMP_ACT_ALLOW" || len(r.Args) != 0 || string(r.Includes) != "{}" || string(r.Excludes) != "{}" {
			t.Errorf("added rule %v is not a plain SCMP_ACT_ALLOW", r.Names)
		}
		if !strings.HasPrefix(r.Comment, "b10x-harness: ") {
			t.Errorf("added rule %v: comment %q does not say whose it is", r.Names, r.Comment)
		}
	}
}

func addedNames(t *testing.T) []string {
	adds, err := DecodeAdditions(read(t, "additions.json"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, a := range adds.Add {
		r, _ := DecodeRule(a)
		names = append(names, r.Names...)
	}
	slices.Sort(names)
	return names
}

// unconditional returns the syscalls upstream allows to every container:
// allow rules with no argument conditions and no capability, kernel or
// architecture gate.
func unconditional(t *testing.T) map[string]bool {
	_, up := rules(t, read(t, "upstream-default.json"))
	m := map[string]bool{}
	for _, u := range up {
		if u.r.Action == "SCMP_ACT_ALLOW" && len(u.r.Args) == 0 && string(u.r.Includes) == "{}" && string(u.r.Excludes) == "{}" {
			for _, n := range u.r.Names {
				m[n] = true
			}
		}
	}
	if len(m) < 200 {
		t.Fatalf("upstream allows only %d syscalls unconditionally: not the profile expected", len(m))
	}
	return m
}

// checkEvidence fails unless file (from the module root) contains evidence.
func checkEvidence(t *testing.T, syscall, file, evidence string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, file))
	if err != nil {
		t.Errorf("%s: %v", syscall, err)
		return
	}
	if evidence == "" || !bytes.Contains(b, []byte(evidence)) {
		t.Errorf("%s: %s does not contain %q: the justification in README.md is out of date", syscall, file, evidence)
	}
}

func TestEveryAddedSyscallIsJustified(t *testing.T) {
	var inTable []string
	for _, row := range table(t, "added") {
		if len(row) != 4 || row[3] == "" {
			t.Fatalf("added table row %q: want syscall, file, evidence, why", row)
		}
		inTable = append(inTable, row[0])
		checkEvidence(t, row[0], row[1], row[2])
	}
	slices.Sort(inTable)
	if got := addedNames(t); !slices.Equal(got, inTable) {
		t.Fatalf("added syscalls %v, README.md justifies %v", got, inTable)
	}
	allowed := unconditional(t)
	for _, n := range addedNames(t) {
		if allowed[n] {
			t.Errorf("%s is added but upstream already allows it to every container", n)
		}
	}
}

func TestEveryRemovalIsJustified(t *testing.T) {
	adds, err := DecodeAdditions(read(t, "additions.json"))
	if err != nil {
		t.Fatal(err)
	}
	var comments, inTable []string
	for _, rm := range adds.Remove {
		r, _ := DecodeRule(rm)
		if r.Action == "SCMP_ACT_ALLOW" {
			t.Errorf("removal of allow rule %v would take something away from containers", r.Names)
		}
		comments = append(comments, r.Comment)
	}
	for _, row := range table(t, "removed") {
		inTable = append(inTable, row[0])
	}
	slices.Sort(comments)
	slices.Sort(inTable)
	if !slices.Equal(comments, inTable) {
		t.Fatalf("removed rules %q, README.md justifies %q", comments, inTable)
	}
}

func TestNeededSyscallsUpstreamAllows(t *testing.T) {
	allowed := unconditional(t)
	for _, row := range table(t, "upstream") {
		if len(row) != 3 {
			t.Fatalf("upstream table row %q: want syscall, file, evidence", row)
		}
		if !allowed[row[0]] {
			t.Errorf("%s: README.md says upstream allows it, but no unconditional upstream rule does", row[0])
		}
		checkEvidence(t, row[0], row[1], row[2])
	}
}

func TestGenerateFailsClosed(t *testing.T) {
	up := read(t, "upstream-default.json")
	cases := map[string]struct{ up, adds string }{
		"removal matching nothing":   {string(up), `{"comment":"","remove":[{"names":["nosuch"],"action":"SCMP_ACT_ERRNO","args":[],"comment":"","includes":{},"excludes":{}}],"add":[]}`},
		"unknown field in additions": {string(up), `{"comment":"","remove":[],"add":[],"extra":1}`},
		"unknown field in a rule":    {string(up), `{"comment":"","remove":[],"add":[{"names":["x"],"action":"SCMP_ACT_ALLOW","args":[],"comment":"","includes":{},"excludes":{},"minKernel":"5"}]}`},
		"rule without names":         {string(up), `{"comment":"","remove":[],"add":[{"names":[],"action":"SCMP_ACT_ALLOW","args":[],"comment":"","includes":{},"excludes":{}}]}`},
		"upstream not in its form":   {strings.Replace(string(up), "\t", "  ", -1), `{"comment":"","remove":[],"add":[]}`},
		"upstream unknown top field": {strings.Replace(string(up), `"defaultAction"`, `"listenerPath": "x",`+"\n\t"+`"defaultAction"`, 1), `{"comment":"","remove":[],"add":[]}`},
	}
	var first json.RawMessage
	{
		p, err := Decode(up)
		if err != nil {
			t.Fatal(err)
		}
		first = p.Syscalls[0]
	}
	cases["added rule already upstream"] = struct{ up, adds string }{string(up), `{"comment":"","remove":[],"add":[` + string(first) + `]}`}
	for name, c := range cases {
		if _, err := Generate([]byte(c.up), []byte(c.adds)); err == nil {
			t.Errorf("%s: Generate succeeded", name)
		}
	}
	// And the unchanged case succeeds and reproduces upstream exactly.
	out, err := Generate(up, []byte(`{"comment":"","remove":[],"add":[]}`))
	if err != nil || !bytes.Equal(out, up) {
		t.Fatalf("empty additions: err %v, identical %v", err, bytes.Equal(out, up))
	}
}
