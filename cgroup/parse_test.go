package cgroup

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// Mount tables as the kernel prints them on the host shapes the harness
// meets.
const (
	// This development host: cgroup v1 controllers plus cgroup2 at
	// /sys/fs/cgroup/unified.
	mountsHybrid = `22 27 0:21 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw
30 22 0:27 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
31 30 0:28 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
32 30 0:29 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
34 30 0:31 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
38 30 0:35 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
39 30 0:36 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
40 30 0:37 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
`
	// Debian 12 with systemd: pure cgroup v2 at /sys/fs/cgroup.
	mountsPureV2 = `26 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw,errors=remount-ro
29 26 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot
33 26 0:29 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc proc rw
`
	// cgroup v1 only.
	mountsV1Only = `30 22 0:27 / /sys/fs/cgroup ro,nosuid,nodev,noexec shared:9 - tmpfs tmpfs ro,mode=755
31 30 0:28 / /sys/fs/cgroup/systemd rw,nosuid,nodev,noexec,relatime shared:10 - cgroup cgroup rw,xattr,name=systemd
35 30 0:32 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid,nodev,noexec,relatime shared:15 - cgroup cgroup rw,cpu,cpuacct
36 30 0:33 / /sys/fs/cgroup/pids rw,nosuid,nodev,noexec,relatime shared:16 - cgroup cgroup rw,pids
`
	// A container with a cgroup namespace, the cgroup2 mount showing a
	// subtree, mounted at a path with a space, several optional fields.
	mountsEscaped = `101 90 0:40 /kubepods/pod1 /mnt/my\040cgroup rw,nosuid shared:5 master:3 - cgroup2 none rw
102 90 0:41 / /mnt/back\134slash\011tab rw - tmpfs my\040src rw
`
)

func TestParseMountInfo(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		cgroup2 []string // mount points of cgroup2 entries
		v1      int
		n       int
	}{
		{"hybrid", mountsHybrid, []string{"/sys/fs/cgroup/unified"}, 5, 8},
		{"pure v2", mountsPureV2, []string{"/sys/fs/cgroup"}, 0, 3},
		{"v1 only", mountsV1Only, nil, 3, 4},
		{"escaped", mountsEscaped, []string{"/mnt/my cgroup"}, 0, 2},
		{"empty", "", nil, 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseMountInfo([]byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != tc.n {
				t.Fatalf("got %d entries, want %d", len(got), tc.n)
			}
			var c2 []string
			v1 := 0
			for _, e := range got {
				switch e.FSType {
				case "cgroup2":
					c2 = append(c2, e.MountPoint)
				case "cgroup":
					v1++
				}
			}
			if !slices.Equal(c2, tc.cgroup2) || v1 != tc.v1 {
				t.Fatalf("cgroup2 mounts %q and %d v1 mounts, want %q and %d", c2, v1, tc.cgroup2, tc.v1)
			}
		})
	}

	es, err := parseMountInfo([]byte(mountsEscaped))
	if err != nil {
		t.Fatal(err)
	}
	want := mountEntry{ID: 101, Parent: 90, Root: "/kubepods/pod1", MountPoint: "/mnt/my cgroup", Options: "rw,nosuid",
		FSType: "cgroup2", Source: "none", SuperOptions: "rw"}
	if es[0] != want {
		t.Errorf("entry 0 = %+v, want %+v", es[0], want)
	}
	if es[1].MountPoint != "/mnt/back\\slash\ttab" || es[1].Source != "my src" {
		t.Errorf("entry 1: mount point %q source %q", es[1].MountPoint, es[1].Source)
	}
	hy, _ := parseMountInfo([]byte(mountsHybrid))
	if hy[2].SuperOptions != "rw,cpu" {
		t.Errorf("v1 super options %q, want rw,cpu", hy[2].SuperOptions)
	}
}

