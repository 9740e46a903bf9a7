// Package termsafe renders untrusted text (anything a model, a file or a
// record holds) for a terminal, so that it is shown and never interpreted.
//
// # What is escaped
//
// A terminal acts on more than printable text: C0 controls (ESC starts CSI,
// OSC and DCS sequences that move the cursor, erase lines, set the title or
// make hyperlinks; CR and BS overwrite what is shown), DEL, the C1 controls
// U+0080–U+009F (U+009B is a one-character CSI on terminals that honour
// C1), and bytes that are not UTF-8 (a terminal may resync on them and
// swallow what follows). Unicode format characters reorder or hide text
// without a terminal acting on anything: bidi embeddings, overrides and
// isolates (U+202A–U+202E, U+2066–U+2069), zero-width characters (U+200B–
// U+200F), U+FEFF; the line and paragraph separators U+2028 and U+2029 break
// lines on some terminals. Every one of them is written as an escape:
//
//	\\        a backslash (so an escape in the input cannot pass for one of ours)
//	\n \t \r  newline, tab, carriage return (Line only for \n and \t)
//	\xNN      any other C0 control, DEL, and each byte that is not UTF-8 (0x80–0xff)
//	\uNNNN    a C1 control, a format character (category Cf), U+2028, U+2029
//	\U00NNNNNN a format character above U+FFFF
//
// The escaping is unambiguous: \xNN below 0x80 is always a control byte,
// at or above 0x80 always a byte that was not UTF-8. The output is valid
// UTF-8 holding no control character and no format character, except the
// newlines and tabs that Text keeps.
//
// # What it does not protect against
//
// It does not stop look-alike characters (Cyrillic "а" for Latin "a"),
// combining marks stacked on a character, or very long lines that scroll
// earlier text away; callers that show a prompt bound what they show. Wide
// characters and emoji are passed through.
package termsafe

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Line renders s for use inside one line: every newline and tab is
// escaped too. It is safe for concurrent use.
func Line(s string) string { return render(s, false) }

// Text renders s as multi-line text: newlines and tabs are kept, everything
// else is escaped as Line escapes it. It is safe for concurrent use.
func Text(s string) string { return render(s, true) }

// Message renders an error or a note that may quote untrusted text: as it
// is when it holds nothing a terminal would act on (so a message that
// quoted its operands with %q is not escaped twice), as Text renders it
// otherwise. Unlike Text, its result is safe but not always unambiguous.
func Message(s string) string {
	for _, r := range s {
		if r == utf8.RuneError || (r != '\n' && r != '\t' && Unsafe(r)) {
			return Text(s)
		}
	}
	return s
}

// Unsafe reports whether r is escaped by Line and Text (apart from the
// backslash, \n and \t, which depend on the context).
func Unsafe(r rune) bool {
	return r < 0x20 || (r >= 0x7f && r <= 0x9f) || r == '\u2028' || r == '\u2029' || unicode.Is(unicode.Cf, r)
}

func render(s string, multiline bool) string {
	if isPlain(s, multiline) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			writeX(&b, s[i])
		case r == '\\':
			b.WriteString(`\\`)
		case (r == '\n' || r == '\t') && multiline:
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x20 || r == 0x7f:
			writeX(&b, byte(r))
		case Unsafe(r):
			writeU(&b, r)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// isPlain reports whether s needs no escaping (the common case: no copy).
func isPlain(s string, multiline bool) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x80 {
			return false // decided rune by rune
		}
		if c == '\\' || c == 0x7f || (c < 0x20 && !(multiline && (c == '\n' || c == '\t'))) {
			return false
		}
	}
	return true
}

const hexDigits = "0123456789abcdef"

func writeX(b *strings.Builder, c byte) {
	b.WriteString(`\x`)
	b.WriteByte(hexDigits[c>>4])
	b.WriteByte(hexDigits[c&0xf])
}

func writeU(b *strings.Builder, r rune) {
	if r > 0xffff {
		b.WriteString(`\U`)
		for sh := 28; sh >= 0; sh -= 4 {
			b.WriteByte(hexDigits[(r>>sh)&0xf])
		}
		return
	}
	b.WriteString(`\u`)
	for sh := 12; sh >= 0; sh -= 4 {
		b.WriteByte(hexDigits[(r>>sh)&0xf])
	}
}

// Arg renders one argument of a command line as a shell would need it
// quoted, and safe for a terminal: as it is when it holds only characters
// no shell treats specially, in single quotes when it holds nothing Line
// would escape, and otherwise in bash's $'...' form, whose escapes (\xNN,
// \uNNNN, \\, \', \n, \t, \r) are the ones Line writes, so the text shown
// is also what a bash user would type to pass the same bytes.
func Arg(s string) string {
	if s == "" {
		return "''"
	}
	simple := true
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("_@%+=:,./-", c) >= 0) {
			simple = false
			break
		}
	}
	if simple {
		return s
	}
	if l := Line(s); l != s {
		return "$'" + strings.ReplaceAll(l, "'", `\'`) + "'"
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Argv renders a command line with Arg, one space between arguments.
func Argv(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = Arg(a)
	}
	return strings.Join(q, " ")
}

// JSON makes encoded JSON safe for a terminal without changing what it
// means: every rune in it that Unsafe reports (a raw DEL, C1 control or
// format character inside a string; encoding/json escapes the C0 controls
// already) becomes a \uNNNN escape, and a byte that is not UTF-8 becomes
// \ufffd, as a JSON decoder would read it. Outside strings JSON holds no
// such rune, so the result is the same JSON value. Newlines and tabs (the
// whitespace an indenting encoder writes) are kept; a raw CR, which no
// encoder writes, is escaped like any other control.
func JSON(b []byte) []byte {
	clean := true
	for _, c := range b {
		if c >= 0x7f || (c < 0x20 && c != '\n' && c != '\t') {
			clean = false
			break
		}
	}
	if clean {
		return b
	}
	out := make([]byte, 0, len(b)+16)
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			out = append(out, `\ufffd`...)
		case r == '\n' || r == '\t':
			out = append(out, b[i:i+n]...) // whitespace between tokens
		case Unsafe(r) && r <= 0xffff:
			out = append(out, '\\', 'u', hexDigits[(r>>12)&0xf], hexDigits[(r>>8)&0xf], hexDigits[(r>>4)&0xf], hexDigits[r&0xf])
		case Unsafe(r):
			r1, r2 := utf16Pair(r)
			for _, x := range []rune{r1, r2} {
				out = append(out, '\\', 'u', hexDigits[(x>>12)&0xf], hexDigits[(x>>8)&0xf], hexDigits[(x>>4)&0xf], hexDigits[x&0xf])
			}
		default:
			out = append(out, b[i:i+n]...)
		}
		i += n
	}
	return out
}

func utf16Pair(r rune) (rune, rune) {
	r -= 0x10000
	return 0xd800 + (r>>10)&0x3ff, 0xdc00 + r&0x3ff
}

// WriteJSON writes v to w as one JSON value and a newline, indented by
// indent when it is not empty, with no HTML escaping, made safe for a
// terminal by JSON (the same value, with no raw DEL, C1 or bidi character
// in its strings).
func WriteJSON(w io.Writer, indent string, v any) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if indent != "" {
		enc.SetIndent("", indent)
	}
	if err := enc.Encode(v); err != nil {
		return err
	}
	_, err := w.Write(JSON(b.Bytes()))
	return err
}
