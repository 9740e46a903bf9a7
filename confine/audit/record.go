package audit

import (
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Audit record types (include/uapi/linux/audit.h).
const (
	TypeLandlockAccess = 1423 // AUDIT_LANDLOCK_ACCESS
	TypeLandlockDomain = 1424 // AUDIT_LANDLOCK_DOMAIN
)

// Denial is one AUDIT_LANDLOCK_ACCESS record: a request a Landlock domain
// refused. A plain value.
type Denial struct {
	// Serial is the audit event's serial number; records of one event
	// share it.
	Serial uint64
	// Domain is the refusing domain's id, as the kernel prints it (hex).
	Domain string
	// Blockers are the rights or scopes missing (fs.write_file,
	// net.connect_tcp, scope.signal, ...).
	Blockers []string
	// Object is what was refused, in words: a path (with the name created
	// or removed beneath it), a TCP port, a signalled process.
	Object string
}

// String is the denial as a run call shows it: "landlock: fs.make_reg
// /usr/share/x".
func (d Denial) String() string {
	s := "landlock: " + strings.Join(d.Blockers, ",")
	if d.Object != "" {
		s += " " + d.Object
	}
	return s
}

// Domain is one AUDIT_LANDLOCK_DOMAIN record. A plain value.
type Domain struct {
	Serial uint64
	ID     string
	// Status is allocated or deallocated.
	Status string
	// PID, Exe and Comm are the creator of the domain (allocated only):
	// the process that called landlock_restrict_self, pid in the initial
	// PID namespace, and its name (comm) at that moment.
	PID  int
	Exe  string
	Comm string
	// Denials is how many denials the domain logged (deallocated only).
	Denials uint64
}

// ErrMalformed is returned, wrapped, for a record text this package
// cannot read.
var ErrMalformed = errors.New("audit: malformed record")

// Parse reads one audit record of type typ from its netlink text
// ("audit(1729738800.268:30): domain=1a6fdc66f blockers=..."). It returns
// a Denial, a Domain, or (nil, nil) for a record of another type.
func Parse(typ uint16, text string) (any, error) {
	if typ != TypeLandlockAccess && typ != TypeLandlockDomain {
		return nil, nil
	}
	serial, rest, err := header(text)
	if err != nil {
		return nil, err
	}
	f, err := fields(rest)
	if err != nil {
		return nil, err
	}
	id := f["domain"]
	if id == "" {
		return nil, fmt.Errorf("%w: no domain in %q", ErrMalformed, text)
	}
	if typ == TypeLandlockDomain {
		d := Domain{Serial: serial, ID: id, Status: f["status"], Exe: f["exe"], Comm: f["comm"]}
		if s, ok := f["pid"]; ok {
			if d.PID, err = strconv.Atoi(s); err != nil {
				return nil, fmt.Errorf("%w: pid %q", ErrMalformed, s)
			}
		}
		if s, ok := f["denials"]; ok {
			if d.Denials, err = strconv.ParseUint(s, 10, 64); err != nil {
				return nil, fmt.Errorf("%w: denials %q", ErrMalformed, s)
			}
		}
		return d, nil
	}
	b := f["blockers"]
	if b == "" {
		return nil, fmt.Errorf("%w: no blockers in %q", ErrMalformed, text)
	}
	return Denial{Serial: serial, Domain: id, Blockers: strings.Split(b, ","), Object: object(f)}, nil
}

// object says what a denial refused, from its record's fields.
func object(f map[string]string) string {
	switch {
	case f["path"] != "":
		p := f["path"]
		if n := f["name"]; n != "" {
			p = strings.TrimSuffix(p, "/") + "/" + n
		}
		return p
	case f["name"] != "":
		return f["name"]
	case f["dest"] != "":
		if a := f["daddr"]; a != "" {
			return a + ":" + f["dest"]
		}
		return "port " + f["dest"]
	case f["src"] != "":
		return "port " + f["src"]
	case f["opid"] != "":
		s := "pid " + f["opid"]
		if c := f["ocomm"]; c != "" {
			s += " (" + c + ")"
		}
		return s
	}
	return ""
}

// header splits "audit(SEC.MS:SERIAL): rest".
func header(text string) (uint64, string, error) {
	const p = "audit("
	if !strings.HasPrefix(text, p) {
		return 0, "", fmt.Errorf("%w: no audit( header in %q", ErrMalformed, text)
	}
	end := strings.Index(text, "): ")
	if end < 0 {
		if !strings.HasSuffix(text, ")") && !strings.HasSuffix(text, "):") {
			return 0, "", fmt.Errorf("%w: unterminated header in %q", ErrMalformed, text)
		}
		end = strings.LastIndexByte(text, ')')
	}
	stamp := text[len(p):end]
	colon := strings.LastIndexByte(stamp, ':')
	if colon < 0 {
		return 0, "", fmt.Errorf("%w: no serial in %q", ErrMalformed, text)
	}
	serial, err := strconv.ParseUint(stamp[colon+1:], 10, 64)
	if err != nil {
		return 0, "", fmt.Errorf("%w: serial %q", ErrMalformed, stamp[colon+1:])
	}
	rest := ""
	if end+3 <= len(text) {
		rest = text[end+3:]
	}
	return serial, rest, nil
}

// untrusted are the fields the kernel prints with
// audit_log_untrustedstring: quoted, or hex-encoded when the value holds
// a space, a quote or a control character.
var untrusted = map[string]bool{"path": true, "name": true, "exe": true, "comm": true, "ocomm": true}

// fields reads key=value pairs separated by spaces; a value is "quoted"
// (no escapes inside), or bare, and an untrusted field's bare value is
// hex to decode.
func fields(s string) (map[string]string, error) {
	f := map[string]string{}
	for {
		s = strings.TrimLeft(s, " \n")
		if s == "" {
			return f, nil
		}
		eq := strings.IndexByte(s, '=')
		if eq <= 0 {
			return nil, fmt.Errorf("%w: field without = at %q", ErrMalformed, s)
		}
		k := s[:eq]
		s = s[eq+1:]
		var v string
		if strings.HasPrefix(s, `"`) {
			end := strings.IndexByte(s[1:], '"')
			if end < 0 {
				return nil, fmt.Errorf("%w: unterminated quote in %s=", ErrMalformed, k)
			}
			v, s = s[1:1+end], s[2+end:]
		} else {
			end := strings.IndexByte(s, ' ')
			if end < 0 {
				end = len(s)
			}
			v, s = s[:end], s[end:]
			if untrusted[k] && v != "(null)" && v != "?" {
				b, err := hex.DecodeString(v)
				if err != nil {
					return nil, fmt.Errorf("%w: %s=%s is neither quoted nor hex", ErrMalformed, k, v)
				}
				v = string(b)
			}
		}
		if _, dup := f[k]; !dup {
			f[k] = v
		}
	}
}
