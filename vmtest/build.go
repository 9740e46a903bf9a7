package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/b10x/harness/vmtest/internal/cpio"
	"github.com/b10x/harness/vmtest/internal/protocol"
)

// testPkg is a package under test and its built binary.
type testPkg struct {
	ImportPath string
	Dir        string // source directory on the host
	Rel        string // Dir relative to the module root, slash-separated
	Binary     string // built test binary on the host
	// TimeoutSeconds overrides the -timeout flag for this package (self-test).
	TimeoutSeconds int
	// Shapes, when not empty, are the only shapes it runs in (-pkgs-in).
	Shapes []string
	// RunIn is the -test.run it gets in a shape (-run-in).
	RunIn map[string]string
}

// goListPkg is the part of `go list -json` vmtest reads.
type goListPkg struct {
	ImportPath   string
	Dir          string
	Module       *struct{ Path, Dir string }
	TestGoFiles  []string
	XTestGoFiles []string
}

// listPackages lists the packages matching patterns that have test files.
// With skipVmtest it leaves out vmtest itself and everything below it (host
// tools that boot no kernel of their own, and the self-test packages).
func listPackages(modRoot string, patterns []string, skipVmtest bool) ([]testPkg, error) {
	args := append([]string{"list", "-json=ImportPath,Dir,Module,TestGoFiles,XTestGoFiles"}, patterns...)
	cmd := exec.Command("go", args...)
	cmd.Dir = modRoot
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list %s: %w: %s", strings.Join(patterns, " "), err, strings.TrimSpace(stderr.String()))
	}
	return selectPackages(out, modRoot, skipVmtest)
}

// selectPackages decodes go list's JSON stream and keeps the packages with
// tests of the module at modRoot, except, with skipVmtest, vmtest's own.
func selectPackages(listJSON []byte, modRoot string, skipVmtest bool) ([]testPkg, error) {
	var out []testPkg
	dec := json.NewDecoder(bytes.NewReader(listJSON))
	for {
		var p goListPkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			return nil, fmt.Errorf("decode go list output: %w", err)
		}
		if p.Module == nil || filepath.Clean(p.Module.Dir) != filepath.Clean(modRoot) {
			continue
		}
		if skipVmtest && (p.ImportPath == p.Module.Path+"/vmtest" || strings.HasPrefix(p.ImportPath, p.Module.Path+"/vmtest/")) {
			continue
		}
		if len(p.TestGoFiles)+len(p.XTestGoFiles) == 0 {
			continue
		}
		rel, err := filepath.Rel(modRoot, p.Dir)
		if err != nil || strings.HasPrefix(rel, "..") {
			return nil, fmt.Errorf("package %s: directory %s is outside the module root %s", p.ImportPath, p.Dir, modRoot)
		}
		out = append(out, testPkg{ImportPath: p.ImportPath, Dir: p.Dir, Rel: filepath.ToSlash(rel)})
	}
	return out, nil
}

// binaryName is the test binary's file name in the initramfs: unique per
// package, readable in a process list.
func binaryName(rel string) string {
	if rel == "." {
		return "root.test"
	}
	return strings.ReplaceAll(rel, "/", "_") + ".test"
}

// buildTests compiles every package's test binary with CGO_ENABLED=0 (so it
// is static and runs in a guest with no libc), in as few go test -c calls as
// possible: one call builds in parallel and shares work between packages.
// Vet is off: make lint runs it, and it would fail the build for a reason
// that is not the test binary's.
//
// When a call fails, each of its packages is built alone to find which do
// not compile; those are returned with the compiler's output and left out
// (Binary stays ""), and the rest are built. The error is for failures that
// are not a package's own (the output directory, the go command).
func buildTests(modRoot, outDir, ldflags string, pkgs []testPkg) (broken map[string]string, err error) {
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return nil, fmt.Errorf("create %s: %w", outDir, err)
	}
	broken = map[string]string{}
	// go test -c -o DIR/ names each binary after the last element of its
	// import path; packages whose last elements collide go in separate calls.
	var batches [][]int
	for i, p := range pkgs {
		placed := false
		for b, batch := range batches {
			clash := slices.ContainsFunc(batch, func(j int) bool { return path.Base(pkgs[j].ImportPath) == path.Base(p.ImportPath) })
			if !clash {
				batches[b] = append(batch, i)
				placed = true
				break
			}
		}
		if !placed {
			batches = append(batches, []int{i})
		}
	}
	for b, batch := range batches {
		dir := filepath.Join(outDir, fmt.Sprintf("batch%d", b))
		if out, err := goTestC(modRoot, dir, ldflags, pkgs, batch); err != nil {
			if len(batch) == 1 {
				broken[pkgs[batch[0]].ImportPath] = out
				continue
			}
			for _, i := range batch {
				if out, err := goTestC(modRoot, dir, ldflags, pkgs, []int{i}); err != nil {
					broken[pkgs[i].ImportPath] = out
				}
			}
		}
		for _, i := range batch {
			if _, bad := broken[pkgs[i].ImportPath]; bad {
				continue
			}
			built := filepath.Join(dir, path.Base(pkgs[i].ImportPath)+".test")
			dst := filepath.Join(outDir, binaryName(pkgs[i].Rel))
			if err := os.Rename(built, dst); err != nil {
				return nil, fmt.Errorf("test binary of %s: %w", pkgs[i].ImportPath, err)
			}
			pkgs[i].Binary = dst
		}
		_ = os.RemoveAll(dir)
	}
	return broken, nil
}

