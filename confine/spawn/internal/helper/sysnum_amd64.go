package helper

const (
	sysFstatat = 262 // newfstatat
	sysSeccomp = 317
)
