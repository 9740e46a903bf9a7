package egress

import (
	"io"
	"math/big"
	"net/http"
	"net/netip"
	"strings"
	"testing"

	"golang.org/x/net/proxy"
)

// inside is an address of r's block whose most specific row is r: the
// block's first or last address, or the one after or before it.
func inside(r *special) (netip.Addr, bool) {
	first := r.prefix.Addr()
	b := first.AsSlice()
	for i := r.prefix.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	last, _ := netip.AddrFromSlice(b)
	for _, a := range []netip.Addr{first, first.Next(), last, last.Prev()} {
		if a.IsValid() && specialFor(a) == r {
			return a, true
		}
	}
	return netip.Addr{}, false
}

// carrying is the address of row r that carries v4.
func carrying(r *special, v4 netip.Addr) netip.Addr {
	b := r.prefix.Addr().As16()
	v := v4.As4()
	copy(b[r.at:], v[:])
	return netip.AddrFrom16(b)
}

// TestSpecialTable walks the whole table: an address of each row is
// refused by that row, named, unless the registry calls the row globally
// reachable (then it is admitted, inside the row that covers it); a CIDR
// rule admits it either way; a row that carries an IPv4 address is judged
// as that address.
func TestSpecialTable(t *testing.T) {
	seen := map[netip.Prefix]bool{}
	global, private := netip.MustParseAddr("8.8.8.8"), netip.MustParseAddr("10.0.0.1")
	none := &Policy{}
	for i := range specials() {
		r := &specials()[i]
		if r.prefix != r.prefix.Masked() || seen[r.prefix] || r.kind == "" || r.name == "" || !strings.HasPrefix(r.ref, "RFC ") {
			t.Errorf("row %+v: not masked, a second row of its block, or without a kind, name or reference", *r)
		}
		seen[r.prefix] = true
		a, ok := inside(r)
		if !ok {
			t.Errorf("%s: no address of the block has it as its most specific row", r)
			continue
		}
		if ok, why := (&Policy{CIDRs: []netip.Prefix{r.prefix}}).Reachable(a); !ok {
			t.Errorf("%s: %s refused (%s) with a CIDR rule for the block", r, a, why)
		}
		if r.form != "" {
			for v4, want := range map[netip.Addr]bool{global: true, private: false} {
				c := carrying(r, v4)
				ok, why := none.Reachable(c)
				if ok != want || !want && why != r.form+" of 10.0.0.1, which is private, not globally reachable: 10.0.0.0/8 (Private-Use, RFC 1918)" {
					t.Errorf("%s: %s reachable %v (%q), want %v as %s", r, c, ok, why, want, v4)
				}
			}
			if ok, why := (&Policy{CIDRs: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}).Reachable(carrying(r, private)); !ok {
				t.Errorf("%s: %s refused (%s) with a CIDR rule for 10.0.0.0/8", r, carrying(r, private), why)
			}
			continue
		}
		ok, why := none.Reachable(a)
		if want := r.reach == reachTrue; ok != want {
			t.Errorf("%s: %s reachable %v (%s), want %v", r, a, ok, why, want)
		}
		if want := r.kind + ", not globally reachable: " + r.String(); !ok && why != want {
			t.Errorf("%s: %s refused as %q, want %q", r, a, why, want)
		}
	}
}

