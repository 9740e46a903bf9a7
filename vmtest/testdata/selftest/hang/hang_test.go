// Package hang is a vmtest self-test package that hangs before its tests
// start, where go test's own -timeout alarm is not yet armed: only the
// guest's deadline can end it.
package hang

import (
	"os"
	"testing"
	"time"
)

func TestMain(m *testing.M) {
	if os.Getenv("VMTEST_SELFTEST") != "1" {
		println("vmtest self-test package: runs only under go run ./vmtest -selftest")
		os.Exit(0)
	}
	time.Sleep(time.Hour)
	os.Exit(m.Run())
}

func TestNeverRuns(t *testing.T) {}
