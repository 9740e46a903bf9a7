package session

import (
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// A child that gets the user's terminal as its stdio (exec hands it over:
// spawn passes the descriptors themselves) can leave it unusable: echo and
// canonical mode off (TCSETS), another line discipline (TIOCSETD, e.g.
// N_NULL: nothing is shown and nothing is read), output stopped (TCXONC),
// exclusive mode (TIOCEXCL), a wrong window size. exec saves each terminal's
// state before the call and restores it after, on every path the harness
// survives (docs/decisions/0036-terminal-restore.md).

// nTTY is the default line discipline, N_TTY.
const nTTY = 0

// termState is one terminal's state, saved before a child gets it.
type termState struct {
	fd      int
	name    string // e.g. "/dev/pts/3 (stdin)"
	termios unix.Termios
	ldisc   int           // -1: unknown (TIOCGETD failed)
	excl    int           // -1: unknown (TIOCGEXCL failed)
	winsize *unix.Winsize // nil: unknown
}

// saveTerminals saves the state of each of files that is a terminal, once
// per terminal (stdin, stdout and stderr are often the same one). A file
// that is not a terminal is skipped.
func saveTerminals(files ...*os.File) []termState {
	var saved []termState
	seen := map[uint64]bool{}
	for _, f := range files {
		if f == nil {
			continue
		}
		fd := int(f.Fd())
		tio, err := unix.IoctlGetTermios(fd, unix.TCGETS)
		if err != nil {
			continue // not a terminal
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err == nil {
			if seen[st.Rdev] {
				continue
			}
			seen[st.Rdev] = true
		}
		s := termState{fd: fd, termios: *tio, ldisc: -1, excl: -1, name: termName(fd, f.Name())}
		if ld, err := unix.IoctlGetInt(fd, unix.TIOCGETD); err == nil {
			s.ldisc = ld
		}
		if ex, err := unix.IoctlGetInt(fd, unix.TIOCGEXCL); err == nil {
			s.excl = ex
		}
		if ws, err := unix.IoctlGetWinsize(fd, unix.TIOCGWINSZ); err == nil {
			s.winsize = ws
		}
		saved = append(saved, s)
	}
	return saved
}

// termName names a terminal for a message: its device path and the stream.
func termName(fd int, stream string) string {
	if p, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd)); err == nil {
		return p + " (" + stream + ")"
	}
	return stream
}

// restoreTerminals puts each saved terminal back as it was: the line
// discipline first (a new one starts from the termios the terminal holds),
// then the termios settings (TCSETS: TCSETSW would wait for output to drain,
// forever if the child stopped it), output restarted, exclusive mode and
// the window size. Only what differs is set. SIGTTOU is ignored meanwhile,
// so a harness in a background process group is not stopped by it.
//
// It returns one error per failed operation, each naming the terminal and
// the operation.
func restoreTerminals(saved []termState) []error {
	if len(saved) == 0 {
		return nil
	}
	signal.Ignore(syscall.SIGTTOU)
	defer signal.Reset(syscall.SIGTTOU)
	var errs []error
	for _, s := range saved {
		// A harness sent to the background must not overwrite the
		// settings of the job that now owns the terminal.
		if fg, err := unix.IoctlGetInt(s.fd, unix.TIOCGPGRP); err == nil && fg != unix.Getpgrp() {
			errs = append(errs, fmt.Errorf("%s: not restored: another process group (%d) is in the foreground", s.name, fg))
			continue
		}
		errs = append(errs, s.restore()...)
	}
	return errs
}

// restore restores one terminal; see restoreTerminals.
func (s termState) restore() []error {
	var errs []error
	fail := func(op string, err error) {
		errs = append(errs, fmt.Errorf("%s: %s: %w", s.name, op, err))
	}
	if s.ldisc >= 0 {
		if cur, err := unix.IoctlGetInt(s.fd, unix.TIOCGETD); err != nil || cur != s.ldisc {
			if err := unix.IoctlSetPointerInt(s.fd, unix.TIOCSETD, s.ldisc); err != nil {
				fail(fmt.Sprintf("restoring the line discipline (TIOCSETD %d)", s.ldisc), err)
			}
		}
	}
	if cur, err := unix.IoctlGetTermios(s.fd, unix.TCGETS); err != nil || *cur != s.termios {
		if err := unix.IoctlSetTermios(s.fd, unix.TCSETS, &s.termios); err != nil {
			fail("restoring the settings (TCSETS)", err)
		}
	}
	// Output stopped by the child (tcflow TCOOFF) cannot be queried;
	// restarting output that runs is harmless.
	if err := unix.IoctlSetInt(s.fd, unix.TCXONC, unix.TCOON); err != nil {
		fail("restarting output (TCXONC TCOON)", err)
	}
	if s.excl == 0 {
		if cur, err := unix.IoctlGetInt(s.fd, unix.TIOCGEXCL); err != nil || cur != 0 {
			if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(s.fd), unix.TIOCNXCL, 0); e != 0 {
				fail("leaving exclusive mode (TIOCNXCL)", e)
			}
		}
	}
	if s.winsize != nil {
		if cur, err := unix.IoctlGetWinsize(s.fd, unix.TIOCGWINSZ); err != nil || *cur != *s.winsize {
			if err := unix.IoctlSetWinsize(s.fd, unix.TIOCSWINSZ, s.winsize); err != nil {
				fail("restoring the window size (TIOCSWINSZ)", err)
			}
		}
	}
	return errs
}
