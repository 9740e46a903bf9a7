package helperimage

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"strings"
	"testing"
	"testing/fstest"
)

func TestImageFromNeedsAStampAndAFile(t *testing.T) {
	elf := []byte("\x7fELF pretend image")
	sum := sha256.Sum256(elf)
	stamp := hex.EncodeToString(sum[:])
	for _, c := range []struct {
		name  string
		fsys  fstest.MapFS
		stamp string
		why   string // "" when the image must be returned
	}{
		{"stamped", fstest.MapFS{"bin/h": {Data: elf}}, stamp, ""},
		{"built without make", fstest.MapFS{"bin/h": {Data: elf}}, "", "built without make"},
		{"no image", fstest.MapFS{"bin/README.md": {Data: []byte("x")}}, stamp, "no helper image"},
		{"empty image", fstest.MapFS{"bin/h": {Data: nil}}, stamp, "no helper image"},
		{"directory", fstest.MapFS{"bin/h/x": {Data: elf}}, stamp, "no helper image"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, size, sum, why := imageFrom(c.fsys, "bin/h", c.stamp)
			if c.why == "" {
				if r == nil {
					t.Fatalf("refused a stamped image: %s", why)
				}
				b, err := io.ReadAll(r)
				if err != nil || !bytes.Equal(b, elf) || size != int64(len(elf)) || sum != c.stamp {
					t.Fatalf("read %q (size %d, sum %s), %v", b, size, sum, err)
				}
				return
			}
			if r != nil || !strings.Contains(why, c.why) {
				t.Fatalf("got image %v, why %q; want refusal saying %q", r != nil, why, c.why)
			}
		})
	}
}

func TestCheckComparesTheBytesItReads(t *testing.T) {
	img := bytes.Repeat([]byte("helper image "), 10000)
	sum := sha256.Sum256(img)
	stamp := hex.EncodeToString(sum[:])
	if err := Check(bytes.NewReader(img), int64(len(img)), stamp); err != nil {
		t.Fatalf("the right bytes: %v", err)
	}
	bad := bytes.Clone(img)
	bad[len(bad)/2] ^= 1
	if err := Check(bytes.NewReader(bad), int64(len(bad)), stamp); err == nil || !strings.Contains(err.Error(), "digest") {
		t.Fatalf("one flipped bit: %v, want a digest mismatch", err)
	}
	if err := Check(bytes.NewReader(img[:len(img)-1]), int64(len(img)), stamp); err == nil {
		t.Fatal("a short read-back was accepted")
	}
	if err := Check(bytes.NewReader(img), int64(len(img)), ""); err == nil {
		t.Fatal("an empty stamp was accepted")
	}
}
