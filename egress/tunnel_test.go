package egress

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// TestTunnelSplicesTCP: a tunnel between two TCP connections is spliced,
// and one whose destination is another kind of connection is copied.
func TestTunnelSplicesTCP(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	a, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	m := newMover(a, b, nil, time.Second)
	defer m.close()
	if _, ok := m.(*splicer); !ok {
		t.Errorf("between two TCP connections: %T, want a *splicer", m)
	}
	m2 := newMover(a, hiddenTCP{b}, nil, time.Second)
	defer m2.close()
	if _, ok := m2.(*copier); !ok {
		t.Errorf("to a connection that is not a *net.TCPConn: %T, want a *copier", m2)
	}
}

// TestTunnelIntegrity: 32 MiB of random bytes go through a tunnel to an
// echo server and back unchanged, spliced and copied, while the program
// reads more slowly than it writes (so the proxy's writes are partial).
func TestTunnelIntegrity(t *testing.T) {
	const size = 32 << 20
	data := make([]byte, size)
	if _, err := rand.Read(data); err != nil {
		t.Fatal(err)
	}
	want := sha256.Sum256(data)
	for _, path := range tunnelPaths {
		t.Run(path.name, func(t *testing.T) {
			echo := newServer(t, echoHandler)
			r := newRigWrap(t, loopbackPolicy(t, "echo.test"), loopbackNames("echo.test"), path.wrap)
			c, br, line := r.connect("echo.test", echo.port)
			if !strings.Contains(line, " 200 ") {
				t.Fatalf("CONNECT: %q", line)
			}
			_ = c.SetDeadline(time.Now().Add(20 * time.Second))
			werr := make(chan error, 1)
			go func() {
				_, err := io.Copy(c, bytes.NewReader(data))
				c.(*net.TCPConn).CloseWrite()
				werr <- err
			}()
			h := sha256.New()
			n, err := io.Copy(h, bufio.NewReaderSize(br, 4096))
			if err != nil || n != size {
				t.Fatalf("read back %d of %d bytes: %v", n, size, err)
			}
			if err := <-werr; err != nil {
				t.Fatalf("writing: %v", err)
			}
			if got := h.Sum(nil); !bytes.Equal(got, want[:]) {
				t.Errorf("the bytes came back changed: sha256 %x, want %x", got, want)
			}
			ev := r.waitEvent("echo.test", 1)
			if ev[0].BytesUp != size || ev[0].BytesDown != size {
				t.Errorf("event %+v, want %d bytes each way", ev[0], size)
			}
		})
	}
}
