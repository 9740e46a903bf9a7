package helper

import "testing"

// The counters as Linux 6.18 writes them (shortened: the values past
// OutNoRoutes, and most of snmp6, are cut).
const (
	snmpSample = "Ip: Forwarding DefaultTTL InReceives InHdrErrors InAddrErrors ForwDatagrams InUnknownProtos InDiscards InDelivers OutRequests OutDiscards OutNoRoutes ReasmTimeout\n" +
		"Ip: 2 64 10 0 0 0 0 0 10 10 0 7 0\n" +
		"Icmp: InMsgs InErrors\nIcmp: 0 0\n"
	snmp6Sample = "Ip6InReceives                   \t4\nIp6InNoRoutes                   \t0\nIp6OutNoRoutes                  \t3\nIcmp6InMsgs                     \t0\n"
)

func TestSnmpOutNoRoutes(t *testing.T) {
	if n, ok := snmpOutNoRoutes([]byte(snmpSample)); !ok || n != 7 {
		t.Errorf("snmp: %d %v, want 7", n, ok)
	}
	if n, ok := snmp6OutNoRoutes([]byte(snmp6Sample)); !ok || n != 3 {
		t.Errorf("snmp6: %d %v, want 3", n, ok)
	}
	// What is not the counters is not read as a count (no count is
	// claimed then: the call says its denials of this layer are unknown).
	for _, bad := range []string{
		"",
		"Ip: Forwarding OutNoRoutes\n",                   // names, no values
		"Ip: Forwarding OutNoRoutes\nIp: 2\n",            // a value missing
		"Ip: Forwarding OutNoRoutes\nIp: 2 x\n",          // not a number
		"Ip: Forwarding InReceives\nIp: 2 3\n",           // no such counter
		"Ip: Forwarding OutNoRoutes\nIp: 2 -1\n",         // negative
		"Ip: OutNoRoutes\nIp: 99999999999999999999999\n", // past uint64
	} {
		if n, ok := snmpOutNoRoutes([]byte(bad)); ok {
			t.Errorf("snmp %q: read as %d", bad, n)
		}
	}
	for _, bad := range []string{"", "Ip6OutNoRoutes\n", "Ip6OutNoRoutes x\n", "Ip6InNoRoutes 3\n"} {
		if n, ok := snmp6OutNoRoutes([]byte(bad)); ok {
			t.Errorf("snmp6 %q: read as %d", bad, n)
		}
	}
}

// TestNoRouteEncode: the init's message carries the count since it opened
// the counters, and nothing when they cannot be read.
func TestNoRouteEncode(t *testing.T) {
	n := openNoRoutes()
	if n == nil {
		t.Fatal("this process's /proc/self/net/snmp cannot be read")
	}
	n.base = 0 // every no-route refusal of this namespace so far
	want, ok := n.count()
	if !ok {
		t.Fatal("the counters cannot be read again")
	}
	var e Encoder
	n.encode(&e)
	d := Decoder{B: e.B}
	if tag := d.U8(); tag != StatusNoRoute {
		t.Fatalf("tag %q, want %q", tag, StatusNoRoute)
	}
	if got := d.U64(); got < want || d.End() != nil {
		t.Errorf("count %d, want at least %d (%v)", got, want, d.Err)
	}
	n.base = ^uint64(0) // counters that went back: not a count
	e = Encoder{}
	n.encode(&e)
	if len(e.B) != 0 {
		t.Errorf("counters below their base encoded %q", e.B)
	}
}
