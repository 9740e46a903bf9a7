package egress

import (
	"io"
	"net"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// mover moves one direction of a tunnel in steps, for pipe's loop, which
// keeps the counting, the byte cap and the idle timeout in one place: in
// takes what the source has (waiting, under the source's read deadline,
// until something or its end arrives), out passes those k bytes on (under
// the destination's write deadline, calling touch as they move). A step's
// bytes are dropped if out is not called (the byte cap).
type mover interface {
	in() (int, error)
	out(k int, touch func()) error
	close()
}

// spliceBytes is the pipe a spliced direction moves through: one step moves
// at most this much, and it bounds what the kernel holds between the two
// sockets (in pages of the sockets' own buffers, referenced, not copied).
const spliceBytes = 256 << 10

// copyBytes is the buffer of a direction that is not spliced.
const copyBytes = 32 << 10

// newMover moves src to dst with splice(2) when both are TCP connections,
// through a buffer otherwise. pre is what the proxy already read from src
// (past the program's request); it is sent first.
func newMover(src, dst net.Conn, pre []byte, idle time.Duration) mover {
	if m := newSplicer(src, dst, pre, idle); m != nil {
		return m
	}
	return &copier{pre: pre, r: src, w: dst, buf: make([]byte, copyBytes)}
}

// copier moves through a buffer in the harness's memory.
type copier struct {
	pre  []byte
	r    io.Reader
	w    io.Writer
	buf  []byte
	step []byte
}

func (m *copier) in() (int, error) {
	if len(m.pre) > 0 {
		m.step, m.pre = m.pre, nil
		return len(m.step), nil
	}
	k, err := m.r.Read(m.buf)
	m.step = m.buf[:k]
	return k, err
}

func (m *copier) out(k int, touch func()) error {
	_, err := m.w.Write(m.step[:k])
	touch()
	return err
}

func (m *copier) close() {}

// splicer moves from one TCP socket to another through a pipe with
// splice(2): the bytes never enter the harness's memory, and a step moves
// as much as the source's receive queue holds (up to spliceBytes), where
// a buffer moves one read's worth.
type splicer struct {
	src, dst syscall.RawConn
	dstConn  net.Conn
	idle     time.Duration
	p        [2]int // the pipe: read end, write end
	pre      []byte // sent first, by write
	inPre    bool   // the current step is pre
}

func newSplicer(src, dst net.Conn, pre []byte, idle time.Duration) *splicer {
	s, ok1 := src.(*net.TCPConn)
	d, ok2 := dst.(*net.TCPConn)
	if !ok1 || !ok2 {
		return nil
	}
	sr, err1 := s.SyscallConn()
	dr, err2 := d.SyscallConn()
	if err1 != nil || err2 != nil {
		return nil
	}
	m := &splicer{src: sr, dst: dr, dstConn: d, idle: idle, pre: pre}
	if err := unix.Pipe2(m.p[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		return nil // out of descriptors: a buffer needs none
	}
	// A larger pipe lets a step take a full receive queue; refused (past
	// the user's pipe-user-pages-soft), the default 64 KiB still works.
	_, _ = unix.FcntlInt(uintptr(m.p[0]), unix.F_SETPIPE_SZ, spliceBytes)
	return m
}

func (m *splicer) in() (int, error) {
	if len(m.pre) > 0 {
		m.inPre = true
		return len(m.pre), nil
	}
	m.inPre = false
	var n int64
	var serr error
	err := m.src.Read(func(fd uintptr) bool {
		for {
			n, serr = unix.Splice(int(fd), nil, m.p[1], nil, spliceBytes, unix.SPLICE_F_MOVE|unix.SPLICE_F_NONBLOCK)
			if serr != unix.EINTR {
				return serr != unix.EAGAIN
			}
		}
	})
	switch {
	case err != nil:
		return 0, err // the read deadline, or the connection closed
	case serr != nil:
		return 0, &net.OpError{Op: "splice", Net: "tcp", Err: serr}
	case n == 0:
		return 0, io.EOF
	}
	return int(n), nil
}

func (m *splicer) out(k int, touch func()) error {
	if m.inPre {
		_, err := m.dstConn.Write(m.pre[:k])
		m.pre = m.pre[k:]
		touch()
		return err
	}
	for k > 0 {
		var n int64
		var serr error
		err := m.dst.Write(func(fd uintptr) bool {
			for {
				n, serr = unix.Splice(m.p[0], nil, int(fd), nil, k, unix.SPLICE_F_MOVE|unix.SPLICE_F_NONBLOCK)
				if serr != unix.EINTR {
					return serr != unix.EAGAIN
				}
			}
		})
		if err != nil {
			return err
		}
		if serr != nil {
			return &net.OpError{Op: "splice", Net: "tcp", Err: serr}
		}
		if n == 0 {
			return io.ErrShortWrite // a bug: the pipe held k bytes
		}
		k -= int(n)
		if k > 0 {
			// Moving, slowly: the destination has the idle timeout again.
			touch()
			_ = m.dstConn.SetWriteDeadline(time.Now().Add(m.idle))
		}
	}
	touch()
	return nil
}

func (m *splicer) close() {
	unix.Close(m.p[0])
	unix.Close(m.p[1])
}
