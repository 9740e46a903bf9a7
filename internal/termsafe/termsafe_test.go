package termsafe

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// attacks is what a model can put in a string to drive or fool a terminal.
var attacks = []struct {
	name, in, line, text string
}{
	{"plain", "a = 2", "a = 2", "a = 2"},
	{"cursor up and erase line", "a = 2\x1b[1A\x1b[2K\r  + harmless comment",
		`a = 2\x1b[1A\x1b[2K\r  + harmless comment`, `a = 2\x1b[1A\x1b[2K\r  + harmless comment`},
	{"CSI clear screen", "\x1b[2J\x1b[H", `\x1b[2J\x1b[H`, `\x1b[2J\x1b[H`},
	{"OSC 8 hyperlink", "\x1b]8;;https://evil.example/\x1b\\click\x1b]8;;\x1b\\",
		`\x1b]8;;https://evil.example/\x1b\\click\x1b]8;;\x1b\\`, `\x1b]8;;https://evil.example/\x1b\\click\x1b]8;;\x1b\\`},
	{"OSC title with BEL", "\x1b]0;pwned\x07", `\x1b]0;pwned\x07`, `\x1b]0;pwned\x07`},
	{"bracketed paste", "\x1b[200~rm -rf ~\n\x1b[201~", `\x1b[200~rm -rf ~\n\x1b[201~`, "\\x1b[200~rm -rf ~\n\\x1b[201~"},
	{"carriage return overwrite", "evil\rgood", `evil\rgood`, `evil\rgood`},
	{"backspaces", "rm -rf /\b\b\b\b\b\b\bls", `rm -rf /\x08\x08\x08\x08\x08\x08\x08ls`, `rm -rf /\x08\x08\x08\x08\x08\x08\x08ls`},
	{"DEL", "a\x7fb", `a\x7fb`, `a\x7fb`},
	{"NUL", "a\x00b", `a\x00b`, `a\x00b`},
	{"C1 CSI", "a\u009b2Jb", `a\u009b2Jb`, `a\u009b2Jb`},
	{"C1 OSC and ST", "\u009d0;t\u009c", `\u009d0;t\u009c`, `\u009d0;t\u009c`},
	{"bidi override", "if admin \u202e} {\u202c", `if admin \u202e} {\u202c`, `if admin \u202e} {\u202c`},
	{"bidi isolates", "\u2066x\u2067y\u2068z\u2069", `\u2066x\u2067y\u2068z\u2069`, `\u2066x\u2067y\u2068z\u2069`},
	{"zero width", "pass\u200bword\u200d\ufeff", `pass\u200bword\u200d\ufeff`, `pass\u200bword\u200d\ufeff`},
	{"line separator", "a\u2028b\u2029c", `a\u2028b\u2029c`, `a\u2028b\u2029c`},
	{"tag character", "x\U000E0041", `x\U000e0041`, `x\U000e0041`},
	{"invalid UTF-8", "bad\xff\xc3(", `bad\xff\xc3(`, `bad\xff\xc3(`},
	{"encoded C1 bytes that are not UTF-8", "\x9b2J", `\x9b2J`, `\x9b2J`},
	{"backslash looks like an escape", `\x1b[2J`, `\\x1b[2J`, `\\x1b[2J`},
	{"newline and tab", "a\n\tb", `a\n\tb`, "a\n\tb"},
	{"printable unicode passes", "héllo wörld ✓ 日本", "héllo wörld ✓ 日本", "héllo wörld ✓ 日本"},
	{"literal U+FFFD passes", "x\uFFFDy", "x\uFFFDy", "x\uFFFDy"},
}

func TestAttacks(t *testing.T) {
	for _, c := range attacks {
		if got := Line(c.in); got != c.line {
			t.Errorf("%s: Line(%q) = %q, want %q", c.name, c.in, got, c.line)
		}
		if got := Text(c.in); got != c.text {
			t.Errorf("%s: Text(%q) = %q, want %q", c.name, c.in, got, c.text)
		}
		for _, out := range []string{Line(c.in), Text(c.in)} {
			if strings.ContainsRune(out, 0x1b) || strings.ContainsRune(out, 0x9b) {
				t.Errorf("%s: raw escape in %q", c.name, out)
			}
		}
	}
}

func TestMessage(t *testing.T) {
	if got := Message(`rule "a\x1b" is invalid`); got != `rule "a\x1b" is invalid` {
		t.Errorf("a quoted message was escaped again: %q", got)
	}
	if got := Message("rule a\x1b[2J\\ is invalid"); got != `rule a\x1b[2J\\ is invalid` {
		t.Errorf("Message = %q", got)
	}
}

