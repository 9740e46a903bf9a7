package spawn

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/b10x/harness/cgroup"
	"github.com/b10x/harness/confine/spawn/internal/helper"
	"github.com/b10x/harness/internal/reexec"
)

// brokerEntry is the hidden entry point of the spawn broker.
const brokerEntry = "spawn-broker"

func init() { reexec.Register(brokerEntry, brokerMain) }

// brokerFD is the broker's end of the request socket (ExtraFiles[0]).
const brokerFD = 3

// brokerStartTimeout bounds how long StartBroker waits for the broker's
// greeting, and Close for its exit.
const brokerStartTimeout = 10 * time.Second

// BrokerOptions configure a Broker. The zero value starts a broker without a
// cgroup and with the baseline requirements.
type BrokerOptions struct {
	// Cgroup is the harness's manager (from cgroup.Open, before the harness
	// restricts itself). The broker attaches to its Parent() (cgroup.Attach)
	// and makes the calls' leaves there. The harness keeps it open while the
	// broker runs and closes it after Broker.Close. nil: no cgroup.
	Cgroup *cgroup.Manager
	// Require is passed to the broker's Runner; see Requirements.
	Require Requirements
	// RemoveParent makes the broker remove the cgroup parent when it stops
	// (cgroup.Manager.RemoveParent), for a harness that will have restricted
	// its own writes with Landlock and so cannot remove it itself.
	RemoveParent bool
	// Prestart keeps a pre-started sandbox (PrestartPool: several): when
	// a call (or a probe) ends, the broker starts the helper for the next
	// call with the same view and confines its program stage up to
	// execve, so that call only hands over its program, argv,
	// environment, directory and streams.
	// A call whose view differs, or whose held or pinned paths changed
	// since, discards it and starts cold. A sandbox serves one call and is
	// never reused. Idle, it holds two small processes, a cgroup leaf and
	// its namespaces; Close ends it. For sessions whose calls come from a
	// model, not for one-shot commands. See docs/decisions/0069.
	Prestart bool
	// PrestartPool is how many sandboxes Prestart keeps ready, for calls
	// that come together (a model's turn with several run calls,
	// concurrent MCP calls): each call takes its own, and the pool is
	// topped up behind the calls that took one. Zero or 1: one; more than
	// MaxPrestartPool: MaxPrestartPool. Ignored without Prestart. See
	// docs/decisions/0092.
	PrestartPool int
}

// Broker is a Runner whose calls are started by a separate, unrestricted
// process: the harness's own Landlock domain (which forbids mounting) is
// then not inherited by the helpers. Start it with StartBroker before the
// harness restricts itself.
//
// The broker is this binary re-executed under a hidden entry point; it holds
// nothing but its request socket, dies with the harness (parent-death
// signal SIGKILL, and a check of its parent against the expected one), and
// its calls' trees die with it (their own parent-death signal, their PID
// namespaces, their cgroup leaves). Each call is one request carrying the
// Spec and the stdio descriptors (SCM_RIGHTS) and one reply carrying the
// Result.
//
// Methods are safe for concurrent use. After Close, Run fails.
//
// What it does not protect against: a process that can ptrace or signal the
// broker (root outside any confinement, or the harness before it restricts
// itself) controls what the broker starts.
type Broker struct {
	cmd  *exec.Cmd
	done chan struct{} // closed when the broker process has exited

	mu     sync.RWMutex // held for reading while sending on sock; Close writes
	sock   int
	closed bool
}

// StartBroker forks the broker now and waits for its greeting (it has
// attached to the cgroup parent, if any). Call it before restricting this
// process with Landlock, and from a goroutine that does not hold
// runtime.LockOSThread (the parent-death signal follows the thread that
// started the broker). Close stops it.
//
// Errors: the socket or the start failed, or the broker reported a failure
// (for instance cgroup.Attach), or it did not greet within 10s.
func StartBroker(o BrokerOptions) (*Broker, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("spawn: broker socketpair: %w", err)
	}
	child := os.NewFile(uintptr(fds[1]), "broker-socket")
	parent := ""
	if o.Cgroup != nil {
		parent = o.Cgroup.Parent()
	}
	cmd := reexec.Command(brokerEntry,
		strconv.Itoa(os.Getpid()),
		parent,
		strings.Join(o.Require.Layers, ","),
		strings.Join(o.Require.AllowMissing, ","),
		strconv.FormatBool(o.RemoveParent),
		strconv.FormatBool(o.Prestart),
		strconv.Itoa(o.PrestartPool),
	)
	cmd.Env = []string{}
	cmd.Dir = "/"
	cmd.Stderr = os.Stderr
	cmd.ExtraFiles = []*os.File{child}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	err = cmd.Start()
	child.Close()
	if err != nil {
		unix.Close(fds[0])
		return nil, fmt.Errorf("spawn: start broker: %w", err)
	}
	b := &Broker{cmd: cmd, sock: fds[0], done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(b.done)
	}()
	if err := b.greeting(); err != nil {
		_ = cmd.Process.Kill()
		<-b.done
		unix.Close(fds[0])
		return nil, err
	}
	return b, nil
}

