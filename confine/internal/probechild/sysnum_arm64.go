package probechild

import "syscall"

const sysSeccomp = syscall.SYS_SECCOMP
