package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/b10x/harness/mcp"
)

// mcpOutcome is the gate's outcome a tools/call result carries (decision
// 0078): _meta's data, with the text of its one content block as "result"
// when executed and as "message" (after "STATUS (REASON): ") otherwise. A
// result with structuredContent, more than one block, or a text that does
// not say its status is an error.
func mcpOutcome(r *sdk.CallToolResult) (map[string]any, error) {
	b, _ := json.Marshal(r.Meta[mcp.OutcomeMeta])
	var o map[string]any
	if err := json.Unmarshal(b, &o); err != nil || o == nil {
		return nil, fmt.Errorf("no outcome in _meta: %s", b)
	}
	if r.StructuredContent != nil || len(r.Content) != 1 {
		return nil, fmt.Errorf("structuredContent %v, %d content blocks", r.StructuredContent, len(r.Content))
	}
	tc, ok := r.Content[0].(*sdk.TextContent)
	if !ok {
		return nil, fmt.Errorf("content %T", r.Content[0])
	}
	if o["status"] == "executed" {
		o["result"] = tc.Text
		return o, nil
	}
	prefix := fmt.Sprintf("%v (%v): ", o["status"], o["reason"])
	if !strings.HasPrefix(tc.Text, prefix) {
		return nil, fmt.Errorf("an error's text %q does not begin %q", tc.Text, prefix)
	}
	o["message"] = strings.TrimPrefix(tc.Text, prefix)
	return o, nil
}

// TestMCPDefaultMaxResult: under mcp, max_result is mcp.DefaultMaxResult
// unless --max-result or the policy file gives one; a read one byte over
// it is refused with the hint to read a part, one of exactly it is served.
func TestMCPDefaultMaxResult(t *testing.T) {
	ws := t.TempDir()
	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(ws, "under.txt"), bytes.Repeat([]byte("x"), mcp.DefaultMaxResult), 0o644))
	must(t, os.WriteFile(filepath.Join(ws, "over.txt"), bytes.Repeat([]byte("x"), mcp.DefaultMaxResult+1), 0o644))
	pol := filepath.Join(dir, "p.toml")
	must(t, os.WriteFile(pol, []byte(fmt.Sprintf("workspace = %q\nmax_result = \"64KiB\"\n", ws)), 0o644))
	for _, c := range []struct {
		args []string
		want float64
	}{
		{[]string{"--workspace", ws}, mcp.DefaultMaxResult},
		{[]string{"--workspace", ws, "--max-result", "1MiB"}, 1 << 20},
		{[]string{"--policy", pol}, 64 << 10},
	} {
		rec := filepath.Join(dir, fmt.Sprintf("rec-%d.jsonl", int(c.want)))
		s := mcpMustConnect(t, nil, append(c.args, "--record", rec)...)
		_, under := s.call(t, "file_read", json.RawMessage(`{"path":"under.txt"}`))
		_, over := s.call(t, "file_read", json.RawMessage(`{"path":"over.txt"}`))
		s.close(t)
		start := readRecord(t, rec)[0]
		p, _ := start["policy"].(map[string]any)
		if p["max_result"] != c.want {
			t.Errorf("%v: run_start's max_result %v, want %v", c.args, p["max_result"], c.want)
		}
		wantOver := "executed"
		if c.want == mcp.DefaultMaxResult {
			wantOver = "oversized_result"
			if msg, _ := over["message"].(string); !strings.Contains(msg, "Read a part with offset and limit") {
				t.Errorf("the refusal has no hint: %v", over)
			}
		}
		if mcpReason(under) != "executed" || mcpReason(over) != wantOver {
			t.Errorf("%v: under %v, over %v (want %s)", c.args, mcpReason(under), mcpReason(over), wantOver)
		}
	}
}
