package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/b10x/harness/vmtest/internal/protocol"
)

// vm is how every guest of this invocation boots.
type vm struct {
	qemu    string
	kernel  kernel
	accel   string // "tcg" or "kvm"
	memMiB  int
	cpus    int
	out     *prefixWriter
	logsDir string
}

// qemuArgs is the qemu command line for one boot. No network device, no
// display, the serial port on stdio, and -no-reboot so that a reboot or a
// kernel panic ends qemu instead of looping.
func (v *vm) qemuArgs(initrd, cmdline string) []string {
	args := []string{"-nodefaults", "-no-user-config", "-display", "none", "-monitor", "none",
		"-serial", "stdio", "-no-reboot", "-nic", "none",
		"-m", fmt.Sprint(v.memMiB), "-smp", fmt.Sprint(v.cpus),
		"-kernel", v.kernel.Vmlinuz, "-initrd", initrd, "-append", cmdline}
	if v.accel == "kvm" {
		return append([]string{"-accel", "kvm", "-cpu", "host"}, args...)
	}
	// qemu64, not max: max gives the guest every feature TCG can emulate
	// (5-level paging, AVX2 among them), which made the same tests 9 to
	// 19 % slower (confine/spawn 140.5 s against 128.1 s, tools 82.8 s
	// against 66.7 s, debian-6.1 alone on this host). Nothing under test
	// needs more than qemu64's x86-64 with 32-bit compatibility mode.
	return append([]string{"-accel", "tcg", "-cpu", "qemu64"}, args...)
}

// boot runs one guest until it powers off or the deadline passes, feeding
// every console line to onLine and, prefixed, to the terminal. It returns an
// error only for qemu's own failures (it could not start, it was killed at
// the deadline, it exited non-zero).
func (v *vm) boot(ctx context.Context, name, initrd, cmdline string, deadline time.Duration, echo bool, onLine func(string)) error {
	ctx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	cmd := exec.CommandContext(ctx, v.qemu, v.qemuArgs(initrd, cmdline)...)
	cmd.WaitDelay = 5 * time.Second
	// qemu dies with this program: a left-over TCG guest would eat a core.
	cmd.SysProcAttr = &unix.SysProcAttr{Pdeathsig: unix.SIGKILL}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return fmt.Errorf("qemu stdout pipe: %w", err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	var logf io.Writer = io.Discard
	if v.logsDir != "" {
		if f, err := os.Create(fmt.Sprintf("%s/%s.log", v.logsDir, name)); err == nil {
			defer f.Close()
			logf = f
		}
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", v.qemu, err)
	}
	readLines(stdout, 1<<20, func(line string) {
		line = strings.TrimRight(line, "\r")
		fmt.Fprintln(logf, line)
		if echo {
			v.out.Line(name, line)
		}
		onLine(line)
	})
	werr := cmd.Wait()
	if ctx.Err() == context.DeadlineExceeded {
		return fmt.Errorf("deadline of %s passed; qemu killed", deadline)
	}
	if werr != nil {
		return fmt.Errorf("qemu: %w: %s", werr, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// detectAccel decides between KVM and TCG. KVM is used only when /dev/kvm
// opens and a tiny guest boots under it to its init within probeDeadline:
// some hosts offer a /dev/kvm (PVM, nested set-ups) on which a stock kernel
// hangs, and a hang must not cost more than that deadline.
func detectAccel(ctx context.Context, v vm, probeInitrd string, probeDeadline time.Duration) (string, string) {
	f, err := os.OpenFile("/dev/kvm", os.O_RDWR, 0)
	if err != nil {
		return "tcg", fmt.Sprintf("/dev/kvm unusable (%v)", err)
	}
	f.Close()
	took, err := probeBoot(ctx, v, "kvm", probeInitrd, probeDeadline)
	if err != nil {
		return "tcg", fmt.Sprintf("/dev/kvm opens but a probe guest did not boot under it: %v", err)
	}
	return "kvm", fmt.Sprintf("a probe guest booted under KVM in %.1fs", took.Seconds())
}

// probeBoot boots the probe image (the guest init alone, shape probe) under
// accel and reports how long it took to print its line and power off, or why
// it did not.
func probeBoot(ctx context.Context, v vm, accel, probeInitrd string, deadline time.Duration) (time.Duration, error) {
	v.accel, v.cpus, v.memMiB = accel, 1, 256
	line, err := cmdline(protocol.ShapeProbe, "")
	if err != nil {
		return 0, err
	}
	seen := false
	start := time.Now()
	err = v.boot(ctx, accel+"-probe", probeInitrd, line, deadline, false, func(l string) {
		if l == protocol.ProbeLine {
			seen = true
		}
	})
	switch {
	case err != nil:
		return 0, err
	case !seen:
		return 0, errors.New("it powered off without printing the probe line")
	}
	return time.Since(start), nil
}

// prefixWriter prints whole lines to stdout, each with the shape's name, so
// guests that run side by side stay readable.
type prefixWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (p *prefixWriter) Line(name, line string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, "[%s] %s\n", name, line)
}

func (p *prefixWriter) Printf(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, format, args...)
}

// readLines calls f for each line of r (without its newline) until EOF or a
// read error. A line longer than max is passed in pieces of max bytes, so a
// runaway line can neither stop the reading (a stalled reader would block
// the guest's console) nor take unbounded memory.
func readLines(r io.Reader, max int, f func(string)) {
	br := bufio.NewReaderSize(r, max)
	for {
		line, err := br.ReadSlice('\n')
		if len(line) > 0 {
			f(strings.TrimSuffix(string(line), "\n"))
		}
		if err != nil && err != bufio.ErrBufferFull {
			return
		}
	}
}