// greeting reads the broker's first message: ready, or why it cannot serve.
func (b *Broker) greeting() error {
	type reply struct {
		msg []byte
		err error
	}
	c := make(chan reply, 1)
	go func() {
		buf := make([]byte, 64<<10)
		for {
			n, _, _, _, err := unix.Recvmsg(b.sock, buf, nil, 0)
			if err == unix.EINTR {
				continue
			}
			c <- reply{buf[:max(n, 0)], err}
			return
		}
	}()
	select {
	case r := <-c:
		if r.err != nil {
			return fmt.Errorf("spawn: broker greeting: %w", r.err)
		}
		if len(r.msg) == 0 {
			return errors.New("spawn: broker exited before greeting (see its message on stderr)")
		}
		d := helper.Decoder{B: r.msg[1:]}
		switch r.msg[0] {
		case 'R':
			return nil
		case 'F':
			e := d.Error()
			if d.Err != nil {
				return d.Err
			}
			return fmt.Errorf("spawn: broker: %w", e)
		}
		return fmt.Errorf("spawn: broker greeting: unexpected message %q", r.msg[0])
	case <-time.After(brokerStartTimeout):
		return fmt.Errorf("spawn: broker did not greet within %v", brokerStartTimeout)
	}
}

// Pid returns the broker process's id.
func (b *Broker) Pid() int { return b.cmd.Process.Pid }

// Close stops the broker: calls still running are killed (their trees with
// them) and answered with an error, the broker closes its cgroup manager
// (removing the parent too with BrokerOptions.RemoveParent; otherwise leaving
// it to the harness) and exits. Close waits for that, at
// most 10s, then kills it. Later calls return nil.
func (b *Broker) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	unix.Close(b.sock)
	b.mu.Unlock()
	select {
	case <-b.done:
	case <-time.After(brokerStartTimeout):
		_ = b.cmd.Process.Kill()
		<-b.done
		return fmt.Errorf("spawn: broker did not exit within %v of Close; killed", brokerStartTimeout)
	}
	if ps := b.cmd.ProcessState; ps != nil && !ps.Success() {
		return fmt.Errorf("spawn: broker exited: %v", ps)
	}
	return nil
}

