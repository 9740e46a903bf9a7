package spawn

import (
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/b10x/harness/confine/spawn/internal/helperimage"
	"golang.org/x/sys/unix"
)

// TestSealedMemfd: the helper image's memfd runs as a program and nobody
// can change it afterwards, not through its descriptor, not through
// /proc/self/fd, not by resizing.
func TestSealedMemfd(t *testing.T) {
	// The image is this test binary (/bin/true may be busybox, which
	// dispatches on its name); started with no test to run, it exits 0.
	img, err := os.ReadFile(selfExe(t))
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(selfExe(t))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fd, err := sealedMemfd("b10x-test-image", f, int64(len(img)))
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if fd < helperMemfdMin {
		t.Errorf("memfd is descriptor %d, want at least %d", fd, helperMemfdMin)
	}
	if flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != nil || flags&unix.FD_CLOEXEC == 0 {
		t.Errorf("memfd flags %#x, %v: want close-on-exec", flags, err)
	}
	path := "/proc/self/fd/" + strconv.Itoa(fd)
	if out, err := exec.Command(path, "-test.run=^$").CombinedOutput(); err != nil {
		t.Fatalf("executing the sealed memfd: %v %s", err, out)
	}
	if _, err := unix.Pwrite(fd, []byte("x"), 0); !errors.Is(err, unix.EPERM) {
		t.Errorf("pwrite on the memfd: %v, want EPERM", err)
	}
	if rw, err := os.OpenFile(path, os.O_RDWR, 0); err == nil {
		_, werr := rw.WriteAt([]byte("x"), 0)
		rw.Close()
		if !errors.Is(werr, unix.EPERM) {
			t.Errorf("write through a reopened /proc/self/fd: %v, want EPERM", werr)
		}
	}
	for _, size := range []int64{0, int64(len(img)) + 4096} {
		if err := unix.Ftruncate(fd, size); !errors.Is(err, unix.EPERM) {
			t.Errorf("ftruncate to %d: %v, want EPERM", size, err)
		}
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, 0); err == nil {
		// F_SEAL_SEAL makes any further F_ADD_SEALS fail, even of nothing.
		t.Errorf("F_ADD_SEALS accepted after F_SEAL_SEAL")
	}
	got, err := os.ReadFile(path)
	if err != nil || string(got) != string(img) {
		t.Errorf("memfd holds %d bytes (%v), want the %d written", len(got), err, len(img))
	}
}

// TestSealedMemfdShortImage: an image shorter than announced is an error,
// not a truncated program.
func TestSealedMemfdShortImage(t *testing.T) {
	fd, err := sealedMemfd("b10x-test-image", strings.NewReader("abc"), 10)
	if err == nil {
		unix.Close(fd)
		t.Fatal("a 3-byte image announced as 10 was accepted")
	}
}

// TestHelperSourceFollowsTheImage: with a usable embedded image (make
// builds one before the tests), each call's helper is executed from its
// sealed memfd; without one, from this binary, and doctor says why.
func TestHelperSourceFollowsTheImage(t *testing.T) {
	h := currentHelper()
	img, size, why := helperimage.Image()
	if img == nil {
		if h.image != 0 || h.path != "/proc/self/exe" || h.why != why || !strings.Contains(HelperSource(), why) {
			t.Fatalf("no usable image (%s), yet the helper is %+v (%s)", why, h, HelperSource())
		}
		return
	}
	if h.image != int(size) || !strings.HasPrefix(h.path, "/proc/self/fd/") {
		t.Fatalf("an image of %d bytes is embedded, yet the helper is %+v (%s)", size, h, h.why)
	}
	target, err := os.Readlink(h.path)
	if err != nil || !strings.HasPrefix(target, "/memfd:b10x-spawn-helper") {
		t.Fatalf("%s links to %q (%v), want the helper memfd", h.path, target, err)
	}
	if !strings.HasPrefix(HelperSource(), "embedded helper image") {
		t.Errorf("HelperSource: %q", HelperSource())
	}
}
