// Package mountinfo reads the path fields of /proc/PID/mountinfo: the
// kernel writes a space, tab, newline and backslash in them as \040,
// \011, \012 and \134 (fs/proc_namespace.c, mangle), so a path read
// from a field must be unescaped before it is compared or opened.
package mountinfo

import "strings"

// Unescape undoes the kernel's octal escapes in a path field (any
// backslash and three octal digits, whose value fits a byte). A backslash
// not followed by three octal digits stays as it is.
func Unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && s[i+1] <= '3' && isOctal(s[i+1]) && isOctal(s[i+2]) && isOctal(s[i+3]) {
			b.WriteByte((s[i+1]-'0')<<6 | (s[i+2]-'0')<<3 | (s[i+3] - '0'))
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isOctal(c byte) bool { return c >= '0' && c <= '7' }