// Run implements Runner: the broker starts the call and the reply carries
// its Result. See Runner for the errors; in addition Run fails when the
// broker is closed or gone.
func (b *Broker) Run(ctx context.Context, s Spec, stdio Stdio) (Result, error) {
	if err := s.validate(); err != nil {
		return Result{}, err
	}
	if err := ctx.Err(); err != nil {
		return Result{ExitCode: -1, MemoryPeak: -1, PidsPeak: -1}, fmt.Errorf("spawn: not started: %w", err)
	}
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		return Result{}, fmt.Errorf("spawn: call socketpair: %w", err)
	}
	call := os.NewFile(uintptr(pair[0]), "call")
	defer call.Close()

	var present byte
	if s.Hold != nil {
		// The call asks for its turn with its request: the broker
		// admits it (serveCall) without a round trip of its own.
		present |= turnWanted
	}
	rights := []int{pair[1]}
	for i, f := range []*os.File{stdio.Stdin, stdio.Stdout, stdio.Stderr, stdio.Proxy} {
		if f != nil {
			present |= 1 << i
			rights = append(rights, int(f.Fd()))
		}
	}
	b.mu.RLock()
	if b.closed {
		b.mu.RUnlock()
		unix.Close(pair[1])
		return Result{}, errors.New("spawn: broker is closed")
	}
	err = unix.Sendmsg(b.sock, []byte{'C', present}, unix.UnixRights(rights...), nil, 0)
	b.mu.RUnlock()
	unix.Close(pair[1])
	for _, f := range []*os.File{stdio.Stdin, stdio.Stdout, stdio.Stderr, stdio.Proxy} {
		runtime.KeepAlive(f)
	}
	if err != nil {
		return Result{}, fmt.Errorf("spawn: send request to broker: %w", b.gone(err))
	}

	stop := make(chan struct{})
	defer close(stop)
	go func() {
		select {
		case <-ctx.Done():
			_ = writeFrame(call, 'X', nil)
		case <-stop:
		}
	}()

	held := s.Hold != nil
	if held {
		// The broker gives the call its turn (quiet.go); the paths are
		// read here, in it. Closing the channel gives it back.
		if s, err = b.holdInTurn(call, s); err != nil {
			return Result{ExitCode: -1, MemoryPeak: -1, PidsPeak: -1}, err
		}
	}
	var enc helper.Encoder
	encodeSpec(&enc, s)
	if err := writeFrame(call, 'S', enc.B); err != nil {
		return Result{}, fmt.Errorf("spawn: send spec to broker: %w", b.gone(err))
	}

	tag, body, err := readFrame(call)
	if err != nil {
		return Result{}, fmt.Errorf("spawn: broker reply: %w", b.gone(err))
	}
	if tag != 'R' {
		return Result{}, fmt.Errorf("spawn: broker reply: unexpected tag %q", tag)
	}
	d := helper.Decoder{B: body}
	res := decodeResult(&d)
	defer func() {
		if held && s.After != nil {
			b.afterInTurn(call, s.After)
		}
	}()
	kind := d.U8()
	var rerr error
	switch kind {
	case 0:
	case 1:
		step := d.Str()
		rerr = &SetupError{Step: step, Err: d.Error()}
	case 2:
		rerr = d.Error()
	default:
		return Result{}, fmt.Errorf("spawn: broker reply: unknown error kind %d", kind)
	}
	if err := d.End(); err != nil {
		return Result{}, err
	}
	if ctx.Err() != nil && rerr != nil {
		rerr = fmt.Errorf("%w (%w)", rerr, ctx.Err())
	}
	return res, rerr
}

// holdInTurn waits for the call's turn, asked for with its request
// (turnWanted), and once it is held ('q'), reads s.Hold in it.
func (b *Broker) holdInTurn(call *os.File, s Spec) (Spec, error) {
	tag, body, err := readFrame(call)
	if err != nil {
		return s, fmt.Errorf("spawn: broker's turn reply: %w", b.gone(err))
	}
	d := helper.Decoder{B: body}
	var terr error
	if tag != 'q' {
		return s, fmt.Errorf("spawn: broker's turn reply: unexpected tag %q", tag)
	}
	if d.U8() != 0 {
		terr = d.Error()
	}
	if err := d.End(); err != nil {
		return s, fmt.Errorf("spawn: broker's turn reply: %w", err)
	}
	if terr != nil {
		return s, terr
	}
	h, err := s.Hold()
	if err != nil {
		return s, err
	}
	return s.withHeld(h)
}

// afterInTurn asks the broker for a turn after the call ('A'), calls
// after in it once it is held ('a'), and gives it back ('D'). When the
// broker does not answer, after is called all the same: what it checks is
// then read while other calls run.
func (b *Broker) afterInTurn(call *os.File, after func()) {
	if writeFrame(call, 'A', nil) == nil {
		_, _, _ = readFrame(call)
	}
	after()
	_ = writeFrame(call, 'D', nil)
}

// gone adds the broker's exit to err when the broker has exited.
func (b *Broker) gone(err error) error {
	select {
	case <-b.done:
		return fmt.Errorf("%w (the broker exited: %v)", err, b.cmd.ProcessState)
	default:
		return err
	}
}

// Frames on a call's stream socket: u32 length (tag plus body), tag, body.
func writeFrame(w io.Writer, tag byte, body []byte) error {
	buf := make([]byte, 5, 5+len(body))
	binary.LittleEndian.PutUint32(buf, uint32(1+len(body)))
	buf[4] = tag
	_, err := w.Write(append(buf, body...))
	return err
}

func readFrame(r io.Reader) (byte, []byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		if errors.Is(err, io.EOF) {
			return 0, nil, errors.New("channel closed without a reply")
		}
		return 0, nil, err
	}
	n := binary.LittleEndian.Uint32(hdr[:])
	if n == 0 || n > helper.MaxWire {
		return 0, nil, fmt.Errorf("frame of %d bytes", n)
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(r, buf); err != nil {
		return 0, nil, err
	}
	return buf[0], buf[1:], nil
}

