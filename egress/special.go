package egress

import (
	"net/netip"
	"sync"
)

// special is one row of the table of special-purpose addresses: a block,
// the name and reference the IANA registry gives it, whether the registry
// calls it globally reachable, and whether an address in it carries an
// IPv4 address that stands for it.
type special struct {
	prefix netip.Prefix
	// kind is the row's class in a word or two, as a refusal says it of
	// an address: "127.0.0.1 is loopback".
	kind string
	name string // the registry's name: "Documentation"
	ref  string // where the block is defined: "RFC 3849"
	// reach is the registry's "Globally Reachable" column.
	reach reach
	// form, when set, names the form of an address of the block that
	// carries an IPv4 address (at byte at of the 16): the address reaches
	// that IPv4 address and is judged as it (the row's reach is not
	// consulted).
	form string
	at   int
}

// carried is the IPv4 address an address of the row carries.
func (r *special) carried(a netip.Addr) netip.Addr {
	b := a.As16()
	return netip.AddrFrom4([4]byte(b[r.at : r.at+4]))
}

// reach is a row's "Globally Reachable" value. Only reachTrue admits: a
// block the registry marks N/A (or leaves blank, for a terminated
// allocation) is not declared reachable, so it is not.
type reach int

const (
	reachFalse reach = iota
	reachTrue
	reachNA
)

// String is the row as a refusal names it: "fec0::/10 (Deprecated
// site-local, RFC 3879)".
func (r *special) String() string {
	return r.prefix.String() + " (" + r.name + ", " + r.ref + ")"
}

