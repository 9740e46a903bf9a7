package audit

import "golang.org/x/sys/unix"

var eperm = unix.EPERM
