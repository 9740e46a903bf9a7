package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/b10x/harness/record"
)

// hostile is model-controlled text at every place a record line holds
// one: markup, an attribute break-out, a bidi override and a terminal
// escape.
const hostile = "<script>document.title='pwned'</script>\"><img src=x onerror=alert(1)>\u202egnp.exe\x1b[31m"

func hostileRecord(t *testing.T) string {
	t.Helper()
	line := func(v map[string]any) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return string(b) + "\n"
	}
	start := map[string]any{"event": "run_start", "record_version": 2, "time": "2026-01-02T03:04:05Z", "version": hostile, "command": "run",
		"workspace": hostile, "confinement": map[string]any{"enforced": []string{hostile}, "missing": []any{map[string]any{"name": hostile}}},
		"published": []any{map[string]any{"name": hostile, "risk": "low"}}, "unpublished": map[string]any{},
		"policy": map[string]any{"approve_up_to": hostile, "approve": "all", "approver": "all", "write_scope": []string{hostile}, "max_result": 1}}
	call := map[string]any{"event": "call", "seq": 1, "time": "2026-01-02T03:04:06Z", "surface": "flat", "entry": "file_edit", "via": hostile,
		"args":   map[string]any{"path": hostile, "old_string": hostile, "new_string": "b\n" + hostile},
		"steps":  []any{map[string]any{"step": "scope", "verdict": "refuse", "detail": hostile}},
		"status": "refused", "reason": hostile, "message": hostile, "result_bytes": 0, "duration_us": 5}
	denial := map[string]any{"event": "denial", "seq": 1, "time": "2026-01-02T03:04:06Z", "layer": hostile, "operation": hostile, "object": hostile}
	net := map[string]any{"event": "net", "seq": 1, "time": "2026-01-02T03:04:06Z", "protocol": hostile, "host": hostile, "port": 1,
		"decision": "denied", "rule": hostile, "bytes_up": 0, "bytes_down": 0, "duration_ms": 0}
	end := map[string]any{"event": "run_end", "time": "2026-01-02T03:04:07Z", "ended_by": hostile, "how": hostile}
	return line(start) + line(call) + line(denial) + line(net) + line(end)
}

func render(t *testing.T, records ...string) string {
	t.Helper()
	var logs []*record.Log
	for i, r := range records {
		l, err := record.Load(strings.NewReader(r), fmt.Sprintf("rec-%d%s", i+1, hostile))
		if err != nil {
			t.Fatal(err)
		}
		logs = append(logs, l)
	}
	var b bytes.Buffer
	if err := Write(&b, logs); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestHostileTextIsShownNotRun(t *testing.T) {
	out := render(t, hostileRecord(t))
	for _, bad := range []string{"<script", "<img", "\u202e", "\x1b", "onerror=alert(1)>"} {
		if strings.Contains(out, bad) {
			t.Errorf("the page holds %q raw", bad)
		}
	}
	for _, shown := range []string{"&lt;script&gt;document.title=", "&lt;img src=x onerror=alert(1)&gt;", `\u202e`, `\x1b`} {
		if !strings.Contains(out, shown) {
			t.Errorf("the page does not show %q", shown)
		}
	}
	if !strings.Contains(out, `content="default-src 'none'; style-src 'unsafe-inline'"`) {
		t.Error("the page has no Content-Security-Policy forbidding scripts and fetches")
	}
}

func TestOneRecord(t *testing.T) {
	rec := hostileRecord(t)
	out := render(t, rec)
	if strings.Contains(out, `class="records"`) {
		t.Error("one record got the table of records")
	}
	for _, want := range []string{`data-seq="1" data-status="refused"`, `class="denial" data-layer=`, `class="net net-denied"`, "Change asked for: edit", `<span class="del">`, `<span class="add">+ b</span>`} {
		if !strings.Contains(out, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
}

func TestManyRecords(t *testing.T) {
	rec := hostileRecord(t)
	out := render(t, rec, rec, strings.Replace(rec, `"status":"refused"`, `"status":"executed"`, 1))
	if got := strings.Count(out, `<tr class="record-row"`); got != 3 {
		t.Errorf("%d rows in the table of records, want 3", got)
	}
	for i := 1; i <= 3; i++ {
		if !strings.Contains(out, fmt.Sprintf(`<a href="#r%d">`, i)) || !strings.Contains(out, fmt.Sprintf(`<section class="record" id="r%d"`, i)) {
			t.Errorf("record %d has no link or no section", i)
		}
	}
	// The totals row: 3 calls, 1 executed, 2 refused, 3 denials.
	if !strings.Contains(out, `<tr class="totals"><th>total</th><td class="n"></td><td class="n">3</td><td class="n">1</td><td class="n">2</td>`) {
		t.Errorf("totals row wrong:\n%s", out[strings.Index(out, `<tr class="totals"`):][:300])
	}
}

func TestLongArgumentSaysItIsNotKept(t *testing.T) {
	c := changeOf("file_write", map[string]any{"path": "a", "content": map[string]any{"bytes": 5000.0, "sha256": "ab12"}})
	if c == nil || len(c.Lines) != 0 || !strings.Contains(c.Note, "content: 5000 bytes, sha256 ab12") {
		t.Errorf("change %+v", c)
	}
	v := changeOf("tool_invoke", map[string]any{"name": "file_write", "arguments": map[string]any{"path": "a", "content": "x\ny\n"}})
	if v == nil || v.Path != "a" || len(v.Lines) != 2 {
		t.Errorf("through tool_invoke: %+v", v)
	}
	if changeOf("file_read", map[string]any{"path": "a"}) != nil {
		t.Error("file_read changes nothing")
	}
}
