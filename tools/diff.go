package tools

import (
	"fmt"
	"sort"
	"strings"
)

// diffContext is the number of unchanged lines shown around a change.
const diffContext = 3

// editDiff renders, as a unified diff with paths a/rel and b/rel, the
// change made by replacing the occurrences of old that start at byte
// offsets offs (ascending, non-overlapping) in text by repl.
//
// It needs no general diff algorithm: the changed lines are exactly those
// the occurrences touch, so each group of touched lines becomes a run of
// '-' lines followed by the same lines with the replacements applied as
// '+' lines.
//
// The diff stops once it holds more than limit bytes (limit <= 0: no
// limit), ending with a line that says how many of its lines were left
// out; the counts cover every change either way.
func editDiff(rel, text, old, repl string, offs []int, limit int) (string, diffStats) {
	starts := lineStarts(text)
	nlines := len(starts)
	lineOf := func(pos int) int { return sort.SearchInts(starts, pos+1) - 1 }
	lineEndOff := func(l int) int { // offset just past line l
		if l+1 < nlines {
			return starts[l+1]
		}
		return len(text)
	}

	// Group the occurrences by the lines they touch.
	type change struct {
		a, b  int   // old lines a..b, inclusive
		occ   []int // occurrences inside
		lines []string
	}
	var changes []change
	for _, o := range offs {
		a, b := lineOf(o), lineOf(o+len(old)-1)
		if n := len(changes); n > 0 && changes[n-1].b >= a {
			changes[n-1].b = max(changes[n-1].b, b)
			changes[n-1].occ = append(changes[n-1].occ, o)
			continue
		}
		changes = append(changes, change{a: a, b: b, occ: []int{o}})
	}
	// Build each group's new text; when it no longer ends with a newline
	// (and is not at the end of the file) the next line joins it, so the
	// group grows by that line, possibly merging with the next group.
	for i := 0; i < len(changes); i++ {
		c := &changes[i]
		for {
			var nb strings.Builder
			pos := starts[c.a]
			for _, o := range c.occ {
				nb.WriteString(text[pos:o])
				nb.WriteString(repl)
				pos = o + len(old)
			}
			end := lineEndOff(c.b)
			nb.WriteString(text[pos:end])
			seg := nb.String()
			if seg != "" && !strings.HasSuffix(seg, "\n") && end < len(text) {
				c.b++
				if i+1 < len(changes) && changes[i+1].a <= c.b {
					c.b = max(c.b, changes[i+1].b)
					c.occ = append(c.occ, changes[i+1].occ...)
					changes = append(changes[:i+1], changes[i+2:]...)
				}
				continue
			}
			c.lines = splitLines(seg)
			break
		}
	}

	var stats diffStats
	for _, c := range changes {
		stats.removed += c.b - c.a + 1
		stats.added += len(c.lines)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "--- a/%s\n+++ b/%s\n", showPath(rel), showPath(rel))
	omitted := 0 // lines not shown once the diff holds more than limit bytes
	line := func(prefix byte, s string) {
		if limit > 0 && b.Len() > limit {
			omitted++
			return
		}
		b.WriteByte(prefix)
		b.WriteString(s)
		if !strings.HasSuffix(s, "\n") {
			b.WriteString("\n\\ No newline at end of file\n")
		}
	}
	oldLine := func(l int) string { return text[starts[l]:lineEndOff(l)] }
	delta := 0 // new line index minus old line index, before the current hunk
	for i := 0; i < len(changes); {

		// A hunk: changes i..j-1, whose context overlaps.
		j := i + 1
		for j < len(changes) && changes[j].a-changes[j-1].b-1 <= 2*diffContext {
			j++
		}
		from := max(0, changes[i].a-diffContext)
		to := min(nlines-1, changes[j-1].b+diffContext)
		oldCount, newCount := to-from+1, to-from+1
		for _, c := range changes[i:j] {
			newCount += len(c.lines) - (c.b - c.a + 1)
		}
		newFrom := from + delta
		if limit > 0 && b.Len() > limit {
			omitted++
		} else {
			fmt.Fprintf(&b, "@@ -%s +%s @@\n", hunkRange(from, oldCount), hunkRange(newFrom, newCount))
		}
		l := from
		for _, c := range changes[i:j] {
			for ; l < c.a; l++ {
				line(' ', oldLine(l))
			}
			for ; l <= c.b; l++ {
				line('-', oldLine(l))
			}
			for _, s := range c.lines {
				line('+', s)
			}
			delta += len(c.lines) - (c.b - c.a + 1)
		}
		for ; l <= to; l++ {
			line(' ', oldLine(l))
		}
		i = j
	}
	if omitted > 0 {
		fmt.Fprintf(&b, "[diff stopped past %d bytes; %d more line(s) of it not shown]\n", limit, omitted)
	}
	return b.String(), stats
}

// diffStats counts the lines a diff removes and adds.
type diffStats struct{ removed, added int }

// hunkRange renders a 0-based first line and a count as unified diff does:
// an empty range names the line before it.
func hunkRange(first, count int) string {
	if count == 0 {
		return fmt.Sprintf("%d,0", first)
	}
	return fmt.Sprintf("%d,%d", first+1, count)
}

// lineStarts returns the byte offset of each line's start. A final
// newline does not begin another line; an empty text has no lines.
func lineStarts(text string) []int {
	if text == "" {
		return nil
	}
	starts := []int{0}
	for i := 0; i < len(text)-1; i++ {
		if text[i] == '\n' {
			starts = append(starts, i+1)
		}
	}
	return starts
}

// splitLines splits s into lines that keep their newline.
func splitLines(s string) []string {
	var out []string
	for s != "" {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			out = append(out, s)
			break
		}
		out = append(out, s[:i+1])
		s = s[i+1:]
	}
	return out
}
