package spawn

import (
	"encoding/binary"
	"errors"
	"fmt"
	"syscall"
	"time"
)

// The wire format between the harness, the broker and the helper: fields in
// a fixed order, each integer little-endian, each string a u32 length and
// its bytes, each list a u32 count and its items. Small, no reflection, and
// every read is bounds-checked: a malformed message is an error, never a
// panic.

// maxWire bounds one encoded message (a plan, a request, a result), so a
// corrupt length can never make a reader allocate without bound.
const maxWire = 64 << 20

type encoder struct{ b []byte }

func (e *encoder) u8(v uint8)   { e.b = append(e.b, v) }
func (e *encoder) u32(v uint32) { e.b = binary.LittleEndian.AppendUint32(e.b, v) }
func (e *encoder) u64(v uint64) { e.b = binary.LittleEndian.AppendUint64(e.b, v) }
func (e *encoder) i64(v int64)  { e.u64(uint64(v)) }
func (e *encoder) bool(v bool) {
	if v {
		e.u8(1)
	} else {
		e.u8(0)
	}
}
func (e *encoder) str(s string) { e.u32(uint32(len(s))); e.b = append(e.b, s...) }
func (e *encoder) strs(ss []string) {
	e.u32(uint32(len(ss)))
	for _, s := range ss {
		e.str(s)
	}
}

type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("spawn: malformed message: truncated at %s", what)
	}
}

func (d *decoder) take(n int, what string) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || n > len(d.b) {
		d.fail(what)
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) u8() uint8 {
	if v := d.take(1, "u8"); v != nil {
		return v[0]
	}
	return 0
}
func (d *decoder) u32() uint32 {
	if v := d.take(4, "u32"); v != nil {
		return binary.LittleEndian.Uint32(v)
	}
	return 0
}
func (d *decoder) u64() uint64 {
	if v := d.take(8, "u64"); v != nil {
		return binary.LittleEndian.Uint64(v)
	}
	return 0
}
func (d *decoder) i64() int64 { return int64(d.u64()) }
func (d *decoder) bool() bool {
	switch d.u8() {
	case 0:
		return false
	case 1:
		return true
	default:
		if d.err == nil {
			d.err = errors.New("spawn: malformed message: bad boolean")
		}
		return false
	}
}
func (d *decoder) str() string {
	n := d.u32()
	return string(d.take(int(n), "string"))
}
func (d *decoder) strs() []string {
	n := d.u32()
	if d.err != nil {
		return nil
	}
	// Each string takes at least 4 bytes: a count beyond that is corrupt.
	if uint64(n)*4 > uint64(len(d.b)) {
		d.fail("list")
		return nil
	}
	out := make([]string, 0, n)
	for i := uint32(0); i < n && d.err == nil; i++ {
		out = append(out, d.str())
	}
	return out
}

// end reports an error unless the whole message was consumed.
func (d *decoder) end() error {
	if d.err == nil && len(d.b) != 0 {
		d.err = fmt.Errorf("spawn: malformed message: %d trailing bytes", len(d.b))
	}
	return d.err
}

// remoteError is an error that crossed a process boundary: its text, and the
// errno it wrapped, if any, so errors.Is(err, syscall.EPERM) still works.
type remoteError struct {
	msg   string
	errno syscall.Errno
}

func (e *remoteError) Error() string { return e.msg }
func (e *remoteError) Unwrap() error {
	if e.errno == 0 {
		return nil
	}
	return e.errno
}

// putError encodes an error as its text and its errno (0 when none).
func (e *encoder) error(err error) {
	var errno syscall.Errno
	errors.As(err, &errno)
	e.str(err.Error())
	e.u32(uint32(errno))
}

func (d *decoder) error() error {
	msg := d.str()
	errno := syscall.Errno(d.u32())
	return &remoteError{msg: msg, errno: errno}
}

// encodeSpec and decodeSpec carry a Spec from the harness to the broker.
func (e *encoder) spec(s Spec) {
	e.str(s.Path)
	e.strs(s.Argv)
	e.strs(s.Env)
	e.str(s.Dir)
	e.str(s.Workspace)
	e.strs(s.ReadPaths)
	e.strs(s.WritePaths)
	e.bool(s.Net)
	e.i64(s.Limits.PidsMax)
	e.i64(s.Limits.MemoryMax)
	e.i64(int64(s.Limits.CPUQuota))
	e.i64(int64(s.Limits.CPUPeriod))
	e.i64(int64(s.Timeout))
}

func (d *decoder) spec() Spec {
	var s Spec
	s.Path = d.str()
	s.Argv = d.strs()
	s.Env = d.strs()
	s.Dir = d.str()
	s.Workspace = d.str()
	s.ReadPaths = d.strs()
	s.WritePaths = d.strs()
	s.Net = d.bool()
	s.Limits.PidsMax = d.i64()
	s.Limits.MemoryMax = d.i64()
	s.Limits.CPUQuota = durationOf(d.i64())
	s.Limits.CPUPeriod = durationOf(d.i64())
	s.Timeout = durationOf(d.i64())
	return s
}

