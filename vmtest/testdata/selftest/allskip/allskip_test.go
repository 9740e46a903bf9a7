// Package allskip is a vmtest self-test package whose every test skips: the
// shape must fail because of it.
package allskip

import (
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	if os.Getenv("VMTEST_SELFTEST") != "1" {
		println("vmtest self-test package: runs only under go run ./vmtest -selftest")
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestOne(t *testing.T) { t.Skip("first skip") }

func TestTwo(t *testing.T) {
	t.Run("sub", func(t *testing.T) { t.Skip("nested skip") })
	t.Skip("second skip")
}
