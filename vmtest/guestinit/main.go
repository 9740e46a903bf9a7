// Command guestinit is PID 1 of a vmtest guest. The host packs it into the
// initramfs as /init; the kernel starts it with the shape name, which the
// host puts on the kernel command line after "--".
//
// It mounts the usual file systems, sets the shape up (cgroup layout,
// sysctls, the user the tests run as), checks that the shape really holds,
// runs every test binary listed in /etc/vmtest.json one after the other, each
// in a fresh working directory with its own deadline, checks that nothing was
// left behind, prints machine-readable result lines (package
// vmtest/internal/protocol) on the serial console and powers the machine off.
//
// Any failure to set the shape up is reported and no test runs: a test that
// ran in a shape other than the one it was told would prove nothing.
//
// It is not meant to run anywhere but as PID 1 of a throw-away VM: it mounts
// over /sys/fs/cgroup, changes sysctls and kills every other process.
package main

import (
	"fmt"
	"os"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/b10x/harness/vmtest/internal/protocol"
)

// console serialises whole lines on the serial console, so that the init's
// own result lines never land in the middle of a test's output line.
var console = &lineWriter{f: os.Stdout}

type lineWriter struct {
	mu sync.Mutex
	f  *os.File
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.f.Write(p)
}

func say(line string) { fmt.Fprintln(console, line) }

func sayf(format string, args ...any) { say(fmt.Sprintf(format, args...)) }

func main() {
	// Started again by the shape checks (see helperMain), possibly as PID 1
	// of a new PID namespace: the argument decides, not the PID.
	if len(os.Args) > 1 && (os.Args[1] == noopArg || os.Args[1] == tryCloneArg) {
		os.Exit(helperMain(os.Args[1:]))
	}
	if os.Getpid() != 1 {
		fmt.Fprintln(os.Stderr, "guestinit: must run as PID 1 of a vmtest guest")
		os.Exit(2)
	}
	exit := 1
	defer func() {
		if r := recover(); r != nil {
			say(protocol.SetupFailLine(fmt.Sprintf("guest init panicked: %v", r)))
			fmt.Fprintf(console, "%s\n", debug.Stack())
			say(protocol.DoneLine(1))
		}
		powerOff()
	}()
	exit = run(os.Args[1:])
	say(protocol.DoneLine(exit))
}

func run(args []string) int {
	start := time.Now()
	if len(args) != 1 {
		say(protocol.SetupFailLine(fmt.Sprintf("want exactly one argument (the shape) after -- on the kernel command line, got %q", args)))
		return 1
	}
	shape := args[0]
	if err := leaveRootfs(); err != nil {
		say(protocol.SetupFailLine(err.Error()))
		return 1
	}
	if err := mountBase(); err != nil {
		say(protocol.SetupFailLine(err.Error()))
		return 1
	}
	if shape == protocol.ShapeProbe {
		say(protocol.ProbeLine)
		return 0
	}
	cfgBytes, err := os.ReadFile(protocol.ConfigPath)
	if err != nil {
		say(protocol.SetupFailLine(fmt.Sprintf("read %s: %v", protocol.ConfigPath, err)))
		return 1
	}
	cfg, err := protocol.ParseConfig(cfgBytes)
	if err != nil {
		say(protocol.SetupFailLine(err.Error()))
		return 1
	}
	env, err := setupShape(shape)
	if err != nil {
		say(protocol.SetupFailLine(fmt.Sprintf("shape %s: %v", shape, err)))
		return 1
	}
	reportGuest(env)
	sayf("%sINFO setup %.2fs after init start (uptime %s)", protocol.Prefix, time.Since(start).Seconds(), uptime())
	failed := 0
	for i, p := range cfg.Packages {
		if !p.RunsIn(shape) {
			continue
		}
		pcfg := cfg
		if r, ok := p.RunIn[shape]; ok {
			pcfg.Run = r
		}
		if !runPackage(env, pcfg, i, p) {
			failed++
		}
	}
	if failed > 0 {
		return 1
	}
	return 0
}

func uptime() string {
	b, err := os.ReadFile("/proc/uptime")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return "unknown"
	}
	return f[0] + "s"
}

func powerOff() {
	unix.Sync()
	// Give the serial console a moment to drain what was just written.
	time.Sleep(100 * time.Millisecond)
	if err := unix.Reboot(unix.LINUX_REBOOT_CMD_POWER_OFF); err != nil {
		sayf("guestinit: reboot(POWER_OFF): %v", err)
	}
	// Returning from PID 1 panics the kernel; qemu runs with -no-reboot and
	// the kernel with panic=-1, so that still ends the VM.
	os.Exit(1)
}
