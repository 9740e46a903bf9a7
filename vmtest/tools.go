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
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// kernel is a Debian kernel package unpacked in the cache.
type kernel struct {
	Pkg        string // linux-image-6.1.0-NN-amd64
	Vmlinuz    string // path of the kernel image
	Config     string // path of its /boot/config-*
	DefaultLSM string // CONFIG_LSM from Config
}

// kernelPkgRe matches Debian 12's kernel image packages.
var kernelPkgRe = regexp.MustCompile(`^linux-image-6\.1\.0-(\d+)-amd64$`)

// newestKernelPkg picks the package with the highest ABI number among names.
// It ignores names that are not Debian 12 amd64 kernel images.
func newestKernelPkg(names []string) (string, bool) {
	best, bestN := "", -1
	for _, n := range names {
		m := kernelPkgRe.FindStringSubmatch(strings.TrimSpace(n))
		if m == nil {
			continue
		}
		if v, err := strconv.Atoi(m[1]); err == nil && v > bestN {
			best, bestN = m[0], v
		}
	}
	return best, bestN >= 0
}

// tooling finds or fetches what the VMs need. Every download is a Debian
// package through apt; nothing else is fetched.
type tooling struct {
	cache string // .cache/vmtest under the module root
	log   func(format string, args ...any)
	// updated is set once apt-get update ran in this invocation.
	updated bool
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

// kernel returns an unpacked Debian 12 kernel. It uses pkg when given;
// otherwise the newest one already in the cache, so that repeated runs boot
// the same kernel without asking apt; otherwise the newest apt knows of.
func (t *tooling) kernel(pkg string) (kernel, error) {
	dir := filepath.Join(t.cache, "kernel")
	if pkg == "" {
		ents, _ := os.ReadDir(dir)
		var names []string
		for _, e := range ents {
			if _, err := os.Stat(filepath.Join(dir, e.Name(), "vmlinuz")); err == nil {
				names = append(names, e.Name())
			}
		}
		pkg, _ = newestKernelPkg(names)
	}
	if pkg == "" {
		err := t.withAptRetry(func() error {
			out, err := t.run("apt-cache", "search", "--names-only", `^linux-image-6\.1\.0-[0-9]+-amd64$`)
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
			if pkg, found = newestKernelPkg(names); !found {
				return errors.New("apt-cache lists no linux-image-6.1.0-NN-amd64 package")
			}
			return nil
		})
		if err != nil {
			return kernel{}, fmt.Errorf("find Debian 12's kernel package: %w", err)
		}
	}
	if !kernelPkgRe.MatchString(pkg) {
		return kernel{}, fmt.Errorf("kernel package %q is not a linux-image-6.1.0-NN-amd64 name", pkg)
	}
	k := kernel{Pkg: pkg, Vmlinuz: filepath.Join(dir, pkg, "vmlinuz"), Config: filepath.Join(dir, pkg, "config")}
	if _, err := os.Stat(k.Vmlinuz); err != nil {
		err := t.fetch(pkg, filepath.Join(dir, pkg), func(name string) string {
			switch {
			case strings.HasPrefix(name, "./boot/vmlinuz-"):
				return "vmlinuz"
			case strings.HasPrefix(name, "./boot/config-"):
				return "config"
			}
			return ""
		}, "vmlinuz", "config")
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
	err := t.fetch("busybox-static", dir, func(name string) string {
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
func (t *tooling) fetch(pkg, dir string, pick func(name string) string, want ...string) error {
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return fmt.Errorf("create cache directory: %w", err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), ".fetch-")
	if err != nil {
		return fmt.Errorf("create cache directory: %w", err)
	}
	defer os.RemoveAll(tmp)
	t.log("downloading Debian package %s", pkg)
	err = t.withAptRetry(func() error {
		cmd := exec.Command("apt-get", "download", "-q", "-o", "APT::Sandbox::User=root", pkg)
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
