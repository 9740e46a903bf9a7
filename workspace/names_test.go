package workspace

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzNameQuoting: every name prints on one line as valid UTF-8 without
// control characters, and its printed form, alone or in a path, names it
// again.
func FuzzNameQuoting(f *testing.F) {
	for _, s := range []string{"a", "lnk\nfile fake (1 bytes)", "bad\xffname", `"quoted`, `q"uote`, "\x1b[2J", "\u2028", "caf\u00e9", "\\x41", `"\x41"`, " ", "..", "\t", "\u200b", "\xed\xa0\x80"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		if name == "" || strings.ContainsAny(name, "/\x00") {
			return
		}
		shown := ShowName(name)
		if !utf8.ValidString(shown) {
			t.Fatalf("%q shown as invalid UTF-8 %q", name, shown)
		}
		for _, r := range shown {
			if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || r == '\u2028' || r == '\u2029' {
				t.Fatalf("%q shown with %U: %q", name, r, shown)
			}
		}
		for _, p := range []string{name, "dir/" + name, name + "/x"} {
			got, err := decodePathArg(ShowPath(p))
			if err != nil || got != p {
				t.Fatalf("%q shown %q decodes to %q, %v", p, ShowPath(p), got, err)
			}
		}
	})
}
