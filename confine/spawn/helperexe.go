package spawn

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"

	"github.com/b10x/harness/confine/spawn/internal/helperimage"
	"github.com/b10x/harness/internal/reexec"
	"golang.org/x/sys/unix"
)

// helperExe is what each call's helper is executed from.
type helperExe struct {
	path  string // /proc/self/fd/N of the sealed image, or reexec.Self
	image int    // the image's size in bytes; 0 when this binary is used
	why   string // why this binary is used
}

// helperMemfdMin is the lowest descriptor the image's memfd may have: above
// the descriptors the helper's ExtraFiles take (3 and 4), so the child's
// dup2 of them can never replace the file it is about to execute.
const helperMemfdMin = 10

// currentHelper is decided once per process, at the first call.
var currentHelper = sync.OnceValue(loadHelper)

func loadHelper() helperExe {
	img, size, why := helperimage.Image()
	if img == nil {
		return helperExe{path: reexec.Self, why: why}
	}
	fd, err := sealedMemfd("b10x-spawn-helper", img, size)
	if err != nil {
		return helperExe{path: reexec.Self, why: "helper image: " + err.Error()}
	}
	return helperExe{path: "/proc/self/fd/" + strconv.Itoa(fd), image: int(size)}
}

const wantSeals = unix.F_SEAL_SEAL | unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_WRITE

// sealedMemfd returns a close-on-exec descriptor of an executable memfd
// holding the size bytes r yields, sealed against every change, at helperMemfdMin or above. The
// seals are read back, not assumed: a helper image that could still be
// written would let whoever can reach the descriptor change the code that
// confines the next call.
func sealedMemfd(name string, r io.Reader, size int64) (int, error) {
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING|unix.MFD_EXEC)
	if errors.Is(err, unix.EINVAL) {
		// Kernels before 6.3 know no MFD_EXEC; their memfds are executable.
		fd, err = unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	}
	if err != nil {
		return -1, fmt.Errorf("memfd_create: %w", err)
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close() // the descriptor returned is a duplicate
	fail := func(what string, err error) (int, error) {
		return -1, fmt.Errorf("%s: %w", what, err)
	}
	if err := unix.Ftruncate(fd, size); err != nil {
		return fail("size", err)
	}
	n, err := io.Copy(f, r)
	if err == nil && n != size {
		err = fmt.Errorf("%d bytes written of %d", n, size)
	}
	if err != nil {
		return fail("write", err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, wantSeals); err != nil {
		return fail("seal", err)
	}
	seals, err := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0)
	if err != nil {
		return fail("read seals", err)
	}
	if seals&wantSeals != wantSeals {
		return fail("seal", fmt.Errorf("seals %#x, want %#x", seals, wantSeals))
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fail("fstat", err)
	}
	if st.Size != size {
		return fail("size", fmt.Errorf("%d bytes, want %d", st.Size, size))
	}
	if st.Mode&0o111 == 0 {
		// vm.memfd_noexec made it MFD_NOEXEC_SEAL.
		return fail("exec", errors.New("memfds are not executable here (vm.memfd_noexec)"))
	}
	hi, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, helperMemfdMin)
	if err != nil {
		return fail("dup", err)
	}
	return hi, nil
}

// HelperSource says what each run call's helper is executed from: the
// embedded helper image, or this binary and why.
func HelperSource() string {
	h := currentHelper()
	if h.image > 0 {
		return fmt.Sprintf("embedded helper image (%.1f MB, from a sealed memfd)", float64(h.image)/(1<<20))
	}
	return "this binary, re-executed: " + h.why
}
