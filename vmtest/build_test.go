package main

import (
	"bytes"
	"debug/elf"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/b10x/harness/vmtest/internal/cpio"
	"github.com/b10x/harness/vmtest/internal/protocol"
)

func TestSelectPackages(t *testing.T) {
	const root = "/src/harness"
	list := `{"ImportPath":"github.com/b10x/harness/confine","Dir":"/src/harness/confine","Module":{"Path":"github.com/b10x/harness","Dir":"/src/harness"},"TestGoFiles":["a_test.go"]}
{"ImportPath":"github.com/b10x/harness/cgroup","Dir":"/src/harness/cgroup","Module":{"Path":"github.com/b10x/harness","Dir":"/src/harness"}}
{"ImportPath":"github.com/b10x/harness/tools","Dir":"/src/harness/tools","Module":{"Path":"github.com/b10x/harness","Dir":"/src/harness"},"XTestGoFiles":["x_test.go"]}
{"ImportPath":"github.com/b10x/harness/vmtest","Dir":"/src/harness/vmtest","Module":{"Path":"github.com/b10x/harness","Dir":"/src/harness"},"TestGoFiles":["a_test.go"]}
{"ImportPath":"github.com/b10x/harness/vmtest/internal/cpio","Dir":"/src/harness/vmtest/internal/cpio","Module":{"Path":"github.com/b10x/harness","Dir":"/src/harness"},"TestGoFiles":["a_test.go"]}
{"ImportPath":"github.com/b10x/harness/vmtestish","Dir":"/src/harness/vmtestish","Module":{"Path":"github.com/b10x/harness","Dir":"/src/harness"},"TestGoFiles":["a_test.go"]}
{"ImportPath":"fmt","Dir":"/usr/local/go/src/fmt","TestGoFiles":["a_test.go"]}
{"ImportPath":"example.com/other","Dir":"/other","Module":{"Path":"example.com/other","Dir":"/other"},"TestGoFiles":["a_test.go"]}
`
	got, err := selectPackages([]byte(list), root, true)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range got {
		names = append(names, p.ImportPath+"@"+p.Rel)
	}
	want := []string{"github.com/b10x/harness/confine@confine", "github.com/b10x/harness/tools@tools", "github.com/b10x/harness/vmtestish@vmtestish"}
	if !slices.Equal(names, want) {
		t.Errorf("selected %q, want %q", names, want)
	}
	got, err = selectPackages([]byte(list), root, false)
	if err != nil || len(got) != 5 {
		t.Errorf("without skipping vmtest: %d packages (%v), want 5", len(got), err)
	}
	if _, err := selectPackages([]byte(`{"ImportPath":`), root, true); err == nil {
		t.Error("truncated go list output accepted")
	}
}