func TestArg(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"git", "git"},
		{"", "''"},
		{"a b", "'a b'"},
		{"it's", `'it'\''s'`},
		{"; rm -rf /", "'; rm -rf /'"},
		{"$HOME", "'$HOME'"},
		{"a\x1b[2Jb", `$'a\x1b[2Jb'`},
		{"it's\n", `$'it\'s\n'`},
		{"\\\x07", `$'\\\x07'`},
		{"\u202eabc", `$'\u202eabc'`},
	} {
		if got := Arg(c.in); got != c.want {
			t.Errorf("Arg(%q) = %s, want %s", c.in, got, c.want)
		}
	}
	if got := Argv([]string{"sh", "-c", "echo hi"}); got != "sh -c 'echo hi'" {
		t.Errorf("Argv = %s", got)
	}
}

func TestJSON(t *testing.T) {
	v := map[string]string{"s": "a\x1b[2J\u009b\u202e\x7f\u200b\U000E0041 ok é"}
	b, _ := json.Marshal(v)
	b = append(b, "\xff"...) // not JSON: replaced, never raw
	out := JSON(b)
	checkSafe(t, string(out), false)
	var back map[string]string
	if err := json.Unmarshal(out[:len(out)-len(`\ufffd`)], &back); err != nil || back["s"] != v["s"] {
		t.Errorf("JSON changed the value: %v %q", err, back["s"])
	}
}

// checkSafe fails when out holds anything a terminal would act on.
func checkSafe(t *testing.T, out string, multiline bool) {
	t.Helper()
	if !utf8.ValidString(out) {
		t.Fatalf("output is not UTF-8: %q", out)
	}
	for _, r := range out {
		if (r == '\n' || r == '\t') && multiline {
			continue
		}
		if Unsafe(r) {
			t.Fatalf("output holds %U: %q", r, out)
		}
	}
}

// unescape reverses render; it fails on any backslash that does not start
// one of render's escapes, so a round trip proves the escaping unambiguous.
func unescape(s string) (string, bool) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' {
			b.WriteByte(s[i])
			continue
		}
		if i+1 >= len(s) {
			return "", false
		}
		i++
		switch s[i] {
		case '\\':
			b.WriteByte('\\')
		case 'n':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		case 'r':
			b.WriteByte('\r')
		case 'x', 'u', 'U':
			n := map[byte]int{'x': 2, 'u': 4, 'U': 8}[s[i]]
			if i+n >= len(s) {
				return "", false
			}
			v, err := strconv.ParseUint(s[i+1:i+1+n], 16, 32)
			if err != nil {
				return "", false
			}
			if s[i] == 'x' {
				b.WriteByte(byte(v))
			} else {
				b.WriteRune(rune(v))
			}
			i += n
		default:
			return "", false
		}
	}
	return b.String(), true
}

func FuzzRender(f *testing.F) {
	for _, c := range attacks {
		f.Add(c.in)
	}
	f.Fuzz(func(t *testing.T, in string) {
		for _, multiline := range []bool{false, true} {
			out := render(in, multiline)
			checkSafe(t, out, multiline)
			back, ok := unescape(out)
			if !ok || back != in {
				t.Fatalf("render(%q, %v) = %q does not decode back (%v, %q)", in, multiline, out, ok, back)
			}
		}
		checkSafe(t, Message(in), true)
		arg := Arg(in)
		checkSafe(t, arg, false)
		checkSafe(t, string(JSON([]byte(in))), true)
	})
}

// TestWriteJSON: the value written is the value given, with no HTML
// escaping and no raw bidi or C1 character, indented when asked.
func TestWriteJSON(t *testing.T) {
	var b strings.Builder
	if err := WriteJSON(&b, "", map[string]string{"k": "<a&b>\u202e\u009b"}); err != nil {
		t.Fatal(err)
	}
	if got, want := b.String(), `{"k":"<a&b>\u202e\u009b"}`+"\n"; got != want {
		t.Errorf("WriteJSON = %q, want %q", got, want)
	}
	b.Reset()
	if err := WriteJSON(&b, "  ", []int{1}); err != nil || b.String() != "[\n  1\n]\n" {
		t.Errorf("indented: %q %v", b.String(), err)
	}
	if err := WriteJSON(&b, "", func() {}); err == nil {
		t.Error("a value JSON cannot hold was written")
	}
}
