package tools

import (
	"fmt"
	"sort"
	"strings"

	"github.com/b10x/harness/workspace"
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
	t := diffText{text: text, starts: lineStarts(text)}
	changes := t.changes(old, repl, offs)
	var stats diffStats
	for _, c := range changes {
		stats.removed += c.b - c.a + 1
		stats.added += len(c.lines)
	}
	w := &diffWriter{t: &t, limit: limit}
	fmt.Fprintf(&w.b, "--- a/%s\n+++ b/%s\n", workspace.ShowPath(rel), workspace.ShowPath(rel))
	for i := 0; i < len(changes); {
		// A hunk: changes i..j-1, whose context overlaps.
		j := i + 1
		for j < len(changes) && changes[j].a-changes[j-1].b-1 <= 2*diffContext {
			j++
		}
		w.hunk(changes[i:j])
		i = j
	}
	if w.omitted > 0 {
		fmt.Fprintf(&w.b, "[diff stopped past %d bytes; %d more line(s) of it not shown]\n", limit, w.omitted)
	}
	return w.b.String(), stats
}

// diffText is the old text of a diff, with the offset of each line's
// start.
type diffText struct {
	text   string
	starts []int
}

// lineOf is the line holding byte offset pos.
func (t *diffText) lineOf(pos int) int { return sort.SearchInts(t.starts, pos+1) - 1 }

// lineEndOff is the offset just past line l.
func (t *diffText) lineEndOff(l int) int {
	if l+1 < len(t.starts) {
		return t.starts[l+1]
	}
	return len(t.text)
}

// oldLine is line l of the old text, with its newline.
func (t *diffText) oldLine(l int) string { return t.text[t.starts[l]:t.lineEndOff(l)] }

// diffChange is one group of touched lines: old lines a..b, inclusive,
// the occurrences inside them, and the new lines they become.
type diffChange struct {
	a, b  int
	occ   []int
	lines []string
}

// changes groups the occurrences by the lines they touch and builds each
// group's new lines.
func (t *diffText) changes(old, repl string, offs []int) []diffChange {
	var changes []diffChange
	for _, o := range offs {
		a, b := t.lineOf(o), t.lineOf(o+len(old)-1)
		if n := len(changes); n > 0 && changes[n-1].b >= a {
			changes[n-1].b = max(changes[n-1].b, b)
			changes[n-1].occ = append(changes[n-1].occ, o)
			continue
		}
		changes = append(changes, diffChange{a: a, b: b, occ: []int{o}})
	}
	// Build each group's new text; when it no longer ends with a newline
	// (and is not at the end of the file) the next line joins it, so the
	// group grows by that line, possibly merging with the next group.
	for i := 0; i < len(changes); i++ {
		c := &changes[i]
		for {
			var nb strings.Builder
			pos := t.starts[c.a]
			for _, o := range c.occ {
				nb.WriteString(t.text[pos:o])
				nb.WriteString(repl)
				pos = o + len(old)
			}
			end := t.lineEndOff(c.b)
			nb.WriteString(t.text[pos:end])
			seg := nb.String()
			if seg != "" && !strings.HasSuffix(seg, "\n") && end < len(t.text) {
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
	return changes
}

// diffWriter writes the hunks of a diff, stopping once it holds more than
// limit bytes (limit <= 0: no limit) and counting what it leaves out.
type diffWriter struct {
	t       *diffText
	b       strings.Builder
	limit   int
	omitted int // lines not shown once the diff holds more than limit bytes
	delta   int // new line index minus old line index, before the current hunk
}

// full reports whether the diff holds more than its limit.
func (w *diffWriter) full() bool { return w.limit > 0 && w.b.Len() > w.limit }

// line writes one line of a hunk.
func (w *diffWriter) line(prefix byte, s string) {
	if w.full() {
		w.omitted++
		return
	}
	w.b.WriteByte(prefix)
	w.b.WriteString(s)
	if !strings.HasSuffix(s, "\n") {
		w.b.WriteString("\n\\ No newline at end of file\n")
	}
}

// hunk writes one hunk: the changes, whose context overlaps, with
// diffContext lines of context around them.
func (w *diffWriter) hunk(changes []diffChange) {
	nlines := len(w.t.starts)
	from := max(0, changes[0].a-diffContext)
	to := min(nlines-1, changes[len(changes)-1].b+diffContext)
	oldCount, newCount := to-from+1, to-from+1
	for _, c := range changes {
		newCount += len(c.lines) - (c.b - c.a + 1)
	}
	newFrom := from + w.delta
	if w.full() {
		w.omitted++
	} else {
		fmt.Fprintf(&w.b, "@@ -%s +%s @@\n", hunkRange(from, oldCount), hunkRange(newFrom, newCount))
	}
	l := from
	for _, c := range changes {
		for ; l < c.a; l++ {
			w.line(' ', w.t.oldLine(l))
		}
		for ; l <= c.b; l++ {
			w.line('-', w.t.oldLine(l))
		}
		for _, s := range c.lines {
			w.line('+', s)
		}
		w.delta += len(c.lines) - (c.b - c.a + 1)
	}
	for ; l <= to; l++ {
		w.line(' ', w.t.oldLine(l))
	}
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
