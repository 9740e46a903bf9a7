package main

import (
	"os"
)

// openTTY opens the controlling terminal. It fails when the process has none
// (ENXIO), even when stdin and stdout are terminals of another session.
func openTTY() (*os.File, error) {
	return os.OpenFile("/dev/tty", os.O_RDWR, 0)
}
