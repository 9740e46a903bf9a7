// Command gen writes deploy/seccomp/b10x-harness.json from
// upstream-default.json and additions.json (see package seccomp). Run it
// from the module root:
//
//	go run ./deploy/seccomp/gen [-check] [-dir deploy/seccomp]
//
// With -check it writes nothing and exits 1 when the shipped file differs
// from what it would write.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/b10x/harness/deploy/seccomp"
)

func main() {
	dir := flag.String("dir", "deploy/seccomp", "the directory holding upstream-default.json and additions.json")
	check := flag.Bool("check", false, "exit 1 when b10x-harness.json is not what would be written")
	flag.Parse()
	if err := run(*dir, *check); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

func run(dir string, check bool) error {
	up, err := os.ReadFile(filepath.Join(dir, "upstream-default.json"))
	if err != nil {
		return err
	}
	add, err := os.ReadFile(filepath.Join(dir, "additions.json"))
	if err != nil {
		return err
	}
	out, err := seccomp.Generate(up, add)
	if err != nil {
		return err
	}
	dst := filepath.Join(dir, "b10x-harness.json")
	if check {
		cur, err := os.ReadFile(dst)
		if err != nil {
			return err
		}
		if !bytes.Equal(cur, out) {
			return fmt.Errorf("%s is stale: run go run ./deploy/seccomp/gen", dst)
		}
		return nil
	}
	return os.WriteFile(dst, out, 0o644)
}
