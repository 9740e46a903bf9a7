package helper

const (
	sysFstatat  = 262 // newfstatat
	sysExecveat = 322 // execveat
	sysSeccomp  = 317
)