// TestParseMountInfoNamespaceFile: a namespace file bound at a path (ip
// netns add) has a root that is not a path; the table around it still
// parses, so one such mount cannot hide the cgroup2 mount.
func TestParseMountInfoNamespaceFile(t *testing.T) {
	line := "48 25 0:4 net:[4026532571] /run/netns/test rw - nsfs nsfs rw\n"
	got, err := parseMountInfo([]byte(mountsPureV2 + line))
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range got {
		found = found || (e.FSType == "cgroup2" && e.MountPoint == "/sys/fs/cgroup")
	}
	if !found || got[len(got)-1].Root != "net:[4026532571]" {
		t.Errorf("entries %+v", got)
	}
}

func TestParseMountInfoRejects(t *testing.T) {
	for _, line := range []string{
		"40 30 0:37 / /sys/fs/cgroup/unified rw,relatime cgroup2 cgroup2 rw", // no separator
		"40 30 0:37 / /sys/fs/cgroup/unified rw,relatime -",                  // nothing after it
		"x 30 0:37 / /a rw - cgroup2 cgroup2 rw",                             // id not a number
		"40 30 0:37 relative /a rw - cgroup2 cgroup2 rw",                     // root not absolute
		"40 30 0:37 / a rw - cgroup2 cgroup2 rw",                             // mount point not absolute
		"40 30 - / /a rw x cgroup2 cgroup2 rw",                               // too few fields before "-"
		"40 30 0:37 / /a rw -  cgroup2 rw",                                   // empty filesystem type
	} {
		if _, err := parseMountInfo([]byte(mountsPureV2 + line + "\n")); err == nil {
			t.Errorf("accepted %q", line)
		} else if !strings.Contains(err.Error(), "line 4") {
			t.Errorf("error %q does not name line 4", err)
		}
	}
}