// goTestC builds the test binaries of pkgs[idx...] into dir, with ldflags
// added to the linker's flags, and returns the go command's output when it
// fails.
func goTestC(modRoot, dir, ldflags string, pkgs []testPkg, idx []int) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("create %s: %w", dir, err)
	}
	// -s -w drops the symbol table and DWARF: a third of the size, and
	// every byte is copied into the guest's RAM. Go's stack traces come from
	// its own tables and stay whole.
	args := []string{"test", "-c", "-vet=off", "-ldflags=" + strings.TrimSpace("-s -w "+ldflags), "-o", dir + "/"}
	for _, i := range idx {
		args = append(args, pkgs[i].ImportPath)
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = modRoot
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Sprintf("go %s: %v\n%s", strings.Join(args, " "), err, out), err
	}
	return "", nil
}

// buildGuestInit compiles vmtest/guestinit as a static binary.
func buildGuestInit(modRoot, out string) error {
	cmd := exec.Command("go", "build", "-trimpath", "-o", out, "./vmtest/guestinit")
	cmd.Dir = modRoot
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./vmtest/guestinit: %w\n%s", err, b)
	}
	return nil
}

// initramfsSpec is everything that goes into the guest's root file system.
type initramfsSpec struct {
	Init     string   // host path of the guest init
	Busybox  string   // host path of the static busybox; "" for the probe image
	Applets  []string // busybox applet names
	Packages []testPkg
	Config   protocol.Config
	ModRoot  string   // the module's root on the host
	Files    []string // module files to pack under /src (see moduleFiles)
	// Modules are kernel modules by kernel release, packed under
	// protocol.ModulesDir/RELEASE/.
	Modules map[string][]string
	Payload []payload // host trees packed at their guest paths
}

// payload is a host directory tree packed into the guest (-payload).
type payload struct {
	Host  string // absolute host path of a directory
	Guest string // absolute guest path
}

// parsePayload reads -payload's HOSTDIR=GUESTDIR.
func parsePayload(v string) (payload, error) {
	host, guest, ok := strings.Cut(v, "=")
	if !ok || host == "" || guest == "" {
		return payload{}, fmt.Errorf("want HOSTDIR=GUESTDIR, got %q", v)
	}
	if !path.IsAbs(guest) || path.Clean(guest) != guest || guest == "/" {
		return payload{}, fmt.Errorf("-payload %s: the guest path must be absolute, clean and not /", v)
	}
	abs, err := filepath.Abs(host)
	if err != nil {
		return payload{}, fmt.Errorf("-payload %s: %w", v, err)
	}
	if st, err := os.Stat(abs); err != nil || !st.IsDir() {
		return payload{}, fmt.Errorf("-payload %s: %s is not a directory", v, host)
	}
	return payload{Host: abs, Guest: guest}, nil
}

