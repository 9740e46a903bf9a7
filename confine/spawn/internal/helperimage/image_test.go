package helperimage

import (
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/b10x/harness/confine/spawn/internal/helper"
)

func TestImageFromChecksTheDigest(t *testing.T) {
	sum, err := SourceSum()
	if err != nil {
		t.Fatal(err)
	}
	elf := []byte("\x7fELF pretend image")
	for _, c := range []struct {
		name string
		fsys fstest.MapFS
		why  string // "" when the image must be returned
	}{
		{"matching digest", fstest.MapFS{"bin/h": {Data: elf}, "bin/h.sum": {Data: []byte(sum + "\n")}}, ""},
		{"other sources", fstest.MapFS{"bin/h": {Data: elf}, "bin/h.sum": {Data: []byte(strings.Repeat("0", 64))}}, "other helper sources"},
		{"no digest", fstest.MapFS{"bin/h": {Data: elf}}, "no source digest"},
		{"no image", fstest.MapFS{"bin/README.md": {Data: []byte("x")}}, "no helper image"},
		{"empty image", fstest.MapFS{"bin/h": {Data: nil}, "bin/h.sum": {Data: []byte(sum)}}, "no helper image"},
		{"directory", fstest.MapFS{"bin/h/x": {Data: elf}, "bin/h.sum": {Data: []byte(sum)}}, "no helper image"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, size, why := imageFrom(c.fsys, "bin/h", sum)
			if c.why == "" {
				if r == nil {
					t.Fatalf("refused a matching image: %s", why)
				}
				b, err := io.ReadAll(r)
				if err != nil || string(b) != string(elf) || size != int64(len(elf)) {
					t.Fatalf("read %q (size %d), %v", b, size, err)
				}
				return
			}
			if r != nil || !strings.Contains(why, c.why) {
				t.Fatalf("got image %v, why %q; want refusal saying %q", r != nil, why, c.why)
			}
		})
	}
}

// TestSourceSumCoversTheHelperSources: the digest is over exactly the
// helper's non-test Go files as they are on disk, so an edit to any of them
// retires an image built before it.
func TestSourceSumCoversTheHelperSources(t *testing.T) {
	dir := filepath.Join("..", "helper")
	onDisk, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, p := range onDisk {
		if !strings.HasSuffix(p, "_test.go") {
			want = append(want, filepath.Base(p))
		}
	}
	ents, err := fs.ReadDir(helper.Sources, ".")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), "_test.go") {
			got = append(got, e.Name())
			disk, err := os.ReadFile(filepath.Join(dir, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			emb, _ := fs.ReadFile(helper.Sources, e.Name())
			if string(disk) != string(emb) {
				t.Errorf("%s: embedded copy differs from the file", e.Name())
			}
		}
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("digest covers %v, the helper has %v", got, want)
	}
	a, _ := SourceSum()
	b, _ := SourceSum()
	if a != b || len(a) != 64 {
		t.Fatalf("SourceSum not a stable SHA-256: %q %q", a, b)
	}
}
