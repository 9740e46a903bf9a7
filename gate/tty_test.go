package gate

import (
	"bufio"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"
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
		for _, want := range []string{"run (shell, risk high)", "tool_invoke", `[2] "; rm -rf /"`} {
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
