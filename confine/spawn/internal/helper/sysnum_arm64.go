package helper

import "syscall"

const (
	sysFstatat = syscall.SYS_FSTATAT
	sysSeccomp = syscall.SYS_SECCOMP
)