// addPayload packs p's tree: directories, regular files (streamed) and
// symbolic links as they are, the parents of the guest path made first.
// Anything else (a device, a socket) is an error.
func addPayload(t *tree, p payload) error {
	rel := strings.TrimPrefix(p.Guest, "/")
	if parent := path.Dir(rel); parent != "." {
		if err := t.dirs(parent); err != nil {
			return err
		}
	}
	return filepath.WalkDir(p.Host, func(host string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("-payload %s: %w", p.Host, err)
		}
		r, err := filepath.Rel(p.Host, host)
		if err != nil {
			return err
		}
		name := path.Join(rel, filepath.ToSlash(r))
		info, err := d.Info()
		if err != nil {
			return fmt.Errorf("-payload %s: %w", host, err)
		}
		switch {
		case d.IsDir():
			return t.dir(name, info.Mode().Perm(), 0)
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(host)
			if err != nil {
				return fmt.Errorf("-payload %s: %w", host, err)
			}
			return t.link(name, target)
		case d.Type().IsRegular():
			return t.file(name, info.Mode().Perm(), host)
		}
		return fmt.Errorf("-payload %s: %s is neither a directory, a file nor a symbolic link", p.Host, host)
	})
}

// tree builds the archive in memory-light fashion: small files from bytes,
// large ones streamed from the host.
type tree struct {
	w     *cpio.Writer
	mtime time.Time
}

func (t *tree) dir(name string, mode fs.FileMode, uid int) error {
	return t.w.Add(cpio.Header{Name: name, Mode: fs.ModeDir | mode, UID: uid, GID: uid, ModTime: t.mtime}, nil)
}

// dirs writes name and each of its parents not yet written, as mode 0755
// directories owned by root.
func (t *tree) dirs(name string) error {
	parts := strings.Split(name, "/")
	for i := 1; i <= len(parts); i++ {
		d := strings.Join(parts[:i], "/")
		if m, ok := t.w.Written(d); ok {
			if !m.IsDir() {
				return fmt.Errorf("initramfs %s: %s is not a directory", name, d)
			}
			continue
		}
		if err := t.dir(d, 0o755, 0); err != nil {
			return err
		}
	}
	return nil
}

func (t *tree) link(name, target string) error {
	return t.w.Add(cpio.Header{Name: name, Mode: fs.ModeSymlink | 0o777, Linkname: target, ModTime: t.mtime}, nil)
}

func (t *tree) bytes(name string, mode fs.FileMode, b []byte) error {
	return t.w.Add(cpio.Header{Name: name, Mode: mode, Size: int64(len(b)), ModTime: t.mtime}, bytes.NewReader(b))
}

func (t *tree) file(name string, mode fs.FileMode, src string) error {
	f, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("initramfs %s: %w", name, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("initramfs %s: %w", name, err)
	}
	return t.w.Add(cpio.Header{Name: name, Mode: mode, Size: st.Size(), ModTime: st.ModTime()}, f)
}

const (
	passwd = "root:x:0:0:root:/root:/bin/sh\n" +
		"tester:x:1000:1000:tester:/home/tester:/bin/sh\n" +
		"nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
	group = "root:x:0:\ntty:x:5:\ntester:x:1000:\nnogroup:x:65534:\n"
	hosts = "127.0.0.1\tlocalhost vmtest\n::1\tlocalhost ip6-localhost ip6-loopback\n"
)

