package cgroup

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// getChildSubreaper reads this process's child-subreaper attribute
// (prctl PR_GET_CHILD_SUBREAPER, which stores it through a pointer).
func getChildSubreaper() (int32, error) {
	var v int32
	err := unix.Prctl(unix.PR_GET_CHILD_SUBREAPER, uintptr(unsafe.Pointer(&v)), 0, 0, 0)
	return v, err
}
