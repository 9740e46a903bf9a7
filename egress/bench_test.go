package egress

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"runtime"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// listenTCP listens on 127.0.0.1 with plain TCP, as the run helper opens
// the proxy's listener (net.Listen would make an MPTCP listener).
func listenTCP(b *testing.B) net.Listener {
	var lc net.ListenConfig
	lc.SetMultipathTCP(false)
	ln, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	return ln
}

// sink is a loopback server that discards what it reads and, for a
// "GET n\n" line, writes n bytes back.
func sink(b *testing.B) string {
	ln := listenTCP(b)
	b.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				line, err := bufio.NewReader(c).ReadString('\n')
				if err != nil {
					return
				}
				var n int64
				fmt.Sscanf(line, "GET %d", &n)
				buf := make([]byte, 64<<10)
				for n > 0 {
					k := int64(len(buf))
					if n < k {
						k = n
					}
					if _, err := c.Write(buf[:k]); err != nil {
						return
					}
					n -= k
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// dialVia opens a connection to target, through the proxy at proxy (a
// CONNECT tunnel) or directly when proxy is "".
func dialVia(b *testing.B, proxy, target string) net.Conn {
	if proxy == "" {
		c, err := net.Dial("tcp", target)
		if err != nil {
			b.Fatal(err)
		}
		return c
	}
	c, err := net.Dial("tcp", proxy)
	if err != nil {
		b.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(target)
	fmt.Fprintf(c, "CONNECT bench.test:%s HTTP/1.1\r\nHost: bench.test:%s\r\n\r\n", port, port)
	br := bufio.NewReader(c)
	line, err := br.ReadString('\n')
	if err != nil || !strings.Contains(line, " 200 ") {
		b.Fatalf("CONNECT: %q %v", line, err)
	}
	for {
		l, err := br.ReadString('\n')
		if err != nil {
			b.Fatal(err)
		}
		if l == "\r\n" {
			break
		}
	}
	return c
}

func benchProxy(b *testing.B) string { return benchProxyDial(b, nil) }

// benchProxyDial is benchProxy with its own Dial (nil: the default).
func benchProxyDial(b *testing.B, dial func(context.Context, netip.AddrPort) (net.Conn, error)) string {
	return serveBench(b, listenTCP(b), dial)
}

// serveBench serves the benchmarks' proxy on ln: bench.test is 127.0.0.1.
func serveBench(b *testing.B, ln net.Listener, dial func(context.Context, netip.AddrPort) (net.Conn, error)) string {
	pol := &Policy{Allow: []Pattern{{name: "bench.test"}}, CIDRs: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}
	s := Serve(ln, pol, Options{Lookup: func(context.Context, string) ([]netip.Addr, error) {
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
	}, Dial: dial})
	b.Cleanup(func() { s.Close() })
	return ln.Addr().String()
}

// BenchmarkThroughput moves 1 GiB from a loopback server to the client,
// directly, through the proxy (a CONNECT tunnel, spliced) and through the
// proxy with a destination connection that is not a *net.TCPConn (the
// tunnel copied through a buffer), one GiB per op.
func BenchmarkThroughput(b *testing.B) {
	target := sink(b)
	const size = 1 << 30
	for _, via := range []string{"direct", "proxy", "proxy-copy"} {
		b.Run(via, func(b *testing.B) {
			proxy := ""
			switch via {
			case "proxy":
				proxy = benchProxy(b)
			case "proxy-copy":
				var d net.Dialer
				proxy = benchProxyDial(b, func(ctx context.Context, a netip.AddrPort) (net.Conn, error) {
					c, err := d.DialContext(ctx, "tcp", a.String())
					if err != nil {
						return nil, err
					}
					return struct{ net.Conn }{c}, nil
				})
			}
			b.SetBytes(size)
			for i := 0; i < b.N; i++ {
				c := dialVia(b, proxy, target)
				fmt.Fprintf(c, "GET %d\n", size)
				n, err := io.Copy(io.Discard, c)
				c.Close()
				if err != nil || n != size {
					b.Fatalf("read %d of %d: %v", n, size, err)
				}
			}
		})
	}
}

// BenchmarkThroughputPaired moves 1 GiB directly and 1 GiB through the
// proxy (a CONNECT tunnel) in each op, in alternating order (direct first
// in even ops), so that a burst of load elsewhere on the machine falls on
// both; it reports the rate of each over all ops, the process's CPU time
// per GiB of each, and the median, lowest and highest of the ops' ratios
// (direct time / proxied time), which bench/net.sh checks against its
// target.
//
// host: the client, the proxy's listener and the server on the host's
// loopback. netns: as a run call has it: the client and the proxy's
// listener in a network namespace of the benchmark's own, the server on
// the host's loopback, reached by the proxy; direct is the client and a
// server both inside that namespace. netns needs the rights to unshare a
// network namespace (root); without them it is skipped.
func BenchmarkThroughputPaired(b *testing.B) {
	b.Run("host", func(b *testing.B) {
		target := sink(b)
		paired(b, func(via string) net.Conn { return dialVia(b, via, target) }, target, benchProxy(b))
	})
	b.Run("netns", func(b *testing.B) {
		ns := newBenchNetns(b)
		var inside string // the direct server, inside
		var ln net.Listener
		ns.do(b, func() {
			inside = sink(b)
			ln = listenTCP(b)
		})
		proxy := serveBench(b, ln, nil) // served here, in the host's namespace, as the harness does
		target := sink(b)               // on the host, for the proxy
		dial := func(via string) net.Conn {
			var c net.Conn
			ns.do(b, func() {
				if via == "" {
					c = dialVia(b, "", inside)
				} else {
					c = dialVia(b, via, target)
				}
			})
			return c
		}
		paired(b, dial, target, proxy)
	})
}

// paired is BenchmarkThroughputPaired's loop: dial("") connects directly,
// dial(proxy) through the proxy.
func paired(b *testing.B, dial func(via string) net.Conn, target, proxy string) {
	const size = 1 << 30
	var cpu [2]time.Duration // the process's CPU time, direct and proxied
	one := func(via string) time.Duration {
		var r0, r1 syscall.Rusage
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &r0)
		start := time.Now()
		c := dial(via)
		fmt.Fprintf(c, "GET %d\n", size)
		n, err := io.Copy(io.Discard, c)
		c.Close()
		if err != nil || n != size {
			b.Fatalf("read %d of %d: %v", n, size, err)
		}
		took := time.Since(start)
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &r1)
		used := time.Duration(r1.Utime.Nano() + r1.Stime.Nano() - r0.Utime.Nano() - r0.Stime.Nano())
		if via == "" {
			cpu[0] += used
		} else {
			cpu[1] += used
		}
		return took
	}
	var direct, proxied time.Duration
	var ratios []float64
	for i := 0; i < b.N; i++ {
		var d, p time.Duration
		if i%2 == 0 {
			d = one("")
			p = one(proxy)
		} else {
			p = one(proxy)
			d = one("")
		}
		direct += d
		proxied += p
		ratios = append(ratios, d.Seconds()/p.Seconds())
	}
	sort.Float64s(ratios)
	mbs := func(d time.Duration) float64 { return float64(b.N) * size / d.Seconds() / 1e6 }
	b.ReportMetric(mbs(direct), "direct-MB/s")
	b.ReportMetric(mbs(proxied), "proxy-MB/s")
	b.ReportMetric(float64(cpu[0].Milliseconds())/float64(b.N), "direct-cpu-ms/GiB")
	b.ReportMetric(float64(cpu[1].Milliseconds())/float64(b.N), "proxy-cpu-ms/GiB")
	median := ratios[len(ratios)/2]
	if len(ratios)%2 == 0 {
		median = (ratios[len(ratios)/2-1] + median) / 2
	}
	b.ReportMetric(median, "ratio")
	b.ReportMetric(ratios[0], "min-ratio")
	b.ReportMetric(ratios[len(ratios)-1], "max-ratio")
}

// benchNetns is a network namespace of the benchmark's own with lo up, the
// shape of a run call's.
type benchNetns struct{ fd int }

func newBenchNetns(b *testing.B) *benchNetns {
	type result struct {
		fd  int
		err error
	}
	ch := make(chan result, 1)
	go func() {
		// The thread is never unlocked: it ends with this goroutine,
		// and its namespace with it, but for the descriptor.
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			ch <- result{-1, fmt.Errorf("unshare(CLONE_NEWNET): %w", err)}
			return
		}
		if err := loUp(); err != nil {
			ch <- result{-1, err}
			return
		}
		fd, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		ch <- result{fd, err}
	}()
	r := <-ch
	if errors.Is(r.err, unix.EPERM) {
		b.Skipf("no network namespace of its own: %v", r.err)
	}
	if r.err != nil {
		b.Fatal(r.err)
	}
	b.Cleanup(func() { unix.Close(r.fd) })
	return &benchNetns{fd: r.fd}
}

