package surface

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/b10x/harness/gate"
	"github.com/b10x/harness/internal/termsafe"
)

// WriteText writes, for a person, what the model sees and what it does not:
// a table of the surface's definitions (name, the catalogue entry's
// operation and risk, the description's first line, each further line of
// it beneath), then each entry the gate did not publish, in catalogue
// order, with why. Every name, description and reason is made safe for a
// terminal with termsafe.Line. It returns the first write error, and writes
// nothing after it.
func (s *Surface) WriteText(w io.Writer) error {
	return writeText(w, s.kind, s.Definitions(), s.g.Unpublished())
}

// writeText is WriteText of a surface of kind presenting defs over a gate
// whose unpublished entries are unpublished (entry → why).
func writeText(w io.Writer, kind Kind, defs []Def, unpublished map[string]string) error {
	ew := termsafe.NewWriter(w)
	tw := tabwriter.NewWriter(ew, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "SURFACE %s — what the model sees:\n", kind)
	for _, d := range defs {
		first, rest, _ := strings.Cut(d.Description, "\n")
		risk := ""
		if en, ok := gate.Lookup(d.Name); ok {
			risk = en.Operation + ", risk " + en.Risk.String()
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", termsafe.Line(d.Name), risk, termsafe.Line(first))
		// The rest (the write rules the model is told, for one) is shown
		// too, a line each, beneath the first.
		for _, l := range strings.Split(rest, "\n") {
			if strings.TrimSpace(l) != "" {
				fmt.Fprintf(tw, "  \t\t%s\n", termsafe.Line(l))
			}
		}
	}
	tw.Flush()
	if len(unpublished) > 0 {
		fmt.Fprintln(ew, "\nNot published:")
		for _, en := range gate.Catalogue {
			if why, ok := unpublished[en.Name]; ok {
				fmt.Fprintf(ew, "  %s: %s\n", termsafe.Line(en.Name), termsafe.Line(why))
			}
		}
	}
	return ew.Err()
}
