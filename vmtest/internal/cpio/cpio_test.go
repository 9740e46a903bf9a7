package cpio

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"strings"
	"testing"
	"time"
)

// TestGolden checks the bytes of a small archive against the newc layout
// written out by hand from the format's definition: "070701", thirteen
// 8-digit hex fields, the NUL-terminated name padded so header+name is a
// multiple of 4, then the data padded to a multiple of 4.
func TestGolden(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	mt := time.Unix(0x5f5e100, 0)
	must(t, w.Add(Header{Name: "d", Mode: fs.ModeDir | 0o755, ModTime: mt}, nil))
	must(t, w.Add(Header{Name: "d/f", Mode: 0o644, UID: 1000, GID: 1000, ModTime: mt, Size: 3}, strings.NewReader("abc")))
	must(t, w.Add(Header{Name: "l", Mode: fs.ModeSymlink | 0o777, ModTime: mt, Linkname: "d/f"}, nil))
	must(t, w.Add(Header{Name: "c", Mode: fs.ModeDevice | fs.ModeCharDevice | 0o600, ModTime: mt, Major: 5, Minor: 1}, nil))
	must(t, w.Close())

	want := "" +
		// ino 1, dir 040755, nlink 2, namesize 2 ("d\0"): 110+2=112, no padding
		"070701" + "00000001" + "000041ed" + "00000000" + "00000000" + "00000002" + "05f5e100" + "00000000" + "00000000" + "00000000" + "00000000" + "00000000" + "00000002" + "00000000" + "d\x00" +
		// ino 2, file 0100644, uid/gid 1000, size 3, namesize 4: 114 -> pad 2; data 3 -> pad 1
		"070701" + "00000002" + "000081a4" + "000003e8" + "000003e8" + "00000001" + "05f5e100" + "00000003" + "00000000" + "00000000" + "00000000" + "00000000" + "00000004" + "00000000" + "d/f\x00" + "\x00\x00" + "abc\x00" +
		// ino 3, symlink 0120777, size 3 (target), namesize 2: 112; data pad 1
		"070701" + "00000003" + "0000a1ff" + "00000000" + "00000000" + "00000001" + "05f5e100" + "00000003" + "00000000" + "00000000" + "00000000" + "00000000" + "00000002" + "00000000" + "l\x00" + "d/f\x00" +
		// ino 4, char device 020600, rdev 5:1
		"070701" + "00000004" + "00002180" + "00000000" + "00000000" + "00000001" + "05f5e100" + "00000000" + "00000000" + "00000000" + "00000005" + "00000001" + "00000002" + "00000000" + "c\x00" +
		// trailer: namesize 11, 121 -> pad 3
		"070701" + "00000000" + "00000000" + "00000000" + "00000000" + "00000001" + "00000000" + "00000000" + "00000000" + "00000000" + "00000000" + "00000000" + "0000000b" + "00000000" + "TRAILER!!!\x00" + "\x00\x00\x00"
	if got := buf.String(); got != want {
		t.Fatalf("archive bytes differ\n got %q\nwant %q", got, want)
	}
	if buf.Len()%4 != 0 {
		t.Fatalf("archive length %d is not a multiple of 4", buf.Len())
	}
}

func TestRoundTrip(t *testing.T) {
	big := bytes.Repeat([]byte("0123456789abcdef"), 70000) // over the 1 MiB buffer
	mt := time.Unix(1700000000, 0)
	in := []Header{
		{Name: "bin", Mode: fs.ModeDir | 0o755},
		{Name: "bin/busybox", Mode: 0o755, Size: int64(len(big))},
		{Name: "bin/sh", Mode: fs.ModeSymlink | 0o777, Linkname: "busybox"},
		{Name: "tmp", Mode: fs.ModeDir | fs.ModeSticky | 0o777},
		{Name: "tmp/suid", Mode: fs.ModeSetuid | fs.ModeSetgid | 0o755, Size: 0},
		{Name: "fifo", Mode: fs.ModeNamedPipe | 0o600},
		{Name: "blk", Mode: fs.ModeDevice | 0o600, Major: 8, Minor: 16},
		{Name: "odd-name-of-five", Mode: 0o600, Size: 1, UID: 7, GID: 9},
	}
	bodies := map[string][]byte{"bin/busybox": big, "odd-name-of-five": {'x'}}
	var buf bytes.Buffer
	w := NewWriter(&buf)
	for _, h := range in {
		h.ModTime = mt
		must(t, w.Add(h, bytes.NewReader(bodies[h.Name])))
	}
	must(t, w.Close())
	out, err := ReadAll(bytes.NewReader(buf.Bytes()))
	must(t, err)
	if len(out) != len(in) {
		t.Fatalf("read %d entries, wrote %d", len(out), len(in))
	}
	inos := map[uint32]bool{}
	for i, e := range out {
		h := in[i]
		if e.Name != h.Name || e.Mode != h.Mode || e.UID != h.UID || e.GID != h.GID || e.Linkname != h.Linkname || e.Major != h.Major || e.Minor != h.Minor || !e.ModTime.Equal(mt) {
			t.Errorf("entry %d: got %+v, want %+v", i, e.Header, h)
		}
		if !bytes.Equal(e.Data, bodies[h.Name]) {
			t.Errorf("entry %q: %d data bytes differ from the %d written", h.Name, len(e.Data), len(bodies[h.Name]))
		}
		if inos[e.Ino] {
			t.Errorf("entry %q: inode %d reused", h.Name, e.Ino)
		}
		inos[e.Ino] = true
	}
}

