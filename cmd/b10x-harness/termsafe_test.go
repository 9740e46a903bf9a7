package main

import (
	"bytes"
	"fmt"
	"github.com/b10x/harness/internal/testenv"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"
)

// hostileText is what a model puts in a string to rewrite the screen: move
// the cursor up and erase the line, return and overwrite, a C1 CSI (U+009B),
// a bidi override, an OSC 8 hyperlink and a bracketed paste.
const hostileText = "a = 2\x1b[1A\x1b[2K\r  + harmless comment \u009b2J \u202eevil \x1b]8;;http://x/\x1b\\link \x1b[200~paste"

// hostileShown is hostileText as termsafe shows it.
const hostileShown = `a = 2\x1b[1A\x1b[2K\r  + harmless comment \u009b2J \u202eevil \x1b]8;;http://x/\x1b\\link \x1b[200~paste`

// hostileJSON is hostileText as a JSON string's body, all ASCII: nothing
// raw is on the harness's command line.
const hostileJSON = `a = 2\u001b[1A\u001b[2K\r  + harmless comment \u009b2J \u202eevil \u001b]8;;http://x/\u001b\\link \u001b[200~paste`

// assertTerminalSafe fails when what reached the terminal holds a raw ESC,
// a C1 control (as UTF-8, or as a byte that is not UTF-8, which an 8-bit
// terminal reads as C1) or a bidi control.
func assertTerminalSafe(t *testing.T, what string, out []byte) {
	t.Helper()
	for i := 0; i < len(out); {
		r, n := utf8.DecodeRune(out[i:])
		bad := ""
		switch {
		case r == utf8.RuneError && n == 1:
			bad = fmt.Sprintf("byte %#x that is not UTF-8", out[i])
		case r == 0x1b:
			bad = "ESC"
		case r >= 0x80 && r <= 0x9f:
			bad = fmt.Sprintf("C1 control %U", r)
		case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
			bad = fmt.Sprintf("bidi control %U", r)
		}
		if bad != "" {
			t.Errorf("%s: a raw %s reached the terminal at byte %d:\n%q", what, bad, i, out)
			return
		}
		i += n
	}
}

// onTerminal starts cmd with p's slave as its stdin, stdout and stderr and,
// with ctty, as its controlling terminal (what /dev/tty opens).
func onTerminal(t *testing.T, p *pty, cmd *exec.Cmd, ctty bool) {
	t.Helper()
	cmd.Env = append(os.Environ(), "B10X_TEST_MAIN=1")
	f, err := os.OpenFile(p.name, os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd.Stdin, cmd.Stdout, cmd.Stderr = f, f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: ctty, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
}

// readUntil reads the master until what it got holds want, or fails after 60s.
func (p *pty) readUntil(t *testing.T, got *bytes.Buffer, want string) {
	t.Helper()
	buf := make([]byte, 4096)
	deadline := time.Now().Add(60 * time.Second)
	for !bytes.Contains(got.Bytes(), []byte(want)) {
		if time.Now().After(deadline) {
			t.Fatalf("the terminal never showed %q; it got:\n%s", want, got.String())
		}
		p.master.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
		n, _ := p.master.Read(buf)
		got.Write(buf[:n])
	}
}

// TestApprovalPromptOnTerminalIsSafe: a file_edit whose new_string holds
// escape sequences asks on the harness's controlling terminal; the prompt
// shows the diff with the sequences escaped, and no raw ESC, C1 or bidi
// character from the call reaches the terminal, before or after the answer.
func TestApprovalPromptOnTerminalIsSafe(t *testing.T) {
	testenv.Require(t, atkWrites(), "file_write and file_edit (a confined workspace, landlock-self)", testenv.ShapeNoLandlock)
	ws, _ := sampleWorkspace(t)
	rec := filepath.Join(t.TempDir(), "rec.jsonl")
	p := openPTY(t)
	cmd := harnessCommand("call", "--workspace", ws, "--approve", "prompt", "--record", rec, "file_edit",
		`{"path":"hello.txt","old_string":"world","new_string":"`+hostileJSON+`"}`)
	onTerminal(t, p, cmd, true)
	var got bytes.Buffer
	p.readUntil(t, &got, "in this run: ")
	prompt := got.String()
	for _, want := range []string{"tool:      file_edit", "--- a/hello.txt\r\n", "  -world\r\n", "  +" + hostileShown + "\r\n", "writes:    hello.txt (edit)"} {
		if !strings.Contains(prompt, want) {
			t.Errorf("the prompt lacks %q:\n%s", want, prompt)
		}
	}
	if _, err := p.master.Write([]byte("y\n")); err != nil {
		t.Fatal(err)
	}
	code := waitExit(t, cmd)
	got.WriteString(p.drain())
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, got.String())
	}
	assertTerminalSafe(t, "call --approve prompt file_edit", got.Bytes())
	if b, _ := os.ReadFile(filepath.Join(ws, "hello.txt")); string(b) != "hello\n"+hostileText+"\n" {
		t.Errorf("the approved edit did not land: %q", b)
	}

	// The record holds the strings raw (it is JSON, for programs); a
	// summary of it on a terminal does not.
	sum := exec.Command(os.Args[0], "record", "summary", rec)
	p.drain()
	onTerminal(t, p, sum, false)
	if code := waitExit(t, sum); code != 0 {
		t.Fatalf("record summary: exit %d: %s", code, p.drain())
	}
	assertTerminalSafe(t, "record summary", []byte(p.drain()))
}

