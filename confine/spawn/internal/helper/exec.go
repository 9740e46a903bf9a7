package helper

import (
	"strings"
	"syscall"
)

// The program is pinned at start like every other path the caller names
// (docs/decisions/0071-programs-pinned.md): the harness holds the file
// open and sends its identity; here, in the finished view, its path is
// walked one component at a time without following any link, the file
// reached must be that identity, and it is executed through the descriptor
// that was checked. No name is resolved between the check and the
// execve, so a child that swapped the path for a link or another file
// (in this call or a concurrent one) gets a refusal, never a run of what
// it put there.

// openProgram opens path (canonical and absolute) O_PATH, component by
// component from "/" with O_NOFOLLOW, and checks that the file reached is
// a regular file with st_dev dev and st_ino ino. It uses openat only:
// the child's seccomp filter, already loaded, refuses openat2.
func openProgram(path string, dev, ino uint64) (int, error) {
	if !strings.HasPrefix(path, "/") || ino == 0 {
		return -1, opErr("open", path, syscall.EINVAL)
	}
	dir, err := sysOpen("/", oPath|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return -1, opErr("open", "/", err)
	}
	parts := strings.Split(path[1:], "/")
	for i, c := range parts {
		if c == "" || c == "." || c == ".." {
			sysClose(dir)
			return -1, opErr("open", path, syscall.EINVAL)
		}
		flags := oPath | syscall.O_NOFOLLOW | syscall.O_CLOEXEC
		if i < len(parts)-1 {
			flags |= syscall.O_DIRECTORY
		}
		next, err := sysOpenat(dir, c, flags)
		sysClose(dir)
		switch {
		case err == syscall.ENOTDIR || err == syscall.ELOOP:
			return -1, opErr("open", path, &hintError{err.(syscall.Errno), "a component is now a symbolic link or a file; the program is pinned at start and never followed through links made since"})
		case err == syscall.ENOENT:
			return -1, opErr("open", path, &hintError{syscall.ENOENT, "the program pinned at start was moved or removed since"})
		case err != nil:
			return -1, opErr("open", path, err)
		}
		dir = next
	}
	st, e := sysFstatFD(dir)
	if e != 0 {
		sysClose(dir)
		return -1, opErr("fstat", path, e)
	}
	if uint64(st.Dev) != dev || uint64(st.Ino) != ino || st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		sysClose(dir)
		return -1, &pinMismatch{path: path, program: true, wantDev: dev, wantIno: ino, gotDev: uint64(st.Dev), gotIno: uint64(st.Ino), gotDir: st.Mode&syscall.S_IFMT == syscall.S_IFDIR}
	}
	return dir, nil
}

// execProgram executes the checked descriptor fd with p.Argv and p.Env
// (execveat with AT_EMPTY_PATH). It never returns.
//
// A "#!" script cannot run that way: its interpreter must be given a name
// to open, and the kernel refuses (ENOENT) to hand it /dev/fd/N of a
// close-on-exec descriptor. Only then is the script executed by its path,
// which was checked to be the pinned file an instant before; the
// interpreter, which the kernel finds from the script's first line, lies
// in the view, and so does whatever the name reaches (see Spec.Program in
// package spawn for what that leaves).
func execProgram(p *Plan, fd int) {
	argv, err := syscall.SlicePtrFromStrings(p.Argv)
	if err != nil {
		fail("exec "+p.Path, err)
	}
	envv, err := syscall.SlicePtrFromStrings(p.Env)
	if err != nil {
		fail("exec "+p.Path, err)
	}
	e := sysExecveatFD(fd, argv, envv)
	if e != syscall.ENOENT {
		fail("exec "+p.Path, opErr("execveat", p.Path, e))
	}
	sysClose(fd)
	err = syscall.Exec(p.Path, p.Argv, p.Env)
	fail("exec "+p.Path, err)
}
