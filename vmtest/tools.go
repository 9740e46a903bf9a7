package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// kernel is a Debian kernel package unpacked in the cache.
type kernel struct {
	Pkg        string // linux-image-6.1.0-NN-amd64, linux-image-6.12.NN+deb12-amd64
	Vmlinuz    string // path of the kernel image
	Config     string // path of its /boot/config-*
	DefaultLSM string // CONFIG_LSM from Config
	// Modules are the kernel modules taken out of the package (the
	// series' modules), each a host path; the guest loads them in the
	// shapes that need them.
	Modules []string
}

// kernelSeries is one line of Debian kernels a shape can boot: which package
// names belong to it, how they are ordered, and where apt finds them.
type kernelSeries struct {
	Name string // "6.1", "6.12"
	// re matches the series' amd64 image packages; its submatches are the
	// numbers that order them (6.12.95+deb12.1: 95, then 1).
	re *regexp.Regexp
	// search is the apt-cache search pattern that lists them.
	search string
	// backports, when set, is the Debian suite outside the host's apt
	// sources that carries the series: vmtest asks apt for it through an
	// apt configuration of its own in the cache, never the host's.
	backports string
	// modules are the kernel modules vmtest takes out of the package,
	// paths under /usr/lib/modules/RELEASE/kernel/.
	modules []string
}

// Kernel series. 6.1 is Debian 12's own kernel (Landlock ABI 2); 6.12 is
// the one bookworm-backports carries (Landlock ABI 6: TCP rights, scoped
// abstract sockets and signals). Package names carry the version, so a
// cached directory is one exact kernel.
var (
	series61 = kernelSeries{
		Name:   "6.1",
		re:     regexp.MustCompile(`^linux-image-6\.1\.0-(\d+)-amd64$`),
		search: `^linux-image-6\.1\.0-[0-9]+-amd64$`,
	}
	series612 = kernelSeries{
		Name:      "6.12",
		re:        regexp.MustCompile(`^linux-image-6\.12\.(\d+)\+deb12(?:\.(\d+))?-amd64$`),
		search:    `^linux-image-6\.12\.[0-9]+\+deb12(\.[0-9]+)?-amd64$`,
		backports: "bookworm-backports",
	}
	// 6.18 is Debian 13's backported kernel: Landlock ABI 7, the first
	// with audit records of its denials (Linux 6.15).
	series618 = kernelSeries{
		Name:      "6.18",
		re:        regexp.MustCompile(`^linux-image-6\.18\.(\d+)\+deb13(?:\.(\d+))?-amd64$`),
		search:    `^linux-image-6\.18\.[0-9]+\+deb13(\.[0-9]+)?-amd64$`,
		backports: "trixie-backports",
		// The k8s-node shape's pods need veth (the ptp CNI plugin) and
		// overlay (containerd's default snapshotter); Debian builds both
		// as modules with no dependencies.
		modules: []string{"drivers/net/veth.ko.xz", "fs/overlayfs/overlay.ko.xz"},
	}
	kernelSeriesAll = []kernelSeries{series61, series612, series618}
)

// seriesOf returns the series a package name belongs to.
func seriesOf(pkg string) (kernelSeries, bool) {
	for _, s := range kernelSeriesAll {
		if s.re.MatchString(pkg) {
			return s, true
		}
	}
	return kernelSeries{}, false
}

// newest picks the package of the series with the highest version among
// names, comparing the numbers numerically. It ignores other names.
func (s kernelSeries) newest(names []string) (string, bool) {
	var best string
	var bestV []int
	for _, n := range names {
		m := s.re.FindStringSubmatch(strings.TrimSpace(n))
		if m == nil {
			continue
		}
		var v []int
		for _, d := range m[1:] {
			x, _ := strconv.Atoi(d) // "" (no .M suffix) is 0
			v = append(v, x)
		}
		if best == "" || slices.Compare(v, bestV) > 0 {
			best, bestV = m[0], v
		}
	}
	return best, best != ""
}

// newestKernelPkg picks the newest Debian 12 6.1 kernel among names.
func newestKernelPkg(names []string) (string, bool) { return series61.newest(names) }

// tooling finds or fetches what the VMs need. Every download is a Debian
// package through apt; nothing else is fetched.
type tooling struct {
	cache string // .cache/vmtest under the module root
	log   func(format string, args ...any)
	// updated is set once apt-get update ran in this invocation;
	// extraUpdated the same for vmtest's own apt configurations, by suite.
	updated      bool
	extraUpdated map[string]*bool
}

