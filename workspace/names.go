package workspace

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// Names in results (docs/decisions/0049-what-an-edit-preserves.md, "Names
// in results"): a file name can hold any byte but '/' and NUL, so printed
// raw a name with a newline forges a line of the result, and one that is
// not UTF-8 cannot be given back. Every name the tools print goes through
// ShowPath: a component that is not plain is printed as a Go
// double-quoted string (strconv.Quote: \n, \t, \x1b, \xff, \u2028 ...);
// every other component is printed as it is. Not plain: invalid UTF-8, a
// rune strconv.IsPrint rejects (control characters, format characters,
// line and paragraph separators), or a leading '"' (so a name printed raw
// never begins with a quote).
//
// Path arguments accept the same spellings back (decodePathArg): the whole
// argument in Go double quotes ("sub/x\n", as error messages quote paths),
// or any component in Go double quotes (sub/"x\n", as find and search
// print them; dir_list prints the name alone). A component that begins
// with '"' is always read as a quoted name; a file whose name begins with
// '"' is named by its quoted form ("\"x").

// nameIsPlain reports whether a name component (or a path, each of whose
// components is checked) can be printed as it is.
func nameIsPlain(name string) bool {
	for i := 0; i < len(name); {
		c := name[i]
		if c == '"' && (i == 0 || name[i-1] == '/') {
			return false
		}
		if c >= 0x20 && c < 0x7f {
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(name[i:])
		if r == utf8.RuneError && n == 1 || !strconv.IsPrint(r) {
			return false
		}
		i += n
	}
	return true
}

// ShowName renders one name component (a file name, never holding '/')
// for a result: as it is when plain, else as a Go double-quoted string,
// which a path argument accepts back. It never returns a string holding a
// control character, a line or paragraph separator or invalid UTF-8.
func ShowName(name string) string {
	if nameIsPlain(name) {
		return name
	}
	return strconv.Quote(name)
}

// ShowPath renders a canonical workspace-relative path for a result, each
// component by ShowName, so the rendered path, given back as a path
// argument, names the same file.
func ShowPath(rel string) string {
	if nameIsPlain(rel) {
		return rel
	}
	parts := strings.Split(rel, "/")
	for i, c := range parts {
		parts[i] = ShowName(c)
	}
	return strings.Join(parts, "/")
}

// decodePathArg turns a path argument into the bytes it names: a
// whole-argument or per-component Go double-quoted spelling is unquoted;
// anything else is taken as it is. A component that begins with '"' but
// does not unquote, or a quoted component that holds '/' or NUL, is
// Invalid.
func decodePathArg(p string) (string, *Error) {
	if strings.IndexByte(p, '"') < 0 {
		return p, nil
	}
	if len(p) >= 2 && p[0] == '"' && p[len(p)-1] == '"' {
		if u, err := strconv.Unquote(p); err == nil {
			if strings.IndexByte(u, 0) >= 0 {
				return "", errorf(Invalid, nil, "path must not contain NUL bytes")
			}
			return u, nil
		}
	}
	parts := strings.Split(p, "/")
	for i, c := range parts {
		if c == "" || c[0] != '"' {
			continue
		}
		u, err := strconv.Unquote(c)
		switch {
		case err != nil:
			return "", errorf(Invalid, nil, "path component %s begins with '\"' but is not a Go double-quoted name (results print such names as \"a\\nb\"; a name that itself begins with '\"' is written \"\\\"name\")", capText(c, maxEchoBytes))
		case strings.IndexByte(u, 0) >= 0:
			return "", errorf(Invalid, nil, "path must not contain NUL bytes")
		case strings.IndexByte(u, '/') >= 0:
			return "", errorf(Invalid, nil, "path component %s holds '/': quote the whole path or each name alone", capText(c, maxEchoBytes))
		}
		parts[i] = u
	}
	return strings.Join(parts, "/"), nil
}
