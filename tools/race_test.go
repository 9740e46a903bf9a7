package tools

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/b10x/harness/workspace"
)

// A directory inside the workspace is swapped, atomically and in a tight
// loop, with a symbolic link to an outside directory holding a unique
// secret (file contents and a file name), while every read tool runs in a
// loop. No result may ever hold the secret. [MCP filesystem server, "race
// condition in read operations"]
func TestSwapRace(t *testing.T) {
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(base, "ws")
	outside := filepath.Join(base, "outside")
	secretName := "only-outside-3b9e1d.txt"
	for _, d := range []string{root + "/swap/deeper", outside + "/deeper"} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for p, c := range map[string]string{
		root + "/swap/inner.txt":          "INSIDE\n",
		root + "/swap/deeper/inner.txt":   "INSIDE DEEPER\n",
		outside + "/inner.txt":            outsideSecret + "\n",
		outside + "/deeper/inner.txt":     outsideSecret + "\n",
		outside + "/" + secretName:        outsideSecret + "\n",
		outside + "/deeper/" + secretName: outsideSecret + "\n",
	} {
		if err := os.WriteFile(p, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// "alt" is the link; RENAME_EXCHANGE swaps it with the directory
	// "swap" atomically, so at any instant one name is the directory and
	// the other the link.
	if err := os.Symlink(outside, filepath.Join(root, "alt")); err != nil {
		t.Fatal(err)
	}
	ws, err := workspace.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	var swaps atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			if err := unix.Renameat2(unix.AT_FDCWD, filepath.Join(root, "swap"), unix.AT_FDCWD, filepath.Join(root, "alt"), unix.RENAME_EXCHANGE); err != nil {
				t.Errorf("exchange: %v", err)
				return
			}
			swaps.Add(1)
		}
	}()

	calls := []struct {
		tool Tool
		args string
	}{
		{Search{}, `{"pattern":"SECRET|INSIDE|only-outside","max_results":100000}`},
		{Search{}, `{"pattern":"."}`},
		{Search{}, `{"pattern":".","path":"swap"}`},
		{Search{}, `{"pattern":".","path":"alt/deeper"}`},
		{Find{}, `{"pattern":"**"}`},
		{Find{}, `{"pattern":"*","path":"swap"}`},
		{Find{}, `{"pattern":"*","path":"alt/deeper"}`},
		{FileRead{}, `{"path":"swap/inner.txt"}`},
		{FileRead{}, `{"path":"alt/inner.txt"}`},
		{FileRead{}, `{"path":"swap/deeper/inner.txt"}`},
		{FileRead{}, `{"path":"alt/deeper/inner.txt"}`},
		{DirList{}, `{"path":"swap"}`},
		{DirList{}, `{"path":"alt"}`},
		{DirList{}, `{"path":"swap/deeper"}`},
	}
	var ran, succeeded, insideSeen atomic.Int64
	refusals := map[Reason]*atomic.Int64{ReasonDeniedPath: {}, ReasonToolError: {}}
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; ctx.Err() == nil; i++ {
				c := calls[i%len(calls)]
				ran.Add(1)
				p, err := c.tool.Prepare(ws, json.RawMessage(c.args))
				var r Result
				if err == nil {
					r, err = p.Execute(context.Background(), Report{})
				}
				if err != nil {
					e, ok := err.(*Error)
					if !ok || refusals[e.Reason] == nil {
						t.Errorf("%s %s: unexpected error %v", c.tool.Name(), c.args, err)
						return
					}
					if strings.Contains(e.Public, outsideSecret) || strings.Contains(e.Public, secretName) || strings.Contains(e.Public, outside) {
						t.Errorf("%s %s: refusal leaks: %q", c.tool.Name(), c.args, e.Public)
						return
					}
					refusals[e.Reason].Add(1)
					continue
				}
				succeeded.Add(1)
				if strings.Contains(r.Text, "INSIDE") {
					insideSeen.Add(1)
				}
				if strings.Contains(r.Text, outsideSecret) || strings.Contains(r.Text, secretName) || strings.Contains(r.Text, outside) {
					t.Errorf("%s %s: OUTSIDE DATA in result:\n%s", c.tool.Name(), c.args, r.Text)
					return
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("%d swaps; %d calls: %d succeeded (%d showed inside content), %d denied_path, %d tool_error",
		swaps.Load(), ran.Load(), succeeded.Load(), insideSeen.Load(), refusals[ReasonDeniedPath].Load(), refusals[ReasonToolError].Load())
	// The test must have exercised both sides of the race.
	if swaps.Load() < 1000 || succeeded.Load() < 100 || insideSeen.Load() == 0 || refusals[ReasonDeniedPath].Load() == 0 {
		t.Fatalf("the race was not exercised enough")
	}
}

// Deterministic form of the race for search: a file replaced by a link
// between listing and reading is skipped and noted, never read. (The
// workspace package's TestWalkRechecksEveryStep does the same for a
// directory the walker enters.)
func TestSearchRechecksEveryFile(t *testing.T) {
	fx := newFixture(t)
	os.MkdirAll(filepath.Join(fx.root, "w/e"), 0o755)
	os.WriteFile(filepath.Join(fx.root, "w/e/inside.txt"), []byte("INSIDE\n"), 0o644)
	swap := func(rel, target string) {
		p := filepath.Join(fx.root, rel)
		if err := os.RemoveAll(p); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
	}
	p, err := Search{}.Prepare(fx.ws, json.RawMessage(`{"pattern":".","path":"w/e"}`))
	if err != nil {
		t.Fatal(err)
	}
	swap("w/e/inside.txt", filepath.Join(fx.base, "secret.txt"))
	c := p.(*searchCall)
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	err = fx.ws.WithRoot(func(root int) error {
		fd, err := workspace.OpenBeneath(root, "w/e", unix.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			return err
		}
		d := workspace.NewDir(fd, "w/e", true)
		defer d.Release()
		nts := &notes{}
		r := c.scanFile(context.Background(), searchJob{dir: d, name: "inside.txt", rel: "w/e/inside.txt"}, bp, nts)
		if r.n != 0 || len(r.out) != 0 || nts.count != 1 {
			t.Fatalf("scan through a swapped-in link: %d matches %q, notes %q", r.n, r.out, nts.text())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// And the whole call reports no match and no outside byte.
	r, err := p.Execute(context.Background(), Report{})
	if err != nil || strings.Contains(r.Text, outsideSecret) || r.Meta["matches"] != 0 {
		t.Fatalf("search after the swap: %q %v", r.Text, err)
	}
}
