package tools

import (
	"fmt"
	"strings"
	"sync"

	"github.com/b10x/harness/workspace"
)

// maxNotes bounds the skipped-path notes a walk keeps for the result text.
const maxNotes = 10

// notes collects the paths a walk or a search skipped, with the reason.
// Safe for concurrent use.
type notes struct {
	mu    sync.Mutex
	count int
	list  []string
}

func (n *notes) add(rel, why string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.count++
	if len(n.list) < maxNotes {
		n.list = append(n.list, fmt.Sprintf("%s: %s", workspace.ShowPath(rel), why))
	}
}

// text renders the notes as a footer for a result text, or "".
func (n *notes) text() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.count == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "[%d path(s) skipped]\n", n.count)
	for _, l := range n.list {
		b.WriteString("  skipped ")
		b.WriteString(l)
		b.WriteByte('\n')
	}
	if n.count > len(n.list) {
		fmt.Fprintf(&b, "  ... and %d more\n", n.count-len(n.list))
	}
	return b.String()
}