// TestSpecialExceptions: the registries' globally reachable blocks inside
// blocks that are not are admitted, their neighbours refused by the
// covering row (the most specific row decides), and an address of each
// block that is not globally reachable, those IsGlobalUnicast admits
// among them, is refused by name. The addresses and rows are written here
// from the registries, apart from the table (TestSpecialTable only checks
// the lookup against the table's own values).
func TestSpecialExceptions(t *testing.T) {
	p := &Policy{}
	for _, a := range []string{"192.0.0.9", "192.0.0.10", "2001:1::1", "2001:1::2", "2001:1::3", "2001:3::1", "2001:4:112::1",
		"2001:20::1", "2001:30::1", "192.31.196.1", "192.52.193.1", "192.175.48.1", "2620:4f:8000::1",
		"8.8.8.8", "2001:4860:4860::8888", "::ffff:8.8.8.8", "64:ff9b::808:808", "2002:808:808::1"} {
		if ok, why := p.Reachable(netip.MustParseAddr(a)); !ok {
			t.Errorf("%s refused (%s), want it admitted", a, why)
		}
	}
	for a, row := range map[string]string{
		"0.1.2.3":          `0.0.0.0/8 ("This network", RFC 791)`,
		"0.0.0.0":          `0.0.0.0/32 ("This host on this network", RFC 1122)`,
		"10.1.2.3":         "10.0.0.0/8 (Private-Use, RFC 1918)",
		"100.64.0.1":       "100.64.0.0/10 (Shared Address Space, RFC 6598)",
		"127.0.0.1":        "127.0.0.0/8 (Loopback, RFC 1122)",
		"169.254.169.254":  "169.254.0.0/16 (Link Local, RFC 3927)",
		"172.31.255.255":   "172.16.0.0/12 (Private-Use, RFC 1918)",
		"192.168.1.1":      "192.168.0.0/16 (Private-Use, RFC 1918)",
		"192.0.0.170":      "192.0.0.170/32 (NAT64/DNS64 Discovery, RFC 8880)",
		"192.0.0.171":      "192.0.0.171/32 (NAT64/DNS64 Discovery, RFC 8880)",
		"192.0.2.1":        "192.0.2.0/24 (Documentation (TEST-NET-1), RFC 5737)",
		"198.51.100.1":     "198.51.100.0/24 (Documentation (TEST-NET-2), RFC 5737)",
		"203.0.113.80":     "203.0.113.0/24 (Documentation (TEST-NET-3), RFC 5737)",
		"192.88.99.1":      "192.88.99.0/24 (Deprecated (6to4 Relay Anycast), RFC 7526)",
		"198.19.0.1":       "198.18.0.0/15 (Benchmarking, RFC 2544)",
		"240.0.0.1":        "240.0.0.0/4 (Reserved, RFC 1112)",
		"255.255.255.255":  "255.255.255.255/32 (Limited Broadcast, RFC 919)",
		"224.0.0.1":        "224.0.0.0/4 (Multicast, RFC 5771)",
		"::1":              "::1/128 (Loopback Address, RFC 4291)",
		"::":               "::/128 (Unspecified Address, RFC 4291)",
		"100::1":           "100::/64 (Discard-Only Address Block, RFC 6666)",
		"fd00::1":          "fc00::/7 (Unique-Local, RFC 4193)",
		"fe80::1":          "fe80::/10 (Link-Local Unicast, RFC 4291)",
		"fe00::1":          "fe00::/9 (Reserved by IETF, RFC 4291)",
		"192.0.0.8":        "192.0.0.8/32 (IPv4 dummy address, RFC 7600)",
		"192.0.0.11":       "192.0.0.0/24 (IETF Protocol Assignments, RFC 6890)",
		"192.0.0.1":        "192.0.0.0/29 (IPv4 Service Continuity Prefix, RFC 7335)",
		"192.88.99.2":      "192.88.99.2/32 (6a44-relay anycast address, RFC 6751)",
		"2001:1::4":        "2001::/23 (IETF Protocol Assignments, RFC 2928)",
		"2001:4:113::1":    "2001::/23 (IETF Protocol Assignments, RFC 2928)",
		"2001:2::1":        "2001:2::/48 (Benchmarking, RFC 5180)",
		"2001:10::1":       "2001:10::/28 (Deprecated (previously ORCHID), RFC 4843)",
		"2001::1":          "2001::/32 (TEREDO, RFC 4380)",
		"fec0::1":          "fec0::/10 (Deprecated site-local, RFC 3879)",
		"3fff::1":          "3fff::/20 (Documentation, RFC 9637)",
		"5f00::1":          "5f00::/16 (Segment Routing (SRv6) SIDs, RFC 9602)",
		"2001:db8::1":      "2001:db8::/32 (Documentation, RFC 3849)",
		"100:0:0:1::1":     "100:0:0:1::/64 (Dummy IPv6 Prefix, RFC 9780)",
		"64:ff9b:1::1":     "64:ff9b:1::/48 (IPv4-IPv6 Translation, RFC 8215)",
		"::7f00:1":         "::/8 (Reserved by IETF, RFC 4291)",
		"4000::1":          "4000::/3 (Reserved by IETF, RFC 4291)",
		"ff0e::1":          "ff00::/8 (Multicast, RFC 4291)",
		"233.252.0.1":      "224.0.0.0/4 (Multicast, RFC 5771)",
		"::ffff:127.0.0.1": "127.0.0.0/8 (Loopback, RFC 1122)",
		"64:ff9b::7f00:1":  "127.0.0.0/8 (Loopback, RFC 1122)",
		"2002:a9fe:a9fe::": "169.254.0.0/16 (Link Local, RFC 3927)",
	} {
		ok, why := p.Reachable(netip.MustParseAddr(a))
		if ok || !strings.HasSuffix(why, "not globally reachable: "+row) {
			t.Errorf("%s: reachable %v (%s), want it refused by %s", a, ok, why, row)
		}
	}
	for _, a := range []netip.Addr{{}, netip.MustParseAddr("fe80::1%eth0"), netip.MustParseAddr("2001:4860::1%eth0")} {
		if ok, _ := p.Reachable(a); ok {
			t.Errorf("%v admitted", a)
		}
	}
}

