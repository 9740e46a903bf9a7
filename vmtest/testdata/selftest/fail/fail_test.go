// Package fail is a vmtest self-test package whose one test fails.
package fail

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

func TestFails(t *testing.T) {
	t.Error("selftest failure")
}