// writeInitramfs writes the guest's root file system as a newc archive. The
// layout follows Debian 12's merged /usr: /bin, /sbin, /lib and /lib64 are
// links into /usr, busybox and its applets live in /usr/bin.
func writeInitramfs(out string, spec initramfsSpec) (err error) {
	f, err := os.Create(out)
	if err != nil {
		return fmt.Errorf("create %s: %w", out, err)
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("write %s: %w", out, cerr)
		}
	}()
	bw := bufio.NewWriterSize(f, 1<<20)
	t := &tree{w: cpio.NewWriter(bw), mtime: time.Now().Truncate(time.Second)}
	steps := []func() error{
		func() error { return t.file("init", 0o755, spec.Init) },
		func() error { return t.dir("dev", 0o755, 0) },
		func() error {
			// The kernel opens /dev/console for init's stdio before init
			// can mount devtmpfs; without the node init has no output.
			return t.w.Add(cpio.Header{Name: "dev/console", Mode: fs.ModeDevice | fs.ModeCharDevice | 0o600, Major: 5, Minor: 1, ModTime: t.mtime}, nil)
		},
		func() error { return t.dir("etc", 0o755, 0) },
	}
	for _, d := range []string{"proc", "sys", "run", "mnt"} {
		steps = append(steps, func() error { return t.dir(d, 0o755, 0) })
	}
	steps = append(steps, func() error { return t.dir("tmp", fs.ModeSticky|0o777, 0) })
	if spec.Busybox != "" {
		steps = append(steps,
			func() error { return t.dir("root", 0o700, 0) },
			func() error { return t.dir("home", 0o755, 0) },
			func() error { return t.dir("home/tester", 0o755, protocol.UnprivilegedUID) },
			func() error { return t.dir("usr", 0o755, 0) },
			func() error { return t.dir("usr/bin", 0o755, 0) },
			func() error { return t.dir("usr/lib", 0o755, 0) },
			func() error { return t.dir("usr/lib64", 0o755, 0) },
			func() error { return t.dir("usr/local", 0o755, 0) },
			func() error { return t.dir("usr/local/bin", 0o755, 0) },
			func() error { return t.link("usr/sbin", "bin") },
			func() error { return t.link("bin", "usr/bin") },
			func() error { return t.link("sbin", "usr/sbin") },
			func() error { return t.link("lib", "usr/lib") },
			func() error { return t.link("lib64", "usr/lib64") },
			func() error { return t.file("usr/bin/busybox", 0o755, spec.Busybox) },
		)
		for _, a := range spec.Applets {
			steps = append(steps, func() error { return t.link("usr/bin/"+a, "busybox") })
		}
		steps = append(steps,
			func() error { return t.bytes("etc/passwd", 0o644, []byte(passwd)) },
			func() error { return t.bytes("etc/group", 0o644, []byte(group)) },
			func() error { return t.bytes("etc/hosts", 0o644, []byte(hosts)) },
			func() error { return t.bytes("etc/hostname", 0o644, []byte("vmtest\n")) },
		)
		cfg, err := spec.Config.Marshal()
		if err != nil {
			return fmt.Errorf("encode guest config: %w", err)
		}
		steps = append(steps,
			func() error { return t.bytes(strings.TrimPrefix(protocol.ConfigPath, "/"), 0o644, cfg) },
			func() error { return t.dir("tests", 0o755, 0) },
		)
		for _, p := range spec.Packages {
			steps = append(steps, func() error { return t.file("tests/"+filepath.Base(p.Binary), 0o755, p.Binary) })
		}
		steps = append(steps, func() error { return addModule(t, spec.ModRoot, spec.Files) })
		for _, release := range slices.Sorted(maps.Keys(spec.Modules)) {
			dir := strings.TrimPrefix(protocol.ModulesDir, "/") + "/" + release
			steps = append(steps, func() error { return t.dirs(dir) })
			for _, m := range spec.Modules[release] {
				steps = append(steps, func() error { return t.file(dir+"/"+filepath.Base(m), 0o644, m) })
			}
		}
		for _, p := range spec.Payload {
			steps = append(steps, func() error { return addPayload(t, p) })
		}
	}
	for _, s := range steps {
		if err := s(); err != nil {
			return err
		}
	}
	if err := t.w.Close(); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write %s: %w", out, err)
	}
	return nil
}

// maxPackedFile bounds one file of the module copy: a stray build output in
// the work tree should not fill the guest's memory.
const maxPackedFile = 8 << 20

// moduleFiles lists the module's files for the guest's copy: what git
// tracks plus untracked files it does not ignore (so work in progress is
// tested as go test would see it), or, without git, every file outside
// hidden directories and bin/. It also returns what it left out and why.
func moduleFiles(modRoot string) (files, skipped []string, err error) {
	var names []string
	cmd := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	cmd.Dir = modRoot
	if out, gerr := cmd.Output(); gerr == nil {
		for _, n := range strings.Split(string(out), "\x00") {
			if n != "" {
				names = append(names, n)
			}
		}
	} else {
		werr := filepath.WalkDir(modRoot, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(modRoot, p)
			if d.IsDir() && p != modRoot && (strings.HasPrefix(d.Name(), ".") || rel == "bin") {
				return filepath.SkipDir
			}
			if !d.IsDir() {
				names = append(names, filepath.ToSlash(rel))
			}
			return nil
		})
		if werr != nil {
			return nil, nil, fmt.Errorf("list the module's files (git ls-files: %v): %w", gerr, werr)
		}
	}
	slices.Sort(names)
	names = slices.Compact(names)
	for _, n := range names {
		st, err := os.Lstat(filepath.Join(modRoot, filepath.FromSlash(n)))
		switch {
		case err != nil:
			// Deleted in the work tree but still tracked: go test would not see it either.
		case st.Mode().Type() == fs.ModeSymlink:
			files = append(files, n)
		case !st.Mode().IsRegular():
			skipped = append(skipped, n+" (not a regular file)")
		case st.Size() > maxPackedFile:
			skipped = append(skipped, fmt.Sprintf("%s (%d MiB, over the %d MiB limit)", n, st.Size()>>20, maxPackedFile>>20))
		default:
			files = append(files, n)
		}
	}
	return files, skipped, nil
}