// The real module: vmtest's own packages are never among the packages
// under test, and the list is not empty.
func TestListPackagesOfThisModule(t *testing.T) {
	t.Parallel()
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	pkgs, err := listPackages(root, []string{"./..."}, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(pkgs) == 0 {
		t.Fatal("no package with tests found in the module")
	}
	for _, p := range pkgs {
		if strings.Contains(p.ImportPath, "/vmtest") {
			t.Errorf("vmtest package %s selected", p.ImportPath)
		}
	}
	self, err := listPackages(root, []string{selftestPattern}, false)
	if err != nil || len(self) != 5 {
		t.Errorf("self-test packages: %d (%v), want 5", len(self), err)
	}
}

func TestBinaryName(t *testing.T) {
	for rel, want := range map[string]string{".": "root.test", "confine": "confine.test", "confine/spawn": "confine_spawn.test", "cmd/b10x-harness": "cmd_b10x-harness.test"} {
		if got := binaryName(rel); got != want {
			t.Errorf("binaryName(%q) = %q, want %q", rel, got, want)
		}
	}
}

func TestInitramfsLayout(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string, perm os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), perm); err != nil {
			t.Fatal(err)
		}
		return p
	}
	initBin := write("init", "INIT", 0o755)
	bb := write("busybox", "BUSYBOX", 0o755)
	bin := write("build/confine_spawn.test", "TESTBIN", 0o755)
	mod := filepath.Join(dir, "mod")
	write("mod/go.mod", "module m", 0o644)
	write("mod/confine/spawn/spawn_test.go", "package spawn", 0o644)
	write("mod/confine/spawn/testdata/deep/run.sh", "#!/bin/sh", 0o755)
	write("mod/examples/a.jsonl", "{}", 0o644)
	if err := os.Symlink("deep/run.sh", filepath.Join(mod, "confine/spawn/testdata/link")); err != nil {
		t.Fatal(err)
	}
	files := []string{"confine/spawn/spawn_test.go", "confine/spawn/testdata/deep/run.sh", "confine/spawn/testdata/link", "examples/a.jsonl", "go.mod"}
	pkgs := []testPkg{{ImportPath: "m/confine/spawn", Dir: filepath.Join(mod, "confine/spawn"), Rel: "confine/spawn", Binary: bin}}
	cfg := protocol.Config{Run: "TestX", TimeoutSeconds: 60, SrcRoot: "/src", Packages: []protocol.Package{{ImportPath: "m/confine/spawn", Binary: "/tests/confine_spawn.test", Dir: "confine/spawn"}}}
	out := filepath.Join(dir, "initramfs.cpio")
	veth := write("kmod/veth.ko.xz", "VETH", 0o644)
	write("payload/bin/kubelet", "KUBELET", 0o755)
	write("payload/etc/conf", "CONF", 0o600)
	if err := os.Symlink("kubelet", filepath.Join(dir, "payload/bin/k")); err != nil {
		t.Fatal(err)
	}
	pl, err := parsePayload(filepath.Join(dir, "payload") + "=/opt/k8s/p")
	if err != nil {
		t.Fatal(err)
	}
	spec := initramfsSpec{Init: initBin, Busybox: bb, Applets: []string{"sh", "sleep", "["}, Packages: pkgs, Config: cfg, ModRoot: mod, Files: files,
		Modules: map[string][]string{"6.18.15+deb13-amd64": {veth}}, Payload: []payload{pl}}
	if err := writeInitramfs(out, spec); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	ents, err := cpio.ReadAll(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]cpio.Entry{}
	for _, e := range ents {
		got[e.Name] = e
	}
	check := func(name string, ok func(e cpio.Entry) bool, what string) {
		t.Helper()
		e, found := got[name]
		if !found {
			t.Errorf("%s missing", name)
			return
		}
		if !ok(e) {
			t.Errorf("%s: want %s, got mode %v link %q data %q uid %d", name, what, e.Mode, e.Linkname, e.Data, e.UID)
		}
	}
	isFile := func(content string, perm fs.FileMode) func(cpio.Entry) bool {
		return func(e cpio.Entry) bool { return e.Mode == perm && string(e.Data) == content }
	}
	isLink := func(target string) func(cpio.Entry) bool {
		return func(e cpio.Entry) bool { return e.Mode.Type() == fs.ModeSymlink && e.Linkname == target }
	}
	isDir := func(e cpio.Entry) bool { return e.Mode.IsDir() }
	check("init", isFile("INIT", 0o755), "the guest init, executable")
	check("dev/console", func(e cpio.Entry) bool {
		return e.Mode.Type() == fs.ModeDevice|fs.ModeCharDevice && e.Major == 5 && e.Minor == 1
	}, "char device 5:1")
	check("usr/bin/busybox", isFile("BUSYBOX", 0o755), "busybox")
	check("usr/bin/sh", isLink("busybox"), "applet link")
	check("usr/bin/[", isLink("busybox"), "applet link")
	check("bin", isLink("usr/bin"), "merged-/usr link")
	check("sbin", isLink("usr/sbin"), "merged-/usr link")
	check("usr/sbin", isLink("bin"), "link to usr/bin")
	check("lib64", isLink("usr/lib64"), "merged-/usr link")
	check("tmp", func(e cpio.Entry) bool { return e.Mode == fs.ModeDir|fs.ModeSticky|0o777 }, "sticky world-writable dir")
	check("home/tester", func(e cpio.Entry) bool { return e.Mode.IsDir() && e.UID == protocol.UnprivilegedUID }, "owned by the test user")
	check("etc/passwd", func(e cpio.Entry) bool { return strings.Contains(string(e.Data), "tester:x:1000:1000:") }, "the test user")
	check("tests/confine_spawn.test", isFile("TESTBIN", 0o755), "the test binary")
	check("src/go.mod", isFile("module m", 0o644), "module file")
	check("src/confine/spawn/spawn_test.go", isFile("package spawn", 0o644), "package file")
	check("src/confine/spawn/testdata/deep", isDir, "testdata dir")
	check("src/confine/spawn/testdata/deep/run.sh", isFile("#!/bin/sh", 0o755), "testdata file, mode kept")
	check("src/confine/spawn/testdata/link", isLink("deep/run.sh"), "testdata symlink kept as a link")
	check("src/examples/a.jsonl", isFile("{}", 0o644), "a file outside the package, reached by ../..")
	check("usr/lib/modules/6.18.15+deb13-amd64/veth.ko.xz", isFile("VETH", 0o644), "a kernel module under its release")
	check("opt/k8s", isDir, "the payload's parent, made")
	check("opt/k8s/p/bin/kubelet", isFile("KUBELET", 0o755), "a payload file, mode kept")
	check("opt/k8s/p/etc/conf", isFile("CONF", 0o600), "a payload file, mode kept")
	check("opt/k8s/p/bin/k", isLink("kubelet"), "a payload symlink kept as a link")
	c, ok := got["etc/vmtest.json"]
	if !ok {
		t.Fatal("etc/vmtest.json missing")
	}
	back, err := protocol.ParseConfig(c.Data)
	if err != nil || back.Run != "TestX" || len(back.Packages) != 1 || back.Packages[0].Binary != "/tests/confine_spawn.test" {
		t.Errorf("config read back as %+v, %v", back, err)
	}
}

