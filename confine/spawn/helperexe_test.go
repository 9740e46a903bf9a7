package spawn

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/b10x/harness/confine"
	"github.com/b10x/harness/confine/spawn/internal/helperimage"
	"github.com/b10x/harness/internal/testenv"
)

// selfImage seals this test binary into a memfd: a valid helper image (the
// helper package's init runs the helper when argv[0] says so) that exists
// whether or not make embedded one.
func selfImage(t *testing.T) *os.File { return sealFile(t, selfExe(t)) }

// sealFile seals a copy of the file at path into a memfd, closed when the
// test ends.
func sealFile(t *testing.T, path string) *os.File {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	m, err := sealedMemfd("b10x-test-image", f, st.Size())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// TestSealedMemfd: the image's memfd runs as a program and nobody can
// change it afterwards: not through its descriptor, not through a reopened
// /proc/self/fd, not by resizing it, changing its mode or its seals.
func TestSealedMemfd(t *testing.T) {
	img, err := os.ReadFile(selfExe(t))
	if err != nil {
		t.Fatal(err)
	}
	m := selfImage(t)
	fd := int(m.Fd())
	if flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != nil || flags&unix.FD_CLOEXEC == 0 {
		t.Errorf("memfd flags %#x, %v: want close-on-exec", flags, err)
	}
	// Executed the way calls execute it: passed as an ExtraFiles entry,
	// named by its number in the child. With no test to run it exits 0.
	cmd := exec.Command("/proc/self/fd/3", "-test.run=^$")
	cmd.ExtraFiles = []*os.File{m}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("executing the sealed memfd: %v %s", err, out)
	}
	if _, err := unix.Pwrite(fd, []byte("x"), 0); !errors.Is(err, unix.EPERM) {
		t.Errorf("pwrite on the memfd: %v, want EPERM", err)
	}
	path := "/proc/self/fd/" + strconv.Itoa(fd)
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
	seals, err := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0)
	if err != nil {
		t.Fatal(err)
	}
	// F_SEAL_EXEC exists from Linux 6.3 (the host has it; the VM shapes
	// all boot Debian 12's 6.1).
	if kernelAtLeast(t, 6, 3) {
		if seals&unix.F_SEAL_EXEC == 0 {
			t.Errorf("seals %#x lack F_SEAL_EXEC", seals)
		}
		if err := unix.Fchmod(fd, 0o644); !errors.Is(err, unix.EPERM) {
			t.Errorf("fchmod of the sealed memfd: %v, want EPERM", err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil || string(got) != string(img) {
		t.Errorf("memfd holds %d bytes (%v), want the %d written", len(got), err, len(img))
	}
}

// kernelAtLeast reports whether the running kernel's release is at least
// major.minor.
func kernelAtLeast(t *testing.T, major, minor int) bool {
	t.Helper()
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		t.Fatal(err)
	}
	rel := unix.ByteSliceToString(u.Release[:])
	var ma, mi int
	if _, err := fmt.Sscanf(rel, "%d.%d", &ma, &mi); err != nil {
		t.Fatalf("kernel release %q: %v", rel, err)
	}
	return ma > major || ma == major && mi >= minor
}

// TestSealedMemfdShortImage: an image shorter than announced is an error,
// not a truncated program.
func TestSealedMemfdShortImage(t *testing.T) {
	f, err := sealedMemfd("b10x-test-image", strings.NewReader("abc"), 10)
	if err == nil {
		f.Close()
		t.Fatal("a 3-byte image announced as 10 was accepted")
	}
}

// TestImageSurvivesDescriptorShuffle: the image is executed whatever
// numbers the call's own descriptors have. Between clone and execve Go
// moves descriptors to numbers above the highest one passed; an image named
// by its number in the parent was overwritten when the call's stdout and
// stderr sat just below it (the child then tried to execute a pipe).
func TestImageSurvivesDescriptorShuffle(t *testing.T) {
	requireSpawn(t)
	// Push the image's descriptor up, then free the numbers below it and
	// put the call's stdout and stderr just under it: the descriptors the
	// call opens itself (its pipes, stdin's /dev/null) take the free ones
	// below, so every descriptor passed to the child is below the image's,
	// and the first one Go moves lands on the image's number.
	var pad []*os.File
	for i := 0; i < 10; i++ {
		f, err := os.Open(os.DevNull)
		if err != nil {
			t.Fatal(err)
		}
		pad = append(pad, f)
	}
	m := selfImage(t)
	n := int(m.Fd())
	for _, f := range pad {
		f.Close()
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var outs []*os.File
	for _, at := range []int{n - 1, n - 2} {
		if err := unix.Dup3(int(w.Fd()), at, unix.O_CLOEXEC); err != nil {
			t.Fatalf("dup3 to %d: %v", at, err)
		}
		outs = append(outs, os.NewFile(uintptr(at), "out"))
	}
	w.Close()
	d := newDirect(testOptions())
	d.helper = &helperExe{file: m, size: 1}
	ws := workspace(t)
	res, err := d.Run(context.Background(), shSpec(t, ws, "echo from-the-image"), Stdio{Stdout: outs[0], Stderr: outs[1]})
	for _, f := range outs {
		f.Close()
	}
	got, _ := io.ReadAll(r)
	if err != nil || res.ExitCode != 0 || string(got) != "from-the-image\n" {
		t.Fatalf("call with stdout at %d and stderr at %d, image at %d: %v %+v %q", n-1, n-2, n, err, res, got)
	}
	if f := d.helper.failed.Load(); f != nil {
		t.Fatalf("the image was not executed (fell back to this binary): %s", *f)
	}
}

// TestImageStartFailureFallsBack: an image that cannot be executed makes
// the call start this binary as its helper instead, and nothing else: in
// particular the failure is not taken for a refused user namespace, which
// would drop that layer from every later call.
func TestImageStartFailureFallsBack(t *testing.T) {
	requireSpawn(t)
	bad, err := sealedMemfd("b10x-test-image", strings.NewReader("not a program\n"), 14)
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	d := newDirect(testOptions())
	d.helper = &helperExe{file: bad, size: 14}
	ws := workspace(t)
	for i := 0; i < 2; i++ {
		res, out, err := run(t, d, shSpec(t, ws, "echo ok"))
		if err != nil || res.ExitCode != 0 || string(out.stdout.Bytes()) != "ok\n" {
			t.Fatalf("call %d: %v %+v\n%s", i, err, res, out)
		}
		if testenv.Shape() != testenv.ShapeNoUserns && !slices.Contains(res.Layers, confine.LayerUserNS) {
			t.Fatalf("call %d: layers %v lack %s after the image failed to start", i, res.Layers, confine.LayerUserNS)
		}
	}
	f := d.helper.failed.Load()
	if f == nil || !strings.Contains(*f, "exec format error") {
		t.Fatalf("the failed image is not recorded as such: %v", f)
	}
	if src := d.helper.source(); !strings.Contains(src, "executing the embedded helper image failed") {
		t.Errorf("source: %q", src)
	}
}

// TestHelperSourceFollowsTheImage: with an image stamped in (make builds
// one and links its digest into every binary it builds, and says so with
// B10X_REQUIRE_HELPER_IMAGE=1, on the host and in every VM shape), each
// call's helper is executed from its sealed memfd, and the image starts as
// a helper; without one, from this binary, and doctor says why.
func TestHelperSourceFollowsTheImage(t *testing.T) {
	h := currentHelper()
	img, size, _, why := helperimage.Image()
	if img == nil {
		if os.Getenv("B10X_REQUIRE_HELPER_IMAGE") == "1" {
			t.Fatalf("make built this binary, yet it has no helper image: %s", why)
		}
		if h.file != nil || h.why != why || !strings.Contains(HelperSource(), why) {
			t.Fatalf("no usable image (%s), yet the helper is %+v (%s)", why, h, HelperSource())
		}
		return
	}
	if h.file == nil || h.size != size {
		t.Fatalf("an image of %d bytes is stamped in, yet the helper is %+v (%s)", size, h, h.why)
	}
	target, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(int(h.file.Fd())))
	if err != nil || !strings.HasPrefix(target, "/memfd:b10x-spawn-helper") {
		t.Fatalf("the image descriptor links to %q (%v), want the helper memfd", target, err)
	}
	// HelperSource starts the image once (doctor's check).
	if src := HelperSource(); !strings.HasPrefix(src, "embedded helper image") {
		t.Fatalf("HelperSource: %q", src)
	}
}

// TestProbeTellsAHelperFromAnyProgram: doctor's check starts the image and
// accepts it only when it answers as the helper does.
func TestProbeTellsAHelperFromAnyProgram(t *testing.T) {
	good := &helperExe{file: selfImage(t)}
	if err := good.probe(); err != nil {
		t.Fatalf("this test binary, a helper: %v", err)
	}
	if err := (&helperExe{file: sealFile(t, lookPath(t, "true"))}).probe(); err == nil {
		t.Fatal("true passed for a helper")
	}
	junk, err := sealedMemfd("b10x-test-image", strings.NewReader("not a program\n"), 14)
	if err != nil {
		t.Fatal(err)
	}
	defer junk.Close()
	bad := &helperExe{file: junk, size: 14}
	if err := bad.probe(); err == nil {
		t.Fatal("a text file passed for a helper")
	}
}