func (t *tooling) run(name string, args ...string) ([]byte, error) {
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive", "LC_ALL=C")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(lastLines(stderr.String(), 5)))
	}
	return out, nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// aptUpdate runs apt-get update at most once per invocation.
func (t *tooling) aptUpdate() error {
	if t.updated {
		return nil
	}
	t.updated = true
	t.log("apt-get update")
	_, err := t.run("apt-get", "update", "-q")
	return err
}

// withAptRetry runs f, and once more after apt-get update when it failed:
// a fresh machine has no package lists, an old one may list removed files.
func (t *tooling) withAptRetry(f func() error) error {
	err := f()
	if err == nil || t.updated {
		return err
	}
	if uerr := t.aptUpdate(); uerr != nil {
		return errors.Join(err, uerr)
	}
	return f()
}

// qemu returns the qemu-system-x86_64 path, installing Debian's
// qemu-system-x86 when it is missing (root only).
func (t *tooling) qemu() (string, error) {
	if p, err := exec.LookPath("qemu-system-x86_64"); err == nil {
		return p, nil
	}
	if os.Geteuid() != 0 {
		return "", errors.New("qemu-system-x86_64 is not installed and installing it needs root: apt-get install qemu-system-x86")
	}
	t.log("installing qemu-system-x86 with apt-get")
	err := t.withAptRetry(func() error {
		_, err := t.run("apt-get", "install", "-y", "-q", "--no-install-recommends", "qemu-system-x86")
		return err
	})
	if err != nil {
		return "", fmt.Errorf("install qemu-system-x86: %w", err)
	}
	return exec.LookPath("qemu-system-x86_64")
}

// kernel returns an unpacked kernel of series sr. It uses pkg when given;
// otherwise the newest of the series already in the cache, so that repeated
// runs boot the same kernel without asking apt; otherwise the newest apt
// knows of. apt-get download checks the package against the suite's signed
// Release file (the SHA-256 in its Packages index) before vmtest sees it.
func (t *tooling) kernel(sr kernelSeries, pkg string) (kernel, error) {
	dir := filepath.Join(t.cache, "kernel")
	if pkg == "" {
		ents, _ := os.ReadDir(dir)
		var names []string
		for _, e := range ents {
			if _, err := os.Stat(filepath.Join(dir, e.Name(), "vmlinuz")); err == nil {
				names = append(names, e.Name())
			}
		}
		pkg, _ = sr.newest(names)
	}
	apt, err := t.aptFor(sr)
	if err != nil {
		return kernel{}, err
	}
	if pkg == "" {
		err := apt.withRetry(func() error {
			out, err := t.run("apt-cache", append(apt.opts, "search", "--names-only", sr.search)...)
			if err != nil {
				return err
			}
			var names []string
			for _, l := range strings.Split(string(out), "\n") {
				if name, _, ok := strings.Cut(l, " "); ok {
					names = append(names, name)
				}
			}
			var found bool
			if pkg, found = sr.newest(names); !found {
				return fmt.Errorf("apt-cache lists no package matching %s", sr.search)
			}
			return nil
		})
		if err != nil {
			return kernel{}, fmt.Errorf("find Debian's %s kernel package: %w", sr.Name, err)
		}
	}
	if !sr.re.MatchString(pkg) {
		return kernel{}, fmt.Errorf("kernel package %q is not of the %s series (%s)", pkg, sr.Name, sr.re)
	}
	k := kernel{Pkg: pkg, Vmlinuz: filepath.Join(dir, pkg, "vmlinuz"), Config: filepath.Join(dir, pkg, "config")}
	want := []string{"vmlinuz", "config"}
	missing := false
	for _, m := range sr.modules {
		k.Modules = append(k.Modules, filepath.Join(dir, pkg, path.Base(m)))
		want = append(want, path.Base(m))
	}
	for _, w := range want {
		if _, err := os.Stat(filepath.Join(dir, pkg, w)); err != nil {
			missing = true
		}
	}
	if missing {
		err := t.fetch(apt, pkg, filepath.Join(dir, pkg), func(name string) string {
			switch {
			case strings.HasPrefix(name, "./boot/vmlinuz-"):
				return "vmlinuz"
			case strings.HasPrefix(name, "./boot/config-"):
				return "config"
			}
			for _, m := range sr.modules {
				if strings.HasPrefix(name, "./usr/lib/modules/") && strings.HasSuffix(name, "/kernel/"+m) {
					return path.Base(m)
				}
			}
			return ""
		}, want...)
		if err != nil {
			return kernel{}, err
		}
	}
	cfg, err := os.ReadFile(k.Config)
	if err != nil {
		return kernel{}, fmt.Errorf("read kernel config: %w", err)
	}
	k.DefaultLSM = configValue(string(cfg), "CONFIG_LSM")
	return k, nil
}