// TestSpecialTableCoversIPv6: the IPv6 rows that no other row contains
// are disjoint and together cover every IPv6 address, so the lookup's
// branch for an IPv6 address in no row is never taken.
func TestSpecialTableCoversIPv6(t *testing.T) {
	sum := new(big.Int)
	for i := range specials() {
		r := &specials()[i]
		if !r.prefix.Addr().Is6() {
			continue
		}
		top := true
		for j := range specials() {
			q := &specials()[j]
			if j != i && q.prefix.Bits() <= r.prefix.Bits() && q.prefix.Contains(r.prefix.Addr()) {
				top = false
			}
		}
		if top {
			sum.Add(sum, new(big.Int).Lsh(big.NewInt(1), uint(128-r.prefix.Bits())))
		}
	}
	if all := new(big.Int).Lsh(big.NewInt(1), 128); sum.Cmp(all) != 0 {
		t.Errorf("the outermost IPv6 rows hold %v addresses, want 2^128 = %v", sum, all)
	}
}

// FuzzReachable: an address the table admits is one the standard
// library calls global unicast and not private; an IPv4-mapped address is
// judged as its IPv4 address.
func FuzzReachable(f *testing.F) {
	for _, s := range []string{"8.8.8.8", "127.0.0.1", "fec0::1", "64:ff9b::a00:1", "2002:7f00:1::", "192.0.0.9", "2001:1::1", "::ffff:1.2.3.4", "ff02::1"} {
		f.Add(netip.MustParseAddr(s).AsSlice())
	}
	p := &Policy{}
	f.Fuzz(func(t *testing.T, b []byte) {
		a, ok := netip.AddrFromSlice(b)
		if !ok {
			return
		}
		got, why := p.Reachable(a)
		if u := a.Unmap(); got && (!u.IsGlobalUnicast() || u.IsPrivate()) {
			t.Errorf("%s admitted, which the standard library calls not global unicast or private", a)
		}
		if !got && why == "" {
			t.Errorf("%s refused without a reason", a)
		}
		if a.Is4() {
			if m, _ := p.Reachable(netip.AddrFrom16(a.As16())); m != got {
				t.Errorf("%s reachable %v, its IPv4-mapped form %v", a, got, m)
			}
		}
	})
}

// TestProxyRefusesSiteLocal: through the proxy, a name that resolves to
// the deprecated site-local fec0::1 (which IsGlobalUnicast admits) is
// refused with a 403 that names the registry row, nothing is dialled, and
// an IP literal in the block is refused naming it too.
func TestProxyRefusesSiteLocal(t *testing.T) {
	r := newRig(t, &Policy{Allow: pats(t, "site.test", "doc.test")}, map[string][]string{"site.test": {"fec0::1"}, "doc.test": {"3fff::1", "5f00::1"}})
	c := r.client(nil)
	for host, want := range map[string]string{
		"site.test": "resolves only to addresses no rule admits (fec0::1 is site-local); not globally reachable: fec0::/10 (Deprecated site-local, RFC 3879); allow them with a CIDR rule",
		"doc.test":  "(3fff::1 is documentation; 5f00::1 is segment routing); not globally reachable: 3fff::/20 (Documentation, RFC 9637), 5f00::/16 (Segment Routing (SRv6) SIDs, RFC 9602)",
		"[fec0::1]": "an IP address outside every allow_cidr (names only); fec0::1 is site-local, not globally reachable: fec0::/10 (Deprecated site-local, RFC 3879)",
	} {
		resp, err := c.Get("http://" + host + ":8080/")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(resp.Header.Get("X-B10x-Harness-Denied"), want) || !strings.Contains(string(body), want) {
			t.Errorf("GET via %s: %d %q, want a 403 naming %q", host, resp.StatusCode, body, want)
		}
		if _, err := c.Get("https://" + host + ":8443/"); err == nil || !strings.Contains(err.Error(), "Forbidden") {
			t.Errorf("CONNECT to %s: %v, want a refused CONNECT", host, err)
		}
		ev := r.waitEvent(strings.Trim(host, "[]"), 2)
		if !ev[0].Denied() || !strings.Contains(ev[0].Rule, want) {
			t.Errorf("%s: event %+v", host, ev[0])
		}
	}
	d, err := proxy.SOCKS5("tcp", r.addr, nil, proxy.Direct)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Dial("tcp", "site.test:443"); err == nil || !strings.Contains(err.Error(), "not allowed") {
		t.Errorf("SOCKS5 to site.test: %v, want a refusal by ruleset", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.dialed) != 0 {
		t.Errorf("the proxy dialled %v", r.dialed)
	}
}
