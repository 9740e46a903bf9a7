package gate

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"sort"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/b10x/harness/internal/termsafe"
)

// TTYApprover asks a person on a terminal. It shows the resolved entry (never
// a generic verb), its operation and risk, and the arguments in a readable
// form, and reads one answer: y (yes, once), n (no), a (yes for this entry
// for the rest of the run). Anything else, or end of input, is no.
//
// Prompts are serialised; TTYApprover is safe for concurrent use.
type TTYApprover struct {
	mu  sync.Mutex
	in  *bufio.Reader
	out io.Writer
}

// NewTTYApprover returns an approver reading answers from in and writing
// prompts to out (both usually /dev/tty).
func NewTTYApprover(in io.Reader, out io.Writer) *TTYApprover {
	return &TTYApprover{in: bufio.NewReader(in), out: out}
}

// Name implements Approver.
func (*TTYApprover) Name() string { return "tty" }

// Approve implements Approver.
func (a *TTYApprover) Approve(ctx context.Context, r Request) (Decision, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	fmt.Fprintf(a.out, "\n── approval needed ──\n%s", DescribeRequest(r))
	fmt.Fprintf(a.out, "Allow %s? [y]es once, [n]o, [a]lways for %s in this run: ", termsafe.Line(r.Entry.Name), termsafe.Line(r.Entry.Name))
	type answer struct {
		line string
		err  error
	}
	ch := make(chan answer, 1)
	go func() {
		l, err := a.in.ReadString('\n')
		ch <- answer{l, err}
	}()
	var ans answer
	select {
	case ans = <-ch:
	case <-ctx.Done():
		fmt.Fprintln(a.out)
		return Decision{Reason: "no answer before the call was cancelled"}, ctx.Err()
	}
	switch strings.ToLower(strings.TrimSpace(ans.line)) {
	case "y", "yes":
		return Decision{Approved: true, Reason: "approved on the terminal"}, nil
	case "a", "always":
		return Decision{Approved: true, Standing: true, Reason: "approved on the terminal for the rest of the run"}, nil
	}
	if ans.err != nil && strings.TrimSpace(ans.line) == "" {
		return Decision{Reason: "the terminal gave no answer"}, nil
	}
	return Decision{Reason: "rejected on the terminal"}, nil
}

