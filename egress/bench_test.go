package egress

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sort"
	"strings"
	"testing"
	"time"
)

// sink is a loopback server that discards what it reads and, for a
// "GET n\n" line, writes n bytes back.
func sink(b *testing.B) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
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

func benchProxy(b *testing.B) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	pol := &Policy{Allow: []Pattern{{name: "bench.test"}}, CIDRs: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}
	s := Serve(ln, pol, Options{Lookup: func(context.Context, string) ([]netip.Addr, error) {
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
	}})
	b.Cleanup(func() { s.Close() })
	return ln.Addr().String()
}

// BenchmarkThroughput moves 1 GiB from a loopback server to the client,
// directly and through the proxy (a CONNECT tunnel), one GiB per op
// (bench/net.sh compares the two).
func BenchmarkThroughput(b *testing.B) {
	target := sink(b)
	const size = 1 << 30
	for _, via := range []string{"direct", "proxy"} {
		b.Run(via, func(b *testing.B) {
			proxy := ""
			if via == "proxy" {
				proxy = benchProxy(b)
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
