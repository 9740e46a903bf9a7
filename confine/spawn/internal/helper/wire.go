package helper

import (
	"encoding/binary"
	"errors"
	"strconv"
	"strings"
	"syscall"
)

// The wire format between the harness, the broker and the helper: fields in
// a fixed order, each integer little-endian, each string a u32 length and
// its bytes, each list a u32 count and its items. Small, no reflection, and
// every read is bounds-checked: a malformed message is an error, never a
// panic.

// MaxWire bounds one encoded message (a plan, a request, a result), so a
// corrupt length can never make a reader allocate without bound.
const MaxWire = 64 << 20

// Encoder appends fields to B. The zero value is ready; not safe for
// concurrent use.
type Encoder struct{ B []byte }

// U8 appends one byte.
func (e *Encoder) U8(v uint8) { e.B = append(e.B, v) }

// U32 appends v, little-endian.
func (e *Encoder) U32(v uint32) { e.B = binary.LittleEndian.AppendUint32(e.B, v) }

// U64 appends v, little-endian.
func (e *Encoder) U64(v uint64) { e.B = binary.LittleEndian.AppendUint64(e.B, v) }

// I64 appends v as its two's complement U64.
func (e *Encoder) I64(v int64) { e.U64(uint64(v)) }

// Bool appends 1 or 0.
func (e *Encoder) Bool(v bool) {
	if v {
		e.U8(1)
	} else {
		e.U8(0)
	}
}

// Str appends the length of s and its bytes.
func (e *Encoder) Str(s string) { e.U32(uint32(len(s))); e.B = append(e.B, s...) }

// Strs appends the count of ss and each string.
func (e *Encoder) Strs(ss []string) {
	e.U32(uint32(len(ss)))
	for _, s := range ss {
		e.Str(s)
	}
}

// Error encodes an error as its text and the errno it wraps (0 when none).
func (e *Encoder) Error(err error) {
	var errno syscall.Errno
	errors.As(err, &errno)
	e.Str(err.Error())
	e.U32(uint32(errno))
}

// Decoder reads fields from B. The first failure is kept in Err; later reads
// return zero values, so a caller checks Err (or End) once at the end. Not
// safe for concurrent use.
type Decoder struct {
	B   []byte
	Err error
}

func (d *Decoder) fail(what string) {
	if d.Err == nil {
		d.Err = errors.New("spawn: malformed message: truncated at " + what)
	}
}

// Failf records a malformed-message error unless one is recorded already.
func (d *Decoder) Failf(msg string) {
	if d.Err == nil {
		d.Err = errors.New("spawn: malformed message: " + msg)
	}
}

func (d *Decoder) take(n int, what string) []byte {
	if d.Err != nil {
		return nil
	}
	if n < 0 || n > len(d.B) {
		d.fail(what)
		return nil
	}
	v := d.B[:n]
	d.B = d.B[n:]
	return v
}

// U8 reads one byte.
func (d *Decoder) U8() uint8 {
	if v := d.take(1, "u8"); v != nil {
		return v[0]
	}
	return 0
}

// U32 reads a little-endian u32.
func (d *Decoder) U32() uint32 {
	if v := d.take(4, "u32"); v != nil {
		return binary.LittleEndian.Uint32(v)
	}
	return 0
}

// U64 reads a little-endian u64.
func (d *Decoder) U64() uint64 {
	if v := d.take(8, "u64"); v != nil {
		return binary.LittleEndian.Uint64(v)
	}
	return 0
}

// I64 reads what Encoder.I64 wrote.
func (d *Decoder) I64() int64 { return int64(d.U64()) }

// Bool reads a 0 or 1 byte; anything else is malformed.
func (d *Decoder) Bool() bool {
	switch d.U8() {
	case 0:
		return false
	case 1:
		return true
	default:
		d.Failf("bad boolean")
		return false
	}
}

// Str reads what Encoder.Str wrote.
func (d *Decoder) Str() string {
	n := d.U32()
	return string(d.take(int(n), "string"))
}

// Strs reads what Encoder.Strs wrote.
func (d *Decoder) Strs() []string {
	n := d.U32()
	if d.Err != nil {
		return nil
	}
	// Each string takes at least 4 bytes: a count beyond that is corrupt.
	if uint64(n)*4 > uint64(len(d.B)) {
		d.fail("list")
		return nil
	}
	out := make([]string, 0, n)
	for i := uint32(0); i < n && d.Err == nil; i++ {
		out = append(out, d.Str())
	}
	return out
}

// Count reads a list length whose items take at least min bytes each.
func (d *Decoder) Count(min int, what string) int {
	n := d.U32()
	if d.Err == nil && uint64(n)*uint64(min) > uint64(len(d.B)) {
		d.fail(what)
		return 0
	}
	return int(n)
}

// Error decodes what Encoder.Error wrote.
func (d *Decoder) Error() error {
	msg := d.Str()
	errno := syscall.Errno(d.U32())
	return &RemoteError{Msg: msg, Errno: errno}
}

// End reports an error unless the whole message was consumed.
func (d *Decoder) End() error {
	if d.Err == nil && len(d.B) != 0 {
		d.Err = errors.New("spawn: malformed message: " + strconv.Itoa(len(d.B)) + " trailing bytes")
	}
	return d.Err
}

// RemoteError is an error that crossed a process boundary: its text, and
// the errno it wrapped, if any, so errors.Is(err, syscall.EPERM) still
// works.
type RemoteError struct {
	Msg   string
	Errno syscall.Errno
}

// Error returns the text the other process wrote.
func (e *RemoteError) Error() string { return e.Msg }

// Unwrap returns the errno, or nil.
func (e *RemoteError) Unwrap() error {
	if e.Errno == 0 {
		return nil
	}
	return e.Errno
}

// ErrRootWorkspace is package spawn's ErrRootWorkspace, defined here so
// that a RemoteError carrying it still matches it.
var ErrRootWorkspace = errors.New("the workspace is owned by root")

// Is reports whether the error that crossed was one of the sentinels that
// keep their identity across the boundary (ErrRootWorkspace): their text
// leads the message.
func (e *RemoteError) Is(target error) bool {
	return target == ErrRootWorkspace && strings.HasPrefix(e.Msg, ErrRootWorkspace.Error()+" ")
}