// moduleFiles in a real git work tree: tracked and untracked-but-not-ignored
// files are packed; ignored, deleted and oversized ones are not.
func TestModuleFiles(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatalf("git is needed (the module is a git clone): %v", err)
	}
	dir := t.TempDir()
	run := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@invalid", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@invalid")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	put := func(name string, size int) {
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, bytes.Repeat([]byte("x"), size), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run("init", "-q")
	put(".gitignore", 0)
	os.WriteFile(filepath.Join(dir, ".gitignore"), []byte("/.cache/\n*.test\n"), 0o644)
	put("go.mod", 10)
	put("a/tracked.go", 10)
	put("a/gone.go", 10)
	run("add", ".")
	run("commit", "-q", "-m", "x")
	os.Remove(filepath.Join(dir, "a/gone.go"))
	put("a/new.go", 10)
	put("a/a.test", 10)
	put(".cache/vmtest/big", 10)
	put("huge.bin", maxPackedFile+1)
	files, skipped, err := moduleFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{".gitignore", "a/new.go", "a/tracked.go", "go.mod"}; !slices.Equal(files, want) {
		t.Errorf("files %q, want %q", files, want)
	}
	if len(skipped) != 1 || !strings.HasPrefix(skipped[0], "huge.bin") {
		t.Errorf("skipped %q, want huge.bin only", skipped)
	}
	// Without git (a tarball of the module): walk, skipping hidden
	// directories and bin/.
	os.RemoveAll(filepath.Join(dir, ".git"))
	put("bin/tool", 10)
	files, _, err = moduleFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{".gitignore", "a/a.test", "a/new.go", "a/tracked.go", "go.mod"}; !slices.Equal(files, want) {
		t.Errorf("without git: files %q, want %q", files, want)
	}
}

// The probe image holds only what the probe boot needs.
func TestProbeInitramfs(t *testing.T) {
	dir := t.TempDir()
	initBin := filepath.Join(dir, "init")
	if err := os.WriteFile(initBin, []byte("INIT"), 0o755); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "probe.cpio")
	if err := writeInitramfs(out, initramfsSpec{Init: initBin}); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(out)
	ents, err := cpio.ReadAll(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name)
	}
	for _, want := range []string{"init", "dev/console", "proc", "sys", "tmp"} {
		if !slices.Contains(names, want) {
			t.Errorf("probe image lacks %s (has %q)", want, names)
		}
	}
	if slices.Contains(names, "usr/bin/busybox") || len(b) > 4096 {
		t.Errorf("probe image carries more than it needs: %d bytes, %q", len(b), names)
	}
}

