package gate

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"sort"
	"strings"
	"sync"
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
	fmt.Fprintf(a.out, "Allow %s? [y]es once, [n]o, [a]lways for %s in this run: ", r.Entry.Name, r.Entry.Name)
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

// DescribeRequest renders a request for a person: entry, operation, risk,
// surface, and the arguments (argv as a list, paths, an edit as -/+ lines).
func DescribeRequest(r Request) string {
	var b strings.Builder
	fmt.Fprintf(&b, "tool:      %s (%s, risk %s)\n", r.Entry.Name, r.Entry.Operation, r.Entry.Risk)
	if r.Via != "" {
		fmt.Fprintf(&b, "via:       %s on the %s surface\n", r.Via, r.Surface)
	}
	fields := argFields(r.Args)
	if argv, ok := fields["argv"].([]any); ok {
		b.WriteString("argv:\n")
		for i, a := range argv {
			fmt.Fprintf(&b, "  [%d] %q\n", i, a)
		}
		delete(fields, "argv")
	}
	old, hasOld := fields["old_string"].(string)
	nw, hasNew := fields["new_string"].(string)
	if hasOld && hasNew {
		delete(fields, "old_string")
		delete(fields, "new_string")
	}
	if content, ok := fields["content"].(string); ok {
		fields["content"] = fmt.Sprintf("(%d bytes)", len(content))
	}
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v, _ := json.Marshal(fields[k])
		fmt.Fprintf(&b, "%-10s %s\n", k+":", v)
	}
	for _, w := range r.Writes {
		kind := "edit"
		if w.Whole {
			kind = "whole-file write"
		}
		fmt.Fprintf(&b, "writes:    %s (%s)\n", w.Path, kind)
	}
	if hasOld && hasNew {
		b.WriteString("change:\n")
		for _, l := range strings.Split(old, "\n") {
			fmt.Fprintf(&b, "  - %s\n", l)
		}
		for _, l := range strings.Split(nw, "\n") {
			fmt.Fprintf(&b, "  + %s\n", l)
		}
	}
	return b.String()
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
