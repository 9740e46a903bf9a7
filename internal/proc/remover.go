// Package proc holds the harness's own helper processes: the small,
// never-confined processes it starts before it confines itself, to do
// later what its own Landlock domain will deny it.
package proc

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/b10x/harness/internal/reexec"
)

// A harness confined by its own Landlock domain cannot remove an entry of
// a directory outside the workspace: removing needs the remove_file or
// remove_dir right on the parent, which would let it remove any entry there
// and must not be granted. So what it creates outside (the hooks' private
// temporary directory, an MCP listener's Unix socket) is removed by a
// Remover: a process started before the harness confines itself, and never
// confined, that waits until the harness closes its end of a pipe (at Done,
// or when the harness dies in any way, SIGKILL included) and then removes
// the path, if it is still the entry that was there at the start (same
// device and inode): never another file put there since.

const removerEntry = "remover"

func init() { reexec.Register(removerEntry, removerMain) }

// Remover is a started remover of one path.
type Remover struct {
	cmd *exec.Cmd
	end *os.File // closing it lets the remover act
}

// StartRemover starts the process that removes path (with what it holds,
// when tree) once Done is called or the harness dies. path must be
// absolute and exist. The remover runs in its own process group, so a
// Ctrl-C sent to the harness's does not end it before it has acted.
func StartRemover(path string, tree bool) (*Remover, error) {
	if len(path) == 0 || path[0] != '/' {
		return nil, fmt.Errorf("remover of %q: not an absolute path", path)
	}
	// The remover holds the entry itself (an O_PATH descriptor, taken
	// here, when the caller knows the path is its own): while it is held
	// its inode number cannot be given to a file put in its place.
	held, err := os.OpenFile(path, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("remover of %s: %w", path, err)
	}
	defer held.Close()
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("remover of %s: %w", path, err)
	}
	mode := "entry"
	if tree {
		mode = "tree"
	}
	cmd := reexec.Command(removerEntry, mode, path)
	cmd.ExtraFiles = []*os.File{held} // fd 3
	cmd.Stdin = r
	cmd.Env = []string{}
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = cmd.Start()
	r.Close()
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("starting the remover of %s: %w", path, err)
	}
	return &Remover{cmd: cmd, end: w}, nil
}

// Done lets the remover act and waits until it has: the path is gone when
// Done returns (unless it was no longer the same entry). It reports the
// remover's failure. Done may be called once.
func (r *Remover) Done() error {
	r.end.Close()
	err := r.cmd.Wait()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return fmt.Errorf("the remover of %s: %s", r.cmd.Args[len(r.cmd.Args)-1], ee)
	}
	return err
}

// removerMain is the remover: argv is MODE PATH, fd 3 the entry
// StartRemover found at PATH; when stdin ends it removes PATH (MODE
// "tree": with its contents) if PATH is still that entry. It exits 1 when
// removing failed.
func removerMain() {
	signal.Ignore(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGPIPE)
	if len(os.Args) != 3 || (os.Args[1] != "entry" && os.Args[1] != "tree") {
		os.Exit(2)
	}
	tree, path := os.Args[1] == "tree", os.Args[2]
	var held, now unix.Stat_t
	if err := unix.Fstat(3, &held); err != nil {
		fmt.Fprintln(os.Stderr, "remover: the entry's descriptor:", err)
		os.Exit(1)
	}
	_, _ = io.Copy(io.Discard, os.Stdin)
	if err := unix.Lstat(path, &now); err != nil || now.Dev != held.Dev || now.Ino != held.Ino {
		os.Exit(0) // gone, or no longer the entry it was
	}
	var err error
	if tree {
		err = os.RemoveAll(path)
	} else {
		err = os.Remove(path)
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}
