package spawn

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/b10x/harness/confine"
	"github.com/b10x/harness/confine/spawn/internal/helper"
	"github.com/b10x/harness/internal/reexec"
)

func TestWireRoundTrip(t *testing.T) {
	s := Spec{Program: Pinned{Path: "/p", Dev: 7, Ino: 8}, Argv: []string{"", "a b"}, Env: []string{"X=y"}, Dir: "/d", Workspace: Pinned{Path: "/w", Dev: 1, Ino: 2, Dir: true}, ReadPaths: []Pinned{{Path: "/r", Dev: 3, Ino: 1 << 40}}, WritePaths: []Pinned{{Path: "/x", Dev: 4, Ino: 5, Dir: true}, {Path: "/y", Ino: 6}}, Net: true, Timeout: 3 * time.Second, TmpSize: 8, ReadOnly: []string{"/w/.git", "/w/h"}, Anchored: []string{"/w/a"}, Masked: []string{"/w/.env"}, HeldIDs: map[string]FileID{"/w/.env": {Dev: 9, Ino: 1 << 50}, "/w/.git": {Dev: 9, Ino: 3}}, Grace: 2 * time.Second}
	s.Limits.PidsMax, s.Limits.MemoryMax, s.Limits.CPUQuota, s.Limits.CPUPeriod = 5, 6, time.Millisecond, time.Second
	var e helper.Encoder
	encodeSpec(&e, s)
	d := helper.Decoder{B: e.B}
	if gs := decodeSpec(&d); d.End() != nil || !reflect.DeepEqual(gs, s) {
		t.Fatalf("spec round trip: %+v, %v", gs, d.Err)
	}
	r := Result{ExitCode: -1, Signal: "SIGKILL", TimedOut: true, OOMKilled: true, Duration: time.Second, MemoryPeak: 7, PidsPeak: -1, Layers: []string{"a", "b"}, HostUID: 1000, HostGID: 65534, LockedView: true, DomainName: "b10x0123456789a", SeccompAttributed: true, SeccompRefused: []string{"mount", "socket(AF_PACKET)"}, SeccompRefusedAll: 3, NoRouteCounted: true, NoRoute: 100002, MaskedWatched: true, MaskedOpened: []string{"/etc/shadow", "/w/.env"}}
	e = helper.Encoder{}
	encodeResult(&e, r)
	d = helper.Decoder{B: e.B}
	if gr := decodeResult(&d); d.End() != nil || !reflect.DeepEqual(gr, r) {
		t.Fatalf("result round trip: %+v", gr)
	}
	e = helper.Encoder{}
	e.Error(fmt.Errorf("open x: %w", syscall.EACCES))
	d = helper.Decoder{B: e.B}
	if ge := d.Error(); !errors.Is(ge, syscall.EACCES) || ge.Error() != "open x: permission denied" {
		t.Fatalf("error round trip: %v", ge)
	}
}

func TestCapture(t *testing.T) {
	c := NewCapture(10)
	c.Write([]byte("hello"))
	if string(c.Bytes()) != "hello" || c.Total() != 5 || c.Cut() != 0 {
		t.Fatalf("%q %d", c.Bytes(), c.Total())
	}
	c.Write([]byte("world"))
	if string(c.Bytes()) != "helloworld" {
		t.Fatalf("%q", c.Bytes())
	}
	c.Write([]byte("0123456789AB"))
	want := "hello\n[... 12 bytes cut ...]\n789AB"
	if string(c.Bytes()) != want || c.Total() != 22 || c.Cut() != 12 {
		t.Fatalf("got %q (total %d), want %q", c.Bytes(), c.Total(), want)
	}
	var z Capture
	z.Write([]byte("abc"))
	if z.Total() != 3 || string(z.Bytes()) != "\n[... 3 bytes cut ...]\n" {
		t.Fatalf("zero Capture: %q", z.Bytes())
	}
}

// TestCaptureMatchesNaive compares Capture with keeping everything, over
// random write sizes.
func TestCaptureMatchesNaive(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for iter := 0; iter < 300; iter++ {
		max := rng.Intn(40)
		c := NewCapture(max)
		var all []byte
		for w := rng.Intn(20); w > 0; w-- {
			p := make([]byte, rng.Intn(30))
			rng.Read(p)
			if n, err := c.Write(p); n != len(p) || err != nil {
				t.Fatal(n, err)
			}
			all = append(all, p...)
		}
		var want []byte
		if len(all) <= max {
			want = all
		} else {
			h, tl := max-max/2, max/2
			want = append(append(slices.Clone(all[:h]), fmt.Sprintf("\n[... %d bytes cut ...]\n", len(all)-h-tl)...), all[len(all)-tl:]...)
		}
		if !bytes.Equal(c.Bytes(), want) || c.Total() != int64(len(all)) {
			t.Fatalf("max %d, %d bytes: got %q want %q", max, len(all), c.Bytes(), want)
		}
	}
}

