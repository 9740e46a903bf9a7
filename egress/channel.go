package egress

import (
	"errors"
	"fmt"
	"net"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// Channel is the harness's side of one call's proxy: a Unix socket pair
// whose child end goes to the run helper (spawn.Stdio.Proxy), over which
// the helper sends the listener it opened inside the call's network
// namespace; Channel serves it as soon as it arrives.
//
// Use: NewChannel, pass Child() to the spawn, and after the call ends (or
// fails to start) Close, which ends every connection of the call and
// returns the attempts that were denied.
type Channel struct {
	ours, child *os.File
	pol         *Policy
	opt         Options

	mu     sync.Mutex
	served *Served
	closed bool
	done   chan struct{}
	err    error // why no listener arrived, if none did
}

// NewChannel makes the socket pair and starts waiting for the listener.
func NewChannel(pol *Policy, opt Options) (*Channel, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("egress: socketpair: %w", err)
	}
	c := &Channel{ours: os.NewFile(uintptr(fds[0]), "proxy channel"), child: os.NewFile(uintptr(fds[1]), "proxy channel (child)"),
		pol: pol, opt: opt, done: make(chan struct{})}
	go c.receive()
	return c, nil
}

// Child is the end the run helper gets (spawn.Stdio.Proxy).
func (c *Channel) Child() *os.File { return c.child }

func (c *Channel) receive() {
	defer close(c.done)
	buf := make([]byte, 1)
	oob := make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := recvmsg(c.ours, buf, oob)
	if err != nil || n != 1 || buf[0] != 'L' {
		c.setErr(fmt.Errorf("egress: no proxy listener from the run helper (read %d bytes: %v)", n, err))
		return
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		c.setErr(errors.New("egress: the run helper sent no listener"))
		return
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 1 {
		for _, fd := range fds {
			unix.Close(fd)
		}
		c.setErr(errors.New("egress: the run helper sent no listener"))
		return
	}
	f := os.NewFile(uintptr(fds[0]), "proxy listener")
	ln, err := net.FileListener(f)
	f.Close()
	if err != nil {
		c.setErr(fmt.Errorf("egress: the proxy listener: %w", err))
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		ln.Close()
		return
	}
	c.served = Serve(ln, c.pol, c.opt)
}

func (c *Channel) setErr(err error) {
	c.mu.Lock()
	c.err = err
	c.mu.Unlock()
}

// recvmsg reads one message and its descriptors, retrying on EINTR.
func recvmsg(f *os.File, buf, oob []byte) (n, oobn int, flags int, from unix.Sockaddr, err error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return 0, 0, 0, nil, err
	}
	cerr := rc.Read(func(fd uintptr) bool {
		for {
			n, oobn, flags, from, err = unix.Recvmsg(int(fd), buf, oob, unix.MSG_CMSG_CLOEXEC)
			if err == unix.EINTR {
				continue
			}
			return err != unix.EAGAIN
		}
	})
	if cerr != nil {
		return 0, 0, 0, nil, cerr
	}
	return n, oobn, flags, from, err
}

// Served reports whether the helper's listener arrived (and was served until Close).
func (c *Channel) Served() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.served != nil
}

// Close ends the call's proxy: the child end is closed (so a helper that
// never sent a listener is not waited for), every connection is closed, and
// the denied attempts are returned. Safe to call more than once.
func (c *Channel) Close() []Event {
	c.child.Close()
	// Our end is closed only after the receiver is done with it; closing
	// the child's end (and the helper's copies dying with the call) ends a
	// receiver still waiting.
	<-c.done
	c.ours.Close()
	c.mu.Lock()
	c.closed = true
	s := c.served
	c.mu.Unlock()
	if s == nil {
		return nil
	}
	return s.Close()
}