func TestInitramfsMissingInput(t *testing.T) {
	dir := t.TempDir()
	err := writeInitramfs(filepath.Join(dir, "x.cpio"), initramfsSpec{Init: filepath.Join(dir, "absent")})
	if err == nil || !strings.Contains(err.Error(), "absent") {
		t.Fatalf("writeInitramfs with a missing init = %v, want an error naming it", err)
	}
}

func TestNewestKernelPkg(t *testing.T) {
	got, ok := newestKernelPkg([]string{"linux-image-6.1.0-9-amd64", "linux-image-6.1.0-57-amd64 ", "linux-image-6.1.0-100-amd64-unsigned", "linux-image-6.1.0-48-amd64", "linux-image-6.1.0-7-cloud-amd64", "linux-image-amd64"})
	if !ok || got != "linux-image-6.1.0-57-amd64" {
		t.Errorf("newest = %q, %v; want linux-image-6.1.0-57-amd64 (numeric, not lexical order)", got, ok)
	}
	if got, ok := newestKernelPkg([]string{"linux-image-amd64", ""}); ok {
		t.Errorf("found %q among no kernel images", got)
	}
}

func TestNewest612KernelPkg(t *testing.T) {
	names := []string{"linux-image-6.12.9+deb12-amd64", "linux-image-6.12.90+deb12-amd64", "linux-image-6.12.90+deb12.1-amd64",
		"linux-image-6.12.95+deb12-cloud-amd64", "linux-image-6.12.96+deb12-amd64-unsigned", "linux-image-6.12.95+deb12-rt-amd64",
		"linux-image-6.1.0-57-amd64", "linux-image-amd64"}
	if got, ok := series612.newest(names); !ok || got != "linux-image-6.12.90+deb12.1-amd64" {
		t.Errorf("newest 6.12 = %q, %v; want linux-image-6.12.90+deb12.1-amd64 (numeric, revision counted, flavours and -unsigned left out)", got, ok)
	}
	if got, ok := series61.newest(names); !ok || got != "linux-image-6.1.0-57-amd64" {
		t.Errorf("newest 6.1 = %q, %v", got, ok)
	}
	for pkg, want := range map[string]string{"linux-image-6.1.0-48-amd64": "6.1", "linux-image-6.12.95+deb12-amd64": "6.12", "linux-image-6.12.95+deb12-rt-amd64": ""} {
		sr, ok := seriesOf(pkg)
		if sr.Name != want || ok != (want != "") {
			t.Errorf("seriesOf(%q) = %q, %v; want %q", pkg, sr.Name, ok, want)
		}
	}
}

func TestKernelPkgsFlag(t *testing.T) {
	got, err := kernelPkgs("linux-image-6.12.95+deb12-amd64, linux-image-6.1.0-48-amd64")
	if err != nil || got["6.1"] != "linux-image-6.1.0-48-amd64" || got["6.12"] != "linux-image-6.12.95+deb12-amd64" || len(got) != 2 {
		t.Errorf("kernelPkgs = %v, %v", got, err)
	}
	for _, bad := range []string{"linux-image-6.1.0-48-amd64,linux-image-6.1.0-57-amd64", "linux-image-amd64"} {
		if got, err := kernelPkgs(bad); err == nil {
			t.Errorf("kernelPkgs(%q) = %v, want an error", bad, got)
		}
	}
}

func TestMirrorFrom(t *testing.T) {
	lines := "Debian bookworm-security bookworm-security http://deb.debian.org/debian-security/\n" +
		"Debian bookworm-updates bookworm-updates http://mirror.example/debian/\n" +
		"Debian bookworm bookworm http://mirror.example/debian/\n"
	if got, err := mirrorFrom(lines); err != nil || got != "http://mirror.example/debian/" {
		t.Errorf("mirrorFrom = %q, %v", got, err)
	}
	if got, err := mirrorFrom("Ubuntu noble noble http://archive.example/ubuntu/\n"); err == nil {
		t.Errorf("mirrorFrom without a Debian bookworm suite = %q, want an error", got)
	}
}