// loUp brings the loopback interface of the thread's namespace up.
func loUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("socket: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("SIOCGIFFLAGS lo: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("SIOCSIFFLAGS lo: %w", err)
	}
	return nil
}

// do runs f on a thread inside the namespace: the sockets f opens are the
// namespace's, wherever they are used later.
func (n *benchNetns) do(b *testing.B, f func()) {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		if err := unix.Setns(n.fd, unix.CLONE_NEWNET); err != nil {
			done <- fmt.Errorf("setns: %w", err)
			return
		}
		f()
		done <- nil
	}()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}

// BenchmarkConnect is the time from dialling to the first byte back,
// directly and through the proxy; it reports the median as p50-µs.
func BenchmarkConnect(b *testing.B) {
	target := sink(b)
	for _, via := range []string{"direct", "proxy"} {
		b.Run(via, func(b *testing.B) {
			proxy := ""
			if via == "proxy" {
				proxy = benchProxy(b)
			}
			times := make([]time.Duration, 0, b.N)
			one := make([]byte, 1)
			for i := 0; i < b.N; i++ {
				start := time.Now()
				c := dialVia(b, proxy, target)
				fmt.Fprintf(c, "GET 1\n")
				if _, err := io.ReadFull(c, one); err != nil {
					b.Fatal(err)
				}
				times = append(times, time.Since(start))
				c.Close()
			}
			sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
			b.ReportMetric(float64(times[len(times)/2].Microseconds()), "p50-µs")
		})
	}
}
