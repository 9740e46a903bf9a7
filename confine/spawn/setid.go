package spawn

import (
	"errors"
	"fmt"
	"runtime"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/b10x/harness/internal/dirent"
)

// privilegedFile walks the directory tree of the pinned directory root
// for a regular file that is set-user-ID or set-group-ID, or that carries
// file capabilities, and returns the first it finds, with why, or "" when
// there is none. Mount points beneath root are crossed (an idmapped tree
// is cloned with its submounts). Nothing is named from the host's root:
// the walk starts from the pinned descriptor (checked to be the file
// pinned), opens each directory from its parent's descriptor with
// O_NOFOLLOW, and reads each regular file's mode and capabilities from a
// descriptor of its own (opened O_NOFOLLOW|O_NONBLOCK from its directory),
// so a link swapped in anywhere is never followed.
//
// It runs on up to four goroutines (a directory's entries are read and
// checked by one of them, its subdirectories handed to the others while
// few are waiting), as a run call in a root-owned workspace waits for it:
// in a tree of 11,478 files, filepath.WalkDir with Lstat and Lgetxattr on
// each path took 35 ms on two CPUs. Any error (a directory it cannot
// read, a file it cannot open or stat, capabilities it cannot read) ends
// the walk and is returned: what was not seen cannot be said to be clean.
func privilegedFile(root Pinned) (found string, err error) {
	pfd, _, err := root.open()
	if err != nil {
		return "", err
	}
	fd, err := unix.Openat(pfd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	unix.Close(pfd)
	if err != nil {
		return "", &walkError{root.Path, "open", err}
	}
	s := &setIDScan{}
	s.cond = sync.NewCond(&s.mu)
	s.queue = append(s.queue, setIDDir{fd, root.Path})
	workers := min(runtime.NumCPU(), 4)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.work()
		}()
	}
	wg.Wait()
	for _, d := range s.queue {
		unix.Close(d.fd)
	}
	return s.found, s.err
}

// walkError is a failed step of the set-id walk, naming its path.
type walkError struct {
	path, op string
	err      error
}

func (e *walkError) Error() string { return e.op + " " + e.path + ": " + e.err.Error() }
func (e *walkError) Unwrap() error { return e.err }

// setIDDir is a directory opened for the set-id walk, and its path.
type setIDDir struct {
	fd   int
	path string
}

// setIDScan is the set-id walk's shared state.
type setIDScan struct {
	mu    sync.Mutex
	cond  *sync.Cond
	queue []setIDDir // opened, not yet read
	busy  int        // goroutines reading a directory
	done  bool       // found, failed, or nothing left
	found string
	err   error
}

// maxQueued bounds the directories opened and waiting; past it a goroutine
// reads the subdirectories it finds itself, depth first, so open
// descriptors stay few.
const maxQueued = 64

func (s *setIDScan) work() {
	buf := make([]byte, 32<<10)
	for {
		s.mu.Lock()
		for len(s.queue) == 0 && s.busy > 0 && !s.done {
			s.cond.Wait()
		}
		if s.done || len(s.queue) == 0 {
			s.done = true
			s.cond.Broadcast()
			s.mu.Unlock()
			return
		}
		d := s.queue[len(s.queue)-1]
		s.queue = s.queue[:len(s.queue)-1]
		s.busy++
		s.mu.Unlock()

		found, err := s.dir(d, buf)

		s.mu.Lock()
		s.busy--
		if (found != "" || err != nil) && !s.done {
			s.found, s.err, s.done = found, err, true
		}
		s.cond.Broadcast()
		s.mu.Unlock()
	}
}

// stopped reports whether the walk has ended elsewhere.
func (s *setIDScan) stopped() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.done
}

// dir checks the directory d (and closes it): each regular file's mode
// and capabilities; each subdirectory is opened and queued, or walked here
// when the queue is full.
func (s *setIDScan) dir(d setIDDir, buf []byte) (found string, err error) {
	defer unix.Close(d.fd)
	if s.stopped() {
		return "", nil
	}
	ents, err := dirent.Read(d.fd, buf)
	if err != nil {
		return "", &walkError{d.path, "read directory", err}
	}
	for _, e := range ents {
		path := d.path + "/" + e.Name
		switch dirent.Type(d.fd, e) {
		case unix.DT_REG:
			if why, err := privileged(d.fd, e.Name); why != "" || err != nil {
				if err != nil {
					return "", &walkError{path, "check", err}
				}
				return path + why, nil
			}
		case unix.DT_DIR:
			sfd, err := unix.Openat(d.fd, e.Name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if err != nil {
				return "", &walkError{path, "open", err}
			}
			sub := setIDDir{sfd, path}
			s.mu.Lock()
			queued := len(s.queue) < maxQueued && !s.done
			if queued {
				s.queue = append(s.queue, sub)
				s.cond.Signal()
			}
			s.mu.Unlock()
			if !queued {
				// ents holds its own names: buf is free to read into.
				if found, err := s.dir(sub, buf); found != "" || err != nil {
					return found, err
				}
			}
		}
	}
	return "", nil
}

// privileged checks the entry name of the directory open at dirfd, from
// that descriptor and without following a link: " is set-user-ID or
// set-group-ID", " carries file capabilities", or "" for neither (or for
// what is not a regular file, or no longer there). The capabilities are
// read with getxattrat(2) (Linux 6.13), or where it is missing through a
// descriptor of the file's own (opened O_NOFOLLOW|O_NONBLOCK, checked to be
// the file whose mode was read).
func privileged(dirfd int, name string) (string, error) {
	var st unix.Stat_t
	if err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return "", nil
		}
		return "", err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return "", nil
	}
	if st.Mode&(unix.S_ISUID|unix.S_ISGID) != 0 {
		return " is set-user-ID or set-group-ID", nil
	}
	err := capabilitiesAt(dirfd, name)
	if errors.Is(err, unix.ENOSYS) {
		err = capabilitiesOf(dirfd, name, &st)
	}
	if err == nil {
		return " carries file capabilities", nil
	}
	if errors.Is(err, unix.ENODATA) || errors.Is(err, unix.ENOTSUP) || errors.Is(err, unix.ENOENT) {
		return "", nil
	}
	return "", fmt.Errorf("read its capabilities: %w", err)
}

// capabilitiesOf is capabilitiesAt where the kernel has no getxattrat: it
// opens the file from dirfd and reads the attribute from that descriptor,
// after checking it is the file st describes (ENOENT when it was replaced).
func capabilitiesOf(dirfd int, name string, st *unix.Stat_t) error {
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ELOOP) {
			return unix.ENOENT // a link swapped in: not the file whose mode was read
		}
		return err
	}
	defer unix.Close(fd)
	var now unix.Stat_t
	if err := unix.Fstat(fd, &now); err != nil {
		return err
	}
	if now.Dev != st.Dev || now.Ino != st.Ino || now.Mode != st.Mode {
		return fmt.Errorf("%s was replaced while it was checked", name)
	}
	_, err = unix.Fgetxattr(fd, "security.capability", nil)
	return err
}

// scanError wraps a failed set-id walk of dir for its caller.
func scanError(dir string, err error) error {
	return fmt.Errorf("scan %s for set-id files: %w", dir, err)
}
