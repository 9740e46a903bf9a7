package transcript

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/b10x/harness/internal/termsafe"
)

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

func roundDur(d time.Duration) string {
	if d < time.Millisecond {
		return "<1ms"
	}
	return d.Round(time.Millisecond).String()
}

// printPreview prints the first lines of a result, indented.
func printPreview(w io.Writer, s string) {
	const maxLines, maxWidth = 6, 160
	s = strings.TrimRight(s, "\n")
	if s == "" {
		return
	}
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if i == maxLines {
			fmt.Fprintf(w, "       | ... (%d more lines)\n", len(lines)-maxLines)
			break
		}
		fmt.Fprintf(w, "       | %s\n", termsafe.Text(firstLine(l, maxWidth)))
	}
}

func firstLine(s string, max int) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > max {
		cut := max
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "..."
	}
	return s
}

// argsText renders a call's arguments for the transcript: compact JSON, or
// the raw bytes escaped when they are not JSON; safe for a terminal either
// way.
func argsText(raw json.RawMessage, max int) string {
	var b strings.Builder
	if json.Valid(raw) {
		var v any
		_ = json.Unmarshal(raw, &v)
		_ = termsafe.WriteJSON(&b, "", v)
		return firstLine(strings.TrimSpace(b.String()), max)
	}
	return firstLine("(not JSON) "+termsafe.Line(string(raw)), max)
}
