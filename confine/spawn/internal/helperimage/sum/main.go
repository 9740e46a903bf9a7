// Command sum prints the digest of the helper's sources, for `make build`
// to record beside the helper image it builds.
package main

import (
	"fmt"
	"os"

	"github.com/b10x/harness/confine/spawn/internal/helperimage"
)

func main() {
	sum, err := helperimage.SourceSum()
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper source sum:", err)
		os.Exit(1)
	}
	fmt.Println(sum)
}
