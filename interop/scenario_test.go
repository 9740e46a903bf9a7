package interop

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/b10x/harness/interop/fakemodel"
	"github.com/b10x/harness/mcp"
)

// want is what a call must come to, in the record and before the model.
type want struct {
	status string // executed, refused or failed
	reason string
	// text is the exact text the model must read (the client's own framing
	// removed); like, when text is "", a pattern it must match.
	text string
	like *regexp.Regexp
}

// planned is one scripted call and what it must come to.
type planned struct {
	call fakemodel.Call
	want want
	// ignored is the argument the record must say was ignored
	// ("wait_for_previous=true"); "": none.
	ignored string
}

// scenario is a script: turns of calls, then the final text.
type scenario struct {
	turns [][]planned
}

func (sc scenario) script() []fakemodel.Turn {
	var s []fakemodel.Turn
	for _, turn := range sc.turns {
		var t fakemodel.Turn
		for _, p := range turn {
			t.Calls = append(t.Calls, p.call)
		}
		s = append(s, t)
	}
	return append(s, fakemodel.Turn{Text: "done"})
}

// scenarioOptions are what differs between clients.
type scenarioOptions struct {
	// client names the client in what it writes (new.txt's content).
	client string
	// run says what a run call above the ceiling comes to: approved by the
	// client's user (Claude Code's Elicitation hook), or refused
	// approval_rejected with a message matching runRefused.
	runApproved bool
	runRefused  string
	// waitForPrevious adds Gemini CLI's wait_for_previous to some calls,
	// as its model sends it.
	waitForPrevious bool
}

var (
	sizeLimit = mcp.DefaultMaxResult
	// The files the size turn reads: exactly the MCP default (the clients
	// must pass it whole), one byte over (refused with the hint), and one
	// above what any tested client keeps whole.
	underText = sizedText(sizeLimit)
	overText  = sizedText(sizeLimit + 1)
	bigText   = sizedText(64 << 10)
)

// sizedText is n bytes of source-like lines, ending with a newline.
func sizedText(n int) string {
	var b strings.Builder
	for i := 1; b.Len() < n; i++ {
		fmt.Fprintf(&b, "line %05d: func f%d(x, y int) int { return x*%d + y } // the quick brown fox\n", i, i, i)
	}
	return b.String()[:n-1] + "\n"
}

