package helper

import (
	"encoding/binary"
	"reflect"
	"syscall"
	"testing"

	"github.com/b10x/harness/confine/spawn/internal/seccomp"
	"github.com/b10x/harness/internal/testenv"
)

// TestNotifying: the notifying form of the child's filter differs from it
// only where it returned EPERM, which it now hands to the listener; the
// ENOSYS returns (clone3, openat2, unknown numbers), the kills and ALLOW
// stay.
func TestNotifying(t *testing.T) {
	testenv.Require(t, seccomp.Supported, "a seccomp filter for this architecture")
	raw, err := seccomp.Filter(2)
	if err != nil {
		t.Fatal(err)
	}
	got := notifying(raw)
	if len(got) != len(raw) {
		t.Fatalf("%d bytes, want %d", len(got), len(raw))
	}
	changed, enosys := 0, 0
	for i := 0; i < len(raw); i += 8 {
		code, k, nk := binary.LittleEndian.Uint16(raw[i:]), binary.LittleEndian.Uint32(raw[i+4:]), binary.LittleEndian.Uint32(got[i+4:])
		isRet := code == 0x06
		switch {
		case isRet && k == seccompRetErrno|uint32(syscall.EPERM):
			if nk != seccompRetUserNotif {
				t.Errorf("instruction %d: EPERM became %#x, want USER_NOTIF", i/8, nk)
			}
			changed++
		case nk != k || binary.LittleEndian.Uint16(got[i:]) != code:
			t.Errorf("instruction %d changed: %#x to %#x", i/8, k, nk)
		case isRet && k == seccompRetErrno|uint32(syscall.ENOSYS):
			enosys++
		}
	}
	// Fewer means the shared program was changed in place, or the
	// filter lost its refusals.
	if changed < 40 || enosys < 3 {
		t.Errorf("%d EPERM returns made notifications and %d ENOSYS kept; the filter has more", changed, enosys)
	}
}

// TestRefusedWire: what the init reports decodes as it was kept.
func TestRefusedWire(t *testing.T) {
	r := &refusals{total: 7, kept: []Refusal{{Nr: 272, Args: [6]uint64{0x10000000}}, {Nr: 41, Args: [6]uint64{17, 3, 0, 0, 0, 1 << 40}}}}
	var e Encoder
	r.encode(&e)
	d := Decoder{B: e.B}
	if tag := d.U8(); tag != StatusRefused {
		t.Fatalf("tag %q", tag)
	}
	total, kept := DecodeRefused(&d)
	if err := d.End(); err != nil || total != 7 || !reflect.DeepEqual(kept, r.kept) {
		t.Fatalf("%d %+v %v", total, kept, err)
	}
	// A report that keeps more than it counts is corrupt.
	bad := &refusals{total: 1, kept: r.kept}
	e = Encoder{}
	bad.encode(&e)
	d = Decoder{B: e.B[1:]}
	DecodeRefused(&d)
	if d.Err == nil {
		t.Error("a report of 1 refusal keeping 2 decoded")
	}
}