func TestConfigValue(t *testing.T) {
	cfg := "# CONFIG_LSM is not set here\nCONFIG_LSM_X=y\nCONFIG_LSM=\"landlock,yama\"\nCONFIG_SECURITY=y\n"
	if got := configValue(cfg, "CONFIG_LSM"); got != "landlock,yama" {
		t.Errorf("CONFIG_LSM = %q", got)
	}
	if got := configValue(cfg, "CONFIG_ABSENT"); got != "" {
		t.Errorf("absent key = %q", got)
	}
}

// extractDeb against a real package built with dpkg-deb: only the picked
// files come out, with their contents.
func TestExtractDeb(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("dpkg-deb"); err != nil {
		t.Fatalf("dpkg-deb is needed to fetch the kernel and is part of every Debian system: %v", err)
	}
	dir := t.TempDir()
	pkg := filepath.Join(dir, "pkg")
	for name, content := range map[string]string{
		"DEBIAN/control":                 "Package: vmtest-fake\nVersion: 1\nArchitecture: amd64\nMaintainer: nobody <nobody@invalid>\nDescription: fake\n",
		"boot/vmlinuz-6.1.0-99-amd64":    "KERNEL",
		"boot/config-6.1.0-99-amd64":     "CONFIG_LSM=\"landlock\"\n",
		"boot/System.map-6.1.0-99-amd64": "MAP",
		"lib/modules/x.ko":               "MODULE",
	} {
		p := filepath.Join(pkg, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	deb := filepath.Join(dir, "fake.deb")
	if out, err := exec.Command("dpkg-deb", "--root-owner-group", "--build", pkg, deb).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb --build: %v\n%s", err, out)
	}
	out := filepath.Join(dir, "out")
	if err := os.Mkdir(out, 0o755); err != nil {
		t.Fatal(err)
	}
	pick := func(name string) string {
		switch {
		case strings.HasPrefix(name, "./boot/vmlinuz-"):
			return "vmlinuz"
		case strings.HasPrefix(name, "./boot/config-"):
			return "config"
		}
		return ""
	}
	if err := extractDeb(deb, out, pick); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(out)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, []string{"config", "vmlinuz"}) {
		t.Errorf("extracted %q, want config and vmlinuz only", names)
	}
	if b, _ := os.ReadFile(filepath.Join(out, "vmlinuz")); string(b) != "KERNEL" {
		t.Errorf("vmlinuz holds %q", b)
	}
	if err := extractDeb(filepath.Join(dir, "absent.deb"), out, pick); err == nil {
		t.Error("extracting a missing .deb succeeded")
	}
}

