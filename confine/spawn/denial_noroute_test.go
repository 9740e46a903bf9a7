package spawn

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/b10x/harness/internal/reexec"
)

// noRouteEntry tries, from inside the call's network namespace, a TCP
// connect to an IPv4 documentation address (192.0.2.1, TEST-NET-1) as
// often as its argument says, one UDP datagram to another, one IPv6 TCP
// connect (2001:db8::1, the documentation prefix) where IPv6 is on, and a
// TCP connect to a closed loopback port. It prints what each got. Every
// destination but loopback has no route in an empty namespace: nothing
// leaves it.
const noRouteEntry = "spawn-test-no-route"

func init() { reexec.Register(noRouteEntry, noRouteMain) }

func noRouteMain() {
	n, _ := strconv.Atoi(os.Args[1])
	unreach := 0
	s, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
	if err != nil {
		fmt.Println("socket:", err)
		os.Exit(3)
	}
	// An unconnected socket whose connect failed may connect again: the
	// flood costs one system call an attempt.
	for range n {
		if unix.Connect(s, &unix.SockaddrInet4{Port: 443, Addr: [4]byte{192, 0, 2, 1}}) == unix.ENETUNREACH {
			unreach++
		}
	}
	fmt.Printf("tcp4=%d\n", unreach)
	u, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM, 0)
	if err != nil {
		fmt.Println("socket:", err)
		os.Exit(3)
	}
	fmt.Printf("udp4=%v\n", errName(unix.Sendto(u, []byte("x"), 0, &unix.SockaddrInet4{Port: 53, Addr: [4]byte{192, 0, 2, 2}})))
	if s6, err := unix.Socket(unix.AF_INET6, unix.SOCK_STREAM, 0); err == nil {
		fmt.Printf("tcp6=%v\n", errName(unix.Connect(s6, &unix.SockaddrInet6{Port: 443, Addr: [16]byte{0x20, 0x01, 0x0d, 0xb8, 15: 1}})))
	} else {
		fmt.Printf("tcp6=%v\n", errName(err))
	}
	l, _ := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
	fmt.Printf("loopback=%v\n", errName(unix.Connect(l, &unix.SockaddrInet4{Port: 1, Addr: [4]byte{127, 0, 0, 1}})))
	os.Exit(0)
}

// TestNoRouteCounted: the connections and datagrams a program sends to
// addresses outside its call's empty network namespace are refused by the
// kernel (ENETUNREACH) and counted, each, in that call's Result, through
// every runner; a connect to a closed loopback port is not a refusal of
// the sandbox and is not counted; a flood is counted whole; a call with
// the host's network counts nothing and says so.
func TestNoRouteCounted(t *testing.T) {
	for name, r := range runners(t) {
		ws := workspace(t)
		n := 3
		if name == "direct" {
			n = 100000
		}
		s := Spec{Program: pin(t, selfExe(t)), Argv: []string{"b10x-reexec:" + noRouteEntry, strconv.Itoa(n)}, Env: []string{"PATH=/usr/bin:/bin"}, Dir: ws, Workspace: pin(t, ws)}
		res, out, err := run(t, r, s)
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("%s: %v %+v\n%s", name, err, res, out)
		}
		got := probes(out)
		if got["tcp4"] != strconv.Itoa(n) || got["udp4"] != "ENETUNREACH" || got["loopback"] != "ECONNREFUSED" {
			t.Fatalf("%s: the program saw %v; want %d TCP and one UDP ENETUNREACH, loopback ECONNREFUSED", name, got, n)
		}
		want := n + 1
		switch got["tcp6"] {
		case "ENETUNREACH":
			want++
		case "EAFNOSUPPORT":
		default:
			t.Fatalf("%s: IPv6 connect: %s, want ENETUNREACH (or EAFNOSUPPORT where IPv6 is off)", name, got["tcp6"])
		}
		if !res.NoRouteCounted || res.NoRoute != want {
			t.Errorf("%s: counted %v, %d refused for want of a route; want %d (the program saw them)", name, res.NoRouteCounted, res.NoRoute, want)
		}
		t.Logf("%s: %d no-route refusals counted (tcp6 %s), the call %v", name, res.NoRoute, got["tcp6"], res.Duration)

		host := Spec{Program: pin(t, "/bin/true"), Argv: []string{"true"}, Env: []string{"PATH=/usr/bin:/bin"}, Dir: ws, Workspace: pin(t, ws), Net: true}
		res, out, err = run(t, r, host)
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("%s: host network: %v %+v\n%s", name, err, res, out)
		}
		if res.NoRouteCounted || strings.Contains(strings.Join(res.Layers, " "), "netns") {
			t.Errorf("%s: host network: counted %v (%d), layers %v; the host's counters are not the call's", name, res.NoRouteCounted, res.NoRoute, res.Layers)
		}
	}
}
