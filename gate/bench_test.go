package gate

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/b10x/harness/tools"
	"github.com/b10x/harness/workspace"
)

// BenchmarkGateFileRead1KiB is one file_read of a 1 KiB file through every
// gate step, including its record line written to a real file.
func BenchmarkGateFileRead1KiB(b *testing.B) {
	dir := b.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "f.txt"), []byte(strings.Repeat("0123456789abcde\n", 64)), 0o644); err != nil {
		b.Fatal(err)
	}
	ws, err := workspace.Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer ws.Close()
	rec, err := os.Create(filepath.Join(b.TempDir(), "run.jsonl"))
	if err != nil {
		b.Fatal(err)
	}
	defer rec.Close()
	g, err := New(Config{Workspace: ws, Tools: tools.ReadTools(), Recorder: NewRecorder(rec)})
	if err != nil {
		b.Fatal(err)
	}
	c := Call{Surface: "flat", Name: "file_read", Args: json.RawMessage(`{"path":"f.txt"}`)}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if o := g.Call(ctx, c); o.Status != Executed || len(o.Result) != 1024 {
			b.Fatalf("%+v", o)
		}
	}
}

// BenchmarkRunHold10k is what holding a run call's child to the policy
// costs the gate per call (docs/BENCHMARKS.md): reading what must not
// change before the call and again after it, on a workspace of 10,000
// files in 101 directories (a .git directory, keys/ with 10 .pem files,
// tests/ with 100 files). "protected" has no write-scope rule and no read
// scope (only the protected paths are read); "scope" adds keys/*.pem=denied
// and tests/**=denied, so the whole workspace is walked twice; "read_scope"
// has the default read scope alone, as a session has it (one walk, for the
// masks), "read_scope_kept" the same with every directory's listing kept
// from the call before (maskwalk.go), and "scope+read_scope" both rules. The child
// itself is not run: BenchmarkRunTrueHeld in confine/spawn measures
// what the binds add to a spawn.
//
//	go test ./gate -run '^$' -bench RunHold10k -benchtime 50x
func BenchmarkRunHold10k(b *testing.B) {
	dir := b.TempDir()
	mk := func(rel string) {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x\n"), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	n := 0
	for i := 0; i < 10; i++ {
		mk(filepath.Join("keys", "k"+strconv.Itoa(i)+".pem"))
		n++
	}
	for i := 0; i < 100; i++ {
		mk(filepath.Join("tests", "t"+strconv.Itoa(i)+"_test.go"))
		n++
	}
	mk(".git/config")
	n++
	for d := 0; n < 10000; d++ {
		for f := 0; f < 100 && n < 10000; f++ {
			mk(filepath.Join("src", "d"+strconv.Itoa(d), "f"+strconv.Itoa(f)+".go"))
			n++
		}
	}
	ws, err := workspace.Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer ws.Close()
	var rules []ScopeRule
	for _, s := range []string{"keys/*.pem=denied", "tests/**=denied"} {
		r, _ := ParseScopeRule(s)
		rules = append(rules, r)
	}
	reads, err := ReadScopeRules(nil)
	if err != nil {
		b.Fatal(err)
	}
	margin := listingMargin
	defer func() { listingMargin = margin }()
	for _, c := range []struct {
		name  string
		rules []ScopeRule
		reads []ScopeRule
		kept  bool // the directories' listings kept from the call before
	}{{"protected", nil, nil, false}, {"scope", rules, nil, false}, {"read_scope", nil, reads, false},
		{"read_scope_kept", nil, reads, true}, {"scope+read_scope", rules, reads, false}} {
		b.Run(c.name, func(b *testing.B) {
			// The tree is new: "kept" takes its directories as if they
			// were older than the margin, the others never keep them.
			listingMargin = 1000 * time.Hour
			if c.kept {
				listingMargin = -time.Hour
			}
			g := &Gate{cfg: Config{Workspace: ws, WriteScope: c.rules, Protected: []string{"hook.sh", "run.jsonl"}}, reads: readScope{newScope(c.reads)}}
			if _, err := g.holdBefore(); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				h, err := g.holdBefore()
				if err != nil {
					b.Fatal(err)
				}
				if vs := h.after(); len(vs) != 0 {
					b.Fatal(vs)
				}
			}
		})
	}
}