func TestResolveLocation(t *testing.T) {
	mounts := func(s string) []mountEntry {
		m, err := parseMountInfo([]byte(s))
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	tests := []struct {
		name, mounts, own, override string
		dir, rel                    string
		notSupported                bool
	}{
		{"hybrid root", mountsHybrid, "/", "", "/sys/fs/cgroup/unified", "/", false},
		{"hybrid nested", mountsHybrid, "/ci/job 1", "", "/sys/fs/cgroup/unified/ci/job 1", "/ci/job 1", false},
		{"pure v2 session", mountsPureV2, "/user.slice/user-1000.slice/session-3.scope", "",
			"/sys/fs/cgroup/user.slice/user-1000.slice/session-3.scope", "/user.slice/user-1000.slice/session-3.scope", false},
		{"override", mountsPureV2, "/a", "/sys/fs/cgroup/", "/sys/fs/cgroup/a", "/a", false},
		{"namespace subtree", mountsEscaped, "/kubepods/pod1/c1", "", "/mnt/my cgroup/c1", "/c1", false},
		{"namespace subtree root", mountsEscaped, "/kubepods/pod1", "", "/mnt/my cgroup", "/", false},
		{"outside mount root", mountsEscaped, "/kubepods/pod10", "", "", "", true},
		{"v1 only", mountsV1Only, "/", "", "", "", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			loc, err := resolveLocation(location{}, mounts(tc.mounts), tc.own, tc.override)
			if tc.notSupported {
				if !errors.Is(err, ErrNotSupported) {
					t.Fatalf("err = %v, want one matching ErrNotSupported", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if loc.dir != tc.dir || loc.rel != tc.rel {
				t.Fatalf("dir %q rel %q, want %q %q", loc.dir, loc.rel, tc.dir, tc.rel)
			}
		})
	}
}

func TestParseProcCgroup(t *testing.T) {
	tests := []struct {
		name, in, want string
		ok, err        bool
	}{
		{"hybrid", "9:name=systemd:/\n8:pids:/\n4:memory:/process_api/ed58\n1:cpu:/\n0::/\n", "/", true, false},
		{"pure v2", "0::/user.slice/user-1000.slice/session-3.scope\n", "/user.slice/user-1000.slice/session-3.scope", true, false},
		{"colon in path", "0::/a:b:c\n", "/a:b:c", true, false},
		{"v1 only", "12:pids:/\n11:memory:/x\n1:name=systemd:/init.scope\n", "", false, false},
		{"named v1 with empty controllers is not v2", "1::/x\n", "", false, false},
		{"relative path", "0::x\n", "", false, true},
		{"malformed", "0:/\n", "", false, true},
		{"empty", "", "", false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok, err := parseProcCgroup([]byte(tc.in))
			if (err != nil) != tc.err || ok != tc.ok || got != tc.want {
				t.Fatalf("got (%q, %v, %v), want (%q, %v, err %v)", got, ok, err, tc.want, tc.ok, tc.err)
			}
		})
	}
}

func TestParseList(t *testing.T) {
	got := parseList([]byte("cpuset cpu io memory hugetlb pids rdma misc\n"))
	want := []string{"cpuset", "cpu", "io", "memory", "hugetlb", "pids", "rdma", "misc"}
	if !slices.Equal(got, want) {
		t.Errorf("got %q", got)
	}
	if got := parseList([]byte("\n")); len(got) != 0 {
		t.Errorf("empty file gave %q", got)
	}
}

func TestParseFlatKeyed(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want map[string]uint64
	}{
		{"events", "populated 1\nfrozen 0\n", map[string]uint64{"populated": 1, "frozen": 0}},
		{"cpu.stat", "usage_usec 1503\nuser_usec 1002\nsystem_usec 501\nnice_usec 0\nnr_periods 4\nnr_throttled 2\nthrottled_usec 81234\n",
			map[string]uint64{"usage_usec": 1503, "user_usec": 1002, "system_usec": 501, "nice_usec": 0, "nr_periods": 4, "nr_throttled": 2, "throttled_usec": 81234}},
		{"memory.events", "low 0\nhigh 0\nmax 117\noom 3\noom_kill 2\noom_group_kill 0\n",
			map[string]uint64{"low": 0, "high": 0, "max": 117, "oom": 3, "oom_kill": 2, "oom_group_kill": 0}},
	}
	for _, tc := range tests {
		got, err := parseFlatKeyed([]byte(tc.in))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if !maps.Equal(got, tc.want) {
			t.Errorf("%s: got %v", tc.name, got)
		}
	}
	for _, bad := range []string{"populated\n", "populated x\n", " 1\n", "populated -1\n", "populated 1 2\n"} {
		if _, err := parseFlatKeyed([]byte(bad)); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}

func TestParsePids(t *testing.T) {
	got, err := parsePids([]byte("1\n4242\n77\n"))
	if err != nil || !slices.Equal(got, []int{1, 4242, 77}) {
		t.Fatalf("got %v, %v", got, err)
	}
	for _, bad := range []string{"x\n", "0\n", "-3\n", "1 2\n"} {
		if _, err := parsePids([]byte(bad)); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}

func TestParseSingleInt(t *testing.T) {
	for in, want := range map[string]int64{"max\n": -1, "33554432\n": 33554432, "0": 0} {
		if got, err := parseSingleInt([]byte(in)); err != nil || got != want {
			t.Errorf("%q: got %d, %v", in, got, err)
		}
	}
	for _, bad := range []string{"", "-1", "12 34", "maxi"} {
		if _, err := parseSingleInt([]byte(bad)); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}

func TestParseStartTime(t *testing.T) {
	stat := func(comm string) string {
		// Fields 3..22 and a few more; starttime (field 22) is 987654.
		return fmt.Sprintf("4242 (%s) S 1 4242 4242 0 -1 4194560 1180 0 0 0 3 1 0 0 20 0 1 0 987654 8417280 1049 18446744073709551615", comm)
	}
	for _, comm := range []string{"sleep", "a b", "x) S 1 2 3 (y", "))"} {
		got, err := parseStartTime([]byte(stat(comm)))
		if err != nil || got != 987654 {
			t.Errorf("comm %q: got %d, %v", comm, got, err)
		}
	}
	for _, bad := range []string{"", "4242 sleep S 1", "4242 (sleep) S 1 2 3", stat("a")[:60]} {
		if _, err := parseStartTime([]byte(bad)); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}

func TestParseParentName(t *testing.T) {
	tests := []struct {
		name, prefix string
		pid          int
		start        uint64
		ok           bool
	}{
		{"b10x-4242-987654", "b10x", 4242, 987654, true},
		{"b10x-probe-4242-9", "b10x-probe", 4242, 9, true},
		{"b10x-probe-4242-9", "b10x", 0, 0, false},
		{"b10x-4242", "b10x", 0, 0, false},
		{"b10x-4242-9-1", "b10x", 0, 0, false},
		{"b10x-0-9", "b10x", 0, 0, false},
		{"b10x-+1-9", "b10x", 0, 0, false},
		{"b10x-01-9", "b10x", 0, 0, false},
		{"b10x--9", "b10x", 0, 0, false},
		{"other-1-2", "b10x", 0, 0, false},
		{"b10xtest-1-2", "b10x", 0, 0, false},
	}
	for _, tc := range tests {
		pid, st, ok := parseParentName(tc.name, tc.prefix)
		if pid != tc.pid || st != tc.start || ok != tc.ok {
			t.Errorf("parseParentName(%q, %q) = %d %d %v", tc.name, tc.prefix, pid, st, ok)
		}
	}
	for name, want := range map[string]string{"b10x-1-2": "b10x", "my-ci-1-2": "my-ci", "b10x-1": "", "-1-2": "", "_x-1-2": ""} {
		got, ok := parentPrefix(name)
		if got != want || ok != (want != "") {
			t.Errorf("parentPrefix(%q) = %q %v, want %q", name, got, ok, want)
		}
	}
}

func TestLimitsCheck(t *testing.T) {
	const ms = 1_000_000
	good := []Limits{{}, {PidsMax: 1}, {MemoryMax: 1 << 20}, {CPUQuota: 50 * ms}, {CPUQuota: 2000 * ms, CPUPeriod: 1000 * ms}, {CPUQuota: ms, CPUPeriod: ms}}
	for _, l := range good {
		if _, err := l.check(); err != nil {
			t.Errorf("%+v: %v", l, err)
		}
	}
	bad := map[string]Limits{
		"PidsMax is negative":         {PidsMax: -1},
		"MemoryMax is negative":       {MemoryMax: -1},
		"CPUQuota is negative":        {CPUQuota: -1},
		"CPUPeriod is negative":       {CPUPeriod: -1, CPUQuota: ms},
		"without a CPUQuota":          {CPUPeriod: 100 * ms},
		"outside 1ms..1s":             {CPUQuota: 10 * ms, CPUPeriod: 2000 * ms},
		"below 1ms":                   {CPUQuota: ms / 2},
		"outside 1ms..1s (too short)": {CPUQuota: ms, CPUPeriod: ms / 2},
	}
	for want, l := range bad {
		_, err := l.check()
		if err == nil {
			t.Errorf("%+v accepted", l)
			continue
		}
		if w, _, _ := strings.Cut(want, " ("); !strings.Contains(err.Error(), w) {
			t.Errorf("%+v: error %q does not say %q", l, err, w)
		}
	}
	if p, _ := (Limits{CPUQuota: 5 * ms}).check(); p != DefaultCPUPeriod {
		t.Errorf("default period %v", p)
	}
}

func TestValidName(t *testing.T) {
	for _, n := range []string{"a", "run-1", "call_7.x", "0"} {
		if !validName(n) {
			t.Errorf("rejected %q", n)
		}
	}
	for _, n := range []string{"", ".", "..", "_harness", "-x", "a/b", "a b", "ä", "x\x00"} {
		if validName(n) {
			t.Errorf("accepted %q", n)
		}
	}
	if _, err := (Options{Name: "../up"}).name(); err == nil {
		t.Error("Options.Name ../up accepted")
	}
	if _, err := (Options{Name: strings.Repeat("a", 65)}).name(); err == nil {
		t.Error("65-byte Options.Name accepted")
	}
	if n, err := (Options{}).name(); n != DefaultName || err != nil {
		t.Errorf("zero Options name %q, %v", n, err)
	}
}

func TestWithin(t *testing.T) {
	tests := []struct{ path, root, rel string }{
		{"/a/b", "/", "/a/b"},
		{"/a/b", "/a", "/b"},
		{"/a", "/a", "/"},
		{"/ab", "/a", ""},
		{"/", "/a", ""},
	}
	for _, tc := range tests {
		rel, ok := within(tc.path, tc.root)
		if rel != tc.rel || ok != (tc.rel != "") {
			t.Errorf("within(%q, %q) = %q %v", tc.path, tc.root, rel, ok)
		}
	}
}

// Fuzz targets: the parsers read kernel files but must never panic, and
// what they accept must keep the promises the callers rely on.

func FuzzParseMountInfo(f *testing.F) {
	for _, s := range []string{mountsHybrid, mountsPureV2, mountsV1Only, mountsEscaped, "1 2 3 / / - x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		es, err := parseMountInfo([]byte(s))
		if err != nil {
			return
		}
		for _, e := range es {
			if !strings.HasPrefix(e.Root, "/") || !strings.HasPrefix(e.MountPoint, "/") || e.FSType == "" {
				t.Fatalf("accepted entry %+v", e)
			}
		}
	})
}

func FuzzParseProcCgroup(f *testing.F) {
	for _, s := range []string{"0::/\n", "9:name=systemd:/\n0::/a b\n", "1:cpu:/\n", "0::x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, ok, err := parseProcCgroup([]byte(s))
		if err == nil && ok && !strings.HasPrefix(p, "/") {
			t.Fatalf("accepted relative path %q", p)
		}
		if !ok && p != "" {
			t.Fatalf("path %q without ok", p)
		}
	})
}

func FuzzParseFlatKeyed(f *testing.F) {
	for _, s := range []string{"populated 1\nfrozen 0\n", "usage_usec 1\n", "oom_kill 18446744073709551615\n", "a"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		kv, err := parseFlatKeyed([]byte(s))
		if err != nil {
			return
		}
		// What was accepted must survive printing and parsing again.
		var b strings.Builder
		for _, k := range slices.Sorted(maps.Keys(kv)) {
			fmt.Fprintf(&b, "%s %d\n", k, kv[k])
		}
		again, err := parseFlatKeyed([]byte(b.String()))
		if err != nil || !reflect.DeepEqual(again, kv) {
			t.Fatalf("round trip of %v: %v, %v", kv, again, err)
		}
	})
}

func FuzzParseStat(f *testing.F) {
	f.Add("1 (init) S 0 1 1 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 5 0 0 0")
	f.Add("4242 (a) b)) R 1")
	f.Fuzz(func(t *testing.T, s string) {
		_, _ = parseStartTime([]byte(s))
		_, _ = parsePids([]byte(s))
		_, _ = parseSingleInt([]byte(s))
	})
}

func FuzzParseParentName(f *testing.F) {
	f.Add("b10x-1-2", "b10x")
	f.Add("b10x-probe-77-12345", "b10x-probe")
	f.Fuzz(func(t *testing.T, name, prefix string) {
		pid, st, ok := parseParentName(name, prefix)
		if ok && fmt.Sprintf("%s-%d-%d", prefix, pid, st) != name {
			t.Fatalf("%q with prefix %q parsed as %d %d", name, prefix, pid, st)
		}
		if p, ok := parentPrefix(name); ok && !validName(p) {
			t.Fatalf("parentPrefix(%q) = %q, not a valid name", name, p)
		}
	})
}

func TestReleaseAtLeast(t *testing.T) {
	for _, c := range []struct {
		release string
		want    bool
	}{
		{"5.2.0", true}, {"5.1.21-foo", false}, {"6.1.0-57-amd64", true}, {"4.19.0", false},
		{"5.10", true}, {"10.0", true}, {"", false}, {"x.y", false}, {"5", false},
	} {
		if got := releaseAtLeast(c.release, 5, 2); got != c.want {
			t.Errorf("releaseAtLeast(%q, 5, 2) = %t, want %t", c.release, got, c.want)
		}
	}
}
