// Command helperbin is the run helper as a program of its own: the image
// `make build` embeds into the harness (package helperimage) and package
// spawn executes from a sealed memfd. It is the same code as the helper
// the harness re-executes itself as (package helper), in a 1.5 MB binary
// instead of the whole harness, so each call's helper starts the Go
// runtime over a small binary (see docs/decisions/0043-helper-image.md).
//
// The helper package's init runs the helper when argv[0] is helper.Argv0;
// main is reached only when the program was started any other way.
package main

import (
	"os"

	"github.com/b10x/harness/confine/spawn/internal/helper"
)

func main() {
	os.Stderr.WriteString("b10x-harness spawn helper: started by the harness only (argv[0] " + helper.Argv0 + ")\n")
	os.Exit(2)
}
