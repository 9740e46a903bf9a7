package audit

import (
	"errors"
	"reflect"
	"testing"
)

// The record texts are the kernel's own, as its documentation
// (Documentation/admin-guide/LSM/landlock.rst, Documentation/userspace-api/
// landlock.rst) and lsm_audit.c print them, with the audit( header the
// netlink message carries.
func TestParse(t *testing.T) {
	for _, c := range []struct {
		name string
		typ  uint16
		text string
		want any
	}{
		{"refer", TypeLandlockAccess,
			`audit(1729738800.268:30): domain=195ba459b blockers=fs.refer path="/usr/bin" dev="vda2" ino=351`,
			Denial{Serial: 30, Domain: "195ba459b", Blockers: []string{"fs.refer"}, Object: "/usr/bin"}},
		{"two blockers", TypeLandlockAccess,
			`audit(1729738800.268:30): domain=195ba459b blockers=fs.make_reg,fs.refer path="/usr/local" dev="vda2" ino=365`,
			Denial{Serial: 30, Domain: "195ba459b", Blockers: []string{"fs.make_reg", "fs.refer"}, Object: "/usr/local"}},
		{"write", TypeLandlockAccess,
			`audit(1729738800.268:31): domain=1a6fdc66f blockers=fs.write_file path="/dev/tty" dev="devtmpfs" ino=9`,
			Denial{Serial: 31, Domain: "1a6fdc66f", Blockers: []string{"fs.write_file"}, Object: "/dev/tty"}},
		{"hex path", TypeLandlockAccess,
			`audit(1.2:7): domain=a blockers=fs.read_file path=2F746D702F6120622022 dev="sda1" ino=4`,
			Denial{Serial: 7, Domain: "a", Blockers: []string{"fs.read_file"}, Object: `/tmp/a b "`}},
		{"dentry name", TypeLandlockAccess,
			`audit(1.2:8): domain=a blockers=fs.remove_file path="/w" dev="sda1" ino=4 name="x"`,
			Denial{Serial: 8, Domain: "a", Blockers: []string{"fs.remove_file"}, Object: "/w/x"}},
		{"tcp", TypeLandlockAccess,
			`audit(1.2:9): domain=b blockers=net.connect_tcp daddr=127.0.0.1 dest=443`,
			Denial{Serial: 9, Domain: "b", Blockers: []string{"net.connect_tcp"}, Object: "127.0.0.1:443"}},
		{"bind", TypeLandlockAccess,
			`audit(1.2:10): domain=b blockers=net.bind_tcp saddr=0.0.0.0 src=8080`,
			Denial{Serial: 10, Domain: "b", Blockers: []string{"net.bind_tcp"}, Object: "port 8080"}},
		{"signal", TypeLandlockAccess,
			`audit(1.2:11): domain=b blockers=scope.signal opid=1 ocomm="b10x-harness"`,
			Denial{Serial: 11, Domain: "b", Blockers: []string{"scope.signal"}, Object: "pid 1 (b10x-harness)"}},
		{"allocated", TypeLandlockDomain,
			`audit(1729738800.268:30): domain=195ba459b status=allocated mode=enforcing pid=300 uid=0 exe="/root/sandboxer" comm="sandboxer"`,
			Domain{Serial: 30, ID: "195ba459b", Status: "allocated", PID: 300, Exe: "/root/sandboxer", Comm: "sandboxer"}},
		{"deallocated", TypeLandlockDomain,
			`audit(1729738800.324:31): domain=195ba459b status=deallocated denials=3`,
			Domain{Serial: 31, ID: "195ba459b", Status: "deallocated", Denials: 3}},
		{"other type", 1300, `audit(1.2:3): arch=c000003e syscall=257`, nil},
	} {
		got, err := Parse(c.typ, c.text)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s:\n got %#v\nwant %#v", c.name, got, c.want)
		}
	}
}

func TestParseMalformed(t *testing.T) {
	for _, text := range []string{
		``,
		`domain=1 blockers=fs.read_file`,
		`audit(1.2): domain=1 blockers=fs.read_file`,
		`audit(1.2:x): domain=1 blockers=fs.read_file`,
		`audit(1.2:3): blockers=fs.read_file`,
		`audit(1.2:3): domain=1`,
		`audit(1.2:3): domain=1 blockers=fs.read_file path="/unterminated`,
		`audit(1.2:3): domain=1 blockers=fs.read_file path=not-hex`,
		`audit(1.2:3): domain=1 blockers=fs.read_file junk`,
	} {
		if _, err := Parse(TypeLandlockAccess, text); !errors.Is(err, ErrMalformed) {
			t.Errorf("Parse(%q) = %v, want ErrMalformed", text, err)
		}
	}
	if _, err := Parse(TypeLandlockDomain, `audit(1.2:3): domain=1 status=allocated pid=x`); !errors.Is(err, ErrMalformed) {
		t.Errorf("pid=x: %v, want ErrMalformed", err)
	}
}

func FuzzParse(f *testing.F) {
	f.Add(uint16(TypeLandlockAccess), `audit(1729738800.268:30): domain=195ba459b blockers=fs.refer path="/usr/bin" dev="vda2" ino=351`)
	f.Add(uint16(TypeLandlockDomain), `audit(1729738800.268:30): domain=195ba459b status=allocated mode=enforcing pid=300 uid=0 exe="/root/sandboxer" comm="sandboxer"`)
	f.Fuzz(func(t *testing.T, typ uint16, text string) {
		rec, err := Parse(typ, text)
		if err != nil && rec != nil {
			t.Fatalf("a record and an error: %v %v", rec, err)
		}
	})
}

func TestDenialString(t *testing.T) {
	d := Denial{Blockers: []string{"fs.make_reg"}, Object: "/usr/share/x"}
	if got, want := d.String(), "landlock: fs.make_reg /usr/share/x"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
