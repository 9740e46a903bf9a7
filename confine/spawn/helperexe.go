package spawn

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/b10x/harness/confine/spawn/internal/helper"
	"github.com/b10x/harness/confine/spawn/internal/helperimage"
)

// helperExe is what calls' helpers are executed from: the sealed memfd of
// the embedded image, or (file nil) this binary re-executed.
type helperExe struct {
	file *os.File // the sealed image; nil: this binary
	size int64
	why  string // why this binary is used when file is nil
	// failed holds why executing the image failed once; from then on this
	// binary is re-executed instead.
	failed atomic.Pointer[string]
}

// imageFD is the image's descriptor number in the child: it is passed as
// the ExtraFiles entry after the status and plan pipes, so Go's own
// descriptor shuffle between clone and execve places it there, and the
// child executes /proc/self/fd/5. (A descriptor of the parent's, named by
// its own number, could be overwritten by that shuffle before execve.)
const imageFD = helper.PlanFD + 1

var imagePath = "/proc/self/fd/" + strconv.Itoa(imageFD)

// use reports whether calls should execute the image.
func (h *helperExe) use() bool { return h.file != nil && h.failed.Load() == nil }

// source says what calls' helpers are executed from.
func (h *helperExe) source() string {
	if h.file == nil {
		return "this binary, re-executed: " + h.why
	}
	if f := h.failed.Load(); f != nil {
		return "this binary, re-executed: executing the embedded helper image failed: " + *f
	}
	return fmt.Sprintf("embedded helper image (%.1f MB, from a sealed memfd)", float64(h.size)/1e6)
}

// probe starts the image once as a helper with an empty plan, outside any
// new namespace: a working helper reads the plan, finds it empty, reports
// "read plan" failed on its status pipe and exits with ExitSetup before it
// does anything else. Anything else (the image does not execute, or is
// not this helper) is the error returned.
func (h *helperExe) probe() error {
	statusR, statusW, err := os.Pipe()
	if err != nil {
		return err
	}
	defer statusR.Close()
	planR, planW, err := os.Pipe()
	if err != nil {
		statusW.Close()
		return err
	}
	planW.Close()
	cmd := exec.Command(imagePath)
	cmd.Args = []string{helper.Argv0}
	cmd.Env = helperEnv
	cmd.Dir = "/"
	cmd.ExtraFiles = []*os.File{statusW, planR, h.file}
	err = cmd.Start()
	statusW.Close()
	planR.Close()
	if err != nil {
		return err
	}
	st := readStatus(statusR, nil)
	werr := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(werr, &ee) || ee.ExitCode() != helper.ExitSetup || st.setupErr == nil || st.setupErr.Step != "read plan" {
		return fmt.Errorf("a helper given no plan should report it and exit %d; it exited with %v, status %+v", helper.ExitSetup, werr, st)
	}
	return nil
}

// currentHelper is decided once per process, at the first call;
// helperWarm starts deciding it at the start of that call.
var (
	currentHelper = sync.OnceValue(loadHelper)
	helperWarm    sync.Once
)

func loadHelper() *helperExe {
	img, size, sum, why := helperimage.Image()
	if img == nil {
		return &helperExe{why: why}
	}
	f, err := sealedMemfd("b10x-spawn-helper", img, size)
	if err != nil {
		return &helperExe{why: "helper image: " + err.Error()}
	}
	if err := helperimage.Check(f, size, sum); err != nil {
		f.Close()
		return &helperExe{why: err.Error()}
	}
	return &helperExe{file: f, size: size}
}

const wantSeals = unix.F_SEAL_SEAL | unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_WRITE

// sealedMemfd returns a close-on-exec, executable memfd holding the size
// bytes r yields, sealed against every change: its contents, its size, its
// mode (F_SEAL_EXEC, where the kernel has it) and its seals. The seals are
// read back, not assumed: an image that could still be written would let
// whoever reaches the descriptor change the code that confines the next
// call.
func sealedMemfd(name string, r io.Reader, size int64) (*os.File, error) {
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING|unix.MFD_EXEC)
	if errors.Is(err, unix.EINVAL) {
		// Kernels before 6.3 know no MFD_EXEC; their memfds are executable.
		fd, err = unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	}
	if err != nil {
		return nil, fmt.Errorf("memfd_create: %w", err)
	}
	f := os.NewFile(uintptr(fd), name)
	fail := func(what string, err error) (*os.File, error) {
		f.Close()
		return nil, fmt.Errorf("%s: %w", what, err)
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
	// F_SEAL_EXEC (6.3) keeps the execute bits; older kernels refuse the
	// unknown seal with EINVAL and have no way to seal the mode.
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_EXEC); err != nil && !errors.Is(err, unix.EINVAL) {
		return fail("seal", err)
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
	return f, nil
}

// HelperSource says what each run call's helper is executed from in this
// process: the embedded helper image, or this binary and why. It starts
// the image once to see that it runs (doctor's question); calls do not
// wait for that, they fall back on their own if the image fails to start.
func HelperSource() string {
	h := currentHelper()
	if h.use() {
		if err := h.probe(); err != nil {
			why := err.Error()
			h.failed.CompareAndSwap(nil, &why)
		}
	}
	return h.source()
}
