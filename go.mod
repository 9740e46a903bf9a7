module github.com/b10x/harness

go 1.26.0

require golang.org/x/sys v0.50.0

require (
	github.com/alecthomas/kong v1.17.0 // indirect
	github.com/bmatcuk/doublestar/v4 v4.10.4 // indirect
	github.com/creack/pty v1.1.24 // indirect
	github.com/elastic/go-seccomp-bpf v1.6.0 // indirect
	github.com/landlock-lsm/go-landlock v0.11.2 // indirect
	golang.org/x/net v0.41.0 // indirect
	kernel.org/pub/linux/libs/security/libcap/psx v1.2.78 // indirect
)