func TestScanMasksAndWatch(t *testing.T) {
	root := t.TempDir()
	mk := func(rel string, mode os.FileMode, dir bool) {
		p := filepath.Join(root, rel)
		if dir {
			if err := os.Mkdir(p, 0o755); err != nil {
				t.Fatal(err)
			}
		} else if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}
	mk("public", 0o644, false)
	mk("shadow", 0o640, false)
	mk("ssl", 0o755, true)
	mk("ssl/private", 0o700, true)
	mk("ssl/certs", 0o755, true)
	mk("ssl/certs/key.pem", 0o600, false)
	mk("ssl/certs/ca.pem", 0o644, false)
	if err := os.Symlink("shadow", filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	m := newEtcMasks(root)
	defer m.close()
	got, err := m.get()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{root + "/shadow", root + "/ssl/certs/key.pem", root + "/ssl/private/"}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("masks %q, want %q", got, want)
	}
	if m.fd >= 0 {
		t.Fatal("the first scan set a watch (a single spawn never uses it)")
	}
	// Between the unwatched first scan and the second call: seen, because
	// the second call scans again, this time watched.
	mk("late.key", 0o600, false)
	got, _ = m.get()
	if !slices.Contains(got, root+"/late.key") || m.fd < 0 || m.scans != 2 {
		t.Fatalf("second get: %q (watch fd %d, %d scans)", got, m.fd, m.scans)
	}
	// Unchanged: the same list without a rescan.
	again, _ := m.get()
	if !slices.Equal(again, got) || m.scans != 2 {
		t.Fatalf("third get: %q after %d scans", again, m.scans)
	}
	// A mode change deep in the tree is seen.
	if err := os.Chmod(filepath.Join(root, "ssl/certs/ca.pem"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, _ = m.get()
	if !slices.Contains(got, root+"/ssl/certs/ca.pem") {
		t.Fatalf("chmod not seen: %q", got)
	}
	// A new secret is seen.
	mk("ssl/new.key", 0o600, false)
	got, _ = m.get()
	if !slices.Contains(got, root+"/ssl/new.key") {
		t.Fatalf("new file not seen: %q", got)
	}
}

func TestBuildView(t *testing.T) {
	ws := workspace(t)
	extra := workspace(t)
	wdir := filepath.Join(extra, "w")
	if err := os.Mkdir(wdir, 0o755); err != nil {
		t.Fatal(err)
	}
	prog := filepath.Join(extra, "prog")
	if err := os.WriteFile(prog, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(extra, "link")
	if err := os.Symlink("w", link); err != nil {
		t.Fatal(err)
	}
	s := Spec{Program: pin(t, prog), Argv: []string{"p"}, Dir: ws, Workspace: pin(t, ws), ReadPaths: []Pinned{pin(t, link), pin(t, ws)}, WritePaths: []Pinned{pin(t, wdir)}}
	ops, rules, err := buildView(s, []string{"/etc/shadow", "/etc/ssl/private/", filepath.Join(wdir, "masked")})
	if err != nil {
		t.Fatal(err)
	}
	byDst := map[string]helper.Mount{}
	for i, op := range ops {
		if _, dup := byDst[op.Dst]; dup {
			t.Fatalf("two mounts at %s", op.Dst)
		}
		byDst[op.Dst] = op
		for _, later := range ops[i+1:] {
			if op.Dst != "/" && within(op.Dst, later.Dst) && op.Dst != later.Dst {
				t.Fatalf("%s comes before its parent %s", op.Dst, later.Dst)
			}
		}
	}
	if op := byDst[ws]; op.Kind != helper.Bind || op.RO {
		t.Errorf("workspace: %+v, want a read-write bind (read path of the same directory must not make it read-only)", op)
	}
	if op := byDst[wdir]; op.Kind != helper.Bind || op.RO {
		t.Errorf("write path (named through a link to it): %+v", op)
	}
	if op := byDst[prog]; op.Kind != helper.Bind || !op.RO || !op.File {
		t.Errorf("program outside every directory of the view: %+v, want a read-only file bind", op)
	}
	if op := byDst["/etc/shadow"]; op.Kind != helper.MaskFile {
		t.Errorf("/etc/shadow: %+v, want masked", op)
	}
	if op := byDst["/etc/ssl/private"]; op.Kind != helper.MaskDir || !op.RO {
		t.Errorf("/etc/ssl/private: %+v, want a read-only empty directory", op)
	}
	if _, ok := byDst[filepath.Join(wdir, "masked")]; ok {
		t.Errorf("a mask beneath a path the Spec named was kept")
	}
	for _, d := range []string{"/proc", "/tmp", "/dev", "/dev/null", "/dev/shm"} {
		if _, ok := byDst[d]; !ok {
			t.Errorf("the view lacks %s", d)
		}
	}
	if !slices.Contains(rules, llRule{Path: ws, Dir: true, Kind: llWrite}) || !slices.Contains(rules, llRule{Path: prog, Kind: llRead}) {
		t.Errorf("rules %+v lack the workspace or the program", rules)
	}

	for _, bad := range []string{"/", "/proc/self", "/dev"} {
		if p, err := Pin(bad); err == nil {
			t.Errorf("Pin(%s) = %+v, want an error", bad, p)
		}
		s2 := s
		s2.ReadPaths = []Pinned{{Path: bad, Ino: 1, Dir: true}}
		if _, _, err := buildView(s2, nil); err == nil {
			t.Errorf("read path %v accepted", bad)
		}
	}
}

func TestRequirements(t *testing.T) {
	base := Requirements{}.required(Spec{}, false)
	for _, l := range []string{confine.LayerLandlockChild, confine.LayerPidNS, confine.LayerMountNS, confine.LayerNetNS, confine.LayerUserNS, confine.LayerSeccomp, confine.LayerNoNewPrivs} {
		if !slices.Contains(base, l) {
			t.Errorf("baseline lacks %s: %v", l, base)
		}
	}
	if slices.Contains(Requirements{}.required(Spec{Net: true}, true), confine.LayerNetNS) {
		t.Error("Net true still requires a network namespace")
	}
	if slices.Contains(Requirements{}.required(Spec{}, true), confine.LayerUserNS) {
		t.Error("root requires a user namespace by default")
	}
	r := Requirements{Layers: []string{confine.LayerCgroupLeaf}, AllowMissing: []string{confine.LayerLandlockChild}}.required(Spec{}, true)
	if !slices.Contains(r, confine.LayerCgroupLeaf) || slices.Contains(r, confine.LayerLandlockChild) {
		t.Errorf("requirements %v", r)
	}
	if !strings.Contains(strings.Join(orderLayers([]string{"seccomp", "pidns", "seccomp", "bogus"}), ","), "pidns,seccomp") {
		t.Error("orderLayers")
	}
}

// TestHelperArgv0: the helper package recognises its argv[0] without
// importing internal/reexec; it must be the one reexec.Command sets.
func TestHelperArgv0(t *testing.T) {
	if got := reexec.Command(helperEntry).Args[0]; got != helper.Argv0 {
		t.Fatalf("reexec.Command(%q).Args[0] = %q, helper.Argv0 = %q", helperEntry, got, helper.Argv0)
	}
}

// TestLandlockPlan: the access masks the helper gets stay within what the
// ABI handles, files get file rights only, and nothing creates devices.
func TestLandlockPlan(t *testing.T) {
	rules := []llRule{{"/", true, llList}, {"/usr", true, llRead}, {"/w", true, llWrite}, {"/prog", false, llRead}, {"/dev/null", false, llDev}}
	for _, abi := range []int{1, 2, 3, 5, 6, 7, 12} {
		var p helper.Plan
		if err := landlockPlan(&p, abi, rules); err != nil {
			t.Fatalf("ABI %d: %v", abi, err)
		}
		if (p.LandlockScoped != 0) != (abi >= 6) {
			t.Errorf("ABI %d: scoped %#x", abi, p.LandlockScoped)
		}
		const makeDev = 1<<6 | 1<<11                        // MAKE_CHAR, MAKE_BLOCK
		const fileOnly = 1<<0 | 1<<1 | 1<<2 | 1<<14 | 1<<15 // EXECUTE, WRITE_FILE, READ_FILE, TRUNCATE, IOCTL_DEV
		for i, r := range p.Rules {
			if r.Access&^p.LandlockFS != 0 || r.Access&makeDev != 0 {
				t.Errorf("ABI %d: rule %s grants %#x beyond handled %#x or device creation", abi, r.Path, r.Access, p.LandlockFS)
			}
			if !rules[i].Dir && r.Access&^fileOnly != 0 {
				t.Errorf("ABI %d: file rule %s grants directory rights %#x", abi, r.Path, r.Access)
			}
		}
	}
	if err := landlockPlan(&helper.Plan{}, 0, rules); err == nil {
		t.Error("ABI 0 accepted")
	}
}

// TestPathnameSocketRule builds the child's Landlock plan for every ABI
// (a fake ABI: no kernel with ABI 9 is needed): from ABI 9 the domain
// handles resolve_unix (1<<16, the kernel's LANDLOCK_ACCESS_FS_RESOLVE_UNIX)
// and no rule grants it, so a socket made outside the call cannot be
// reached; below ABI 9 the right does not exist and the declaration says
// sockets are not confined.
func TestPathnameSocketRule(t *testing.T) {
	const resolveUnix = 1 << 16
	rules := []llRule{{"/", true, llList}, {"/usr", true, llRead}, {"/w", true, llWrite}, {"/prog", false, llRead}, {"/dev/null", false, llDev}}
	for abi := 0; abi <= maxKnownABI+1; abi++ {
		scoped := abi >= 9
		if got := PathnameSocketsScoped(abi); got != scoped {
			t.Errorf("ABI %d: PathnameSocketsScoped = %v, want %v", abi, got, scoped)
		}
		decl := PathnameSockets(abi)
		if strings.Contains(decl, "NOT confined") == scoped {
			t.Errorf("ABI %d: declaration %q", abi, decl)
		}
		if abi == 0 {
			continue
		}
		var p helper.Plan
		if err := landlockPlan(&p, abi, rules); err != nil {
			t.Fatalf("ABI %d: %v", abi, err)
		}
		if (p.LandlockFS&resolveUnix != 0) != scoped {
			t.Errorf("ABI %d: handled %#x, resolve_unix handled: %v, want %v", abi, p.LandlockFS, p.LandlockFS&resolveUnix != 0, scoped)
		}
		for _, r := range p.Rules {
			if r.Access&resolveUnix != 0 {
				t.Errorf("ABI %d: rule %s grants resolve_unix", abi, r.Path)
			}
		}
	}
}

// TestBuildViewResolvConf: with the host's network, a resolv.conf linking
// out of the view brings its target; without, it does not.
func TestBuildViewResolvConf(t *testing.T) {
	dir := workspace(t)
	target := filepath.Join(dir, "run", "stub-resolv.conf")
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(target, []byte("nameserver 127.0.0.53\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "resolv.conf")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	old := resolvConf
	resolvConf = link
	defer func() { resolvConf = old }()
	ws := workspace(t)
	s := Spec{Program: pin(t, lookPath(t, "true")), Argv: []string{"true"}, Dir: ws, Workspace: pin(t, ws)}
	for _, net := range []bool{false, true} {
		s.Net = net
		ops, _, err := buildView(s, nil)
		if err != nil {
			t.Fatal(err)
		}
		found := slices.ContainsFunc(ops, func(m helper.Mount) bool { return m.Dst == target && m.Kind == helper.Bind && m.RO })
		if found != net {
			t.Errorf("Net %v: resolver target bound = %v", net, found)
		}
	}
}

// TestScanMasksMatchesWalk checks the scan of the real /etc against an
// independent walk with the standard library: the same entries are hidden.
func TestScanMasksMatchesWalk(t *testing.T) {
	var want []string
	err := filepath.WalkDir("/etc", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if d != nil && d.IsDir() {
				want = append(want, p+"/")
				return fs.SkipDir
			}
			return nil
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return nil
		}
		m := fi.Mode()
		switch {
		case m&fs.ModeSymlink != 0:
		case m.IsDir():
			if m.Perm()&0o005 != 0o005 {
				want = append(want, p+"/")
				return fs.SkipDir
			}
		case m.Perm()&0o004 == 0:
			want = append(want, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := scanMasks("/etc", -1)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("scan of /etc hides %q, the walk %q", got, want)
	}
	t.Logf("%d entries of /etc hidden", len(got))
}

// TestScanMasksNeedReadAndSearch: a directory of /etc stays visible only
// when every user may both list it (r) and enter it (x); one that others
// may only list, or only enter, is hidden whole, /etc itself included,
// and so is a file others may not read.
func TestScanMasksNeedReadAndSearch(t *testing.T) {
	root := t.TempDir()
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, d := range []struct {
		rel  string
		mode os.FileMode
	}{{"listonly", 0o754}, {"enteronly", 0o751}, {"open", 0o755}, {"open/listonly", 0o744}, {"open/sub", 0o705}} {
		p := filepath.Join(root, d.rel)
		if err := os.Mkdir(p, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, d.mode); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []struct {
		rel  string
		mode os.FileMode
	}{{"open/readable", 0o644}, {"open/private", 0o640}, {"open/sub/writeonly", 0o602}} {
		p := filepath.Join(root, f.rel)
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, f.mode); err != nil {
			t.Fatal(err)
		}
	}
	got, err := scanMasks(root, -1)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{root + "/enteronly/", root + "/listonly/", root + "/open/listonly/", root + "/open/private", root + "/open/sub/writeonly"}
	if !slices.Equal(got, want) {
		t.Fatalf("masks %q, want %q", got, want)
	}
	for _, mode := range []os.FileMode{0o754, 0o751, 0o750} {
		if err := os.Chmod(root, mode); err != nil {
			t.Fatal(err)
		}
		got, err := scanMasks(root, -1)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, []string{root + "/"}) {
			t.Errorf("root of mode %o: masks %q, want the root itself", mode, got)
		}
	}
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
}