// aptConfig is how vmtest calls apt for one series: the host's own
// configuration (opts empty), or one of vmtest's in the cache that lists a
// single extra suite, with its own package lists, so the host's apt is
// never changed.
type aptConfig struct {
	t    *tooling
	opts []string // -o options before the command
	// updated is where this configuration's "apt-get update ran" lives.
	updated *bool
}

// withRetry runs f, and once more after apt-get update (of this
// configuration) when it failed.
func (a aptConfig) withRetry(f func() error) error {
	err := f()
	if err == nil || *a.updated {
		return err
	}
	*a.updated = true
	a.t.log("apt-get update%s", map[bool]string{true: " (vmtest's own sources, " + strings.Join(a.opts, " ") + ")", false: ""}[len(a.opts) > 0])
	if _, uerr := a.t.run("apt-get", append(slices.Clone(a.opts), "update", "-q")...); uerr != nil {
		return errors.Join(err, uerr)
	}
	return f()
}

// aptFor returns the apt configuration that finds sr's packages. For a
// backports series it writes, under the cache, a sources list naming that
// suite on the mirror the host already uses for Debian 12 (read from
// apt-get indextargets, so no mirror is written into the repository),
// signed by Debian's archive keyring, as the host's own entries are.
func (t *tooling) aptFor(sr kernelSeries) (aptConfig, error) {
	if sr.backports == "" {
		return aptConfig{t: t, updated: &t.updated}, nil
	}
	if t.extraUpdated == nil {
		t.extraUpdated = map[string]*bool{}
	}
	if t.extraUpdated[sr.backports] == nil {
		t.extraUpdated[sr.backports] = new(bool)
	}
	root := filepath.Join(t.cache, "apt", sr.backports)
	for _, d := range []string{"lists/partial", "cache/archives/partial", "sources.list.d"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			return aptConfig{}, fmt.Errorf("create %s: %w", root, err)
		}
	}
	sources := filepath.Join(root, "sources.list")
	if _, err := os.Stat(sources); err != nil {
		uri, err := t.debianMirror()
		if err != nil {
			return aptConfig{}, fmt.Errorf("find the Debian mirror for %s: %w", sr.backports, err)
		}
		line := fmt.Sprintf("deb [signed-by=%s] %s %s main\n", debianKeyring, uri, sr.backports)
		if err := os.WriteFile(sources, []byte(line), 0o644); err != nil {
			return aptConfig{}, fmt.Errorf("write %s: %w", sources, err)
		}
	}
	return aptConfig{t: t, updated: t.extraUpdated[sr.backports], opts: []string{
		"-o", "Dir::Etc::SourceList=" + sources,
		"-o", "Dir::Etc::SourceParts=" + filepath.Join(root, "sources.list.d"),
		"-o", "Dir::State::Lists=" + filepath.Join(root, "lists"),
		"-o", "Dir::Cache=" + filepath.Join(root, "cache"),
	}}, nil
}

// debianKeyring is the Debian archive keyring of the debian-archive-keyring
// package, which signs every Debian suite, backports included.
const debianKeyring = "/usr/share/keyrings/debian-archive-keyring.gpg"

// debianMirror returns the URI the host's apt uses for Debian 12's main
// suite (origin Debian, codename bookworm).
func (t *tooling) debianMirror() (string, error) {
	if _, err := os.Stat(debianKeyring); err != nil {
		return "", fmt.Errorf("the Debian archive keyring: %w", err)
	}
	out, err := t.run("apt-get", "indextargets", "--format", "$(ORIGIN) $(CODENAME) $(RELEASE) $(REPO_URI)")
	if err != nil {
		return "", err
	}
	return mirrorFrom(string(out))
}

// mirrorFrom picks, from apt-get indextargets lines "ORIGIN CODENAME
// RELEASE URI", the URI of Debian's bookworm suite itself.
func mirrorFrom(lines string) (string, error) {
	for _, l := range strings.Split(lines, "\n") {
		f := strings.Fields(l)
		if len(f) == 4 && f[0] == "Debian" && f[1] == "bookworm" && f[2] == "bookworm" {
			return f[3], nil
		}
	}
	return "", errors.New("apt's sources have no Debian bookworm suite to take the mirror from")
}

// configValue returns the unquoted value of key in a kernel .config.
func configValue(cfg, key string) string {
	sc := bufio.NewScanner(strings.NewReader(cfg))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), key+"="); ok {
			return strings.Trim(v, `"`)
		}
	}
	return ""
}