// brokerMain is the broker process. Arguments: the expected parent pid, the
// cgroup parent ("" for none), required layers and waived layers (comma
// separated).
func brokerMain() {
	fail := func(err error) {
		var e helper.Encoder
		e.U8('F')
		e.Error(err)
		_ = unix.Sendmsg(brokerFD, e.B, nil, nil, 0)
		fmt.Fprintf(os.Stderr, "b10x-harness: spawn broker: %v\n", err)
		os.Exit(1)
	}
	if len(os.Args) != 8 {
		fail(fmt.Errorf("want 7 arguments, got %d", len(os.Args)-1))
	}
	removeParent := os.Args[5] == "true"
	// The parent-death signal was set before execve; if the parent died
	// before that, the signal will never come: check the parent instead.
	if want, err := strconv.Atoi(os.Args[1]); err != nil || os.Getppid() != want {
		os.Exit(1)
	}
	if _, err := unix.FcntlInt(brokerFD, unix.F_SETFD, unix.FD_CLOEXEC); err != nil {
		fail(fmt.Errorf("fcntl(%d, FD_CLOEXEC): %w", brokerFD, err))
	}
	split := func(s string) []string {
		if s == "" {
			return nil
		}
		return strings.Split(s, ",")
	}
	opts := Options{Require: Requirements{Layers: split(os.Args[3]), AllowMissing: split(os.Args[4])}}
	if err := cgroup.SetChildSubreaper(); err != nil {
		fail(err)
	}
	if parent := os.Args[2]; parent != "" {
		m, err := cgroup.Attach(parent)
		if err != nil {
			fail(err)
		}
		opts.Cgroup = m
	}
	d := newDirect(opts)
	// A call is answered once nothing of it runs; the broker waits for
	// the rest of each teardown (the init's exit, the leaf) before it
	// removes the cgroup parent and exits.
	d.answerEarly = true
	if os.Args[6] == "true" {
		n, err := strconv.Atoi(os.Args[7])
		if err != nil {
			fail(fmt.Errorf("prestart pool %q: %w", os.Args[7], err))
		}
		d.pre = newPrestarter(n)
	}
	if err := unix.Sendmsg(brokerFD, []byte{'R'}, nil, nil, 0); err != nil {
		os.Exit(1)
	}

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	buf := make([]byte, 16)
	oob := make([]byte, unix.CmsgSpace(5*4))
	for {
		n, oobn, _, _, err := unix.Recvmsg(brokerFD, buf, oob, unix.MSG_CMSG_CLOEXEC)
		if err == unix.EINTR {
			continue
		}
		if err != nil || n == 0 {
			break // the harness closed its end, or is gone
		}
		fds, perr := parseRights(oob[:oobn])
		if perr != nil || n != 2 || buf[0] != 'C' || len(fds) == 0 {
			for _, fd := range fds {
				unix.Close(fd)
			}
			continue
		}
		wg.Add(1)
		go func(present byte, fds []int) {
			defer wg.Done()
			serveCall(ctx, d, present, fds)
		}(buf[1], fds)
	}
	cancel()
	wg.Wait()
	d.teardowns.Wait()
	d.closePrestart()
	if opts.Cgroup != nil {
		if removeParent {
			_ = opts.Cgroup.RemoveParent()
		} else {
			_ = opts.Cgroup.Close()
		}
	}
	if err := d.lateErr.Load(); err != nil {
		// Every call after it failed with it; Close says so too.
		fmt.Fprintf(os.Stderr, "b10x-harness: spawn broker: %v\n", *err)
		os.Exit(1)
	}
	os.Exit(0)
}

func parseRights(oob []byte) ([]int, error) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, err
	}
	var fds []int
	for _, m := range msgs {
		f, err := unix.ParseUnixRights(&m)
		if err != nil {
			continue
		}
		fds = append(fds, f...)
	}
	return fds, nil
}

// turnWanted, in a request's flags beside the stdio bits, asks for the
// call's turn (quiet.go) with the request: answered 'q' on the call's
// channel once it is held, before the spec comes.
const turnWanted = 1 << 7