// specials is the table: the IANA IPv4 and IPv6 Special-Purpose Address
// Registries in full (as read in 2026; the IPv6 registry's last update
// was then 2025-10-09), with the blocks of the IPv4 Multicast and IPv6
// Address Space registries that are not global unicast (multicast, the
// blocks reserved by the IETF, the deprecated site-local fec0::/10) and
// 2000::/3, the only IPv6 block from which global unicast addresses are
// assigned. A lookup takes the most specific row that contains the
// address, so an exception (192.0.0.9/32, reachable) is found inside the
// block that holds it (192.0.0.0/24, not); an IPv4 address in no row is
// global, and the IPv6 rows cover every IPv6 address (TestSpecialTableCoversIPv6).
// Parsed at the first check, not by every start (decision 0066);
// docs/decisions/0072-special-purpose-addresses.md says where it comes from.
var specials = sync.OnceValue(func() []special {
	row := func(p, kind, name, ref string, r reach) special {
		return special{prefix: netip.MustParsePrefix(p), kind: kind, name: name, ref: ref, reach: r}
	}
	carrying := func(s special, form string, at int) special {
		s.form, s.at = form, at
		return s
	}
	const F, T, NA = reachFalse, reachTrue, reachNA
	return []special{
		// IANA IPv4 Special-Purpose Address Registry.
		row("0.0.0.0/8", "this network", `"This network"`, "RFC 791", F),
		row("0.0.0.0/32", "unspecified", `"This host on this network"`, "RFC 1122", F),
		row("10.0.0.0/8", "private", "Private-Use", "RFC 1918", F),
		row("100.64.0.0/10", "shared (carrier-grade NAT)", "Shared Address Space", "RFC 6598", F),
		row("127.0.0.0/8", "loopback", "Loopback", "RFC 1122", F),
		row("169.254.0.0/16", "link-local", "Link Local", "RFC 3927", F),
		row("172.16.0.0/12", "private", "Private-Use", "RFC 1918", F),
		row("192.0.0.0/24", "reserved", "IETF Protocol Assignments", "RFC 6890", F),
		row("192.0.0.0/29", "reserved", "IPv4 Service Continuity Prefix", "RFC 7335", F),
		row("192.0.0.8/32", "reserved", "IPv4 dummy address", "RFC 7600", F),
		row("192.0.0.9/32", "anycast", "Port Control Protocol Anycast", "RFC 7723", T),
		row("192.0.0.10/32", "anycast", "Traversal Using Relays around NAT Anycast", "RFC 8155", T),
		row("192.0.0.170/32", "reserved", "NAT64/DNS64 Discovery", "RFC 8880", F),
		row("192.0.0.171/32", "reserved", "NAT64/DNS64 Discovery", "RFC 8880", F),
		row("192.0.2.0/24", "documentation", "Documentation (TEST-NET-1)", "RFC 5737", F),
		row("192.31.196.0/24", "anycast", "AS112-v4", "RFC 7535", T),
		row("192.52.193.0/24", "anycast", "AMT", "RFC 7450", T),
		row("192.88.99.0/24", "deprecated", "Deprecated (6to4 Relay Anycast)", "RFC 7526", NA),
		row("192.88.99.2/32", "relay anycast", "6a44-relay anycast address", "RFC 6751", F),
		row("192.168.0.0/16", "private", "Private-Use", "RFC 1918", F),
		row("192.175.48.0/24", "anycast", "Direct Delegation AS112 Service", "RFC 7534", T),
		row("198.18.0.0/15", "benchmarking", "Benchmarking", "RFC 2544", F),
		row("198.51.100.0/24", "documentation", "Documentation (TEST-NET-2)", "RFC 5737", F),
		row("203.0.113.0/24", "documentation", "Documentation (TEST-NET-3)", "RFC 5737", F),
		row("240.0.0.0/4", "reserved", "Reserved", "RFC 1112", F),
		row("255.255.255.255/32", "broadcast", "Limited Broadcast", "RFC 919", F),
		// IPv4 Multicast Address Space Registry.
		row("224.0.0.0/4", "multicast", "Multicast", "RFC 5771", F),

		// IANA IPv6 Special-Purpose Address Registry.
		row("::1/128", "loopback", "Loopback Address", "RFC 4291", F),
		row("::/128", "unspecified", "Unspecified Address", "RFC 4291", F),
		// The proxy dials the IPv4 address itself (an IPv4-mapped
		// address never leaves the host as such).
		carrying(row("::ffff:0:0/96", "IPv4-mapped", "IPv4-mapped Address", "RFC 4291", F), "the IPv4-mapped form", 12),
		// RFC 6052 section 3.1: the well-known prefix may represent only
		// global IPv4 addresses; the translator reaches the one it carries.
		carrying(row("64:ff9b::/96", "NAT64", "IPv4-IPv6 Translation", "RFC 6052", T), "the NAT64 form", 12),
		row("64:ff9b:1::/48", "local-use translation", "IPv4-IPv6 Translation", "RFC 8215", F),
		row("100::/64", "discard-only", "Discard-Only Address Block", "RFC 6666", F),
		row("100:0:0:1::/64", "dummy", "Dummy IPv6 Prefix", "RFC 9780", F),
		row("2001::/23", "reserved", "IETF Protocol Assignments", "RFC 2928", F),
		row("2001::/32", "Teredo", "TEREDO", "RFC 4380", NA),
		row("2001:1::1/128", "anycast", "Port Control Protocol Anycast", "RFC 7723", T),
		row("2001:1::2/128", "anycast", "Traversal Using Relays around NAT Anycast", "RFC 8155", T),
		row("2001:1::3/128", "anycast", "DNS-SD Service Registration Protocol Anycast", "RFC 9665", T),
		row("2001:2::/48", "benchmarking", "Benchmarking", "RFC 5180", F),
		row("2001:3::/32", "anycast", "AMT", "RFC 7450", T),
		row("2001:4:112::/48", "anycast", "AS112-v6", "RFC 7535", T),
		row("2001:10::/28", "deprecated", "Deprecated (previously ORCHID)", "RFC 4843", NA),
		row("2001:20::/28", "ORCHIDv2", "ORCHIDv2", "RFC 7343", T),
		row("2001:30::/28", "drone entity tag", "Drone Remote ID Protocol Entity Tags (DETs) Prefix", "RFC 9374", T),
		row("2001:db8::/32", "documentation", "Documentation", "RFC 3849", F),
		// A 6to4 address reaches, through a relay, the IPv4 host whose
		// address it carries.
		carrying(row("2002::/16", "6to4", "6to4", "RFC 3056", NA), "the 6to4 form", 2),
		row("2620:4f:8000::/48", "anycast", "Direct Delegation AS112 Service", "RFC 7534", T),
		row("3fff::/20", "documentation", "Documentation", "RFC 9637", F),
		row("5f00::/16", "segment routing", "Segment Routing (SRv6) SIDs", "RFC 9602", F),
		row("fc00::/7", "unique-local", "Unique-Local", "RFC 4193", F),
		row("fe80::/10", "link-local", "Link-Local Unicast", "RFC 4291", F),

		// IANA IPv6 Address Space Registry: every block, so that each IPv6
		// address has a row; only 2000::/3 is global unicast.
		row("::/8", "reserved", "Reserved by IETF", "RFC 4291", F),
		row("100::/8", "reserved", "Reserved by IETF", "RFC 4291", F),
		row("200::/7", "reserved", "Reserved by IETF", "RFC 4048", F),
		row("400::/6", "reserved", "Reserved by IETF", "RFC 4291", F),
		row("800::/5", "reserved", "Reserved by IETF", "RFC 4291", F),
		row("1000::/4", "reserved", "Reserved by IETF", "RFC 4291", F),
		row("2000::/3", "global unicast", "Global Unicast", "RFC 4291", T),
		row("4000::/3", "reserved", "Reserved by IETF", "RFC 4291", F),
		row("6000::/3", "reserved", "Reserved by IETF", "RFC 4291", F),
		row("8000::/3", "reserved", "Reserved by IETF", "RFC 4291", F),
		row("a000::/3", "reserved", "Reserved by IETF", "RFC 4291", F),
		row("c000::/3", "reserved", "Reserved by IETF", "RFC 4291", F),
		row("e000::/4", "reserved", "Reserved by IETF", "RFC 4291", F),
		row("f000::/5", "reserved", "Reserved by IETF", "RFC 4291", F),
		row("f800::/6", "reserved", "Reserved by IETF", "RFC 4291", F),
		// fc00::/7 and fe80::/10 are rows of the registry above.
		row("fe00::/9", "reserved", "Reserved by IETF", "RFC 4291", F),
		row("fec0::/10", "site-local", "Deprecated site-local", "RFC 3879", F),
		row("ff00::/8", "multicast", "Multicast", "RFC 4291", F),
	}
})

// specialFor is the most specific row of the table that contains a, or
// nil. A zoned address is in no row (netip.Prefix.Contains).
func specialFor(a netip.Addr) *special {
	t := specials()
	var best *special
	for i := range t {
		if t[i].prefix.Contains(a) && (best == nil || t[i].prefix.Bits() > best.prefix.Bits()) {
			best = &t[i]
		}
	}
	return best
}