// writeSized puts the size turn's files in the workspace.
func (f *fixture) writeSized(t *testing.T) {
	t.Helper()
	for name, body := range map[string]string{"under.txt": underText, "over.txt": overText, "big.txt": bigText} {
		if err := os.WriteFile(filepath.Join(f.ws, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func call(tool string, args map[string]any) fakemodel.Call {
	if args == nil {
		args = map[string]any{}
	}
	return fakemodel.Call{Tool: tool, Args: args}
}

func executed(text string) want { return want{status: "executed", text: text} }
func executedLike(re string) want {
	return want{status: "executed", like: regexp.MustCompile(re)}
}
func refused(reason, re string) want {
	return want{status: "refused", reason: reason, like: regexp.MustCompile(re)}
}

// fullScenario is every tool at least once, several calls in one turn, the
// attacks (paths outside the workspace, absolute and relative, to read,
// write and list), a refusal (a program not allowed), writes, a run call
// above the ceiling, and the result sizes around the MCP default.
func fullScenario(f *fixture, o scenarioOptions) scenario {
	hint := regexp.QuoteMeta("Read a part with offset and limit (lines).")
	newText := "written through " + o.client + "\n"
	run := planned{call: call("run", map[string]any{"argv": []string{"echo", "hi"}})}
	if o.runApproved {
		run.want = executedLike(`^exit status 0 \(\d+ ms\)\n--- stdout \(3 bytes\) ---\nhi\n--- stderr \(0 bytes\) ---\n$`)
	} else {
		run.want = refused("approval_rejected", o.runRefused)
	}
	sc := scenario{turns: [][]planned{
		{ // several calls in one turn, every read tool
			{call: call("file_read", map[string]any{"path": "hello.txt"}), want: executed(helloText)},
			{call: call("dir_list", nil), want: executedLike(`(?m)\A(.*\n)*file hello\.txt \(85 bytes\)\n(.*\n)*dir sub/\n`)},
			{call: call("find", map[string]any{"pattern": "*.txt"}), want: executedLike(`(?m)^sub/deep\.txt$`)},
			{call: call("search", map[string]any{"pattern": "quoted"}), want: executedLike(`(?m)^hello\.txt:2:"quoted" and a back\\slash`)},
		},
		{ // attacks: everything outside the workspace
			{call: call("file_read", map[string]any{"path": "../secret.txt"}), want: refused("denied_path", `leaves the workspace`)},
			{call: call("file_read", map[string]any{"path": f.outside}), want: refused("denied_path", `outside the workspace|leaves the workspace`)},
			{call: call("file_write", map[string]any{"path": "../escape.txt", "content": "x"}), want: refused("denied_path", `leaves the workspace`)},
			{call: call("dir_list", map[string]any{"path": "/etc"}), want: refused("denied_path", `outside the workspace|leaves the workspace`)},
		},
		{ // writes
			{call: call("file_write", map[string]any{"path": "new.txt", "content": newText}), want: executedLike(`new\.txt`)},
			{call: call("file_edit", map[string]any{"path": "notes.md", "old_string": "TODO: edit me", "new_string": "edited through " + o.client}), want: executedLike(`(?m)^\+edited through `)},
		},
		{ // run: above the ceiling; and a program that is not allowed
			run,
			{call: call("run", map[string]any{"argv": []string{"cat", "/etc/passwd"}}), want: refused("program_not_allowed", `cat`)},
		},
		{ // sizes: the MCP default passes every client whole; above it, the harness's refusal
			{call: call("file_read", map[string]any{"path": "under.txt"}), want: executed(underText)},
			{call: call("file_read", map[string]any{"path": "over.txt"}), want: want{status: "failed", reason: "oversized_result", like: regexp.MustCompile(hint)}},
			{call: call("file_read", map[string]any{"path": "big.txt"}), want: want{status: "failed", reason: "oversized_result", like: regexp.MustCompile(hint)}},
		},
	}}
	if o.waitForPrevious {
		// As Gemini CLI's model sends it: false on independent calls, true
		// on one that depends on the calls before it.
		sc.turns[0][1].call.Args["wait_for_previous"] = false
		sc.turns[0][1].ignored = "wait_for_previous=false"
		sc.turns[2][1].call.Args["wait_for_previous"] = true
		sc.turns[2][1].ignored = "wait_for_previous=true"
	}
	return sc
}

// seenText is what the model read of a result, the client's own framing
// removed, and whether the client marked it an error (nil: the wire has no
// such mark).
type seenText func(t *testing.T, r fakemodel.Result) (text string, isError *bool)

// check asserts a client's run of sc from both ends: the record (a call
// line for each scripted call, with the status and reason expected, and
// nothing else) and what the model saw of each result in the client's
// next request.
func check(t *testing.T, f *fixture, m *fakemodel.Server, sc scenario, seen seenText) {
	t.Helper()
	calls := f.calls(t)
	used := map[int]bool{}
	total := 0
	for ti, turn := range sc.turns {
		results := map[int]fakemodel.Result{}
		for _, r := range m.Seen(ti) {
			results[r.Index] = r
		}
		for ci, p := range turn {
			total++
			name := fmt.Sprintf("turn %d call %d (%s %v)", ti, ci, p.call.Tool, p.call.Args)
			rec, seq := findCall(calls, used, p)
			if rec == nil {
				t.Errorf("%s: no record line with these arguments; the record has:\n%s", name, dump(calls))
				continue
			}
			used[seq] = true
			if rec["status"] != p.want.status || str(rec["reason"]) != p.want.reason {
				t.Errorf("%s: recorded %v (%v): %v; want %s (%s)", name, rec["status"], rec["reason"], rec["message"], p.want.status, p.want.reason)
			}
			if p.ignored != "" {
				steps, _ := rec["steps"].([]any)
				first, _ := firstStep(steps)
				if first["step"] != "client" || !strings.Contains(str(first["detail"]), "ignored "+p.ignored) {
					t.Errorf("%s: the record does not say %s was ignored: steps %v", name, p.ignored, steps)
				}
			}
			r, ok := results[ci]
			if !ok {
				t.Errorf("%s: the model never saw its result", name)
				continue
			}
			text, isErr := seen(t, r)
			if isErr != nil && *isErr != (p.want.status != "executed") {
				t.Errorf("%s: the client marked it error=%v, status %s", name, *isErr, p.want.status)
			}
			checkText(t, name, text, p.want, rec)
		}
	}
	if len(calls) != total {
		t.Errorf("the record has %d call lines, the script made %d calls:\n%s", len(calls), total, dump(calls))
	}
}

// checkText asserts the text the model read.
func checkText(t *testing.T, name, text string, w want, rec map[string]any) {
	t.Helper()
	short := func(s string) string {
		if len(s) > 600 {
			return fmt.Sprintf("%q…(%d bytes)…%q", s[:300], len(s), s[len(s)-300:])
		}
		return fmt.Sprintf("%q", s)
	}
	if w.status == "executed" {
		if n, _ := rec["result_bytes"].(float64); int(n) != len(text) {
			t.Errorf("%s: the model read %d bytes, the harness returned %d: %s", name, len(text), int(n), short(text))
		}
		switch {
		case w.text != "" && text != w.text:
			t.Errorf("%s: the model read %s, want the file's text %s", name, short(text), short(w.text))
		case w.like != nil && !w.like.MatchString(text):
			t.Errorf("%s: the model read %s, want it to match %s", name, short(text), w.like)
		}
		return
	}
	prefix := fmt.Sprintf("%s (%s): ", w.status, w.reason)
	if !strings.HasPrefix(text, prefix) {
		t.Errorf("%s: the model read %s, want it to begin %q", name, short(text), prefix)
	}
	if w.like != nil && !w.like.MatchString(text) {
		t.Errorf("%s: the model read %s, want it to match %s", name, short(text), w.like)
	}
}

// findCall is the record line of p not yet used: its entry and arguments
// (without the argument the record says was ignored).
func findCall(calls map[int]map[string]any, used map[int]bool, p planned) (map[string]any, int) {
	args := map[string]any{}
	for k, v := range p.call.Args {
		if p.ignored == "" || k != mcp.WaitForPrevious {
			args[k] = v
		}
	}
	want, _ := json.Marshal(args)
	var w any
	_ = json.Unmarshal(want, &w)
	for seq, c := range calls {
		if used[seq] || c["entry"] != p.call.Tool {
			continue
		}
		got := c["args"]
		if got == nil {
			got = map[string]any{}
		}
		if reflect.DeepEqual(got, w) {
			return c, seq
		}
	}
	return nil, 0
}

func firstStep(steps []any) (map[string]any, bool) {
	if len(steps) == 0 {
		return nil, false
	}
	m, ok := steps[0].(map[string]any)
	return m, ok
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

// checkWorkspace asserts the writes landed, and nothing outside the
// workspace was read into the record or touched.
func checkWorkspace(t *testing.T, f *fixture, client string) {
	t.Helper()
	if b, err := os.ReadFile(filepath.Join(f.ws, "new.txt")); err != nil || string(b) != "written through "+client+"\n" {
		t.Errorf("new.txt: %q, %v", b, err)
	}
	if b, err := os.ReadFile(filepath.Join(f.ws, "notes.md")); err != nil || !strings.Contains(string(b), "edited through "+client) {
		t.Errorf("notes.md: %q, %v", b, err)
	}
	if b, err := os.ReadFile(f.outside); err != nil || string(b) != "the secret outside the workspace\n" {
		t.Errorf("the file outside: %q, %v", b, err)
	}
	if _, err := os.Lstat(filepath.Join(f.dir, "escape.txt")); err == nil {
		t.Errorf("a file was written outside the workspace")
	}
	rec, err := os.ReadFile(f.record)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(rec), "the secret outside") {
		t.Errorf("the record holds the content of the file outside the workspace")
	}
}

// checkEnd asserts the record's first and last lines: run_start, and a
// run_end saying the client ended the session normally, no call in flight.
func checkEnd(t *testing.T, f *fixture, endedBy string) {
	t.Helper()
	lines := f.recordLines(t)
	if len(lines) < 2 || lines[0]["event"] != "run_start" {
		t.Fatalf("the record does not begin with run_start: %s", dump(lines))
	}
	last := lines[len(lines)-1]
	if last["event"] != "run_end" || last["ended_by"] != endedBy {
		t.Errorf("the record ends with %v, want run_end ended_by %s", dump(last), endedBy)
	}
}

// httpScenario is the scenario of the CLIs over HTTP, shorter than
// fullScenario: several calls in one turn, an attack, writes, a run call
// above the ceiling (refused as o.runRefused says) and a program not
// allowed. The harness is given --allow-program echo --approve-up-to
// medium.
func httpScenario(o scenarioOptions) scenario {
	sc := scenario{turns: [][]planned{
		{
			{call: call("file_read", map[string]any{"path": "hello.txt"}), want: executed(helloText)},
			{call: call("dir_list", nil), want: executedLike(`(?m)^dir sub/$`)},
		},
		{
			{call: call("file_read", map[string]any{"path": "../secret.txt"}), want: refused("denied_path", `leaves the workspace`)},
			{call: call("file_write", map[string]any{"path": "new.txt", "content": "written through " + o.client + "\n"}), want: executedLike(`new\.txt`)},
			{call: call("file_edit", map[string]any{"path": "notes.md", "old_string": "TODO: edit me", "new_string": "edited through " + o.client}), want: executedLike(`(?m)^\+edited through `)},
		},
		{
			{call: call("run", map[string]any{"argv": []string{"echo", "hi"}}), want: refused("approval_rejected", o.runRefused)},
			{call: call("run", map[string]any{"argv": []string{"cat", "/etc/passwd"}}), want: refused("program_not_allowed", `cat`)},
		},
	}}
	if o.waitForPrevious {
		sc.turns[1][2].call.Args["wait_for_previous"] = true
		sc.turns[1][2].ignored = "wait_for_previous=true"
	}
	return sc
}
