package gate

import (
	"bufio"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/creack/pty"

	"github.com/b10x/harness/internal/termsafe"
	"github.com/b10x/harness/tools"
)

// TestTTYApproverOnAPseudoTerminal drives the approver through a real pty:
// the prompt is written to the terminal and the answer read from it.
func TestTTYApproverOnAPseudoTerminal(t *testing.T) {
	for _, c := range []struct {
		answer   string
		approved bool
		standing bool
	}{{"y\n", true, false}, {"a\n", true, true}, {"n\n", false, false}, {"whatever\n", false, false}} {
		ptmx, tty, err := pty.Open()
		if err != nil {
			t.Fatal(err)
		}
		a := NewTTYApprover(tty, tty)
		entry, _ := Lookup("run")
		type res struct {
			d   Decision
			err error
		}
		done := make(chan res, 1)
		go func() {
			d, err := a.Approve(context.Background(), Request{Entry: entry, Surface: "verbs", Via: "tool_invoke",
				Args: map[string]any{"argv": []any{"git", "status", "; rm -rf /"}}})
			done <- res{d, err}
		}()
		// Read the prompt from the terminal's master side.
		br := bufio.NewReader(ptmx)
		var prompt strings.Builder
		deadline := time.After(5 * time.Second)
		for !strings.Contains(prompt.String(), "[a]lways") {
			ch := make(chan string, 1)
			go func() { l, _ := br.ReadString(':'); ch <- l }()
			select {
			case l := <-ch:
				prompt.WriteString(l)
			case <-deadline:
				t.Fatalf("no prompt; got %q", prompt.String())
			}
		}
		p := prompt.String()
		for _, want := range []string{"run (shell, risk high)", "tool_invoke", `argv:      git status '; rm -rf /'`} {
			if !strings.Contains(p, want) {
				t.Errorf("prompt lacks %q:\n%s", want, p)
			}
		}
		if strings.Contains(p, "tool: tool_invoke") {
			t.Error("prompt shows the generic verb as the tool")
		}
		io.WriteString(ptmx, c.answer)
		r := <-done
		if r.err != nil || r.d.Approved != c.approved || r.d.Standing != c.standing {
			t.Errorf("answer %q: %+v %v", c.answer, r.d, r.err)
		}
		ptmx.Close()
		tty.Close()
	}
}

// safeForTerminal fails when s holds anything a terminal would act on.
func safeForTerminal(t *testing.T, what, s string) {
	t.Helper()
	if !utf8.ValidString(s) {
		t.Errorf("%s: not UTF-8: %q", what, s)
	}
	for _, r := range s {
		if r != '\n' && r != '\t' && termsafe.Unsafe(r) {
			t.Errorf("%s: holds %U raw:\n%q", what, r, s)
			return
		}
	}
}

// A prompt shows what the call would do, with every string from the model
// escaped: the escape sequences cannot move the cursor over the change.
func TestDescribeRequestShowsTheCallEscaped(t *testing.T) {
	const attack = "a = 2\x1b[1A\x1b[2K\r  + harmless comment \u009b2J \u202eevil"
	const shown = `a = 2\x1b[1A\x1b[2K\r  + harmless comment \u009b2J \u202eevil`
	edit, _ := Lookup("file_edit")
	write, _ := Lookup("file_write")
	run, _ := Lookup("run")
	var content strings.Builder
	for i := 1; i <= 30; i++ {
		fmt.Fprintf(&content, "line %d %s\n", i, attack)
	}
	sum := sha256.Sum256([]byte(content.String()))
	for _, c := range []struct {
		name string
		r    Request
		want []string
	}{
		{"file_edit with a diff", Request{Entry: edit,
			Args:    tools.FileEditArgs{Path: "a\x1b]0;t\x07.go", OldString: "a = 1", NewString: attack},
			Writes:  []tools.Write{{Path: "a\x1b]0;t\x07.go"}},
			Preview: tools.Preview{Diff: "--- a/x\n+++ b/x\n@@ -1,1 +1,1 @@\n-a = 1\n+" + attack + "\n"}},
			[]string{`path:      "a\u001b]0;t\u0007.go"`, `writes:    a\x1b]0;t\x07.go (edit)`, "  -a = 1\n", "  +" + shown + "\n"}},
		{"file_edit without a diff", Request{Entry: edit,
			Args:    tools.FileEditArgs{Path: "x", OldString: "a = 1", NewString: attack},
			Preview: tools.Preview{DiffErr: "old_string was not found\x1b[2J"}},
			[]string{`change:    no diff: old_string was not found\x1b[2J`, "  -a = 1\n", "  +" + shown + "\n"}},
		{"file_write", Request{Entry: write,
			Args: tools.FileWriteArgs{Path: "x", Content: content.String()}},
			[]string{fmt.Sprintf("content:   %d bytes, 30 lines, sha256 %x\n", content.Len(), sum),
				"  | line 1 " + shown + "\n", "  | line 20 " + shown + "\n", "  | ... (10 more lines)\n"}},
		{"run", Request{Entry: run,
			Args:    tools.RunArgs{Argv: []string{"sh", "-c", "echo hi\x1b[2J", "it's"}, Cwd: "sub"},
			Preview: tools.Preview{Program: "/usr/bin/sh", Dir: "sub"}},
			[]string{`argv:      sh -c $'echo hi\x1b[2J' 'it'\''s'`, "program:   /usr/bin/sh\n", "cwd:       sub\n"}},
	} {
		got := DescribeRequest(c.r)
		safeForTerminal(t, c.name, got)
		for _, w := range c.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: lacks %q:\n%s", c.name, w, got)
			}
		}
		if strings.Contains(got, "line 21") {
			t.Errorf("%s: shows more than %d lines:\n%s", c.name, previewLines, got)
		}
	}
}