// serveCall runs one request: fds[0] is the call's socket, then the stdio
// descriptors flagged in present.
func serveCall(ctx context.Context, d *direct, present byte, fds []int) {
	call := os.NewFile(uintptr(fds[0]), "call")
	defer call.Close()
	var files [4]*os.File
	i := 1
	for k := 0; k < 4; k++ {
		if present&(1<<k) != 0 && i < len(fds) {
			files[k] = os.NewFile(uintptr(fds[i]), "stdio")
			i++
		}
	}
	for ; i < len(fds); i++ {
		unix.Close(fds[i])
	}
	closeStdio := func() {
		for i, f := range files {
			if f != nil {
				f.Close()
				files[i] = nil
			}
		}
	}
	defer closeStdio()
	var res Result
	var err error
	// One reader for the channel's frames: the spec (after 'q', when the
	// turn was wanted), then a cancel frame or the channel's end.
	frames := make(chan frame, 1)
	go func() {
		for {
			f := readFrameOf(call)
			frames <- f
			if f.err != nil || f.tag == 'X' {
				close(frames)
				return
			}
		}
	}()
	var adm *admission
	if present&turnWanted != 0 {
		if adm = serveTurn(ctx, d, call, frames); adm == nil {
			return
		}
	}
	f := <-frames
	if f.err != nil || f.tag != 'S' {
		d.unadmit(adm)
		return
	}
	dec := helper.Decoder{B: f.body}
	s := decodeSpec(&dec)
	var after <-chan frame // the frame that came after the call, if any
	if err = dec.End(); err == nil {
		cctx, cancel := context.WithCancel(ctx)
		ran := make(chan struct{})
		next := make(chan frame, 1)
		go func() {
			// A cancel frame or the end of the channel (the harness is
			// gone, or its Run returned) ends the call; a frame that
			// comes after it is the harness's (an after request).
			select {
			case f := <-frames:
				cancel()
				next <- f
			case <-ran:
				next <- <-frames
			}
		}()
		res, err = d.run(cctx, s, Stdio{Stdin: files[0], Stdout: files[1], Stderr: files[2], Proxy: files[3]}, adm)
		close(ran)
		cancel()
		after = next
	} else {
		d.unadmit(adm)
	}
	// The harness reads the program's output until every copy of its
	// pipes' ends is closed: these go before the result, not after the
	// harness has closed the channel (a round trip more per call).
	closeStdio()
	var e helper.Encoder
	encodeResult(&e, res)
	var se *SetupError
	switch {
	case err == nil:
		e.U8(0)
	case errors.As(err, &se):
		e.U8(1)
		e.Str(se.Step)
		e.Error(se.Err)
	default:
		e.U8(2)
		e.Error(err)
	}
	if writeFrame(call, 'R', e.B) != nil || after == nil {
		return
	}
	// The harness may check what the call left with every other call
	// paused (Spec.After): 'A', answered 'a' once the turn is held,
	// which ends with its 'D' or the channel's end.
	if f := <-after; f.err == nil && f.tag == 'A' {
		d.quiet.paused(func() {
			if writeFrame(call, 'a', nil) == nil {
				<-frames
			}
		})
	}
}

// frame is one frame read from a call's channel, or the error that ended
// it.
type frame struct {
	tag  byte
	body []byte
	err  error
}

func readFrameOf(r io.Reader) frame {
	tag, body, err := readFrame(r)
	return frame{tag, body, err}
}

// serveTurn admits the call (direct.admit: its turn, quiet.go) and says
// so ('q'), or says why not. A frame that comes meanwhile (a cancel, the
// channel's end) abandons the wait. nil: nothing is held, and the call is
// over.
func serveTurn(ctx context.Context, d *direct, call *os.File, frames <-chan frame) *admission {
	qctx, cancel := context.WithCancelCause(ctx)
	waited, watched := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case f := <-frames:
			if f.err != nil {
				cancel(f.err)
			} else {
				cancel(fmt.Errorf("the call was cancelled (%q)", f.tag))
			}
		case <-waited:
		}
	}()
	adm, err := d.admit(qctx, true, false)
	close(waited)
	<-watched
	abandoned := qctx.Err() != nil
	cancel(nil)
	if abandoned {
		d.unadmit(adm)
		return nil
	}
	var e helper.Encoder
	if err != nil {
		e.U8(1)
		e.Error(err)
	} else {
		e.U8(0)
	}
	if werr := writeFrame(call, 'q', e.B); werr != nil || err != nil {
		d.unadmit(adm)
		return nil
	}
	return adm
}