// TestRecordSummaryOnTerminalIsSafe: a record whose lines hold escape
// sequences in every field the summary prints (a forged or model-written
// record) is summarised, as text and as JSON, without a raw ESC, C1 or bidi
// character reaching the terminal, and with the escaped form shown.
func TestRecordSummaryOnTerminalIsSafe(t *testing.T) {
	h := hostileJSON
	rec := filepath.Join(t.TempDir(), "rec.jsonl")
	lines := `{"event":"run_start","seq":0}
{"event":"call","seq":1,"entry":"file_edit` + h + `","via":"tool_invoke` + h + `","status":"refused","reason":"denied_path` + h + `","message":"` + h + `","steps":[{"step":"paths` + h + `","verdict":"refuse"}]}
{"event":"run_end","seq":2,"ended_by":"completed` + h + `"}
`
	must(t, os.WriteFile(rec, []byte(lines), 0o644))
	for _, json := range []bool{false, true} {
		args := []string{"record", "summary", rec}
		if json {
			args = append(args, "--json")
		}
		out := safeOnTerminal(t, args...)
		want := "— " + hostileShown
		if json {
			want = `\u202eevil`
		}
		if !strings.Contains(out, want) {
			t.Errorf("%v: the escaped text %q is not shown:\n%s", args, want, out)
		}
	}
}

// safeOnTerminal runs the harness with args on a fresh pty, requires exit
// 0 and that nothing raw reached the terminal, and returns what it showed.
func safeOnTerminal(t *testing.T, args ...string) string {
	t.Helper()
	p := openPTY(t)
	cmd := harnessCommand(args...)
	onTerminal(t, p, cmd, false)
	code := waitExit(t, cmd)
	out := p.drain()
	if code != 0 {
		t.Fatalf("%v: exit %d: %s", args, code, out)
	}
	assertTerminalSafe(t, strings.Join(args, " "), []byte(out))
	return out
}

// TestToolsOnTerminalIsSafe: tools, as text and as JSON, shows a write-scope
// rule holding escape sequences (the scope announcement quotes it) escaped.
func TestToolsOnTerminalIsSafe(t *testing.T) {
	testenv.Require(t, atkWrites(), "file_write and file_edit (a confined workspace, landlock-self)", testenv.ShapeNoLandlock)
	ws, _ := sampleWorkspace(t)
	rule := "notes\x1b]0;t\x07\u202e\u009b=denied"
	for _, json := range []bool{false, true} {
		args := []string{"tools", "--workspace", ws, "--approve", "deny", "--write-scope", rule}
		if json {
			args = append(args, "--json")
		}
		out := safeOnTerminal(t, args...)
		if json && !strings.Contains(out, `notes\u001b]0;t\u0007\u202e\u009b`) {
			t.Errorf("tools --json does not show the rule escaped:\n%s", out)
		}
	}
}