func TestRejects(t *testing.T) {
	for _, tc := range []struct {
		name string
		prep []Header
		h    Header
		body io.Reader
		want string
	}{
		{name: "empty", h: Header{Mode: 0o644}, want: "empty entry name"},
		{name: "dot", h: Header{Name: ".", Mode: fs.ModeDir}, want: "empty entry name"},
		{name: "absolute", h: Header{Name: "/init", Mode: 0o755}, want: "absolute"},
		{name: "unclean", h: Header{Name: "a//b", Mode: 0o755}, want: "not clean"},
		{name: "dotdot", h: Header{Name: "../x", Mode: 0o755}, want: "leaves the archive root"},
		{name: "nul", h: Header{Name: "a\x00b", Mode: 0o755}, want: "NUL"},
		{name: "trailer", h: Header{Name: "TRAILER!!!", Mode: 0o644}, want: "reserved"},
		{name: "no parent", h: Header{Name: "bin/sh", Mode: 0o755}, want: `parent directory "bin" not written`},
		{name: "parent is a file", prep: []Header{{Name: "bin", Mode: 0o644}}, h: Header{Name: "bin/sh", Mode: 0o755}, want: "parent directory"},
		{name: "duplicate", prep: []Header{{Name: "x", Mode: 0o644}}, h: Header{Name: "x", Mode: 0o644}, want: "written twice"},
		{name: "short body", h: Header{Name: "f", Mode: 0o644, Size: 5}, body: strings.NewReader("abc"), want: "body has 3 bytes"},
		{name: "long body", h: Header{Name: "f", Mode: 0o644, Size: 2}, body: strings.NewReader("abc"), want: "body longer"},
		{name: "no body", h: Header{Name: "f", Mode: 0o644, Size: 2}, want: "no body"},
		{name: "huge", h: Header{Name: "f", Mode: 0o644, Size: 1 << 33}, body: strings.NewReader(""), want: "out of range"},
		{name: "socket", h: Header{Name: "s", Mode: fs.ModeSocket}, want: "cannot be archived"},
		{name: "empty link", h: Header{Name: "l", Mode: fs.ModeSymlink}, want: "symlink target"},
		{name: "negative uid", h: Header{Name: "f", Mode: 0o644, UID: -1}, want: "out of range"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := NewWriter(io.Discard)
			for _, p := range tc.prep {
				must(t, w.Add(p, strings.NewReader("")))
			}
			err := w.Add(tc.h, tc.body)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Add(%+v) = %v, want an error containing %q", tc.h, err, tc.want)
			}
			// Errors are sticky: the archive cannot be finished as if nothing happened.
			if err2 := w.Close(); !errors.Is(err2, err) && err2.Error() != err.Error() {
				t.Fatalf("Close after a failed Add = %v, want the same error %v", err2, err)
			}
		})
	}
}

func TestCloseTwiceAndAddAfterClose(t *testing.T) {
	w := NewWriter(io.Discard)
	must(t, w.Close())
	if err := w.Add(Header{Name: "x", Mode: 0o644}, nil); err == nil {
		t.Fatal("Add after Close succeeded")
	}
	if err := w.Close(); err == nil {
		t.Fatal("second Close succeeded")
	}
}

func TestReadAllRejectsDamage(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	must(t, w.Add(Header{Name: "f", Mode: 0o644, Size: 4}, strings.NewReader("data")))
	must(t, w.Close())
	good := buf.Bytes()
	for name, b := range map[string][]byte{
		"truncated":  good[:len(good)-20],
		"bad magic":  append([]byte("070702"), good[6:]...),
		"bad field":  append(append(append([]byte{}, good[:14]...), 'z'), good[15:]...),
		"no trailer": good[:112+4],
	} {
		if _, err := ReadAll(bytes.NewReader(b)); err == nil {
			t.Errorf("%s: ReadAll accepted a damaged archive", name)
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
