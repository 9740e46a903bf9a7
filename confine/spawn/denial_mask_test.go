package spawn

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/b10x/harness/internal/reexec"
	"github.com/b10x/harness/internal/testenv"
)

// maskOpensEntry does to the files its arguments name what each says and
// prints what it got: "read:P" opens P for reading and reads it,
// "reads:P" opens and reads it 100,000 times, "open:P" opens it for
// reading and reads nothing, "path:P" opens it O_PATH and fstats that,
// "stat:P" stats it, "write:P" opens it for writing.
const maskOpensEntry = "spawn-test-mask-opens"

func init() { reexec.Register(maskOpensEntry, maskOpensMain) }

func maskOpensMain() {
	for _, arg := range os.Args[1:] {
		op, p, _ := strings.Cut(arg, ":")
		got := "bad op"
		switch op {
		case "read":
			b, err := os.ReadFile(p)
			got = errName(err) + ":" + strconv.Itoa(len(b))
		case "reads":
			n := 0
			var err error
			var b [16]byte
			for range 100000 {
				var fd int
				if fd, err = unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC, 0); err != nil {
					break
				}
				_, err = unix.Read(fd, b[:])
				unix.Close(fd)
				if err != nil {
					break
				}
				n++
			}
			got = errName(err) + ":" + strconv.Itoa(n)
		case "open":
			fd, err := unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC, 0)
			if err == nil {
				unix.Close(fd)
			}
			got = errName(err)
		case "path":
			fd, err := unix.Open(p, unix.O_PATH|unix.O_CLOEXEC, 0)
			if err == nil {
				var st unix.Stat_t
				err = unix.Fstat(fd, &st)
				unix.Close(fd)
			}
			got = errName(err)
		case "stat":
			var st unix.Stat_t
			err := unix.Stat(p, &st)
			got = errName(err) + ":" + fmt.Sprintf("%o:%d", st.Mode, st.Size)
		case "write":
			fd, err := unix.Open(p, unix.O_WRONLY|unix.O_CLOEXEC, 0)
			if err == nil {
				unix.Close(fd)
			}
			got = errName(err)
		}
		fmt.Printf("%s=%s\n", arg, got)
	}
	os.Exit(0)
}

// etcMask returns a file of /etc the view masks: /etc/shadow where it is
// one. A guest's /etc has none: the test makes one there, root's alone to
// read (the VM is ours), as TestChildCannotReadSecrets does.
func etcMask(t *testing.T) string {
	t.Helper()
	const shadow = "/etc/shadow"
	if _, err := os.Lstat(shadow); errors.Is(err, os.ErrNotExist) && testenv.InVM() {
		if err := os.WriteFile(shadow, []byte("root:$6$fakehash$abcdefabcdef:19000:0:99999:7:::\n"), 0o640); err != nil {
			t.Fatal(err)
		}
	}
	masks, err := sharedMasks.get()
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(masks, shadow) {
		return shadow
	}
	return maskedFile(t)
}

// TestDenialsOfMasksAttributed: the masked files a call's program reads
// (as empty: no layer refuses them) come back in that call's Result, each
// once, by its path in the view, through every runner (decision 0095): a
// shell's cat of a masked file of /etc and of a read-scope mask of the
// workspace gives both and not the mask it did not read; a program that
// reads none, or only looks at them (an open without a read, an O_PATH
// open, a stat, a write the mask's mode refuses), gives none; 100,000
// reads of one give one; two calls at once get their own.
func TestDenialsOfMasksAttributed(t *testing.T) {
	rs := runners(t)
	etc := etcMask(t)
	for name, r := range rs {
		ws := workspace(t)
		env := filepath.Join(ws, ".env")
		if err := os.WriteFile(env, []byte("API_KEY=sk-live-95\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		own(t, env)
		key := filepath.Join(ws, "key.pem")
		if err := os.WriteFile(key, []byte("-----BEGIN PRIVATE KEY-----\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		own(t, key)
		masked := []string{env, key}

		s := shSpec(t, ws, "cat "+etc+"; cat .env; echo done")
		s.Masked = masked
		res, out, err := run(t, r, s)
		if err != nil || res.ExitCode != 0 || string(out.stdout.Bytes()) != "done\n" {
			t.Fatalf("%s: cat: %v %+v\n%s", name, err, res, out)
		}
		if !res.MaskedWatched || !slices.Equal(res.MaskedOpened, []string{etc, env}) {
			t.Errorf("%s: cat: watched %v, read %q; want %q", name, res.MaskedWatched, res.MaskedOpened, []string{etc, env})
		}

		// Looked at, not read: nothing told. A write is refused by the
		// file's mode (0444, not the program's: EACCES), or by Landlock
		// (EACCES) beneath /etc.
		s = Spec{Program: pin(t, selfExe(t)), Argv: []string{"b10x-reexec:" + maskOpensEntry,
			"open:" + etc, "path:" + etc, "stat:" + etc, "write:" + etc, "open:" + env, "path:" + env, "stat:" + env, "write:" + env},
			Env: []string{"PATH=/usr/bin:/bin"}, Dir: ws, Workspace: pin(t, ws), Masked: masked}
		res, out, err = run(t, r, s)
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("%s: looked at: %v %+v\n%s", name, err, res, out)
		}
		got := probes(out)
		for _, p := range []string{etc, env} {
			if got["open:"+p] != "ok" || got["path:"+p] != "ok" || got["stat:"+p] != "ok:100444:0" || got["write:"+p] != "EACCES" {
				t.Errorf("%s: %s: %v; want an open, an O_PATH open and a stat of an empty file of mode 0444, a write refused (EACCES)", name, p, got)
			}
		}
		if !res.MaskedWatched || len(res.MaskedOpened) != 0 {
			t.Errorf("%s: looked at: watched %v, read %q; want none read", name, res.MaskedWatched, res.MaskedOpened)
		}

		// A flood: one entry.
		s.Argv = []string{"b10x-reexec:" + maskOpensEntry, "reads:" + env}
		res, out, err = run(t, r, s)
		if err != nil || res.ExitCode != 0 || probes(out)["reads:"+env] != "ok:100000" {
			t.Fatalf("%s: flood: %v %+v\n%s", name, err, res, out)
		}
		if !res.MaskedWatched || !slices.Equal(res.MaskedOpened, []string{env}) {
			t.Errorf("%s: flood: watched %v, read %q; want %s once", name, res.MaskedWatched, res.MaskedOpened, env)
		}

		if name == "pre-started" {
			continue // its one slot is for one call at a time
		}
		// Two calls at once: each its own.
		var wg sync.WaitGroup
		results := make([]Result, 2)
		errs := make([]error, 2)
		for i, p := range []string{etc, key} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s := s
				s.Argv = []string{"b10x-reexec:" + maskOpensEntry, "read:" + p}
				results[i], _, errs[i] = run(t, r, s)
			}()
		}
		wg.Wait()
		for i, p := range []string{etc, key} {
			if errs[i] != nil || !results[i].MaskedWatched || !slices.Equal(results[i].MaskedOpened, []string{p}) {
				t.Errorf("%s: call %d of two at once: %v, read %q; want %s alone", name, i, errs[i], results[i].MaskedOpened, p)
			}
		}
	}
}