// buildTests on a scratch module: packages whose names collide still get a
// binary each, a package that does not compile is reported and left out,
// and the others are built as static binaries.
func TestBuildTests(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	files := map[string]string{
		"go.mod":          "module example.com/m\n\ngo 1.26\n",
		"a/x/x_test.go":   "package x\n\nimport \"testing\"\n\nfunc TestA(t *testing.T) {}\n",
		"b/x/x_test.go":   "package x\n\nimport \"testing\"\n\nfunc TestB(t *testing.T) {}\n",
		"bad/bad_test.go": "package bad\n\nfunc TestBad(t *testing.T) { undefined() }\n",
	}
	for name, content := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	pkgs, err := listPackages(root, []string{"./..."}, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(pkgs) != 3 {
		t.Fatalf("listed %d packages, want 3", len(pkgs))
	}
	broken, err := buildTests(root, filepath.Join(root, "out"), "", pkgs)
	if err != nil {
		t.Fatal(err)
	}
	if len(broken) != 1 || !strings.Contains(broken["example.com/m/bad"], "undefined") {
		t.Errorf("broken = %q, want only example.com/m/bad with the compiler's message", broken)
	}
	for _, p := range pkgs {
		switch p.ImportPath {
		case "example.com/m/bad":
			if p.Binary != "" {
				t.Errorf("broken package got a binary %s", p.Binary)
			}
		default:
			out, err := exec.Command(p.Binary, "-test.v").CombinedOutput()
			if err != nil || !strings.Contains(string(out), "--- PASS") {
				t.Errorf("%s: %v\n%s", p.Binary, err, out)
			}
			// Static: no program interpreter, so it runs in a guest without libc.
			f, err := elf.Open(p.Binary)
			if err != nil {
				t.Fatal(err)
			}
			for _, prog := range f.Progs {
				if prog.Type == elf.PT_INTERP {
					t.Errorf("%s has a program interpreter: dynamically linked", p.Binary)
				}
			}
			f.Close()
		}
	}
	if pkgs[0].Binary == pkgs[1].Binary {
		t.Errorf("colliding package names share the binary %s", pkgs[0].Binary)
	}
}

// TestRestrictShapes: -pkgs-in SHAPE=PATTERNS leaves, in SHAPE, only the
// packages PATTERNS match; every other shape still runs everything; a
// pattern matching none of -pkgs is an error, not an empty shape.
func TestRestrictShapes(t *testing.T) {
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	pkgs, err := listPackages(root, []string{"./confine/spawn/internal/..."}, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(pkgs) < 2 {
		t.Fatalf("want at least two packages, got %d", len(pkgs))
	}
	in := map[string][]string{protocol.ShapeNoUserns: {"./confine/spawn/internal/helperimage"}}
	if err := restrictShapes(root, pkgs, in); err != nil {
		t.Fatal(err)
	}
	for _, p := range pkgs {
		named := strings.HasSuffix(p.ImportPath, "/helperimage")
		if p.runsIn(protocol.ShapeNoUserns) != named {
			t.Errorf("%s runs in no-userns: %v", p.ImportPath, p.runsIn(protocol.ShapeNoUserns))
		}
		if !p.runsIn(protocol.ShapeDebian61) || !p.runsIn(protocol.ShapeOrdinary) {
			t.Errorf("%s left out of a shape not named: %v", p.ImportPath, p.Shapes)
		}
	}
	if err := restrictShapes(root, pkgs, map[string][]string{protocol.ShapeCgroupV1: {"./agent/..."}}); err == nil || !strings.Contains(err.Error(), "matches no package of -pkgs") {
		t.Errorf("a pattern outside -pkgs: %v", err)
	}
}

// TestRunInShapes: -run-in SHAPE:PATTERN=REGEXP gives the packages PATTERN
// matches that -test.run in SHAPE only; a pattern matching none of -pkgs,
// or a package the shape does not run (-pkgs-in), is an error.
func TestRunInShapes(t *testing.T) {
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	pkgs, err := listPackages(root, []string{"./confine/spawn/internal/..."}, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := runInShapes(root, pkgs, map[string]string{protocol.ShapeOrdinary + ":./confine/spawn/internal/helperimage": "^TestX$"}); err != nil {
		t.Fatal(err)
	}
	for _, p := range pkgs {
		named := strings.HasSuffix(p.ImportPath, "/helperimage")
		if got := p.RunIn[protocol.ShapeOrdinary]; (got == "^TestX$") != named || p.RunIn[protocol.ShapeDebian61] != "" {
			t.Errorf("%s: RunIn %v", p.ImportPath, p.RunIn)
		}
	}
	if err := runInShapes(root, pkgs, map[string]string{protocol.ShapeOrdinary + ":./agent/...": "x"}); err == nil || !strings.Contains(err.Error(), "matches no package of -pkgs") {
		t.Errorf("a pattern outside -pkgs: %v", err)
	}
	if err := restrictShapes(root, pkgs, map[string][]string{protocol.ShapeCgroupV1: {"./confine/spawn/internal/helper"}}); err != nil {
		t.Fatal(err)
	}
	if err := runInShapes(root, pkgs, map[string]string{protocol.ShapeCgroupV1 + ":./confine/spawn/internal/helperimage": "x"}); err == nil || !strings.Contains(err.Error(), "does not run in") {
		t.Errorf("a package the shape does not run: %v", err)
	}
}

func TestParsePayload(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if p, err := parsePayload(dir + "=/opt/x"); err != nil || p.Host != dir || p.Guest != "/opt/x" {
		t.Errorf("parsePayload: %+v, %v", p, err)
	}
	for _, bad := range []string{dir, "=/opt/x", dir + "=", dir + "=opt/x", dir + "=/opt/../x", dir + "=/", file + "=/opt/x", dir + "/missing=/opt/x"} {
		if _, err := parsePayload(bad); err == nil {
			t.Errorf("parsePayload(%q) accepted it", bad)
		}
	}
}
