package helper

import "syscall"

const (
	sysFstatat  = syscall.SYS_FSTATAT
	sysExecveat = syscall.SYS_EXECVEAT
	sysSeccomp  = syscall.SYS_SECCOMP
)