// busybox returns the path of a static busybox from Debian's busybox-static.
func (t *tooling) busybox() (string, error) {
	dir := filepath.Join(t.cache, "busybox")
	p := filepath.Join(dir, "busybox")
	if _, err := os.Stat(p); err == nil {
		return p, nil
	}
	err := t.fetch(aptConfig{t: t, updated: &t.updated}, "busybox-static", dir, func(name string) string {
		if name == "./bin/busybox" || name == "./usr/bin/busybox" {
			return "busybox"
		}
		return ""
	}, "busybox")
	return p, err
}

// fetch downloads a Debian package with apt-get download (never installing
// it), takes the files pick names out of its data archive into dir, and
// removes the .deb. dir is written whole or not at all.
func (t *tooling) fetch(apt aptConfig, pkg, dir string, pick func(name string) string, want ...string) error {
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return fmt.Errorf("create cache directory: %w", err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), ".fetch-")
	if err != nil {
		return fmt.Errorf("create cache directory: %w", err)
	}
	defer os.RemoveAll(tmp)
	t.log("downloading Debian package %s", pkg)
	err = apt.withRetry(func() error {
		cmd := exec.Command("apt-get", append(slices.Clone(apt.opts), "download", "-q", "-o", "APT::Sandbox::User=root", pkg)...)
		cmd.Dir = tmp
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("apt-get download %s: %w: %s", pkg, err, lastLines(string(out), 5))
		}
		return nil
	})
	if err != nil {
		return err
	}
	debs, _ := filepath.Glob(filepath.Join(tmp, "*.deb"))
	if len(debs) != 1 {
		return fmt.Errorf("apt-get download %s left %d .deb files, want 1", pkg, len(debs))
	}
	out := filepath.Join(tmp, "out")
	if err := os.Mkdir(out, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", out, err)
	}
	if err := extractDeb(debs[0], out, pick); err != nil {
		return err
	}
	for _, w := range want {
		if _, err := os.Stat(filepath.Join(out, w)); err != nil {
			return fmt.Errorf("package %s has no %s", pkg, w)
		}
	}
	_ = os.RemoveAll(dir)
	if err := os.Rename(out, dir); err != nil {
		// Another vmtest run may have put the same package there meanwhile.
		for _, w := range want {
			if _, serr := os.Stat(filepath.Join(dir, w)); serr != nil {
				return fmt.Errorf("move %s into the cache: %w", pkg, err)
			}
		}
	}
	return nil
}

// extractDeb streams the data archive of deb (dpkg-deb --fsys-tarfile) and
// writes the regular files pick names into dir. Only what vmtest needs is
// written: a kernel package's modules alone are about 400 MB.
func extractDeb(deb, dir string, pick func(name string) string) error {
	cmd := exec.Command("dpkg-deb", "--fsys-tarfile", deb)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return fmt.Errorf("dpkg-deb --fsys-tarfile %s: %w", deb, err)
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("dpkg-deb --fsys-tarfile %s: %w", deb, err)
	}
	werr := func() error {
		tr := tar.NewReader(stdout)
		for {
			h, err := tr.Next()
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return fmt.Errorf("read the data archive of %s: %w", deb, err)
			}
			name := pick(h.Name)
			if name == "" || h.Typeflag != tar.TypeReg {
				continue
			}
			f, err := os.OpenFile(filepath.Join(dir, name), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
			if err != nil {
				return fmt.Errorf("extract %s: %w", h.Name, err)
			}
			_, err = io.Copy(f, tr)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return fmt.Errorf("extract %s: %w", h.Name, err)
			}
		}
	}()
	_, _ = io.Copy(io.Discard, stdout)
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("dpkg-deb --fsys-tarfile %s: %w: %s", deb, err, strings.TrimSpace(stderr.String()))
	}
	return werr
}

// busyboxApplets asks the busybox binary for its applet list. The binary is
// static, so it runs on the host as it will in the guest.
func busyboxApplets(busybox string) ([]string, error) {
	out, err := exec.Command(busybox, "--list").Output()
	if err != nil {
		return nil, fmt.Errorf("%s --list: %w", busybox, err)
	}
	var list []string
	for _, a := range strings.Fields(string(out)) {
		if a != "busybox" && !strings.Contains(a, "/") {
			list = append(list, a)
		}
	}
	if len(list) < 50 {
		return nil, fmt.Errorf("%s --list printed %d applets, expected hundreds", busybox, len(list))
	}
	sort.Strings(list)
	return list, nil
}