func (e *encoder) result(r Result) {
	e.i64(int64(r.ExitCode))
	e.str(r.Signal)
	e.bool(r.TimedOut)
	e.bool(r.OOMKilled)
	e.i64(int64(r.Duration))
	e.i64(r.MemoryPeak)
	e.i64(r.PidsPeak)
	e.strs(r.Layers)
}

func (d *decoder) result() Result {
	var r Result
	r.ExitCode = int(d.i64())
	r.Signal = d.str()
	r.TimedOut = d.bool()
	r.OOMKilled = d.bool()
	r.Duration = durationOf(d.i64())
	r.MemoryPeak = d.i64()
	r.PidsPeak = d.i64()
	r.Layers = d.strs()
	return r
}

func durationOf(v int64) time.Duration { return time.Duration(v) }

// mountKind is one step of building the child's view.
type mountKind uint8

const (
	mBind     mountKind = iota + 1 // bind Src (a directory or, with File, a file) at Dst
	mSymlink                       // a symlink at Dst whose target is Src
	mTmpfs                         // a fresh tmpfs at Dst with options Data
	mProc                          // a fresh proc at Dst for the new PID namespace
	mMaskFile                      // hide the file at Dst behind the view's /dev/null
	mMaskDir                       // hide the directory at Dst behind an empty tmpfs
	mountKindEnd
)

// mountOp is one entry of the view, applied in order.
type mountOp struct {
	Kind mountKind
	Src  string
	Dst  string
	RO   bool // read-only (binds, tmpfs, masks)
	File bool // the bind source is a file, not a directory
	Data string
}

// llKind is the access a Landlock rule grants; see childRights.
type llKind uint8

const (
	llRead  llKind = iota + 1 // read and execute
	llWrite                   // read, write, create, remove, execute
	llDev                     // a device file: read and write (and its ioctls)
	llList                    // list the directory's entries, nothing more
	llKindEnd
)

// llRule is one Landlock rule of the child's domain.
type llRule struct {
	Path string
	Dir  bool
	Kind llKind
}

// plan is everything the helper does, computed by the parent: the helper
// only executes it, in order, and reports the first failure.
type plan struct {
	Path     string
	Argv     []string
	Env      []string
	Dir      string
	Hostname string
	Mounts   []mountOp
	Loopback bool   // bring lo up (a fresh network namespace)
	DropCaps bool   // drop every capability before execve (no user namespace)
	Seccomp  []byte // raw classic BPF (struct sock_filter, 8 bytes each); empty: none
	// LandlockABI is the ABI of the child's domain; 0 applies none.
	LandlockABI int
	LL          []llRule
}

func (e *encoder) plan(p *plan) {
	e.str(p.Path)
	e.strs(p.Argv)
	e.strs(p.Env)
	e.str(p.Dir)
	e.str(p.Hostname)
	e.u32(uint32(len(p.Mounts)))
	for _, m := range p.Mounts {
		e.u8(uint8(m.Kind))
		e.str(m.Src)
		e.str(m.Dst)
		e.bool(m.RO)
		e.bool(m.File)
		e.str(m.Data)
	}
	e.bool(p.Loopback)
	e.bool(p.DropCaps)
	e.str(string(p.Seccomp))
	e.u32(uint32(p.LandlockABI))
	e.u32(uint32(len(p.LL)))
	for _, r := range p.LL {
		e.str(r.Path)
		e.bool(r.Dir)
		e.u8(uint8(r.Kind))
	}
}

func (d *decoder) plan() *plan {
	p := &plan{}
	p.Path = d.str()
	p.Argv = d.strs()
	p.Env = d.strs()
	p.Dir = d.str()
	p.Hostname = d.str()
	n := d.u32()
	if uint64(n)*13 > uint64(len(d.b)) {
		d.fail("mounts")
		return p
	}
	for i := uint32(0); i < n && d.err == nil; i++ {
		var m mountOp
		m.Kind = mountKind(d.u8())
		m.Src = d.str()
		m.Dst = d.str()
		m.RO = d.bool()
		m.File = d.bool()
		m.Data = d.str()
		if m.Kind == 0 || m.Kind >= mountKindEnd {
			if d.err == nil {
				d.err = fmt.Errorf("spawn: malformed message: mount kind %d", m.Kind)
			}
		}
		p.Mounts = append(p.Mounts, m)
	}
	p.Loopback = d.bool()
	p.DropCaps = d.bool()
	p.Seccomp = []byte(d.str())
	if len(p.Seccomp)%8 != 0 && d.err == nil {
		d.err = fmt.Errorf("spawn: malformed message: seccomp program of %d bytes", len(p.Seccomp))
	}
	p.LandlockABI = int(d.u32())
	n = d.u32()
	if uint64(n)*6 > uint64(len(d.b)) {
		d.fail("rules")
		return p
	}
	for i := uint32(0); i < n && d.err == nil; i++ {
		r := llRule{Path: d.str(), Dir: d.bool(), Kind: llKind(d.u8())}
		if (r.Kind == 0 || r.Kind >= llKindEnd) && d.err == nil {
			d.err = fmt.Errorf("spawn: malformed message: rule kind %d", r.Kind)
		}
		p.LL = append(p.LL, r)
	}
	return p
}