// DescribeRequest renders a request for a person on a terminal: entry,
// operation, risk, surface, and what the call would do. A run shows its
// argv quoted as a shell would need it, the program argv[0] resolves to and
// the cwd; a file_write shows the path, the size, the SHA-256 and the first
// lines of the content; a file_edit shows the diff of the change (or, when
// the file cannot be read, old_string and new_string as -/+ lines).
//
// Every string from the call is rendered with internal/termsafe: control
// characters, escape sequences and bidi or zero-width characters are shown
// escaped (\x1b, \u202e) and never reach the terminal raw. What is shown is
// bounded (previewLines, previewBytes), and says how much was left out.
func DescribeRequest(r Request) string {
	var b strings.Builder
	fmt.Fprintf(&b, "tool:      %s (%s, risk %s)\n", termsafe.Line(r.Entry.Name), termsafe.Line(r.Entry.Operation), r.Entry.Risk)
	if r.Via != "" {
		fmt.Fprintf(&b, "via:       %s on the %s surface\n", termsafe.Line(r.Via), termsafe.Line(r.Surface))
	}
	fields := argFields(r.Args)
	if argv, ok := fields["argv"].([]any); ok {
		s := make([]string, len(argv))
		for i, a := range argv {
			s[i], _ = a.(string)
		}
		fmt.Fprintf(&b, "argv:      %s\n", termsafe.Argv(s))
		delete(fields, "argv")
	}
	if r.Preview.Program != "" {
		fmt.Fprintf(&b, "program:   %s\n", termsafe.Line(r.Preview.Program))
	}
	if r.Preview.Dir != "" {
		fmt.Fprintf(&b, "cwd:       %s\n", termsafe.Line(r.Preview.Dir))
		delete(fields, "cwd")
	}
	old, hasOld := fields["old_string"].(string)
	nw, hasNew := fields["new_string"].(string)
	if hasOld && hasNew {
		delete(fields, "old_string")
		delete(fields, "new_string")
	}
	var blocks []func()
	for _, k := range []string{"content", "stdin"} {
		text, ok := fields[k].(string)
		if !ok {
			continue
		}
		delete(fields, k)
		sum := sha256.Sum256([]byte(text))
		fmt.Fprintf(&b, "%-10s %d bytes, %d lines, sha256 %x\n", k+":", len(text), countLines(text), sum)
		k := k
		blocks = append(blocks, func() {
			fmt.Fprintf(&b, "%s:\n", k)
			writePreview(&b, "  | ", text)
		})
	}
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "%-10s %s\n", termsafe.Line(k)+":", jsonText(fields[k]))
	}
	for _, w := range r.Writes {
		kind := "edit"
		if w.Whole {
			kind = "whole-file write"
		}
		fmt.Fprintf(&b, "writes:    %s (%s)\n", termsafe.Line(w.Path), kind)
	}
	for _, f := range blocks {
		f()
	}
	if hasOld && hasNew {
		if r.Preview.Diff != "" {
			b.WriteString("change:\n")
			writePreview(&b, "  ", r.Preview.Diff)
		} else {
			if r.Preview.DiffErr != "" {
				fmt.Fprintf(&b, "change:    no diff: %s\n", termsafe.Line(r.Preview.DiffErr))
			} else {
				b.WriteString("change:\n")
			}
			var d strings.Builder
			for _, l := range strings.Split(old, "\n") {
				d.WriteString("-" + l + "\n")
			}
			for _, l := range strings.Split(nw, "\n") {
				d.WriteString("+" + l + "\n")
			}
			writePreview(&b, "  ", d.String())
		}
	}
	return b.String()
}

// What a prompt shows of a text (content, stdin, a diff) at most.
const (
	previewLines = 20
	previewBytes = 2 << 10
)

// writePreview writes the first lines of text, each after prefix and
// rendered with termsafe.Text (a tab is kept, everything else escaped),
// and a line saying how many lines were left out.
func writePreview(b *strings.Builder, prefix, text string) {
	text = strings.TrimSuffix(text, "\n")
	lines := strings.Split(text, "\n")
	shown := 0
	for i, l := range lines {
		if i == previewLines || shown >= previewBytes {
			fmt.Fprintf(b, "%s... (%d more lines)\n", prefix, len(lines)-i)
			return
		}
		if len(l) > previewBytes-shown {
			cut := previewBytes - shown
			for cut > 0 && !utf8.RuneStart(l[cut]) {
				cut--
			}
			l = l[:cut] + " ... (line cut)"
		}
		shown += len(l)
		fmt.Fprintf(b, "%s%s\n", prefix, termsafe.Text(l))
	}
}

// countLines counts lines as an editor shows them: a last line without a
// newline counts.
func countLines(s string) int {
	n := strings.Count(s, "\n")
	if s != "" && !strings.HasSuffix(s, "\n") {
		n++
	}
	return n
}

// jsonText renders one argument value as JSON, safe for a terminal.
func jsonText(v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "(not shown: " + termsafe.Line(err.Error()) + ")"
	}
	return string(termsafe.JSON(bytes.TrimSuffix(b.Bytes(), []byte("\n"))))
}

// argFields turns a typed argument struct into a map by its JSON form.
func argFields(args any) map[string]any {
	m := map[string]any{}
	if args == nil || (reflect.ValueOf(args).Kind() == reflect.Pointer && reflect.ValueOf(args).IsNil()) {
		return m
	}
	b, err := json.Marshal(args)
	if err != nil {
		return m
	}
	_ = json.Unmarshal(b, &m)
	return m
}
