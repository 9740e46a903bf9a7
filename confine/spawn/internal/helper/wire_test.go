package helper

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"
)

func samplePlan() *Plan {
	return &Plan{
		Path: "/usr/bin/sh", ProgDev: 3, ProgIno: 1 << 40, Argv: []string{"sh", "-c", "echo ''; $(x)"}, Env: []string{"A=1", "B="}, Dir: "/w",
		Hostname: "sandbox",
		Mounts: []Mount{
			{Kind: Bind, Src: "/usr", Dst: "/usr", RO: true},
			{Kind: Bind, Src: "/w", Dst: "/w", Pinned: true, PinDev: 0x803, PinIno: 1 << 40},
			{Kind: Symlink, Src: "usr/bin", Dst: "/bin"},
			{Kind: Tmpfs, Dst: "/tmp", Data: "mode=1777"},
			{Kind: Bind, Src: "/dev/null", Dst: "/dev/null", File: true, Dev: true},
			{Kind: MaskDir, Dst: "/etc/ssl/private", RO: true},
		},
		Loopback: true, NestUser: true, ChildUID: 1000, ChildGID: 65534, Seccomp: bytes.Repeat([]byte{1, 2, 3, 4, 5, 6, 7, 8}, 3),
		LandlockFS: 0xffff, LandlockScoped: 3, LandlockFlags: RestrictSelfLogNewExecOn,
		Rules: []Rule{{Path: "/", Access: 8}, {Path: "/w", Access: 0x7fff}},
		GoFD:  6,
	}
}

func TestWireRejectsTruncatedAndTrailing(t *testing.T) {
	var e Encoder
	samplePlan().Encode(&e)
	for n := 0; n < len(e.B); n++ {
		d := Decoder{B: e.B[:n]}
		DecodePlan(&d)
		if d.End() == nil {
			t.Fatalf("a plan cut at %d of %d bytes decoded without error", n, len(e.B))
		}
	}
	d := Decoder{B: append(slices.Clone(e.B), 0)}
	DecodePlan(&d)
	if d.End() == nil {
		t.Fatal("trailing byte accepted")
	}
}

// FuzzDecodePlan: no input makes the decoders panic or allocate without
// bound; what decodes re-encodes to the same bytes.
func FuzzDecodePlan(f *testing.F) {
	var e Encoder
	samplePlan().Encode(&e)
	f.Add(e.B)
	f.Add([]byte{})
	f.Add(binary.LittleEndian.AppendUint32(nil, 0xffffffff))
	f.Fuzz(func(t *testing.T, b []byte) {
		d := Decoder{B: b}
		p := DecodePlan(&d)
		if d.End() != nil {
			return
		}
		var e Encoder
		p.Encode(&e)
		if !bytes.Equal(e.B, b) {
			t.Fatalf("re-encoding differs")
		}
		d = Decoder{B: b}
		d.Error()
		_ = d.End()
	})
}

func TestPlanRoundTrip(t *testing.T) {
	p := samplePlan()
	var e Encoder
	p.Encode(&e)
	d := Decoder{B: e.B}
	got := DecodePlan(&d)
	if err := d.End(); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, p) {
		t.Fatalf("plan round trip:\n got %+v\nwant %+v", got, p)
	}
}

func TestAtFDCWD(t *testing.T) {
	if int(atFDCWD) != -100 {
		t.Fatalf("atFDCWD = %#x", atFDCWD)
	}
}

// TestRemoteErrorKeepsSentinel: ErrRootWorkspace survives the boundary;
// another message does not pass for it.
func TestRemoteErrorKeepsSentinel(t *testing.T) {
	var e Encoder
	e.Error(fmt.Errorf("%w (/w): chown it", ErrRootWorkspace))
	e.Error(errors.New("the workspace is owned by rootless"))
	d := Decoder{B: e.B}
	if err := d.Error(); !errors.Is(err, ErrRootWorkspace) {
		t.Errorf("%v does not match ErrRootWorkspace", err)
	}
	if err := d.Error(); errors.Is(err, ErrRootWorkspace) {
		t.Errorf("%v matches ErrRootWorkspace", err)
	}
}

// FuzzDecodeGo: a pre-started sandbox's call message never panics the
// decoder; what decodes has a program, an argv and known streams, and
// re-encodes to the same bytes.
func FuzzDecodeGo(f *testing.F) {
	var e Encoder
	(&Go{Path: "/bin/sh", Dev: 9, Ino: 10, Argv: []string{"sh", "-c", "x"}, Env: []string{"A=1"}, Dir: "/w", Stdio: 6}).Encode(&e)
	f.Add(e.B[4:])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		d := Decoder{B: b}
		g := DecodeGo(&d)
		if d.End() != nil {
			return
		}
		if g.Path == "" || len(g.Argv) == 0 || g.Stdio > 7 {
			t.Fatalf("accepted %+v", g)
		}
		var e Encoder
		g.Encode(&e)
		if !bytes.Equal(e.B[4:], b) || int(binary.LittleEndian.Uint32(e.B)) != len(b) {
			t.Fatalf("re-encoding differs")
		}
	})
}
