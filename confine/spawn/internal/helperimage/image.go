// Package helperimage holds the run helper as a small program of its own,
// embedded by `make build`, and decides whether it may be used.
//
// Each run call starts a helper as PID 1 of its new namespaces. Re-executing
// the harness itself costs a start of the Go runtime over a 100 MB binary
// (its function and interface tables are checked and filled at every start);
// the same helper code linked alone is 1.5 MB and starts in about half the
// time. The image is used only when the digest recorded beside it equals the
// digest of the helper sources this binary was compiled with: an image left
// over from other sources would run other confinement code than the
// harness's.
package helperimage

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io"
	"io/fs"
	"runtime"
	"strings"

	"github.com/b10x/harness/confine/spawn/internal/helper"
)

//go:embed bin
var images embed.FS

// Name is the image's file name for this architecture, under bin/.
var Name = "helper-" + runtime.GOARCH

// SourceSum is the SHA-256, in hex, over the names and contents of the
// helper package's Go files other than tests, in name order.
func SourceSum() (string, error) {
	ents, err := fs.ReadDir(helper.Sources, ".")
	if err != nil {
		return "", err
	}
	h := sha256.New()
	for _, e := range ents {
		n := e.Name()
		if e.IsDir() || strings.HasSuffix(n, "_test.go") {
			continue
		}
		b, err := fs.ReadFile(helper.Sources, n)
		if err != nil {
			return "", err
		}
		sum := sha256.Sum256(b)
		h.Write([]byte(n))
		h.Write([]byte{0})
		h.Write(sum[:])
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// Image returns the embedded helper for this architecture, read straight
// from the binary's data (no copy of its 1.5 MB on the heap), and its size.
// When there is none to use it returns nil and why, in words for `doctor`.
func Image() (io.Reader, int64, string) {
	want, err := SourceSum()
	if err != nil {
		return nil, 0, "the helper sources' digest: " + err.Error()
	}
	return imageFrom(images, "bin/"+Name, want)
}

// imageFrom is Image over any file system: the image at name, if the
// digest recorded in name+".sum" is want.
func imageFrom(fsys fs.FS, name, want string) (io.Reader, int64, string) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, 0, "no helper image was built into this binary (build with make build)"
	}
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() || st.Size() == 0 {
		f.Close()
		return nil, 0, "no helper image was built into this binary (build with make build)"
	}
	rec, err := fs.ReadFile(fsys, name+".sum")
	if err != nil {
		f.Close()
		return nil, 0, "the helper image has no source digest beside it (rebuild with make build)"
	}
	if strings.TrimSpace(string(rec)) != want {
		f.Close()
		return nil, 0, "the helper image was built from other helper sources than this binary's (rebuild with make build)"
	}
	return f, st.Size(), ""
}
