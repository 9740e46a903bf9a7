package helper

import (
	"bytes"
	"strconv"
	"syscall"
)

// noRoutes counts the packets a fresh network namespace could not route:
// every connect(2) and every datagram a program sent to an address
// outside it (the namespace has only loopback, so the kernel answers
// ENETUNREACH and counts the attempt in the namespace's IP MIB:
// OutNoRoutes in /proc/net/snmp, Ip6OutNoRoutes in /proc/net/snmp6).
// These are the refusals of the netns layer, which no audit record names:
// the count is all the kernel keeps of them (not the destinations).
//
// The files are opened by the init in the call's namespace, before the
// program runs: a procfs net file belongs to the namespace of the task
// that opened it, and each read from offset 0 is the counters as they are
// then. The program never holds these descriptors (the program stage
// closes every descriptor it was not given).
type noRoutes struct {
	v4, v6 int    // -1: not open
	base   uint64 // the count when opened
}

// openNoRoutes opens the counters of the caller's network namespace. Nil
// when /proc/self/net/snmp cannot be read (no count is then claimed);
// snmp6 is absent where IPv6 is off, and only IPv4's count is kept.
func openNoRoutes() *noRoutes {
	n := &noRoutes{v4: -1, v6: -1}
	var err error
	if n.v4, err = syscall.Open("/proc/self/net/snmp", syscall.O_RDONLY|syscall.O_CLOEXEC, 0); err != nil {
		return nil
	}
	if n.v6, err = syscall.Open("/proc/self/net/snmp6", syscall.O_RDONLY|syscall.O_CLOEXEC, 0); err != nil {
		n.v6 = -1
	}
	base, ok := n.read()
	if !ok {
		syscall.Close(n.v4)
		if n.v6 >= 0 {
			syscall.Close(n.v6)
		}
		return nil
	}
	n.base = base
	return n
}

// encode appends the StatusNoRoute message, when the count was read.
func (n *noRoutes) encode(e *Encoder) {
	if c, ok := n.count(); ok {
		e.U8(StatusNoRoute)
		e.U64(c)
	}
}

// count is how many packets found no route since openNoRoutes; false when
// the counters could not be read.
func (n *noRoutes) count() (uint64, bool) {
	now, ok := n.read()
	if !ok || now < n.base {
		return 0, false
	}
	return now - n.base, true
}

// read sums the counters of both files as they are now (IPv4's only when
// snmp6 is not open).
func (n *noRoutes) read() (uint64, bool) {
	v4, ok := readCounter(n.v4, snmpOutNoRoutes)
	if !ok || n.v6 < 0 {
		return v4, ok
	}
	v6, ok := readCounter(n.v6, snmp6OutNoRoutes)
	return v4 + v6, ok
}

// readCounter reads the file fd from its start and finds its counter with
// parse.
func readCounter(fd int, parse func([]byte) (uint64, bool)) (uint64, bool) {
	var buf [16 << 10]byte
	b, ok := preadAll(fd, buf[:])
	if !ok {
		return 0, false
	}
	return parse(b)
}

// preadAll reads fd from offset 0 into buf, as much as it gives: false on
// an error or when it does not fit.
func preadAll(fd int, buf []byte) ([]byte, bool) {
	got := 0
	for got < len(buf) {
		m, err := syscall.Pread(fd, buf[got:], int64(got))
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return nil, false
		}
		if m == 0 {
			return buf[:got], true
		}
		got += m
	}
	return nil, false
}

// snmpOutNoRoutes finds OutNoRoutes in /proc/net/snmp: a line "Ip:" of
// names, then one "Ip:" of values in the same order.
func snmpOutNoRoutes(b []byte) (uint64, bool) {
	var names []string
	for _, line := range bytes.Split(b, []byte("\n")) {
		f := bytes.Fields(line)
		if len(f) == 0 || string(f[0]) != "Ip:" {
			continue
		}
		if names == nil {
			for _, x := range f[1:] {
				names = append(names, string(x))
			}
			continue
		}
		for i, name := range names {
			if name == "OutNoRoutes" && i+1 < len(f) {
				v, err := strconv.ParseUint(string(f[i+1]), 10, 64)
				return v, err == nil
			}
		}
		return 0, false
	}
	return 0, false
}

// snmp6OutNoRoutes finds Ip6OutNoRoutes in /proc/net/snmp6: a name and a
// value on each line.
func snmp6OutNoRoutes(b []byte) (uint64, bool) {
	for _, line := range bytes.Split(b, []byte("\n")) {
		f := bytes.Fields(line)
		if len(f) == 2 && string(f[0]) == "Ip6OutNoRoutes" {
			v, err := strconv.ParseUint(string(f[1]), 10, 64)
			return v, err == nil
		}
	}
	return 0, false
}
