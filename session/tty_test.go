package session

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// openPTY opens a pseudo-terminal pair: the master and the slave, and the
// slave's name.
func openPTY(t *testing.T) (master, slave *os.File, name string) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("opening /dev/ptmx: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlocking the pty (TIOCSPTLCK): %v", err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("TIOCGPTN: %v", err)
	}
	name = "/dev/pts/" + strconv.Itoa(n)
	s, err := os.OpenFile(name, os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("opening %s: %v", name, err)
	}
	t.Cleanup(func() { s.Close() })
	return m, s, name
}

// TestRestoreTerminalsReportsFailures: a terminal among stdin, stdout and
// stderr is saved once however often it appears; restoring an unchanged
// one does nothing, and a restore that fails (the terminal hung up) says
// which operation failed on which terminal, in one line each.
func TestRestoreTerminalsReportsFailures(t *testing.T) {
	master, slave, name := openPTY(t)
	again, err := os.OpenFile(name, os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	saved := saveTerminals(null, slave, again, slave)
	if len(saved) != 1 || !strings.HasPrefix(saved[0].name, name+" ") || saved[0].ldisc != nTTY {
		t.Fatalf("saved %+v, want %s once", saved, name)
	}
	if errs := restoreTerminals(saved); len(errs) != 0 {
		t.Fatalf("restoring an unchanged terminal: %v", errs)
	}
	master.Close() // the slave hangs up: every ioctl on it fails with EIO
	errs := restoreTerminals(saved)
	if len(errs) == 0 {
		t.Fatal("restoring a hung-up terminal reported nothing")
	}
	for _, want := range []string{"TIOCSETD", "TCSETS"} {
		found := false
		for _, e := range errs {
			found = found || strings.Contains(e.Error(), want)
		}
		if !found {
			t.Errorf("no error names %s: %v", want, errs)
		}
	}
	for _, e := range errs {
		if !strings.HasPrefix(e.Error(), name+" ") || strings.Contains(e.Error(), "\n") {
			t.Errorf("error %q: want one line starting with the terminal's name", e)
		}
	}
}
