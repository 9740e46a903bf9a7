package main

import (
	"encoding/json"
	"fmt"
	"strings"

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
