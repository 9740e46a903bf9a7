package mountinfo

import (
	"fmt"
	"strings"
	"testing"
)

// mangle escapes s as the kernel writes a mountinfo path field.
func mangle(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case ' ', '\t', '\n', '\\':
			fmt.Fprintf(&b, `\%03o`, c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

func TestUnescape(t *testing.T) {
	for in, want := range map[string]string{
		`/plain`:         "/plain",
		`/a\040b`:        "/a b",
		`/tab\011nl\012`: "/tab\tnl\n",
		`/back\134slash`: `/back\slash`,
		`/end\`:          `/end\`,
		`/short\04`:      `/short\04`,
		`/not\08x`:       `/not\08x`,
		`/big\777`:       `/big\777`, // no byte has that value
		`\040\040`:       "  ",
	} {
		if got := Unescape(in); got != want {
			t.Errorf("Unescape(%q) = %q, want %q", in, got, want)
		}
	}
}

// FuzzUnescape: whatever a path holds, Unescape of its mangled form gives
// it back.
func FuzzUnescape(f *testing.F) {
	for _, s := range []string{"/a b", `/x\y`, "/\t\n", `\040`, ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got := Unescape(mangle(s)); got != s {
			t.Errorf("Unescape(mangle(%q)) = %q", s, got)
		}
	})
}