// addModule packs the module's files under /src, keeping the tree's shape,
// so that a test finds its testdata and any file it reaches by a relative
// path (../../examples) where go test would.
func addModule(t *tree, modRoot string, files []string) error {
	made := map[string]bool{"src": true}
	var mkdirs func(dir string) error
	mkdirs = func(dir string) error {
		if made[dir] {
			return nil
		}
		if err := mkdirs(path.Dir(dir)); err != nil {
			return err
		}
		made[dir] = true
		return t.dir(dir, 0o755, 0)
	}
	if err := t.dir("src", 0o755, 0); err != nil {
		return err
	}
	for _, f := range files {
		name := path.Join("src", f)
		if err := mkdirs(path.Dir(name)); err != nil {
			return err
		}
		hp := filepath.Join(modRoot, filepath.FromSlash(f))
		st, err := os.Lstat(hp)
		if err != nil {
			return fmt.Errorf("pack %s: %w", hp, err)
		}
		if st.Mode().Type() == fs.ModeSymlink {
			target, err := os.Readlink(hp)
			if err != nil {
				return fmt.Errorf("readlink %s: %w", hp, err)
			}
			if err := t.link(name, target); err != nil {
				return err
			}
			continue
		}
		if err := t.file(name, st.Mode().Perm(), hp); err != nil {
			return err
		}
	}
	return nil
}

// runsIn reports whether p runs in shape.
func (p testPkg) runsIn(shape string) bool {
	return len(p.Shapes) == 0 || slices.Contains(p.Shapes, shape)
}

// restrictShapes applies -pkgs-in: for each shape named, the packages its
// patterns match get that shape in their Shapes; a package some shapes
// were restricted to and others not runs in every shape not named, too.
// Each pattern must match at least one package of pkgs, so a typo cannot
// leave a shape with nothing to run.
func restrictShapes(modRoot string, pkgs []testPkg, in map[string][]string) error {
	if len(in) == 0 {
		return nil
	}
	selected := map[string]map[string]bool{} // import path -> shapes naming it
	for shape, patterns := range in {
		for _, pat := range patterns {
			matched, err := listPackages(modRoot, []string{pat}, true)
			if err != nil {
				return fmt.Errorf("-pkgs-in %s: %w", shape, err)
			}
			n := 0
			for _, m := range matched {
				if !slices.ContainsFunc(pkgs, func(p testPkg) bool { return p.ImportPath == m.ImportPath }) {
					continue
				}
				if selected[m.ImportPath] == nil {
					selected[m.ImportPath] = map[string]bool{}
				}
				selected[m.ImportPath][shape] = true
				n++
			}
			if n == 0 {
				return fmt.Errorf("-pkgs-in %s: %s matches no package of -pkgs", shape, pat)
			}
		}
	}
	all := protocol.KnownVMShapes()
	for i := range pkgs {
		var shapes []string
		for _, s := range all {
			if _, restricted := in[s]; !restricted || selected[pkgs[i].ImportPath][s] {
				shapes = append(shapes, s)
			}
		}
		if len(shapes) < len(all) {
			pkgs[i].Shapes = shapes
		}
	}
	return nil
}

// runInShapes applies -run-in: each entry "SHAPE:PATTERN" names the
// packages (of pkgs) that get the regular expression as -test.run in
// SHAPE. A pattern that matches none of pkgs is an error.
func runInShapes(modRoot string, pkgs []testPkg, in map[string]string) error {
	for key, re := range in {
		shape, pat, _ := strings.Cut(key, ":")
		matched, err := listPackages(modRoot, []string{pat}, true)
		if err != nil {
			return fmt.Errorf("-run-in %s: %w", key, err)
		}
		n := 0
		for _, m := range matched {
			for i := range pkgs {
				if pkgs[i].ImportPath != m.ImportPath {
					continue
				}
				if !pkgs[i].runsIn(shape) {
					return fmt.Errorf("-run-in %s: %s does not run in %s (-pkgs-in)", key, m.ImportPath, shape)
				}
				if pkgs[i].RunIn == nil {
					pkgs[i].RunIn = map[string]string{}
				}
				pkgs[i].RunIn[shape] = re
				n++
			}
		}
		if n == 0 {
			return fmt.Errorf("-run-in %s: %s matches no package of -pkgs", key, pat)
		}
	}
	return nil
}
