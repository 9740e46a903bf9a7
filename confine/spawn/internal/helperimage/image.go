// Package helperimage holds the run helper as a small program of its own,
// embedded by `make build`, and says whether it may be used.
//
// Each run call starts a helper as PID 1 of its new namespaces. Re-executing
// the harness itself costs a start of the Go runtime over a 100 MB binary
// (its function and interface tables are checked and filled at every start);
// the same helper code linked alone is 1.5 MB and starts in about half the
// time.
//
// Make builds the image, then links its SHA-256 into every binary it builds
// (the linker's -X flag sets the package's stamp). An image is used only through that
// stamp: a binary built without make (go build, go install, go test) never
// uses an image, whatever lies in bin/, so no file left or planted there can
// become the code that confines a call; and the harness checks the stamp
// against the very bytes it will execute (Check, after sealing them).
package helperimage

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"runtime"
)

//go:embed bin
var images embed.FS

// stamp is the hex SHA-256 of the image make built, set by make at link
// time: -X github.com/b10x/harness/confine/spawn/internal/helperimage.stamp=...
var stamp string

// Name is the image's file name for this architecture, under bin/.
var Name = "helper-" + runtime.GOARCH

// Image returns the embedded helper for this architecture, read straight
// from the binary's data (no copy on the heap), its size and the digest it
// must have. When there is none to use it returns nil and why, in words for
// `doctor`.
func Image() (r io.Reader, size int64, sum string, why string) {
	return imageFrom(images, "bin/"+Name, stamp)
}

// imageFrom is Image over any file system and stamp.
func imageFrom(fsys fs.FS, name, stamp string) (io.Reader, int64, string, string) {
	if stamp == "" {
		return nil, 0, "", "this binary was built without make, so no helper image is stamped into it (build with make build)"
	}
	f, err := fsys.Open(name)
	if err != nil {
		return nil, 0, "", "no helper image was embedded in this binary (build with make build)"
	}
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() || st.Size() == 0 {
		f.Close()
		return nil, 0, "", "no helper image was embedded in this binary (build with make build)"
	}
	return f, st.Size(), stamp, ""
}

// Check reads size bytes of r from offset 0 and reports whether their
// SHA-256 is sum; the error names the mismatch. It reads through r itself
// (the sealed copy that will be executed), not the embedded original.
func Check(r io.ReaderAt, size int64, sum string) error {
	h := sha256.New()
	n, err := io.Copy(h, io.NewSectionReader(r, 0, size))
	if err != nil {
		return fmt.Errorf("reading the helper image back: %w", err)
	}
	if n != size {
		return fmt.Errorf("helper image: %d bytes read back of %d", n, size)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != sum {
		return fmt.Errorf("helper image digest %s, the binary was stamped with %s (rebuild with make build)", got, sum)
	}
	return nil
}
