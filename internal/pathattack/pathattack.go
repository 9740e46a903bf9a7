// Package pathattack is the tree and the path attacks the workspace
// resolver and the tools built on it are tested against, kept in one
// place so that both suites run the same corpus. It is for tests only.
package pathattack

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Secret is the content planted outside every test workspace. No result
// may ever contain it, and nothing resolved may lead to it.
const Secret = "OUTSIDE-SECRET-7f3a9c"

// Tree makes, in a temporary directory of t (removed with it), a
// workspace root T/data beside outside siblings, and returns T and
// T/data, both canonical:
//
//	T/secret.txt             Secret
//	T/outside/secret2.txt    Secret
//	T/data-archived/x, T/data2/x, T/data_backup, T/data.bak   Secret
//	T/data/                  the workspace: plain files, names that only
//	                         look like traversal, NFC and NFD names, a
//	                         binary file, 300 nested "a" directories, and
//	                         links in, out, in chains, loops and to /proc
func Tree(t testing.TB) (base, root string) {
	t.Helper()
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	root = filepath.Join(base, "data")
	files := map[string]string{
		"secret.txt":          Secret,
		"outside/secret2.txt": Secret,
		"data-archived/x":     Secret,
		"data2/x":             Secret,
		"data_backup":         Secret,
		"data.bak":            Secret,

		"data/file.txt":         "hello\n",
		"data/sub/inner.txt":    "inner text\n",
		"data/..test":           "dotdot-test\n",
		"data/test..":           "test-dotdot\n",
		"data/te..st":           "te-dotdot-st\n",
		"data/...":              "three dots\n",
		"data/....":             "four dots\n",
		"data/%2e%2e":           "percent-encoded name\n",
		"data/caf\u00e9":        "nfc\n", // NFC
		"data/cafe\u0301":       "nfd\n", // NFD
		"data/nfc/caf\u00e9":    "only nfc\n",
		"data/bin.dat":          "abc\x00def\n",
		"data/a/.keep":          "",
		"data/deep/notes.md":    "a note\n",
		"data/deep/er/code.go":  "package er\n\nfunc NewThing() {}\n",
		"data/deep/er/other.go": "package er\n",
	}
	for name, content := range files {
		p := filepath.Join(base, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// 300 nested "a" directories: the in-length form of the deep
	// traversal attack reaches the resolver.
	if err := os.MkdirAll(filepath.Join(root, strings.Repeat("a/", 300)), 0o755); err != nil {
		t.Fatal(err)
	}
	links := map[string]string{
		"out":          "../secret.txt",
		"outabs":       filepath.Join(base, "secret.txt"),
		"link1":        "link2",
		"link2":        "link3",
		"link3":        filepath.Join(base, "secret.txt"),
		"in":           "sub/inner.txt",
		"inabs":        filepath.Join(root, "sub/inner.txt"),
		"reenter":      "../data/file.txt",
		"dirout":       "../outside",
		"dirin":        "sub",
		"dangling_out": filepath.Join(base, "created-outside.txt"),
		"dangling_in":  "newtarget.txt",
		"procroot":     "/proc/self/root",
		"loop1":        "loop2",
		"loop2":        "loop1",
		"sub/up":       "../file.txt",
		"sub/upout":    "../../secret.txt",
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
			t.Fatal(err)
		}
	}
	return base, root
}

// Case is one attack, or one ordinary path, given to a resolver. Want is
// the canonical result when Reason is "", else Reason is the reason code
// of the refusal (workspace.Kind and tools.Reason spell them alike).
type Case struct {
	Name   string
	Path   string
	Want   string
	Reason string
}

// ReadCases are the read attacks of the corpus and the ordinary paths
// beside them, for the Tree at base and root (substituted for T and R).
func ReadCases(base, root string) []Case {
	T, R := base, root
	return []Case{
		// Prefix siblings (CVE-2025-53110).
		{"prefix sibling data-archived", T + "/data-archived/x", "", "denied_path"},
		{"relative sibling data2", "../data2/x", "", "denied_path"},
		{"prefix sibling data_backup", T + "/data_backup", "", "denied_path"},
		{"prefix sibling data.bak", T + "/data.bak", "", "denied_path"},
		{"relative sibling data_backup", "../data_backup", "", "denied_path"},
		// Traversal.
		{"a/../../etc/passwd", "a/../../etc/passwd", "", "denied_path"},
		{"./../../x", "./../../x", "", "denied_path"},
		{"sub/.. is the root", "sub/..", ".", ""},
		{"1000 a/ then 1001 ../ is over-long", strings.Repeat("a/", 1000) + strings.Repeat("../", 1001), "", "invalid_argument"},
		{"300 a/ then 301 ../ leaves", strings.Repeat("a/", 300) + strings.Repeat("../", 301), "", "denied_path"},
		{"300 a/ then 300 ../ is the root", strings.Repeat("a/", 300) + strings.Repeat("../", 300), ".", ""},
		{"dot", ".", ".", ""},
		{"dot slash", "./", ".", ""},
		{"double slash", "sub//inner.txt", "sub/inner.txt", ""},
		// Names that only look like traversal.
		{"..test", "..test", "..test", ""},
		{"test..", "test..", "test..", ""},
		{"te..st", "te..st", "te..st", ""},
		{"...", "...", "...", ""},
		{"....", "....", "....", ""},
		{"%2e%2e is a name", "%2e%2e", "%2e%2e", ""},
		{"%2e%2e/ is never decoded", "%2e%2e/%2e%2e/secret.txt", "", "tool_error"},
		// Absolute paths.
		{"absolute inside", R + "/file.txt", "file.txt", ""},
		{"absolute root", R, ".", ""},
		{"absolute root slash", R + "/", ".", ""},
		{"absolute outside", "/etc/passwd", "", "denied_path"},
		{"absolute outside sibling file", T + "/secret.txt", "", "denied_path"},
		{"absolute root then ..", R + "/../secret.txt", "", "denied_path"},
		// Argument bytes.
		{"NUL", "file.txt\x00.png", "", "invalid_argument"},
		{"empty", "", "", "invalid_argument"},
		{"invalid UTF-8", "caf\xe9", "", "invalid_argument"},
		// (The limits are workspace.MaxPathBytes and MaxNameBytes, which
		// this package cannot import: the workspace's tests import it.)
		{"over-long path", strings.Repeat("x", 4096+1), "", "invalid_argument"},
		{"over-long component", strings.Repeat("x", 255+1), "", "invalid_argument"},
		// Unicode forms are distinct byte strings.
		{"NFC café", "caf\u00e9", "caf\u00e9", ""},
		{"NFD café", "cafe\u0301", "cafe\u0301", ""},
		{"NFD does not alias NFC", "nfc/cafe\u0301", "", "tool_error"},
		// Links (CVE-2025-53109).
		{"link to outside file", "out", "", "denied_path"},
		{"absolute link to outside file", "outabs", "", "denied_path"},
		{"chain to outside", "link1", "", "denied_path"},
		{"chain middle to outside", "link2", "", "denied_path"},
		{"link inside followed", "in", "sub/inner.txt", ""},
		{"absolute link inside followed", "inabs", "sub/inner.txt", ""},
		{"link leaves and re-enters", "reenter", "", "denied_path"},
		{"dir link to outside", "dirout/secret2.txt", "", "denied_path"},
		{"dir link to outside itself", "dirout", "", "denied_path"},
		{"dir link inside", "dirin/inner.txt", "sub/inner.txt", ""},
		{"link .. then file", "dirin/../file.txt", "file.txt", ""},
		{"nested link up inside", "sub/up", "file.txt", ""},
		{"nested link up outside", "sub/upout", "", "denied_path"},
		{"link loop", "loop1", "", "tool_error"},
		// Magic links.
		{"/proc/self/root", "/proc/self/root" + R + "/file.txt", "", "denied_path"},
		{"/proc/self/root/etc", "/proc/self/root/etc/passwd", "", "denied_path"},
		{"/proc/self/cwd", "/proc/self/cwd/file.txt", "", "denied_path"},
		{"/dev/fd/N", "/dev/fd/3/file.txt", "", "denied_path"},
		{"link to /proc/self/root", "procroot/etc/passwd", "", "denied_path"},
		// Plain failures.
		{"missing", "nope.txt", "", "tool_error"},
		{"file as directory", "file.txt/x", "", "tool_error"},
		{"file with trailing slash", "file.txt/", "", "tool_error"},
	}
}
