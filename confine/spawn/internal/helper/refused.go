package helper

import (
	"encoding/binary"
	"errors"
	"sync"
	"syscall"
)

// The filter's refusals, told to the init (Plan.SeccompNotify; decision
// 0090).
//
// The program's stage loads the filter with every EPERM turned into
// SECCOMP_RET_USER_NOTIF and a listener (SECCOMP_FILTER_FLAG_NEW_LISTENER),
// sends the listener to the init on a socket pair and closes it, so the
// program never holds it. The init answers each notification with EPERM,
// as the plain filter would have, and keeps the first MaxRefused of them
// and a count. Allowed calls never reach the init: the filter returns
// ALLOW for them as before, and the kernel's per-filter cache of calls it
// always allows is unchanged. A refused call waits for the init's answer;
// the init is in the call's cgroup, so a program that makes refused calls
// by the hundred thousand spends its own call's CPU, and the harness
// reads one message of bounded size.
//
// Fail closed: if the init stops answering (its listener closed, or the
// init gone, which ends the namespace), the kernel fails every pending
// and later refused call with ENOSYS; a refused call is never let through.

// notifying returns a copy of a raw program with every "return EPERM"
// made "return SECCOMP_RET_USER_NOTIF": the filter's EPERMs are exactly
// its refusals (the ENOSYS it returns for clone3, openat2 and unknown
// numbers are a C library's cue to fall back, and stay as they are).
func notifying(raw []byte) []byte {
	out := append([]byte(nil), raw...)
	const ret = 0x06 // BPF_RET|BPF_K
	for i := 0; i+8 <= len(out); i += 8 {
		if binary.LittleEndian.Uint16(out[i:]) == ret && binary.LittleEndian.Uint32(out[i+4:]) == seccompRetErrno|uint32(syscall.EPERM) {
			binary.LittleEndian.PutUint32(out[i+4:], seccompRetUserNotif)
		}
	}
	return out
}

// refusals is what the init keeps of the filter's refusals.
type refusals struct {
	mu    sync.Mutex
	total uint32 // wraps after 4,294,967,295: a call cannot last that long
	kept  []Refusal
}

// serveRefusals receives the listener on sock (the init's end of the
// stage's socket) and answers every notification with EPERM,
// keeping what was refused in r. It returns when the stage closes the
// socket without a listener, or when the listener fails; the init's exit
// ends it otherwise.
func serveRefusals(sock int, r *refusals) {
	lfd, err := receiveListener(sock)
	sysClose(sock)
	if err != nil || lfd < 0 {
		return
	}
	// Closing the listener makes the kernel answer ENOSYS: a failure here
	// refuses, it never allows.
	defer sysClose(lfd)
	for {
		// Poll first: a notification is pending (POLLIN), or the filter
		// has no task left (POLLHUP), after which a receive would fail
		// with ENOENT at once, for ever.
		ev, e := sysPollIn(lfd)
		switch {
		case e == syscall.EINTR:
			continue
		case e != 0, ev&(pollHup|pollErr) != 0 && ev&pollIn == 0:
			return
		case ev&pollIn == 0:
			continue
		}
		var n seccompNotif
		switch e := sysNotifRecv(lfd, &n); e {
		case 0:
		case syscall.EINTR, syscall.ENOENT:
			continue // a signal to the init; a caller killed before its notice was read
		default:
			return
		}
		// Kept before it is answered: the caller waits until then, so a
		// program that exits right after its refused call is counted
		// before the init reports its exit.
		r.mu.Lock()
		r.total++
		kept := len(r.kept) < MaxRefused
		if kept {
			r.kept = append(r.kept, Refusal{Nr: uint32(n.nr), Args: n.args})
		}
		r.mu.Unlock()
		resp := seccompNotifResp{id: n.id, error: -int32(syscall.EPERM)}
		if sysNotifSend(lfd, &resp) == syscall.ENOENT {
			// The caller is no longer waiting: a signal interrupted its
			// call, which it makes again (and is told again) unless the
			// signal killed it. Not one it was refused.
			r.mu.Lock()
			r.total--
			if kept {
				r.kept = r.kept[:len(r.kept)-1]
			}
			r.mu.Unlock()
		}
	}
}

// receiveListener reads the stage's one message: the listener, or the end
// of the socket (-1) when the stage loaded no notifying filter or died.
func receiveListener(sock int) (int, error) {
	buf := make([]byte, 1)
	oob := make([]byte, syscall.CmsgSpace(4))
	for {
		n, oobn, _, _, err := syscall.Recvmsg(sock, buf, oob, syscall.MSG_CMSG_CLOEXEC)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return -1, err
		}
		if n == 0 || oobn == 0 {
			return -1, nil
		}
		msgs, err := syscall.ParseSocketControlMessage(oob[:oobn])
		if err != nil || len(msgs) != 1 {
			return -1, errors.New("no listener in the stage's message")
		}
		fds, err := syscall.ParseUnixRights(&msgs[0])
		if err != nil || len(fds) != 1 {
			for _, fd := range fds {
				sysClose(fd)
			}
			return -1, errors.New("no listener in the stage's message")
		}
		return fds[0], nil
	}
}

// encode appends the StatusRefused message.
func (r *refusals) encode(e *Encoder) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e.U8(StatusRefused)
	e.U32(r.total)
	e.U32(uint32(len(r.kept)))
	for _, k := range r.kept {
		e.U32(k.Nr)
		for _, a := range k.Args {
			e.U64(a)
		}
	}
}

// Refusal is one call the filter refused, as StatusRefused carries it.
type Refusal struct {
	Nr   uint32
	Args [6]uint64
}

// DecodeRefused reads a StatusRefused message after its tag: how many
// calls were refused in all, and the first of them.
func DecodeRefused(d *Decoder) (total int, kept []Refusal) {
	total = int(d.U32())
	n := d.Count(4+6*8, "refusals")
	if n > MaxRefused {
		d.Failf("more refusals than MaxRefused")
		return 0, nil
	}
	for i := 0; i < n && d.Err == nil; i++ {
		var k Refusal
		k.Nr = d.U32()
		for j := range k.Args {
			k.Args[j] = d.U64()
		}
		kept = append(kept, k)
	}
	if total < len(kept) {
		d.Failf("fewer refusals in all than kept")
	}
	return total, kept
}
